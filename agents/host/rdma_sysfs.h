#pragma once
// Reads RDMA port counters from sysfs, as the kernel lays them out:
//   class/infiniband/<dev>/ports/<N>/counters/<name>      (IB PMA counters)
//   class/infiniband/<dev>/ports/<N>/counters_ext/<name>   (64-bit, older drivers)
//   class/infiniband/<dev>/ports/<N>/hw_counters/<name>    (driver counters, mlx5 q-counters)
//   class/infiniband/<dev>/ports/<N>/{rate,state,phys_state}
//   class/infiniband/<dev>/device/net/<netdev>             (the Ethernet device)
// Values become vocabulary names (common/counters.h). "N/A (no PMA)" and
// missing files are skipped and counted, never turned into 0.
// Files stay open between polls (common/file_cache.h), so a poll is one
// pread per counter. One thread at a time.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "agents/host/rdma_netlink.h"
#include "common/counter_values.h"
#include "common/file_cache.h"
#include "common/fs_root.h"

namespace rocefab::hostd {

// What could not be read, summed over a poll.
struct ReadHealth {
  uint64_t skipped_values = 0;  // N/A or missing
  uint64_t parse_errors = 0;    // garbage
  uint64_t source_errors = 0;   // a whole source failed
  void Add(const ReadHealth& other) {
    skipped_values += other.skipped_values;
    parse_errors += other.parse_errors;
    source_errors += other.source_errors;
  }
};

// The readings of one RDMA port.
struct NicReading {
  std::string device;  // "mlx5_0"
  uint32_t port = 1;
  std::string netdev;  // "eth2", or empty when device/net/ is absent
  // Vocabulary name -> value, already scaled (bytes are bytes).
  ByCounter<uint64_t> counters{v1::SCOPE_NIC};
  // Per-priority counters: name -> prio -> value.
  ByCounter<IndexedValues> per_prio{v1::SCOPE_NIC};
  std::optional<bool> link_up;
  std::optional<uint64_t> rate_bytes_per_second;
};

// Parsing of single sysfs values; exposed for tests and fuzzing.
enum class ValueParse { kOk, kNotAvailable, kGarbage };
// "12345\n" -> kOk; "N/A (no PMA)" -> kNotAvailable; else kGarbage.
ValueParse ParseSysfsCounter(std::string_view text, uint64_t* value);
// "400 Gb/sec (4X NDR)" -> 50000000000 bytes/s. False when unparseable.
bool ParseRate(std::string_view text, uint64_t* bytes_per_second);
// "4: ACTIVE" -> 4. False when unparseable.
bool ParseStateNumber(std::string_view text, int* number);

class RdmaSysfsReader final {
 public:
  // With `netlink` (available, and reading the same kernel as `sysfs_root`),
  // each port's hw_counters come from one RDMA netlink reply
  // (agents/host/rdma_netlink.h), and from their files only where netlink
  // fails; a device whose request fails is read from sysfs for the next 30 s.
  explicit RdmaSysfsReader(const FsRoot& sysfs_root, HwCounterSource* netlink = nullptr)
      : files_(sysfs_root), netlink_(netlink) {}

  // One NicReading per (device, port). An absent class/infiniband is not an
  // error (a host without RDMA devices): it yields no readings. `now_us`
  // paces the rediscovery of devices; 0 opens everything afresh.
  std::vector<NicReading> ReadAll(ReadHealth* health, int64_t now_us = 0);

  const FileCache& files() const { return files_; }
  // Ports whose hw_counters came from RDMA netlink, and requests that failed.
  uint64_t netlink_ports() const { return netlink_ports_; }
  uint64_t netlink_failures() const { return netlink_failures_; }

 private:
  static constexpr int64_t kNetlinkRetryUs = 30'000'000;
  void ReadPort(const std::string& port_dir, NicReading* nic, ReadHealth* health);
  // The port's hw_counters by name into netlink_values_; false to read sysfs.
  bool ReadNetlink(const NicReading& nic);
  FileCache files_;
  HwCounterSource* netlink_;
  int64_t now_us_ = 0;
  std::unordered_map<std::string, int64_t> netlink_off_until_us_;  // by device
  RdmaCounters netlink_reply_;
  std::unordered_map<std::string_view, uint64_t> netlink_values_;  // views netlink_reply_
  uint64_t netlink_ports_ = 0;
  uint64_t netlink_failures_ = 0;
};

// Each RDMA device's firmware version, from class/infiniband/<dev>/fw_ver
// (the RDMA core's attribute); devices without one are left out.
std::map<std::string, std::string> NicFirmwareVersions(const FsRoot& sysfs);

}  // namespace rocefab::hostd
