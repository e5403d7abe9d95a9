#include "common/daemon_setup.h"

#include <gtest/gtest.h>

namespace rocefab {
namespace {

TEST(ResolveDurationUs, FlagBeatsConfigBeatsDefault) {
  google::protobuf::Duration from_file;
  from_file.set_seconds(5);
  EXPECT_EQ(*ResolveDurationUs("--interval", true, "250ms", true, from_file), 250'000);
  EXPECT_EQ(*ResolveDurationUs("--interval", false, "1s", true, from_file), 5'000'000);
  EXPECT_EQ(*ResolveDurationUs("--interval", false, "1s", false, {}), 1'000'000);
  auto bad = ResolveDurationUs("--interval", true, "soon", false, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("--interval: bad duration 'soon'"),
            std::string::npos);
}

TEST(ApplyLogLevel, RejectsUnknown) {
  EXPECT_TRUE(ApplyLogLevel("info").ok());
  auto status = ApplyLogLevel("chatty");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("'chatty'"), std::string::npos);
}

TEST(LoadConfigIfGiven, EmptyPathIsNoConfig) {
  google::protobuf::Duration untouched;
  untouched.set_seconds(3);
  EXPECT_TRUE(LoadConfigIfGiven("", &untouched).ok());
  EXPECT_EQ(untouched.seconds(), 3);
  EXPECT_FALSE(LoadConfigIfGiven("/nonexistent.yaml", &untouched).ok());
}

}  // namespace
}  // namespace rocefab
