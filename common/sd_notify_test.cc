#include "common/sd_notify.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/process.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

TEST(SdNotify, ReadyReachesTheNotifySocket) {
  testing::NotifySocket socket;
  setenv("NOTIFY_SOCKET", socket.path().c_str(), 1);
  systemd::NotifyReady("listening grpc=127.0.0.1:1");
  unsetenv("NOTIFY_SOCKET");
  auto status = socket.WaitReady(std::chrono::seconds(5));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, "listening grpc=127.0.0.1:1");
}

// sd_notify(3) ignores a NOTIFY_SOCKET that is not absolute: a socket
// bound at a relative path (a lab run directory given as `runs/x`) gives
// its absolute path, so a daemon is heard.
TEST(SdNotify, ASocketBoundAtARelativePathIsHeard) {
  testing::TempDir dir;
  const std::filesystem::path was = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  std::filesystem::create_directory("run");
  ::rocefab::NotifySocket socket("run/notify.sock");
  std::filesystem::current_path(was);
  EXPECT_TRUE(std::filesystem::path(socket.path()).is_absolute()) << socket.path();
  EXPECT_EQ(std::filesystem::path(socket.path()).filename(), "notify.sock");
  EXPECT_TRUE(std::filesystem::equivalent(std::filesystem::path(socket.path()).parent_path(), dir / "run"))
      << socket.path();
  setenv("NOTIFY_SOCKET", socket.path().c_str(), 1);
  systemd::NotifyReady("listening");
  unsetenv("NOTIFY_SOCKET");
  const auto status = socket.WaitReady(std::chrono::seconds(5));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, "listening");
}

TEST(SdNotify, NoSocketIsANoOp) {
  unsetenv("NOTIFY_SOCKET");
  systemd::NotifyReady("x");
  systemd::NotifyWatchdog();
  systemd::NotifyStopping();
  SUCCEED();
}

TEST(SdNotify, WatchdogIntervalIsHalfOfWatchdogSec) {
  setenv("WATCHDOG_USEC", "30000000", 1);
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  EXPECT_EQ(systemd::WatchdogPingIntervalUs(), 15'000'000);
  // For another process's watchdog, we must not ping.
  setenv("WATCHDOG_PID", "1", 1);
  EXPECT_EQ(systemd::WatchdogPingIntervalUs(), 0);
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
  EXPECT_EQ(systemd::WatchdogPingIntervalUs(), 0);
}

}  // namespace
}  // namespace rocefab
