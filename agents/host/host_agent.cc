#include "agents/host/host_agent.h"

#include "common/log.h"

namespace rocefab::hostd {
namespace {
constexpr char kHostAgentLog[] = "hostd";
}

HostAgent::HostAgent(HostPoller& poller, TelemetryShipper& shipper, const FsRoot& proc_root,
                     const Clock& clock, InspectorTailer* inspector)
    : poller_(poller),
      shipper_(shipper),
      clock_(clock),
      proc_files_(proc_root, 30'000'000, /*watch=*/false),
      live_proc_(IsProcfsMount(proc_root.root())),
      inspector_(inspector) {}

void HostAgent::PollOnce() {
  if (!live_proc_ || builder_.host_boot_id().empty()) {
    proc_files_.BeginPoll(clock_.NowUs());
    const std::string boot_id = ReadHostBootId(proc_files_);
    if (!boot_id.empty() && boot_id != builder_.host_boot_id()) {
      if (!builder_.host_boot_id().empty())
        LOG_WARN(kHostAgentLog, "host boot id changed: treating every counter as reset");
      builder_.SetHostBootId(boot_id);
    }
  }
  HostSnapshot snapshot = poller_.Poll();
  std::shared_ptr<v1::TelemetryBatch> batch = builder_.NewArenaBatch(clock_.NowUs());
  const bool reread = read_components_ && polls_++ % static_cast<uint64_t>(components_every_) == 0;
  if (reread) builder_.SetComponents(read_components_());
  builder_.AttachComponents(batch.get(), reread);
  AppendSnapshot(snapshot, &builder_, batch.get());
  for (const auto& [source, h] : snapshot.by_source)
    problems_.Add(source, {h.skipped_values, h.parse_errors, h.source_errors});
  if (inspector_ != nullptr) {
    const uint64_t bad_before = tail_stats_.bad_lines;
    for (auto& record : inspector_->Poll(&tail_stats_)) *batch->add_collectives() = std::move(record);
    // Garbage in the logs counts like garbage in sysfs.
    batch->mutable_health()->set_parse_errors(batch->health().parse_errors() + tail_stats_.bad_lines - bad_before);
    problems_.Add("inspector", {0, tail_stats_.bad_lines - bad_before, 0});
  }
  shipper_.Enqueue(std::move(batch));
}

void HostAgent::PollFast() {
  const HostSnapshot snapshot = poller_.PollPfc();
  if (snapshot.nics.empty()) return;
  std::shared_ptr<v1::TelemetryBatch> batch = builder_.NewArenaBatch(clock_.NowUs());
  AppendSnapshot(snapshot, &builder_, batch.get(), /*fast=*/true);
  if (batch->entities_size() > 0) shipper_.Enqueue(std::move(batch));
}

}  // namespace rocefab::hostd
