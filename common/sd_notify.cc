#include "common/sd_notify.h"

#include <systemd/sd-daemon.h>

#include <string>

#include "common/strings.h"

namespace rocefab::systemd {

void NotifyReady(std::string_view status) {
  sd_notify(0, StrCat("READY=1\nSTATUS=", status).c_str());
}

void NotifyStatus(std::string_view status) {
  sd_notify(0, StrCat("STATUS=", status).c_str());
}

void NotifyStopping() { sd_notify(0, "STOPPING=1"); }

void NotifyWatchdog() { sd_notify(0, "WATCHDOG=1"); }

int64_t WatchdogPingIntervalUs() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0) return 0;
  return static_cast<int64_t>(usec / 2);
}

}  // namespace rocefab::systemd
