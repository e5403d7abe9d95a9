// The example configs shipped in deploy/config must load without error, so
// an operator who copies one starts from something that works.
#include <gtest/gtest.h>

#include "common/config_loader.h"
#include "controller/compiler.h"
#include "rocefab/v1/config.pb.h"
#include "rocefab/v1/control.pb.h"

namespace rocefab {
namespace {

TEST(DeployConfig, HostdExampleLoads) {
  v1::HostdConfig config;
  absl::Status status =
      LoadYamlConfigFile(std::string(ROCEFAB_SOURCE_DIR) + "/deploy/config/hostd.yaml", &config);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(config.collector(), "127.0.0.1:9410");
  EXPECT_EQ(config.interval().seconds(), 1);
}

TEST(DeployConfig, CollectordExampleLoads) {
  v1::CollectordConfig config;
  absl::Status status = LoadYamlConfigFile(
      std::string(ROCEFAB_SOURCE_DIR) + "/deploy/config/collectord.yaml", &config);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(config.listen(), "0.0.0.0:9410");
  EXPECT_EQ(config.retention().seconds(), 7 * 86400);
}

TEST(DeployConfig, ControllerdExampleAndPolicyLoad) {
  v1::ControllerdConfig config;
  absl::Status status = LoadYamlConfigFile(
      std::string(ROCEFAB_SOURCE_DIR) + "/deploy/config/controllerd.yaml", &config);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(config.listen(), "0.0.0.0:9412");
  v1::Policy policy;
  status = LoadYamlConfigFile(std::string(ROCEFAB_SOURCE_DIR) + "/deploy/config/policy.yaml", &policy);
  ASSERT_TRUE(status.ok()) << status;
  auto valid = controller::ValidatePolicy(policy);
  ASSERT_TRUE(valid.ok()) << valid.status();
  EXPECT_EQ(valid->default_scheme(), v1::ROUTING_SCHEME_EECMP);
}

}  // namespace
}  // namespace rocefab
