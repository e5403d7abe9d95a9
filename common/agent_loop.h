#pragma once
// The poll loop shared by rocefab-hostd and rocefab-switchd: every interval,
// call the agent's poll function, on one Boost.Asio io_context (the main
// thread), which also pings the systemd watchdog, so a stuck poll stops the
// pings. On SIGINT or SIGTERM it stops polling and flushes the shipper.

#include <boost/asio/io_context.hpp>
#include <functional>

#include "common/clock.h"
#include "common/telemetry_shipper.h"

namespace rocefab {

class AgentLoop final {
 public:
  AgentLoop(int64_t interval_us, std::function<void()> poll, TelemetryShipper& shipper,
            const Clock& clock);

  // Polls until SIGINT or SIGTERM, then waits up to `flush_timeout_us` for
  // the shipper's queue to drain, and stops it.
  void Run(boost::asio::io_context& io, int64_t flush_timeout_us);
  uint64_t polls() const { return polls_; }

 private:
  int64_t interval_us_;
  std::function<void()> poll_;
  TelemetryShipper& shipper_;
  const Clock& clock_;
  uint64_t polls_ = 0;
};

}  // namespace rocefab
