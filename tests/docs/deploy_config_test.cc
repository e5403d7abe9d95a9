// The example configs shipped in deploy/config must load without error, so
// an operator who copies one starts from something that works.
#include <gtest/gtest.h>

#include <fstream>

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

TEST(DeployConfig, SwitchdExampleLoads) {
  v1::SwitchdConfig config;
  absl::Status status =
      LoadYamlConfigFile(std::string(ROCEFAB_SOURCE_DIR) + "/deploy/config/switchd.yaml", &config);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(config.backend(), "linux");
  EXPECT_EQ(config.tls().ca(), "/etc/rocefab/tls/ca.pem");
  EXPECT_EQ(config.authorization().controller(0), "rocefab-controllerd");
}

TEST(DeployConfig, CollectordExampleLoads) {
  v1::CollectordConfig config;
  absl::Status status = LoadYamlConfigFile(
      std::string(ROCEFAB_SOURCE_DIR) + "/deploy/config/collectord.yaml", &config);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(config.listen(), "0.0.0.0:9410");
  EXPECT_EQ(config.retention().seconds(), 7 * 86400);
}

// The example's commented-out remote_write and history blocks, uncommented,
// load as documented.
TEST(DeployConfig, CollectordTsdbBlocksLoadUncommented) {
  std::ifstream in(std::string(ROCEFAB_SOURCE_DIR) + "/deploy/config/collectord.yaml");
  std::string line, yaml;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("# remote_write:", 0) == 0 || line.rfind("# history:", 0) == 0) inside = true;
    else if (line.rfind("#   ", 0) != 0) inside = false;
    if (inside) yaml += line.substr(2) + "\n";
  }
  v1::CollectordConfig config;
  absl::Status status = LoadYamlConfig(yaml, "collectord.yaml (uncommented)", &config);
  ASSERT_TRUE(status.ok()) << status << "\n" << yaml;
  ASSERT_EQ(config.remote_write_size(), 1);
  EXPECT_EQ(config.remote_write(0).extra_labels().at("cluster"), "llama3-a");
  EXPECT_EQ(config.history().url(), "http://vmselect.tsdb:8481/select/0/prometheus");
  EXPECT_EQ(config.history().match_labels().at("cluster"), "llama3-a");
  EXPECT_EQ(config.history().timeout().seconds(), 30);
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
