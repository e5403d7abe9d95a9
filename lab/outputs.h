#pragma once
// Writes the model's state in the real input formats of the daemons:
//   hosts/<host>/sys/class/infiniband/<dev>/ports/1/{counters,hw_counters}/*,
//     rate, state, phys_state, device/net/<netdev>/   (sysfs)
//   hosts/<host>/ethtool/<netdev>/statistics           (`ethtool -S` text)
//   hosts/<host>/proc/sys/kernel/random/boot_id
//   hosts/<host>/nccl-inspector-<job>/<host>-pid<pid>.log  (NCCL Inspector JSONL, v4.0)
//   switches/<switch>/counters.json                    (switchd file backend)
// Every file is replaced atomically (write, then rename), so a reader never
// sees half a value. Files whose content did not change are not rewritten.

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/fs_root.h"
#include "lab/fabric_model.h"

namespace rocefab::lab {

using ::rocefab::WriteFileAtomic;

class SonicLab;

class OutputWriter final {
 public:
  OutputWriter(std::string run_dir, const FabricModel& model);

  // Creates the per-host and per-switch trees.
  absl::Status Init();
  // Writes every host's and switch's counters as of now.
  absl::Status WriteCounters(int64_t now_us);
  // Appends one Inspector line per record.
  absl::Status WriteCollectives(const std::vector<CollectiveRecord>& records, int64_t now_us);

  uint64_t files_written() const { return files_written_; }
  // Switches write their readings into SONiC's databases instead of
  // counters.json.
  void UseSonic(SonicLab* sonic) { sonic_ = sonic; }

 private:
  absl::Status WriteIfChanged(const std::string& path, const std::string& content);
  std::string HostDir(int host) const;

  std::string run_dir_;
  const FabricModel& model_;
  std::map<std::string, std::string> last_;  // path -> last content
  uint64_t files_written_ = 0;
  SonicLab* sonic_ = nullptr;
};

// "400 Gb/sec (4X NDR)" for a speed, as the kernel prints ports/N/rate.
std::string RateText(double gbps);

}  // namespace rocefab::lab
