#pragma once
// One rocefab-hostd tick: poll the host, turn the readings into a delta batch
// and hand it to the shipper. common/agent_loop.h calls it every interval.

#include <algorithm>
#include <functional>
#include <map>

#include "agents/host/host_poller.h"
#include "agents/host/inspector_tailer.h"
#include "common/agent_metrics.h"
#include "common/batch_builder.h"
#include "common/clock.h"
#include "common/file_cache.h"
#include "common/fs_root.h"
#include "common/telemetry_shipper.h"

namespace rocefab::hostd {

class HostAgent final {
 public:
  // `inspector` (optional) adds collective records from NCCL Inspector logs.
  HostAgent(HostPoller& poller, TelemetryShipper& shipper, const FsRoot& proc_root,
            const Clock& clock, InspectorTailer* inspector = nullptr);

  // One poll: snapshot, batch, enqueue.
  void PollOnce();
  // One fast-path poll (HostPoller::PollPfc): a batch of the ports whose
  // PFC counters moved, enqueued only if there is one.
  void PollFast();
  // What each source could not give since start, for /metrics.
  const SourceProblems& problems() const { return problems_; }
  // The versions the host's batches report (TelemetryBatch.components),
  // read at the first poll and every `every_polls` after (firmware can be
  // updated under a running agent).
  void SetComponents(std::function<std::map<std::string, std::string>()> read, int every_polls) {
    read_components_ = std::move(read);
    components_every_ = std::max(1, every_polls);
  }

 private:
  HostPoller& poller_;
  TelemetryShipper& shipper_;
  const Clock& clock_;
  FileCache proc_files_;  // the boot id, kept open (stat-checked: one inotify instance per agent)
  // The proc root is a procfs mount: its boot id is the running kernel's,
  // which cannot change under this process, so it is read once. Any other
  // root (the lab's host trees) is read every poll, where a reboot is a new
  // boot id under a running agent.
  const bool live_proc_;
  BatchBuilder builder_;
  InspectorTailer* inspector_;
  TailStats tail_stats_;
  SourceProblems problems_;
  std::function<std::map<std::string, std::string>()> read_components_;
  int components_every_ = 60;
  uint64_t polls_ = 0;
};

}  // namespace rocefab::hostd
