#pragma once
// systemd service notifications (Type=notify, WatchdogSec=). Each call is a
// no-op when the process was not started by systemd (no NOTIFY_SOCKET).

#include <cstdint>
#include <string_view>

namespace rocefab::systemd {

// READY=1 with a STATUS= line, e.g. "listening grpc=127.0.0.1:9410".
void NotifyReady(std::string_view status);
void NotifyStatus(std::string_view status);
void NotifyStopping();
// WATCHDOG=1; call from the main loop, not from a helper thread, so a hung
// loop is what the watchdog catches.
void NotifyWatchdog();
// The interval at which NotifyWatchdog should be called (half of
// WatchdogSec), or 0 when the watchdog is off.
int64_t WatchdogPingIntervalUs();

}  // namespace rocefab::systemd
