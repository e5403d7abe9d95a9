#include "common/config_loader.h"

#include <gtest/gtest.h>

#include "rocefab/v1/config.pb.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

TEST(ConfigLoader, LoadsHostdConfig) {
  v1::HostdConfig config;
  config.set_collector("default:1");
  absl::Status status = LoadYamlConfig(R"(
collector: collector.z1:9410
interval: 500ms
sysfs_root: /host/sys
max_pending_batches: 100
netlink: false
tls:
  ca: /etc/rocefab/ca.pem
  cert: /etc/rocefab/hostd.pem
  key: /etc/rocefab/hostd.key
)",
                                       "hostd.yaml", &config);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(config.collector(), "collector.z1:9410");
  EXPECT_EQ(config.interval().seconds(), 0);
  EXPECT_EQ(config.interval().nanos(), 500'000'000);
  EXPECT_EQ(config.sysfs_root(), "/host/sys");
  EXPECT_EQ(config.max_pending_batches(), 100u);
  EXPECT_FALSE(config.netlink());
  EXPECT_EQ(config.tls().key(), "/etc/rocefab/hostd.key");
}

TEST(ConfigLoader, KeepsDefaultsForAbsentKeysAndEmptyDocuments) {
  v1::HostdConfig config;
  config.set_collector("default:1");
  ASSERT_TRUE(LoadYamlConfig("", "empty.yaml", &config).ok());
  ASSERT_TRUE(LoadYamlConfig("# only a comment\n", "comment.yaml", &config).ok());
  ASSERT_TRUE(LoadYamlConfig("interval: 2s\n", "partial.yaml", &config).ok());
  EXPECT_EQ(config.collector(), "default:1");
  EXPECT_EQ(config.interval().seconds(), 2);
}

struct BadCase {
  const char* yaml;
  const char* expected;  // substring of the error
};

class ConfigLoaderRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigLoaderRejects, WithFileLineAndKey) {
  v1::HostdConfig config;
  absl::Status status = LoadYamlConfig(GetParam().yaml, "hostd.yaml", &config);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find(GetParam().expected), std::string::npos)
      << "error was: " << status.message();
}

INSTANTIATE_TEST_SUITE_P(
    Negative, ConfigLoaderRejects,
    ::testing::Values(
        BadCase{"collector: a:1\nintervall: 1s\n", "hostd.yaml:2: key 'intervall': unknown key"},
        BadCase{"tls:\n  ca: x\n  crt: y\n", "hostd.yaml:3: key 'tls.crt': unknown key"},
        BadCase{"interval: 5 parsecs\n", "hostd.yaml:1: key 'interval': bad duration"},
        BadCase{"interval: [1s]\n", "key 'interval': expected a duration"},
        BadCase{"max_pending_batches: -3\n", "key 'max_pending_batches': expected a non-negative"},
        BadCase{"max_pending_batches: 99999999999\n", "out of range"},
        BadCase{"max_pending_batches: lots\n", "expected a non-negative integer"},
        BadCase{"netlink: maybe\n", "key 'netlink': expected true or false"},
        BadCase{"tls: /etc/ca.pem\n", "key 'tls': expected a mapping"},
        BadCase{"collector: [a, b]\n", "key 'collector': expected a single value"},
        BadCase{"- just\n- a list\n", "expected a mapping"},
        BadCase{"collector: [a, b\n", "YAML syntax error"},
        BadCase{"a: 1\n\tb: 2\n", "hostd.yaml:"}));

TEST(ConfigLoader, LoadsMapsOfScalarsAndRefusesOtherShapes) {
  v1::CollectordConfig config;
  absl::Status status = LoadYamlConfig(R"(
remote_write:
  - url: http://vm:8428/api/v1/write
    extra_labels: {cluster: llama3-a, zone: z1}
    max_queue_bytes: 1073741824
)",
                                       "collectord.yaml", &config);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(config.remote_write_size(), 1);
  EXPECT_EQ(config.remote_write(0).extra_labels().at("cluster"), "llama3-a");
  EXPECT_EQ(config.remote_write(0).extra_labels().at("zone"), "z1");
  EXPECT_EQ(config.remote_write(0).max_queue_bytes(), 1073741824u);
  v1::CollectordConfig bad;
  status = LoadYamlConfig("remote_write:\n  - extra_labels: [a, b]\n", "collectord.yaml", &bad);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("expected a mapping of names to values"), std::string::npos)
      << status;
  status = LoadYamlConfig("remote_write:\n  - extra_labels: {cluster: [x]}\n", "collectord.yaml", &bad);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("extra_labels.cluster"), std::string::npos) << status;
}

TEST(ConfigLoader, MissingFileNamesThePath) {
  v1::HostdConfig config;
  absl::Status status = LoadYamlConfigFile("/nonexistent/rocefab/hostd.yaml", &config);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("/nonexistent/rocefab/hostd.yaml"),
            std::string::npos);
}

TEST(ConfigLoader, LoadsFile) {
  testing::TempDir dir;
  testing::WriteFile(dir / "collectord.yaml", "listen: 127.0.0.1:1\nretention: 12h\n");
  v1::CollectordConfig config;
  ASSERT_TRUE(LoadYamlConfigFile(dir / "collectord.yaml", &config).ok());
  EXPECT_EQ(config.retention().seconds(), 12 * 3600);
}

}  // namespace
}  // namespace rocefab
