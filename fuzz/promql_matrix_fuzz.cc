// Fuzzes the collector's PromQL answer parser (collector/history/
// promql_history.h) on whatever a TSDB, a proxy in front of it or a
// stranger on the history URL could send back. Parsing must fail cleanly or
// yield samples of vocabulary series only.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collector/history/promql_history.h"
#include "common/counters.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t skipped = 0;
  auto rows = rocefab::collector::ParseMatrix(std::string_view(reinterpret_cast<const char*>(data), size), &skipped);
  if (!rows.ok()) return 0;
  for (const auto& row : *rows) {
    const rocefab::CounterDef* def = rocefab::FindCounter(row.series.scope, row.series.counter);
    if (def == nullptr || row.series.entity.find('/') == std::string::npos) __builtin_trap();
    if (def->per_prio != (row.series.prio >= 0)) __builtin_trap();
  }
  return 0;
}
