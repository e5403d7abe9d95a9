#pragma once
// The lab's fabric model: a topology carrying training jobs' collectives,
// advanced in ticks. Each tick it routes flows by the switches' ECMP hashes,
// shares link capacity among them, lets congestion produce ECN marks and
// CNPs, lets stuck or unmarked queues push PFC pauses upstream hop by hop,
// applies faults, and accumulates the counters real NICs and switches would
// show. Collective times come from the slowest connection of each ring, so
// bus bandwidth falls when the fabric suffers.
//
// Not thread-safe; one owner advances it. Deterministic for a given seed.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/topology.h"
#include "rocefab/v1/control.pb.h"
#include "rocefab/v1/lab.pb.h"

namespace rocefab::lab {

// Physical constants of the model (400G RoCE, mlx5-like NICs, shallow-buffer
// rack switches). Documented in docs/lab.md.
struct ModelConstants {
  double mtu_bytes = 4096;              // RoCE payload per packet
  double ecn_kmin_bytes = 150e3;        // marking starts
  double ecn_kmax_bytes = 1.5e6;        // marking at pmax
  double ecn_pmax = 0.1;
  double xoff_bytes = 3e6;              // ingress PFC threshold (beyond Kmax)
  double buffer_bytes = 32e6;           // per switch pool
  double pause_frames_per_s = 24000;    // refresh rate of pauses at full pause
  double incast_pfc_utilization = 4.0;  // with ECN working, PFC only beyond this
  double gbn_cost_packets = 200;        // goodput lost per dropped packet (go-back-N)
  double step_latency_s = 10e-6;        // per ring step
  double cnp_interval_s = 50e-6;        // at most one CNP per QP per interval
  double pfcwd_detect_s = 0.2;          // PFC watchdog detection time (factory QoS)
  // A queue the watchdog calls stormed: paused at least this share of its
  // detection time (it cannot drain).
  double pfcwd_paused_share = 0.95;
  uint32_t roce_dscp = 26;              // the DSCP RoCE traffic carries (mlx5 default)
  // With CNPs queued behind data (no strict-priority class of their own),
  // DCQCN reacts a queue's worth late: ECN holds incast only up to this
  // overload before PFC takes over, instead of incast_pfc_utilization.
  double incast_pfc_utilization_shared_cnp = 1.5;
  // A QP whose path dies under it loses what was in flight and recovers only
  // after its retransmission timeout (local ACK timeout x retries, then
  // go-back-N on the new path): the cost of every unplanned link loss. A
  // drain moves traffic before the link goes, and costs nothing.
  double qp_timeout_s = 1.0;
  // What a hung QP sends again at each timeout: one NCCL step in flight
  // (NCCL_BUFFSIZE, 4 MiB, over NCCL_STEPS, 8).
  double qp_inflight_bytes = 512 * 1024;
  // Relative standard deviation of one rank's kernel time around its
  // collective's (normal, independent per rank and collective).
  double kernel_jitter = 0.01;
};

// Cumulative counters of one port, in vocabulary units (bytes are bytes).
struct PortCounters {
  double rx_bytes = 0, tx_bytes = 0, rx_packets = 0, tx_packets = 0;
  // NIC (RDMA) side.
  double ecn_marked_packets = 0, cnp_sent = 0, cnp_handled = 0;
  double out_of_sequence = 0, packet_seq_errors = 0, local_ack_timeouts = 0;
  double implied_nak_seq_errors = 0, retransmits = 0, retransmit_timeouts = 0;
  double symbol_errors = 0, link_downed = 0, link_down_events = 0, tx_wait = 0;
  double pause_storm_warnings = 0, pause_storm_errors = 0;
  double rx_discards_phy = 0;  // a NIC's receive drops: what its stall prevention lets go
  // Switch side.
  double rx_fcs_errors = 0, rx_symbol_errors = 0, link_flaps = 0;
  double pfcwd_detected = 0, pfcwd_restored = 0;
  double queue_tx_bytes = 0, queue_tx_packets = 0, queue_drops = 0, queue_ecn_marked = 0;
  double queue_depth_bytes = 0, queue_watermark_bytes = 0;  // gauges
  // Both: PFC on the lossless priority.
  double pfc_rx_frames = 0, pfc_tx_frames = 0, pfc_rx_us = 0, pfc_tx_us = 0;
};

struct PortState {
  std::string device;  // host or switch name
  std::string name;    // mlx5_3 or Ethernet12
  int host = -1, nic = -1;  // for NIC ports
  int sw = -1;              // for switch ports
  int link = -1;
  int out_channel = -1, in_channel = -1;
  bool up = true;
  double speed_gbps = 400;
  // PFC on the RoCE priority, as the port reports it (pfc_enabled): off
  // under a pfc_misconfig fault, or where its switch's QoS has the class lossy.
  bool pfc_on = true;
  PortCounters c;
};

// One collective record as one rank saw it, for the Inspector writer.
struct CollectiveRecord {
  int job = 0;
  int rank = 0;
  int host = 0;
  int gpu = 0;
  uint64_t seq = 0;
  double exec_time_us = 0;
  double algbw_gbs = 0;
  double busbw_gbs = 0;
  uint64_t msg_bytes = 0;
};

struct JobStatus {
  std::string id;
  std::string name;
  bool running = false;
  bool stalled = false;
  double busbw_gbs = 0;        // of the collectives completed in the last tick
  double ideal_busbw_gbs = 0;  // on an idle, healthy fabric
  uint64_t completed = 0;
};

// QoS as a switch applies it to the RoCE traffic class, from the qos item
// of its applied config (docs/lab.md, "QoS"). Before a switch has one, or
// when the policy leaves QoS alone, the factory QoS: ECN at the model's
// thresholds, PFC on, a watchdog that only counts.
struct SwitchQos {
  bool managed = false;   // from an applied policy, not the factory QoS
  uint32_t roce_tc = 3;   // the class the RoCE DSCP maps to
  bool ecn = true;        // ECN marking on the RoCE class
  double kmin_bytes = 150e3, kmax_bytes = 1.5e6, pmax = 0.1;
  bool lossless = true;   // PFC on the RoCE priority
  double wd_detect_s = 0.2;  // 0: no PFC watchdog
  double wd_restore_s = 0;
  std::string wd_action = "alert";  // drop | forward | alert (counts only)
  bool control_priority = true;     // CNPs and CTS ride a strict-priority class
  bool wd_mitigates() const { return wd_detect_s > 0 && (wd_action == "drop" || wd_action == "forward"); }
};
SwitchQos QosFromPolicy(const v1::QosPolicy& policy, const ModelConstants& k);

struct ActiveFault {
  v1::FaultSpec spec;
  double start_s = 0, end_s = 0;
  bool active = false;
  // Whether it could show at all while active: a straggler on a job that
  // another fault keeps stalled runs no collective to be late in.
  bool observable = false;
  double observable_from_s = -1;  // when it first could
  // A fault that acts only on the traffic crossing its target's egress
  // (ECN off, an ECMP hash skew, a queue's drop threshold, a switch's added
  // latency): the jobs with a sending flow it acted on, at any time while
  // active. Of the jobs whose paths could cross the target, only these
  // were touched by it (FabricModel::TrafficTarget).
  bool acts_on_traffic = false;
  std::set<std::string> touched_jobs;
  // Since when it has acted on a sending flow without a break (-1: not
  // acting now).
  double acting_since_s = -1;
};

class FabricModel final {
 public:
  static absl::StatusOr<std::unique_ptr<FabricModel>> Create(
      std::shared_ptr<const Topology> topology, const v1::Scenario& scenario,
      ModelConstants constants = {});

  // Advances the model by dt seconds. Records of collectives completed in
  // this step go to `records` when non-null.
  void Step(double dt, std::vector<CollectiveRecord>* records);

  double now_s() const { return now_s_; }
  const ModelConstants& constants() const { return k_; }
  const Topology& topology() const { return *topology_; }
  const std::vector<PortState>& ports() const { return ports_; }
  // The port named "device/port", or -1.
  int PortIndex(const std::string& full_name) const;
  const std::vector<JobStatus>& jobs() const { return job_status_; }
  const std::vector<ActiveFault>& faults() const { return faults_; }
  // Host ranks of job j: (host index, gpu) for rank r = position * gpus + gpu.
  const std::vector<int>& job_hosts(int job) const { return jobs_[job].hosts; }
  int gpus_per_host(int job) const { return jobs_[job].gpus; }
  v1::Collective job_collective(int job) const { return jobs_[job].spec.collective(); }
  bool job_uses_cts(int job) const { return jobs_[job].cts; }
  uint64_t buffer_used_bytes(int sw) const;
  size_t flow_count() const { return flows_.size(); }
  size_t channel_count() const { return channels_.size(); }
  // Per-tick utilisation of each direction of a link (for tests and the
  // timeline): carried / capacity, by channel.
  double ChannelUtilization(int channel) const;
  double ChannelPausedFraction(int channel) const { return channels_[channel].paused; }
  int ChannelOf(const std::string& from_port) const;
  // How unevenly the rack switches' uplinks are loaded: the busiest uplink's
  // utilisation over the mean of all of them (1 = perfectly even).
  double UplinkImbalance() const;
  // When flows collided on each switch's links, as [start_s, end_s)
  // intervals: one of its uplinks, one of the links toward it from the
  // tier above, or one of its parallel links toward one switch below,
  // offered more than its capacity, and more than an even spread over that
  // group of links would have offered it. A fact of the model, for the
  // ground truth.
  const std::map<std::string, std::vector<std::pair<double, double>>>& collisions() const { return collisions_; }
  // When a switch's uplinks, or the links toward it from the tier above,
  // were offered more than their capacity as a group: the traffic exceeds
  // what the tier provides, however it is spread. The same form.
  const std::map<std::string, std::vector<std::pair<double, double>>>& oversubscribed() const {
    return oversubscribed_;
  }
  // The load each (source NIC, destination NIC) pair offers, bytes/s, last
  // tick: what a TE allocator's traffic matrix is built from.
  std::map<std::pair<std::string, std::string>, double> OfferedTraffic() const;
  // Channels a flow from `src` NIC port to `dst` NIC port takes: `sport` is
  // its QP's UDP source port, `conn_sport` its connection's first QP's, `qp`
  // its index within the connection. Exposed for tests.
  std::vector<int> Route(int src, int dst, uint16_t sport, uint16_t conn_sport = 0,
                         uint32_t qp = 0) const;
  // Routes and QoS as switch agents have applied them (their applied.json).
  // From then on that switch forwards by these routes and its scheme's hash,
  // and marks, pauses, drops and watches its queues as its QoS says.
  void SetAppliedConfig(const v1::SwitchConfig& config);
  const SwitchQos& switch_qos(int sw) const { return qos_[sw]; }
  int SwitchIndex(const std::string& name) const;
  // The image switch `sw` reports: "lab-1.0", or a latency_regression's
  // os_version while it lasts.
  std::string SwitchOsVersion(int sw) const;
  // The share of the tick a channel's receiver asked it to pause (the PFC
  // frames on the wire), whether or not its sender obeyed.
  double ChannelPauseRequested(int channel) const { return channels_[channel].request; }
  // The share of a channel's packets its sender's queue dropped this tick
  // (congestion on a lossy class, or the watchdog).
  double ChannelCongestionDrop(int channel) const { return channels_[channel].congestion_drop; }
  bool ChannelWatchdogStormed(int channel) const { return channels_[channel].wd_stormed; }

 private:
  struct Channel {
    int from = -1, to = -1;  // port ids
    double capacity_Bps = 0;
    bool up = true;
    bool ecn_ok = true;
    // PFC off at either end for the RoCE priority (pfc_misconfig): the
    // receiver never asks this sender to pause, or the sender ignores it.
    bool pfc_off = false;
    double drop_rate = 0;
    // Per tick.
    double load = 0, carried = 0, paused = 0, mark = 0, queue = 0;
    bool stuck = false;  // the receiver keeps pausing this egress (storm)
    // ECN is off here (ecn_misconfig) on a queue that marking would hold:
    // over full, not held by pauses, fed mostly by DCQCN senders. The one
    // state in which the setting changes what the queue does.
    bool ecn_missed = false;
    double storm_fraction = 0;  // share of time it holds the pause
    double request = 0;         // pause its receiver asks for, this tick
    double congestion_drop = 0;  // share its sender's queue drops, this tick
    double queue_limit = 0;      // bytes its sender's queue tail-drops at; 0 = the buffer's
    // This tick the queue needed more than queue_limit to hold its excess
    // (ECN's band, or XOFF) and tail-dropped at the limit instead: the one
    // state in which a lowered threshold changes what the queue does.
    bool limit_dropped = false;
    // The sender's PFC watchdog on this queue.
    double wd_paused_s = 0, wd_calm_s = 0;
    bool wd_stormed = false;
    // A NIC receiver's stall prevention: how long it has paused this
    // channel without a break, whether that passed its warning watermark,
    // and whether it reached the timeout, after which the NIC sends no
    // pauses and drops the share of arrivals it cannot take.
    double stall_s = 0;
    bool stall_warned = false, stall_tripped = false;
    double rx_stall_drop = 0;  // share the receiving NIC drops, this tick
  };
  struct Flow {
    int job = 0, conn = 0;
    int src = 0, dst = 0;  // NIC port ids
    uint16_t sport = 0;
    std::vector<int> path;
    double demand = 0, rate = 0;
  };
  struct Job {
    v1::JobSpec spec;
    std::vector<int> hosts;
    int gpus = 0;
    std::vector<std::pair<int, int>> conns;  // (src NIC port, dst NIC port)
    double progress = 0;                      // fractional collectives
    uint64_t seq = 0;
    // Stragglers: rank -> how late it launches each collective. Every rank's
    // kernel ends when the latest has arrived, so the latest's kernel is the
    // shortest, and one less late is short by its own lead over the others.
    std::map<int, double> late_ranks;
    std::vector<double> conn_stall_until;  // per connection: QPs waiting out a timeout
    double straggler_delay_s = 0;  // the latest rank's delay: what each iteration loses
    double bare_iteration_s = 0;  // the last step's iteration without the straggler's delay
    bool cts = false;  // receiver-driven admission instead of DCQCN
    double added_latency_s = 0;  // latency_regression: what each step waits more
  };
  struct SwitchState {
    std::string name;
    v1::SwitchRole role;
    std::string zone;
    uint64_t seed = 0;
    std::vector<int> ports;
    bool ecn_ok = true;
    uint32_t ecmp_members = 0;  // ecmp_skew: members of each group it hashes onto; 0 = all
  };

  FabricModel() = default;
  absl::Status Init(std::shared_ptr<const Topology> topology, const v1::Scenario& scenario,
                    ModelConstants constants);
  absl::Status PlaceJobs(const v1::Scenario& scenario);
  absl::Status CheckFaultTarget(const v1::FaultSpec& fault) const;
  void ApplyFaults();
  void Reroute();
  void ComputeRates();
  // The pause a storm makes the channel's receiver ask for: none once a
  // NIC's stall prevention has timed out.
  static double StormRequest(const Channel& ch) { return ch.stuck && !ch.stall_tripped ? ch.storm_fraction : 0; }
  void AddLatency();
  void RecordCollisions(double dt);
  // Sets ActiveFault::observable (and when) for the faults active now that
  // can show.
  // `dt`: the step just accumulated, from now_s().
  void MarkObservable(double dt);
  bool CanShow(const ActiveFault& fault, double dt) const;
  // Where a fault that acts only on traffic acts: the egress of every port
  // of switch `sw`, or of port `port` alone; with `ecn`, only a queue that
  // marking would have held (Channel::ecn_missed); with `limit`, only one
  // that tail-dropped at its lowered threshold (Channel::limit_dropped).
  struct TrafficTarget {
    int sw = -1, port = -1;
    bool ecn = false, limit = false;
    bool ActsOn(const std::vector<PortState>& ports, const Channel& ch) const {
      const bool egress = sw >= 0 ? ports[ch.from].sw == sw : ch.from == port;
      return egress && (!ecn || ch.ecn_missed) && (!limit || ch.limit_dropped);
    }
  };
  static bool ActsOnTraffic(v1::FaultKind kind);
  TrafficTarget TrafficTargetOf(const ActiveFault& fault) const;
  // Adds to a fault's touched_jobs the jobs whose sending flows it acts on;
  // whether it acted on any this step.
  bool NoteTouchedJobs(ActiveFault& fault) const;
  // Whether a flow put frames on its path this step: it has a rate and a
  // path, and its job runs and is not hung (a hung job's QPs only resend
  // what is in flight, at each timeout, into the NIC that drops it).
  bool Sends(const Flow& f) const;
  void Accumulate(double dt, std::vector<CollectiveRecord>* records);
  int PickChannel(int sw, const std::vector<int>& candidates, int src, int dst,
                  uint16_t sport, uint32_t qp) const;
  std::vector<int> DefaultNextHops(int sw, int dst) const;
  std::vector<int> AppliedNextHops(int sw, int dst) const;
  // The up next hops of the table a policy rule picks for traffic entering
  // `sw` by `ingress` for `dst`; empty when no rule matches or the table's
  // route has no live next hop (the kernel then goes on to the main table).
  std::vector<int> RuleNextHops(int sw, int ingress, int dst) const;
  std::vector<int> UpChannelsToward(int sw, int neighbor_sw) const;
  bool SwitchReaches(int sw, int rtsw) const;

  std::shared_ptr<const Topology> topology_;
  ModelConstants k_;
  double now_s_ = 0;
  std::vector<PortState> ports_;
  std::map<std::string, int> port_index_;
  std::vector<Channel> channels_;
  std::vector<SwitchState> switches_;
  std::map<std::string, int> switch_index_;
  std::vector<int> nic_rtsw_;                 // NIC port -> its RTSW switch index
  std::vector<std::vector<int>> sw_out_;      // switch -> out channels
  std::map<std::string, int> host_index_;
  std::vector<std::vector<int>> host_nic_ports_;  // host -> NIC port ids
  std::vector<std::string> host_zone_;
  std::vector<Job> jobs_;
  std::vector<JobStatus> job_status_;
  std::vector<Flow> flows_;
  std::vector<ActiveFault> faults_;
  std::map<std::string, std::vector<std::pair<double, double>>> collisions_;
  std::map<std::string, std::vector<std::pair<double, double>>> oversubscribed_;
  struct AppliedRouting {
    v1::RoutingScheme scheme = v1::ROUTING_SCHEME_ECMP;
    uint32_t qp_scaling_hint = 0;
    std::map<uint32_t, std::vector<int>> host_routes;  // /32 -> egress ports
    std::map<uint32_t, std::vector<int>> rack_routes;  // /24 -> egress ports
    std::map<uint32_t, std::vector<int>> zone_routes;  // /16 -> egress ports (other zones' racks)
    // Policy routing (TE overrides): (ingress port, /24) -> table, and each
    // table's /24 routes.
    std::map<std::pair<int, uint32_t>, uint32_t> rules;
    std::map<uint32_t, std::map<uint32_t, std::vector<int>>> tables;
  };
  std::vector<std::optional<AppliedRouting>> applied_;  // per switch
  std::vector<SwitchQos> qos_;                          // per switch
  // The QoS of a channel's sender, or null for a NIC.
  const SwitchQos* SenderQos(const Channel& ch) const {
    return ports_[ch.from].sw >= 0 ? &qos_[ports_[ch.from].sw] : nullptr;
  }
  std::vector<uint32_t> nic_ip_;                        // per NIC port
  bool routes_dirty_ = true;
  uint64_t seed_ = 1;
  // The NICs' PFC stall prevention (Scenario.nic_stall_timeout_ms), in
  // seconds: the warning watermark and the timeout; 0 when off.
  double nic_stall_warn_s_ = 0, nic_stall_timeout_s_ = 0;
  double poll_interval_s_ = 1;  // the agents' (Scenario.poll_interval_s)
};

// The NCCL bus bandwidth factor (docs/counters.md): AllReduce 2(n-1)/n,
// AllGather and ReduceScatter (n-1)/n, others 1.
double BusBwFactor(v1::Collective collective, int n_ranks);

}  // namespace rocefab::lab
