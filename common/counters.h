#pragma once
// The counter vocabulary (docs/counters.md) as data. Every layer takes names,
// kinds, widths and /metrics names from this table; docs/counters.md is
// checked against it by a test.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/counter_delta.h"
#include "rocefab/v1/telemetry.pb.h"

namespace rocefab {

// Where a counter's reading comes from on Linux.
enum class CounterSource : uint8_t {
  kSysfsCounters,    // ports/N/counters/<source>, fallback counters_ext/<source_ext>
  kSysfsHwCounters,  // ports/N/hw_counters/<source>
  kEthtool,          // ethtool statistic <source>; "{prio}" expands to 0..7
  kLinkState,        // netlink carrier, or ports/N/state
  kSysfsRate,        // ports/N/rate
  kRoceSetting,      // the NIC's RoCE settings: sysfs, configfs, debugfs, dcbnl (agents/host/roce_settings.h)
  kSwitch,           // switch agent backends
  kCollective,       // collective records
};

struct CounterDef {
  std::string_view name;
  v1::Scope scope;
  CounterSource source;
  std::string_view source_name;      // file or statistic name, see CounterSource
  std::string_view source_ext_name;  // 64-bit counters_ext fallback, if any
  v1::ValueKind kind;
  CounterWidth width;
  uint32_t multiplier;  // applied to the raw reading (port_*_data are octets/4)
  bool per_prio;        // labelled by PFC priority 0..7
  bool per_queue;       // labelled by queue
  std::string_view note;
};

std::span<const CounterDef> AllCounters();
std::span<const CounterDef> CountersOfScope(v1::Scope scope);
// nullptr when `name` is not in the vocabulary of `scope`.
const CounterDef* FindCounter(v1::Scope scope, std::string_view name);

// The counters the PFC fast path reads between full polls (the pause frames
// and durations, and the NIC's own storm events), by vocabulary name.
bool IsFastPathCounter(std::string_view name);

// "nic", "port", "queue", "coll".
std::string_view ScopeName(v1::Scope scope);
bool ParseScope(std::string_view name, v1::Scope* scope);

// The Prometheus name of a counter, e.g. rocefab_nic_rx_bytes_total,
// rocefab_nic_pfc_rx_pause_seconds_total (microseconds become seconds),
// rocefab_nic_link_up.
std::string MetricName(const CounterDef& def);
// The factor from the stored value to the exported one (1e-6 for _us).
double MetricScale(const CounterDef& def);

// The labels of one series as docs/metrics.md names them: host, device, port
// for a NIC; switch, port for a switch port or queue; then prio and queue
// where present (-1: absent).
std::vector<std::pair<std::string, std::string>> SeriesLabels(v1::Scope scope,
                                                              const std::string& entity,
                                                              uint32_t port, int64_t prio,
                                                              int64_t queue);

}  // namespace rocefab
