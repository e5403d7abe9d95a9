#pragma once
// Turning cumulative counter readings into increases.
//
// Hardware counters are 32 bits (mlx5 q-counters such as out_of_sequence) or
// 64 bits wide and wrap; they also restart from zero when the host reboots or
// the driver reloads. DeltaTracker keeps the previous reading of each series
// and classifies every new one. Not thread-safe: one per poll loop.

#include <cstdint>
#include <string>
#include <unordered_map>

namespace rocefab {

enum class CounterWidth : uint8_t { k32 = 32, k64 = 64 };

enum class DeltaKind : uint8_t {
  kFirst,  // no previous reading: no delta
  kDelta,  // normal increase (possibly across a wrap)
  kReset,  // the counter restarted; delta counts from zero
};

struct DeltaResult {
  DeltaKind kind = DeltaKind::kFirst;
  uint64_t delta = 0;
  bool wrapped = false;
};

// Pure function behind DeltaTracker. A decrease is a wrap when the modular
// increase is less than half the counter's range, and a reset otherwise
// (a 32-bit counter from 4294967000 to 500 wrapped; from 100 to 5 it reset).
DeltaResult ComputeDelta(uint64_t previous, uint64_t current, CounterWidth width);

class DeltaTracker final {
 public:
  DeltaTracker() = default;
  DeltaTracker(const DeltaTracker&) = delete;
  DeltaTracker& operator=(const DeltaTracker&) = delete;

  // A changed host boot id means every counter restarted: the next reading
  // of each series is a reset, whatever its value.
  void SetBootId(const std::string& boot_id);

  // Records `value` for `series` and returns how it relates to the last one.
  DeltaResult Update(const std::string& series, uint64_t value, CounterWidth width);

  // The last reading of one series, for a caller that keeps its series
  // itself (common/batch_builder.h finds them without building a key).
  struct Series {
    bool seen = false;
    uint64_t value = 0;
    uint64_t boot_epoch = 0;
  };
  // As Update, on a series the caller found.
  DeltaResult Update(Series* series, uint64_t value, CounterWidth width) const;

  size_t series_count() const { return last_.size(); }

 private:
  std::unordered_map<std::string, Series> last_;
  std::string boot_id_;
  uint64_t boot_epoch_ = 0;  // bumped when the boot id changes
};

}  // namespace rocefab
