#pragma once
// The `file` backend: the lab's switches. Counters come from
// <state-dir>/<switch>/counters.json, which the lab replaces atomically each
// tick:
//
//   {"switch": "z1-rtsw01", "timestamp_us": 1700000000000000,
//    "ports": {"Ethernet0": {"rx_bytes": 1, "link_up": 1,
//                            "pfc_rx_pause_frames": {"3": 7},
//                            "pfcwd_storms_detected": {"3": 0},
//                            "queues": {"3": {"queue_drops": 0, "queue_depth_bytes": 0}}}},
//    "buffer_pools": {"ingress_lossless_pool": {"buffer_used_bytes": 0}}}

#include <string>
#include <tuple>
#include <string_view>

#include "agents/switch/switch_backend.h"

namespace rocefab::switchd {

class FileBackend final : public SwitchBackend {
 public:
  FileBackend(std::string state_dir, std::string switch_name);
  absl::StatusOr<SwitchReading> ReadCounters() override;
  // The fast path: a file the lab has not replaced since the last fast
  // read (same inode, size and mtime) holds no moved counter, and gives an
  // empty reading without being parsed.
  absl::StatusOr<SwitchReading> ReadPfcCounters() override;

 private:
  std::string path_;
  std::string switch_name_;
  std::tuple<uint64_t, int64_t, int64_t, int64_t> last_fast_{};  // inode, size, mtime s, ns
};

// Parses counters.json. Malformed JSON or a wrong top-level shape is an
// error; unknown names and bad values inside are skipped and counted.
absl::StatusOr<SwitchReading> ParseSwitchCountersJson(std::string_view text);

}  // namespace rocefab::switchd
