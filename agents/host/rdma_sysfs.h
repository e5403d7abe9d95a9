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
#include <vector>

#include "absl/status/statusor.h"
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
  explicit RdmaSysfsReader(const FsRoot& sysfs_root) : files_(sysfs_root) {}

  // One NicReading per (device, port). An absent class/infiniband is not an
  // error (a host without RDMA devices): it yields no readings. `now_us`
  // paces the rediscovery of devices; 0 opens everything afresh.
  std::vector<NicReading> ReadAll(ReadHealth* health, int64_t now_us = 0);

  const FileCache& files() const { return files_; }

 private:
  void ReadPort(const std::string& port_dir, NicReading* nic, ReadHealth* health);
  FileCache files_;
};

// Each RDMA device's firmware version, from class/infiniband/<dev>/fw_ver
// (the RDMA core's attribute); devices without one are left out.
std::map<std::string, std::string> NicFirmwareVersions(const FsRoot& sysfs);

}  // namespace rocefab::hostd
