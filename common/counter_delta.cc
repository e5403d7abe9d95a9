#include "common/counter_delta.h"

namespace rocefab {

DeltaResult ComputeDelta(uint64_t previous, uint64_t current, CounterWidth width) {
  DeltaResult result;
  if (width == CounterWidth::k32) {
    // A 32-bit source never legitimately reads above 2^32-1; treat as reset.
    if (current > 0xffffffffULL || previous > 0xffffffffULL) {
      result.kind = current >= previous ? DeltaKind::kDelta : DeltaKind::kReset;
      result.delta = current >= previous ? current - previous : current;
      return result;
    }
  }
  if (current >= previous) {
    result.kind = DeltaKind::kDelta;
    result.delta = current - previous;
    return result;
  }
  const uint64_t modular = width == CounterWidth::k32
                               ? ((current + (1ULL << 32)) - previous) & 0xffffffffULL
                               : current - previous;  // unsigned wrap is the 2^64 modulus
  const uint64_t half = width == CounterWidth::k32 ? (1ULL << 31) : (1ULL << 63);
  if (modular < half) {
    result.kind = DeltaKind::kDelta;
    result.delta = modular;
    result.wrapped = true;
  } else {
    result.kind = DeltaKind::kReset;
    result.delta = current;
  }
  return result;
}

void DeltaTracker::SetBootId(const std::string& boot_id) {
  if (boot_id == boot_id_) return;
  if (!boot_id_.empty()) ++boot_epoch_;
  boot_id_ = boot_id;
}

DeltaResult DeltaTracker::Update(const std::string& series, uint64_t value, CounterWidth width) {
  return Update(&last_[series], value, width);
}

DeltaResult DeltaTracker::Update(Series* series, uint64_t value, CounterWidth width) const {
  DeltaResult result;
  if (!series->seen) {
    result.kind = DeltaKind::kFirst;
  } else if (series->boot_epoch != boot_epoch_) {
    result.kind = DeltaKind::kReset;
    result.delta = value;
  } else {
    result = ComputeDelta(series->value, value, width);
  }
  series->seen = true;
  series->value = value;
  series->boot_epoch = boot_epoch_;
  return result;
}

}  // namespace rocefab
