#pragma once
// The rocefab-hostd poll loop: every interval, poll the host, turn the
// readings into a delta batch and hand it to the shipper. Runs on one
// Boost.Asio io_context (the main thread), which also pings the systemd
// watchdog, so a stuck poll stops the pings.

#include <boost/asio/io_context.hpp>

#include "agents/host/host_poller.h"
#include "common/batch_builder.h"
#include "common/clock.h"
#include "common/fs_root.h"
#include "common/telemetry_shipper.h"

namespace rocefab::hostd {

class HostAgent final {
 public:
  HostAgent(int64_t interval_us, HostPoller& poller, TelemetryShipper& shipper,
            const FsRoot& proc_root, const Clock& clock);

  // Polls until SIGINT or SIGTERM, then flushes for up to `flush_timeout_us`.
  void Run(boost::asio::io_context& io, int64_t flush_timeout_us);
  // One poll: snapshot, batch, enqueue. Public for tests and benchmarks.
  void PollOnce();
  uint64_t polls() const { return polls_; }

 private:
  int64_t interval_us_;
  HostPoller& poller_;
  TelemetryShipper& shipper_;
  const FsRoot& proc_root_;
  const Clock& clock_;
  BatchBuilder builder_;
  uint64_t polls_ = 0;
};

}  // namespace rocefab::hostd
