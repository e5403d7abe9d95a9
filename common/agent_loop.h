#pragma once
// The poll loop shared by rocefab-hostd and rocefab-switchd: every interval,
// call the agent's poll function, on one Boost.Asio io_context (the main
// thread), which also pings the systemd watchdog, so a stuck poll stops the
// pings. On SIGINT or SIGTERM it stops polling and flushes the shipper.
//
// With a fast path (SetFastPoll), ticks come every fast interval; the full
// poll takes the ticks on its own grid (every interval/fast_interval-th)
// and the fast poll the others, so both run on one thread in time order.

#include <array>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <mutex>

#include "common/clock.h"
#include "common/telemetry_shipper.h"

namespace rocefab {

class AgentLoop final {
 public:
  AgentLoop(int64_t interval_us, std::function<void()> poll, TelemetryShipper& shipper,
            const Clock& clock);

  // Adds the fast path: `fast_poll` every `fast_interval_us` between full
  // polls. `fast_interval_us` must divide the interval
  // (ResolveFastIntervalUs in common/daemon_setup.h checks it).
  void SetFastPoll(int64_t fast_interval_us, std::function<void()> fast_poll);

  // Polls until SIGINT or SIGTERM, then waits up to `flush_timeout_us` for
  // the shipper's queue to drain, and stops it.
  void Run(boost::asio::io_context& io, int64_t flush_timeout_us);
  uint64_t polls() const;

  // How long polls take, for /metrics: a histogram over kPollBucketsUs.
  static constexpr std::array<int64_t, 9> kPollBucketsUs = {500,     1'000,   5'000,     10'000,   50'000,
                                                           100'000, 500'000, 1'000'000, 5'000'000};
  struct PollTimes {
    uint64_t polls = 0;
    int64_t total_us = 0;
    int64_t last_us = 0;
    uint64_t overruns = 0;  // polls that took longer than the interval
    std::array<uint64_t, kPollBucketsUs.size()> buckets{};  // cumulative: count <= bound
  };
  PollTimes poll_times() const;
  int64_t interval_us() const { return interval_us_; }
  int64_t fast_interval_us() const { return fast_interval_us_; }
  // The fast path's polls, kept apart from the full polls' (overruns
  // against the fast interval).
  PollTimes fast_times() const;

 private:
  // Adds one poll of `us` to `times`; REQUIRES: mu_ held.
  static void Record(PollTimes* times, int64_t us, int64_t interval_us);
  int64_t interval_us_;
  int64_t fast_interval_us_ = 0;
  std::function<void()> poll_;
  std::function<void()> fast_poll_;
  TelemetryShipper& shipper_;
  const Clock& clock_;
  mutable std::mutex mu_;
  PollTimes times_;
  PollTimes fast_times_;
};

}  // namespace rocefab
