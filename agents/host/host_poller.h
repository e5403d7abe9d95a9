#pragma once
// One poll of everything rocefab-hostd reads on a GPU host: RDMA sysfs
// counters, ethtool statistics and netlink link state, for every RDMA port.
// Keeps the sysfs counter files open between polls; the other sources are
// references. One thread at a time.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agents/host/ethtool_stats.h"
#include "agents/host/link_state.h"
#include "agents/host/rdma_sysfs.h"
#include "agents/host/roce_settings.h"
#include "common/batch_builder.h"
#include "common/clock.h"
#include "common/file_cache.h"
#include "common/fs_root.h"
#include "rocefab/v1/telemetry.pb.h"

namespace rocefab::hostd {

struct HostSnapshot {
  std::string host;
  int64_t timestamp_us = 0;
  int64_t previous_us = 0;  // the poller's read before this one (full or fast)
  std::vector<NicReading> nics;
  ReadHealth health;  // the sum of by_source
  std::map<std::string, ReadHealth> by_source;  // "sysfs", "ethtool", "netlink"
};

class HostPoller final {
 public:
  struct Sources {
    const FsRoot* sysfs = nullptr;       // required
    EthtoolSource* ethtool = nullptr;    // optional
    LinkStateSource* links = nullptr;    // optional
    DcbSource* dcb = nullptr;            // optional: PFC and the DSCP map over dcbnl
    HwCounterSource* hw_counters = nullptr;  // optional: hw_counters over RDMA netlink
  };

  HostPoller(std::string host, Sources sources, const Clock& clock);

  HostSnapshot Poll();
  // The fast path: only the PFC pause counters (IsFastPathCounter), from
  // the ethtool statistics of the ports the last Poll found. Empty before
  // the first Poll or without an ethtool source.
  HostSnapshot PollPfc();

 private:
  std::string host_;
  Sources sources_;
  const Clock& clock_;
  RdmaSysfsReader sysfs_;
  // The NICs' RoCE settings change on reconfiguration, not per poll: they
  // are read at most every 30 s ("device/port" -> last read), and each poll
  // reports the latest.
  std::map<std::string, RoceSettings> roce_;
  struct Port {
    std::string device, netdev;
    uint32_t port;
  };
  std::vector<Port> ports_;  // as the last Poll found them
  int64_t last_read_us_ = 0;  // the last Poll or PollPfc
  int64_t roce_read_us_ = 0;
};

// The `--once -o json` shape:
//   {"host": H, "nics": [{"device": "mlx5_0", "port": 1, "netdev": "eth2" | null,
//     "counters": {"rx_bytes": N, "pfc_rx_pause_frames": {"3": N}, ...}}],
//    "health": {"skipped_values": N, "parse_errors": N, "source_errors": N}}
nlohmann::json SnapshotToJson(const HostSnapshot& snapshot);

// Appends a snapshot to a batch: one SCOPE_NIC entity per RDMA port,
// "<host>/<device>". A `fast` snapshot (PollPfc) gives fast entities, and
// only for the ports where a counter moved since its last sample.
void AppendSnapshot(const HostSnapshot& snapshot, BatchBuilder* builder,
                    v1::TelemetryBatch* batch, bool fast = false);

// The kernel boot id from <proc-root>/sys/kernel/random/boot_id, or "" if unreadable.
std::string ReadHostBootId(const FsRoot& proc_root);
std::string ReadHostBootId(FileCache& proc_files);

}  // namespace rocefab::hostd
