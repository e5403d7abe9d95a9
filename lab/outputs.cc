#include "lab/outputs.h"

#include "lab/sonic_lab.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "common/counters.h"
#include "common/strings.h"

namespace rocefab::lab {
namespace {

uint64_t U(double v) { return v <= 0 ? 0 : static_cast<uint64_t>(v); }

// The vocabulary values of a NIC port, from the model's counters.
std::map<std::string, uint64_t> NicValues(const PortState& port) {
  const PortCounters& c = port.c;
  return {{"rx_bytes", U(c.rx_bytes)},
          {"tx_bytes", U(c.tx_bytes)},
          {"rx_packets", U(c.rx_packets)},
          {"tx_packets", U(c.tx_packets)},
          {"rx_errors", 0},
          {"rx_discards", 0},
          {"tx_discards", 0},
          {"tx_wait", U(c.tx_wait)},
          {"symbol_errors", U(c.symbol_errors)},
          {"link_downed", U(c.link_downed)},
          {"link_error_recovery", 0},
          {"ecn_marked_packets", U(c.ecn_marked_packets)},
          {"cnp_sent", U(c.cnp_sent)},
          {"cnp_handled", U(c.cnp_handled)},
          {"cnp_ignored", 0},
          {"out_of_sequence", U(c.out_of_sequence)},
          {"packet_seq_errors", U(c.packet_seq_errors)},
          {"local_ack_timeouts", U(c.local_ack_timeouts)},
          {"implied_nak_seq_errors", U(c.implied_nak_seq_errors)},
          {"duplicate_requests", 0},
          {"rnr_nak_retry_errors", 0},
          {"out_of_buffer", 0},
          {"retransmits", U(c.retransmits)},
          {"retransmit_timeouts", U(c.retransmit_timeouts)},
          {"rx_icrc_errors", 0}};
}

std::string CollectiveName(v1::Collective collective) {
  switch (collective) {
    case v1::COLLECTIVE_ALL_REDUCE: return "AllReduce";
    case v1::COLLECTIVE_ALL_GATHER: return "AllGather";
    case v1::COLLECTIVE_REDUCE_SCATTER: return "ReduceScatter";
    case v1::COLLECTIVE_ALL_TO_ALL: return "AllToAll";
    default: return "Invalid";
  }
}

}  // namespace

std::string RateText(double gbps) {
  const char* lanes = "4X";
  const char* name = "NDR";
  if (gbps >= 800) name = "XDR";
  else if (gbps >= 400) name = "NDR";
  else if (gbps >= 200) name = "HDR";
  else if (gbps >= 100) name = "EDR";
  else if (gbps >= 50) lanes = "2X", name = "HDR";
  else lanes = "1X", name = "QDR";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g Gb/sec (%s %s)\n", gbps, lanes, name);
  return buf;
}

OutputWriter::OutputWriter(std::string run_dir, const FabricModel& model)
    : run_dir_(std::move(run_dir)), model_(model) {}

std::string OutputWriter::HostDir(int host) const {
  return StrCat(run_dir_, "/hosts/", model_.topology().proto().hosts(host).name());
}

absl::Status OutputWriter::Init() {
  std::error_code ec;
  const v1::Topology& topo = model_.topology().proto();
  for (int h = 0; h < topo.hosts_size(); ++h) {
    const std::string dir = HostDir(h);
    for (const auto& nic : topo.hosts(h).nics()) {
      const std::string dev = StrCat(dir, "/sys/class/infiniband/", nic.name());
      std::filesystem::create_directories(dev + "/ports/1/counters", ec);
      std::filesystem::create_directories(dev + "/ports/1/hw_counters", ec);
      std::filesystem::create_directories(StrCat(dev, "/device/net/", nic.netdev()), ec);
      std::filesystem::create_directories(StrCat(dir, "/ethtool/", nic.netdev()), ec);
      if (ec) return absl::UnavailableError(StrCat("cannot create ", dev, ": ", ec.message()));
      if (auto s = WriteFileAtomic(dev + "/node_type", "1: CA\n"); !s.ok()) return s;
      if (auto s = WriteFileAtomic(dev + "/hca_type", "MT4129\n"); !s.ok()) return s;
      if (auto s = WriteFileAtomic(dev + "/ports/1/link_layer", "Ethernet\n"); !s.ok()) return s;
      // The host's RoCE settings as a MLNX_OFED host lays them out
      // (agents/host/roce_settings.h), set up for the lab's policies: RoCE
      // on DSCP 26 (ToS 106 with ECT(0)) and priority 3 with CNPs, the CNPs
      // on DSCP 48 and priority 6. `rocefab check roce` compares them.
      const std::string net = StrCat(dir, "/sys/class/net/", nic.netdev());
      std::filesystem::create_directories(net + "/ecn/roce_np/enable", ec);
      std::filesystem::create_directories(net + "/ecn/roce_rp/enable", ec);
      std::filesystem::create_directories(StrCat(dir, "/sys/kernel/config/rdma_cm/", nic.name(), "/ports/1"), ec);
      if (ec) return absl::UnavailableError(StrCat("cannot create ", net, ": ", ec.message()));
      std::vector<std::pair<std::string, std::string>> files = {
          {net + "/mtu", "4200\n"},
          {net + "/ecn/roce_np/cnp_dscp", "48\n"},
          {net + "/ecn/roce_np/cnp_802p_prio", "6\n"},
          {StrCat(dir, "/sys/kernel/config/rdma_cm/", nic.name(), "/ports/1/default_roce_tos"), "106\n"}};
      for (int prio = 0; prio < 8; ++prio) {
        files.push_back({StrCat(net, "/ecn/roce_np/enable/", prio), prio == 3 ? "1\n" : "0\n"});
        files.push_back({StrCat(net, "/ecn/roce_rp/enable/", prio), prio == 3 ? "1\n" : "0\n"});
      }
      for (const auto& [path, text] : files)
        if (auto s = WriteFileAtomic(path, text); !s.ok()) return s;
    }
    std::filesystem::create_directories(dir + "/proc/sys/kernel/random", ec);
    // A stable boot id per emulated host.
    char boot[64];
    std::snprintf(boot, sizeof boot, "00000000-0000-4000-8000-%012x\n", h + 1);
    if (auto s = WriteFileAtomic(dir + "/proc/sys/kernel/random/boot_id", boot); !s.ok()) return s;
  }
  for (const auto& sw : topo.switches()) {
    std::filesystem::create_directories(StrCat(run_dir_, "/switches/", sw.name()), ec);
    if (ec) return absl::UnavailableError(StrCat("cannot create switch dir: ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status OutputWriter::WriteIfChanged(const std::string& path, const std::string& content) {
  auto it = last_.find(path);
  if (it != last_.end() && it->second == content) return absl::OkStatus();
  if (auto s = WriteFileAtomic(path, content); !s.ok()) return s;
  last_[path] = content;
  ++files_written_;
  return absl::OkStatus();
}

absl::Status OutputWriter::WriteCounters(int64_t now_us) {
  const v1::Topology& topo = model_.topology().proto();
  std::map<int, nlohmann::json> switch_ports;
  for (const PortState& port : model_.ports()) {
    if (port.host >= 0) {
      const auto& nic = topo.hosts(port.host).nics(port.nic);
      const std::string dev =
          StrCat(HostDir(port.host), "/sys/class/infiniband/", nic.name(), "/ports/1");
      // Each vocabulary counter goes back to the file the kernel would show,
      // divided by the vocabulary's multiplier (port_*_data count 4-byte words)
      // and wrapped to 32 bits where the hardware counter is 32 bits wide.
      for (const auto& [name, value] : NicValues(port)) {
        const CounterDef* def = FindCounter(v1::SCOPE_NIC, name);
        uint64_t raw = value / def->multiplier;
        if (def->width == CounterWidth::k32) raw &= 0xffffffffULL;
        const char* sub = def->source == CounterSource::kSysfsCounters ? "/counters/" : "/hw_counters/";
        if (auto s = WriteIfChanged(StrCat(dev, sub, def->source_name), StrCat(raw, "\n")); !s.ok())
          return s;
      }
      if (auto s = WriteIfChanged(dev + "/rate", RateText(port.speed_gbps)); !s.ok()) return s;
      if (auto s = WriteIfChanged(dev + "/state", port.up ? "4: ACTIVE\n" : "1: DOWN\n"); !s.ok())
        return s;
      if (auto s = WriteIfChanged(dev + "/phys_state", port.up ? "5: LinkUp\n" : "3: Disabled\n");
          !s.ok())
        return s;
      const PortCounters& c = port.c;
      std::string stats = "NIC statistics:\n";
      StrAppend(&stats, "     rx_bytes_phy: ", U(c.rx_bytes), "\n     tx_bytes_phy: ", U(c.tx_bytes),
                "\n     rx_packets_phy: ", U(c.rx_packets), "\n     tx_packets_phy: ",
                U(c.tx_packets), "\n");
      for (int prio = 0; prio < 8; ++prio) {
        const bool lossless = prio == 3;
        StrAppend(&stats, "     rx_prio", prio, "_pause: ", lossless ? U(c.pfc_rx_frames) : 0,
                  "\n     rx_prio", prio, "_pause_duration: ", lossless ? U(c.pfc_rx_us) : 0,
                  "\n     tx_prio", prio, "_pause: ", lossless ? U(c.pfc_tx_frames) : 0,
                  "\n     tx_prio", prio, "_pause_duration: ", lossless ? U(c.pfc_tx_us) : 0, "\n");
      }
      StrAppend(&stats, "     tx_pause_storm_warning_events: ", U(c.pause_storm_warnings),
                "\n     tx_pause_storm_error_events: ", U(c.pause_storm_errors),
                "\n     rx_discards_phy: ", U(c.rx_discards_phy), "\n     tx_discards_phy: 0\n",
                "     rx_buffer_passed_thres_phy: 0\n     link_down_events_phy: ",
                U(c.link_down_events), "\n");
      if (auto s = WriteIfChanged(StrCat(HostDir(port.host), "/ethtool/", nic.netdev(), "/statistics"),
                                  stats);
          !s.ok())
        return s;
    } else {
      const PortCounters& c = port.c;
      nlohmann::json queue = {{"queue_tx_bytes", U(c.queue_tx_bytes)},
                              {"queue_tx_packets", U(c.queue_tx_packets)},
                              {"queue_drops", U(c.queue_drops)},
                              {"queue_ecn_marked_packets", U(c.queue_ecn_marked)},
                              {"queue_depth_bytes", U(c.queue_depth_bytes)},
                              {"queue_watermark_bytes", U(c.queue_watermark_bytes)}};
      switch_ports[port.sw][port.name] = {
          {"rx_bytes", U(c.rx_bytes)},
          {"tx_bytes", U(c.tx_bytes)},
          {"rx_packets", U(c.rx_packets)},
          {"tx_packets", U(c.tx_packets)},
          {"rx_fcs_errors", U(c.rx_fcs_errors)},
          {"rx_symbol_errors", U(c.rx_symbol_errors)},
          {"link_up", port.up ? 1 : 0},
          {"rate_bytes_per_second", static_cast<uint64_t>(port.speed_gbps * 1e9 / 8)},
          {"link_flaps", U(c.link_flaps)},
          {"pfc_rx_pause_frames", {{"3", U(c.pfc_rx_frames)}}},
          {"pfc_tx_pause_frames", {{"3", U(c.pfc_tx_frames)}}},
          {"pfc_rx_pause_us", {{"3", U(c.pfc_rx_us)}}},
          {"pfc_tx_pause_us", {{"3", U(c.pfc_tx_us)}}},
          {"pfcwd_storms_detected", {{"3", U(c.pfcwd_detected)}}},
          {"pfcwd_storms_restored", {{"3", U(c.pfcwd_restored)}}},
          {"pfc_enabled", {{"3", port.pfc_on ? 1 : 0}}},
          {"queues", {{"3", std::move(queue)}}}};
    }
  }
  for (int sw = 0; sw < topo.switches_size(); ++sw) {
    const std::string& name = topo.switches(sw).name();
    const uint64_t used = model_.buffer_used_bytes(sw);
    nlohmann::json doc = {
        {"switch", name},
        {"timestamp_us", now_us},
        {"os_version", model_.SwitchOsVersion(model_.SwitchIndex(name))},
        {"ports", switch_ports.count(sw) ? switch_ports[sw] : nlohmann::json::object()},
        {"buffer_pools",
         {{"ingress_lossless_pool",
           {{"buffer_used_bytes", used},
            {"buffer_watermark_bytes", used + used / 5},
            {"buffer_size_bytes", static_cast<uint64_t>(model_.constants().buffer_bytes)}}}}}};
    if (sonic_ != nullptr) {
      if (auto s = sonic_->WriteSwitch(name, doc); !s.ok()) return s;
      continue;
    }
    if (auto s = WriteFileAtomic(StrCat(run_dir_, "/switches/", name, "/counters.json"), doc.dump());
        !s.ok())
      return s;
    ++files_written_;
  }
  return absl::OkStatus();
}

absl::Status OutputWriter::WriteCollectives(const std::vector<CollectiveRecord>& records,
                                            int64_t now_us) {
  const v1::Topology& topo = model_.topology().proto();
  // One file per process (rank), as the Inspector plugin writes them.
  std::map<std::string, std::string> lines_by_file;
  for (const CollectiveRecord& rec : records) {
    const JobStatus& job = model_.jobs()[rec.job];
    const std::string& host = topo.hosts(rec.host).name();
    const int pid = 20000 + rec.job * 100 + rec.gpu;
    const int n = static_cast<int>(model_.job_hosts(rec.job).size()) * model_.gpus_per_host(rec.job);
    // NCCL's commHash, identical on every rank, printed as at most 14 hex digits.
    char comm_id[32];
    std::snprintf(comm_id, sizeof comm_id, "0x%lx",
                  static_cast<unsigned long>(std::hash<std::string>{}(job.id) >> 8));
    nlohmann::ordered_json line;
    line["header"] = {{"id", comm_id},
                      {"comm_name", job.name},
                      {"rank", rec.rank},
                      {"n_ranks", n},
                      {"nnodes", model_.job_hosts(rec.job).size()}};
    line["metadata"] = {{"inspector_output_format_version", "v4.0"},
                        {"git_rev", "v2.30.3-1"},
                        {"rec_mechanism", "nccl_profiler_interface"},
                        {"dump_timestamp_us", now_us},
                        {"hostname", host},
                        {"pid", pid}};
    line["coll_perf"] = {{"coll", CollectiveName(model_.job_collective(rec.job))},
                         {"coll_sn", rec.seq},
                         {"coll_msg_size_bytes", rec.msg_bytes},
                         {"coll_exec_time_us", static_cast<uint64_t>(rec.exec_time_us)},
                         {"coll_timing_source", "kernel_gpu"},
                         {"coll_algobw_gbs", std::round(rec.algbw_gbs * 1e6) / 1e6},
                         {"coll_busbw_gbs", std::round(rec.busbw_gbs * 1e6) / 1e6}};
    const std::string file = StrCat(run_dir_, "/hosts/", host, "/nccl-inspector-", job.id, "/",
                                    host, "-pid", pid, ".log");
    StrAppend(&lines_by_file[file], line.dump(), "\n");
  }
  for (const auto& [file, lines] : lines_by_file) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ec);
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return absl::UnavailableError(StrCat("cannot append to ", file, ": ", std::strerror(errno)));
    // One write per batch of whole lines: a reader never sees half a line
    // unless the disk fills, which readers must survive anyway.
    const ssize_t n = ::write(fd, lines.data(), lines.size());
    ::close(fd);
    if (n != static_cast<ssize_t>(lines.size()))
      return absl::UnavailableError(StrCat("short write to ", file));
  }
  return absl::OkStatus();
}

}  // namespace rocefab::lab
