#pragma once
// What rocefab-switchd needs from a switch, behind one interface: the `file`
// backend reads what the lab writes, the `linux` backend the kernel
// (netlink), the `sonic` backend SONiC's COUNTERS_DB.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rocefab::switchd {

// Cumulative readings of one switch port. Names are the vocabulary's
// (docs/counters.md, scopes `port` and `queue`).
struct PortReading {
  std::map<std::string, uint64_t> counters;                          // rx_bytes, link_up, ...
  std::map<std::string, std::map<uint32_t, uint64_t>> per_prio;      // pfc_*{prio}
  std::map<std::string, std::map<uint32_t, uint64_t>> port_queue;    // pfcwd_*{queue}
  std::map<uint32_t, std::map<std::string, uint64_t>> queues;        // queue -> queue_* counters
};

struct SwitchReading {
  std::string name;
  int64_t timestamp_us = 0;  // when the source says it read them; 0 = now
  std::map<std::string, PortReading> ports;
  // Buffer pool -> buffer_used_bytes, buffer_watermark_bytes.
  std::map<std::string, std::map<std::string, uint64_t>> buffer_pools;
  // The switch's operating system image as the source names it (SONiC's
  // build_version; the lab's "os_version"), or empty.
  std::string os_version;
  uint64_t unknown_keys = 0;  // names outside the vocabulary, skipped
  uint64_t bad_values = 0;    // values that were not non-negative integers
  // Sources the backend expected and did not find this poll (a SONiC map or
  // table that is missing), in words an operator can act on.
  std::vector<std::string> degraded;
};

class SwitchBackend {
 public:
  virtual ~SwitchBackend() = default;
  virtual absl::StatusOr<SwitchReading> ReadCounters() = 0;
  // The PFC fast path's read. The agent keeps only the pause counters
  // (IsFastPathCounter); a backend that can read those alone more cheaply
  // overrides this, and the default reads everything.
  virtual absl::StatusOr<SwitchReading> ReadPfcCounters() { return ReadCounters(); }
};

}  // namespace rocefab::switchd
