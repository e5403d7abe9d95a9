#pragma once
// A clock tests move by hand.

#include <atomic>

#include "common/clock.h"

namespace rocefab::testing {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t now_us = 1'700'000'000'000'000) : now_us_(now_us), mono_us_(1'000'000) {}
  int64_t NowUs() const override { return now_us_.load(); }
  int64_t MonotonicUs() const override { return mono_us_.load(); }
  void Advance(int64_t us) {
    now_us_ += us;
    mono_us_ += us;
  }

 private:
  std::atomic<int64_t> now_us_;
  std::atomic<int64_t> mono_us_;
};

}  // namespace rocefab::testing
