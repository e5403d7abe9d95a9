#include "common/agent_loop.h"

#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/log.h"
#include "common/sd_notify.h"

namespace rocefab {

AgentLoop::AgentLoop(int64_t interval_us, std::function<void()> poll, TelemetryShipper& shipper,
                     const Clock& clock)
    : interval_us_(interval_us), poll_(std::move(poll)), shipper_(shipper), clock_(clock) {}

void AgentLoop::Run(boost::asio::io_context& io, int64_t flush_timeout_us) {
  boost::asio::steady_timer timer(io);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  bool stopping = false;
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    LOG_INFO("agent", "signal ", signal, ": stopping");
    stopping = true;
    timer.cancel();
  });

  const int64_t watchdog_us = systemd::WatchdogPingIntervalUs();
  int64_t last_ping_us = 0;
  // Ticks are scheduled from a fixed origin so the interval does not drift
  // by the poll's own duration. With a fast path a tick is a fast interval
  // and every `ratio`-th is the full poll's.
  const int64_t step_us = fast_interval_us_ > 0 ? fast_interval_us_ : interval_us_;
  const int64_t ratio = interval_us_ / step_us;
  const auto origin = std::chrono::steady_clock::now();
  int64_t slot = 0;
  int64_t last_full_us = 0;
  bool polled = false;
  auto next = origin;
  std::function<void(const boost::system::error_code&)> tick =
      [&](const boost::system::error_code& ec) {
        if (ec || stopping) return;
        const int64_t started_us = clock_.MonotonicUs();
        // A full poll on its own slots, and whenever one is due because
        // slow ticks skipped its slot (then not again on the next slot of
        // its own, half an interval later or less).
        const int64_t since_full_us = started_us - last_full_us;
        const bool full = !polled || fast_interval_us_ == 0 || since_full_us >= interval_us_ ||
                          (slot % ratio == 0 && since_full_us >= interval_us_ / 2);
        if (full) {
          poll_();
          polled = true;
          last_full_us = started_us;
        } else {
          fast_poll_();
        }
        const int64_t now_us = clock_.MonotonicUs();
        {
          std::lock_guard lock(mu_);
          if (full) Record(&times_, now_us - started_us, interval_us_);
          else Record(&fast_times_, now_us - started_us, fast_interval_us_);
        }
        if (watchdog_us > 0 && now_us - last_ping_us >= watchdog_us) {
          systemd::NotifyWatchdog();
          last_ping_us = now_us;
        }
        ++slot;
        next = origin + std::chrono::microseconds(slot * step_us);
        const auto now = std::chrono::steady_clock::now();
        if (next < now) {  // fell behind: skip, do not burst
          slot = std::chrono::duration_cast<std::chrono::microseconds>(now - origin).count() / step_us + 1;
          next = origin + std::chrono::microseconds(slot * step_us);
        }
        timer.expires_at(next);
        timer.async_wait(tick);
      };
  timer.expires_at(next);
  timer.async_wait(tick);
  io.run();

  systemd::NotifyStopping();
  if (!shipper_.Flush(flush_timeout_us))
    LOG_WARN("agent", "stopping with ", shipper_.stats().pending, " unacked batches");
  shipper_.Stop();
}

void AgentLoop::SetFastPoll(int64_t fast_interval_us, std::function<void()> fast_poll) {
  fast_interval_us_ = fast_poll ? fast_interval_us : 0;
  fast_poll_ = std::move(fast_poll);
}

AgentLoop::PollTimes AgentLoop::fast_times() const {
  std::lock_guard lock(mu_);
  return fast_times_;
}

uint64_t AgentLoop::polls() const {
  std::lock_guard lock(mu_);
  return times_.polls;
}

AgentLoop::PollTimes AgentLoop::poll_times() const {
  std::lock_guard lock(mu_);
  return times_;
}

void AgentLoop::Record(PollTimes* times, int64_t us, int64_t interval_us) {
  ++times->polls;
  times->total_us += us;
  times->last_us = us;
  if (us > interval_us) ++times->overruns;
  for (size_t i = 0; i < kPollBucketsUs.size(); ++i)
    if (us <= kPollBucketsUs[i]) ++times->buckets[i];
}

}  // namespace rocefab
