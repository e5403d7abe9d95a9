// The example configs shipped in deploy/config must load without error, so
// an operator who copies one starts from something that works.
#include <gtest/gtest.h>

#include "common/config_loader.h"
#include "rocefab/v1/config.pb.h"

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

}  // namespace
}  // namespace rocefab
