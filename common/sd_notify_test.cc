#include "common/sd_notify.h"

#include <gtest/gtest.h>
#include <unistd.h>

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
