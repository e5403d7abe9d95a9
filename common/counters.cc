#include "common/counters.h"

#include <unordered_map>
#include <vector>

#include "common/strings.h"

namespace rocefab {
namespace {

using v1::SCOPE_COLL;
using v1::SCOPE_NIC;
using v1::SCOPE_PORT;
using v1::SCOPE_QUEUE;
constexpr auto C = v1::VALUE_KIND_COUNTER;
constexpr auto G = v1::VALUE_KIND_GAUGE;
constexpr auto W32 = CounterWidth::k32;
constexpr auto W64 = CounterWidth::k64;
using S = CounterSource;

// Order: the tables of docs/counters.md, top to bottom.
constexpr CounterDef kCounters[] = {
    // NIC port.
    {"rx_bytes", SCOPE_NIC, S::kSysfsCounters, "port_rcv_data", "port_rcv_data_64", C, W64, 4, false, false, "x4: the kernel reports octets/4"},
    {"tx_bytes", SCOPE_NIC, S::kSysfsCounters, "port_xmit_data", "port_xmit_data_64", C, W64, 4, false, false, "x4: the kernel reports octets/4"},
    {"rx_packets", SCOPE_NIC, S::kSysfsCounters, "port_rcv_packets", "port_rcv_packets_64", C, W64, 1, false, false, ""},
    {"tx_packets", SCOPE_NIC, S::kSysfsCounters, "port_xmit_packets", "port_xmit_packets_64", C, W64, 1, false, false, ""},
    {"rx_errors", SCOPE_NIC, S::kSysfsCounters, "port_rcv_errors", "", C, W64, 1, false, false, ""},
    {"rx_discards", SCOPE_NIC, S::kSysfsCounters, "port_rcv_discards", "", C, W64, 1, false, false, ""},
    {"tx_discards", SCOPE_NIC, S::kSysfsCounters, "port_xmit_discards", "", C, W64, 1, false, false, ""},
    {"tx_wait", SCOPE_NIC, S::kSysfsCounters, "port_xmit_wait", "", C, W64, 1, false, false, ""},
    {"symbol_errors", SCOPE_NIC, S::kSysfsCounters, "symbol_error", "", C, W64, 1, false, false, ""},
    {"link_downed", SCOPE_NIC, S::kSysfsCounters, "link_downed", "", C, W64, 1, false, false, "flaps"},
    {"link_error_recovery", SCOPE_NIC, S::kSysfsCounters, "link_error_recovery", "", C, W64, 1, false, false, ""},
    {"ecn_marked_packets", SCOPE_NIC, S::kSysfsHwCounters, "np_ecn_marked_roce_packets", "", C, W64, 1, false, false, "received with CE"},
    {"cnp_sent", SCOPE_NIC, S::kSysfsHwCounters, "np_cnp_sent", "", C, W64, 1, false, false, ""},
    {"cnp_handled", SCOPE_NIC, S::kSysfsHwCounters, "rp_cnp_handled", "", C, W64, 1, false, false, ""},
    {"cnp_ignored", SCOPE_NIC, S::kSysfsHwCounters, "rp_cnp_ignored", "", C, W64, 1, false, false, ""},
    {"out_of_sequence", SCOPE_NIC, S::kSysfsHwCounters, "out_of_sequence", "", C, W32, 1, false, false, "32-bit, wraps; reveals unseen drops"},
    {"packet_seq_errors", SCOPE_NIC, S::kSysfsHwCounters, "packet_seq_err", "", C, W32, 1, false, false, "32-bit"},
    {"local_ack_timeouts", SCOPE_NIC, S::kSysfsHwCounters, "local_ack_timeout_err", "", C, W32, 1, false, false, "32-bit"},
    {"implied_nak_seq_errors", SCOPE_NIC, S::kSysfsHwCounters, "implied_nak_seq_err", "", C, W32, 1, false, false, "32-bit"},
    {"duplicate_requests", SCOPE_NIC, S::kSysfsHwCounters, "duplicate_request", "", C, W32, 1, false, false, "32-bit"},
    {"rnr_nak_retry_errors", SCOPE_NIC, S::kSysfsHwCounters, "rnr_nak_retry_err", "", C, W32, 1, false, false, "32-bit"},
    {"out_of_buffer", SCOPE_NIC, S::kSysfsHwCounters, "out_of_buffer", "", C, W32, 1, false, false, "32-bit"},
    {"retransmits", SCOPE_NIC, S::kSysfsHwCounters, "roce_adp_retrans", "", C, W64, 1, false, false, ""},
    {"retransmit_timeouts", SCOPE_NIC, S::kSysfsHwCounters, "roce_adp_retrans_to", "", C, W64, 1, false, false, ""},
    {"rx_icrc_errors", SCOPE_NIC, S::kSysfsHwCounters, "rx_icrc_encapsulated", "", C, W64, 1, false, false, ""},
    {"pfc_rx_pause_frames", SCOPE_NIC, S::kEthtool, "rx_prio{prio}_pause", "", C, W64, 1, true, false, ""},
    {"pfc_tx_pause_frames", SCOPE_NIC, S::kEthtool, "tx_prio{prio}_pause", "", C, W64, 1, true, false, ""},
    {"pfc_rx_pause_us", SCOPE_NIC, S::kEthtool, "rx_prio{prio}_pause_duration", "", C, W64, 1, true, false, "microseconds"},
    {"pfc_tx_pause_us", SCOPE_NIC, S::kEthtool, "tx_prio{prio}_pause_duration", "", C, W64, 1, true, false, "microseconds"},
    {"pause_storm_warnings", SCOPE_NIC, S::kEthtool, "tx_pause_storm_warning_events", "", C, W64, 1, false, false, "names are trimmed: one kernel has a trailing space"},
    {"pause_storm_errors", SCOPE_NIC, S::kEthtool, "tx_pause_storm_error_events", "", C, W64, 1, false, false, ""},
    {"rx_discards_phy", SCOPE_NIC, S::kEthtool, "rx_discards_phy", "", C, W64, 1, false, false, ""},
    {"tx_discards_phy", SCOPE_NIC, S::kEthtool, "tx_discards_phy", "", C, W64, 1, false, false, ""},
    {"rx_buffer_passed_thres", SCOPE_NIC, S::kEthtool, "rx_buffer_passed_thres_phy", "", C, W64, 1, false, false, "receive buffer over 85%"},
    {"link_down_events", SCOPE_NIC, S::kEthtool, "link_down_events_phy", "", C, W64, 1, false, false, ""},
    {"link_up", SCOPE_NIC, S::kLinkState, "state", "", G, W64, 1, false, false, "gauge; netlink carrier, else ports/N/state"},
    {"carrier_changes", SCOPE_NIC, S::kLinkState, "carrier_changes", "", C, W32, 1, false, false, "netlink IFLA_CARRIER_CHANGES: up and down transitions"},
    {"rate_bytes_per_second", SCOPE_NIC, S::kSysfsRate, "rate", "", G, W64, 1, false, false, "gauge; from ports/N/rate"},
    // NIC RoCE settings (agents/host/roce_settings.h): gauges for `rocefab check roce`.
    {"mtu_bytes", SCOPE_NIC, S::kRoceSetting, "class/net/<netdev>/mtu", "", G, W64, 1, false, false, "gauge"},
    {"roce_tos", SCOPE_NIC, S::kRoceSetting, "rdma_cm configfs default_roce_tos", "", G, W64, 1, false, false, "gauge; DSCP << 2"},
    {"roce_prio", SCOPE_NIC, S::kRoceSetting, "dcbnl APP table", "", G, W64, 1, false, false, "gauge"},
    {"dscp_trust", SCOPE_NIC, S::kRoceSetting, "dcbnl APP table", "", G, W64, 1, false, false, "gauge"},
    {"pfc_enabled", SCOPE_NIC, S::kRoceSetting, "dcbnl ieee_pfc pfc_en", "", G, W64, 1, true, false, "gauge"},
    {"roce_ecn_rp_enabled", SCOPE_NIC, S::kRoceSetting, "ecn/roce_rp/enable/<prio>", "", G, W64, 1, true, false, "gauge; MLNX_OFED"},
    {"roce_ecn_np_enabled", SCOPE_NIC, S::kRoceSetting, "ecn/roce_np/enable/<prio>", "", G, W64, 1, true, false, "gauge; MLNX_OFED"},
    {"cnp_dscp", SCOPE_NIC, S::kRoceSetting, "ecn/roce_np/cnp_dscp or cc_params/np_cnp_dscp", "", G, W64, 1, false, false, "gauge"},
    {"cnp_prio", SCOPE_NIC, S::kRoceSetting, "ecn/roce_np/cnp_802p_prio or cc_params/np_cnp_prio", "", G, W64, 1, false, false, "gauge"},
    // Switch port.
    {"rx_bytes", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, false, false, ""},
    {"tx_bytes", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, false, false, ""},
    {"rx_packets", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, false, false, ""},
    {"tx_packets", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, false, false, ""},
    {"rx_fcs_errors", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, false, false, ""},
    {"rx_symbol_errors", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, false, false, ""},
    {"link_up", SCOPE_PORT, S::kSwitch, "", "", G, W64, 1, false, false, "gauge"},
    {"link_flaps", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, false, false, ""},
    {"pfc_rx_pause_frames", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, true, false, ""},
    {"pfc_tx_pause_frames", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, true, false, ""},
    {"pfc_rx_pause_us", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, true, false, "where the ASIC reports duration"},
    {"pfc_tx_pause_us", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, true, false, "where the ASIC reports duration"},
    {"rate_bytes_per_second", SCOPE_PORT, S::kSwitch, "", "", G, W64, 1, false, false, "gauge; the port's negotiated speed"},
    {"pfcwd_storms_detected", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, false, true, "PFC watchdog"},
    {"pfcwd_storms_restored", SCOPE_PORT, S::kSwitch, "", "", C, W64, 1, false, true, "PFC watchdog"},
    {"pfc_enabled", SCOPE_PORT, S::kSwitch, "", "", G, W64, 1, true, false, "gauge; 1: PFC on for the priority"},
    // Switch queue.
    {"queue_tx_bytes", SCOPE_QUEUE, S::kSwitch, "", "", C, W64, 1, false, true, ""},
    {"queue_tx_packets", SCOPE_QUEUE, S::kSwitch, "", "", C, W64, 1, false, true, ""},
    {"queue_drops", SCOPE_QUEUE, S::kSwitch, "", "", C, W64, 1, false, true, "a drop on the lossless class is a misconfiguration"},
    {"queue_ecn_marked_packets", SCOPE_QUEUE, S::kSwitch, "", "", C, W64, 1, false, true, ""},
    {"queue_depth_bytes", SCOPE_QUEUE, S::kSwitch, "", "", G, W64, 1, false, true, "gauge"},
    {"queue_watermark_bytes", SCOPE_QUEUE, S::kSwitch, "", "", G, W64, 1, false, true, "gauge, peak since the last read"},
    {"buffer_used_bytes", SCOPE_QUEUE, S::kSwitch, "", "", G, W64, 1, false, true, "per pool, gauge"},
    {"buffer_watermark_bytes", SCOPE_QUEUE, S::kSwitch, "", "", G, W64, 1, false, true, "per pool, gauge"},
    {"buffer_size_bytes", SCOPE_QUEUE, S::kSwitch, "", "", G, W64, 1, false, true, "per pool, gauge; the pool's configured size"},
    // Collective.
    {"coll_exec_time_us", SCOPE_COLL, S::kCollective, "", "", G, W64, 1, false, false, "per record"},
    {"coll_busbw_gbs", SCOPE_COLL, S::kCollective, "", "", G, W64, 1, false, false, "per record"},
    {"coll_algbw_gbs", SCOPE_COLL, S::kCollective, "", "", G, W64, 1, false, false, "per record"},
    {"coll_msg_size_bytes", SCOPE_COLL, S::kCollective, "", "", G, W64, 1, false, false, "per record"},
    {"coll_seq", SCOPE_COLL, S::kCollective, "", "", G, W64, 1, false, false, "per record"},
};

std::span<const CounterDef> ScopeSlice(v1::Scope scope) {
  size_t begin = 0;
  while (begin < std::size(kCounters) && kCounters[begin].scope != scope) ++begin;
  size_t end = begin;
  while (end < std::size(kCounters) && kCounters[end].scope == scope) ++end;
  return std::span<const CounterDef>(kCounters + begin, end - begin);
}

}  // namespace

std::span<const CounterDef> AllCounters() { return kCounters; }

std::span<const CounterDef> CountersOfScope(v1::Scope scope) { return ScopeSlice(scope); }

bool IsFastPathCounter(std::string_view name) {
  return name == "pfc_rx_pause_frames" || name == "pfc_tx_pause_frames" || name == "pfc_rx_pause_us" ||
         name == "pfc_tx_pause_us" || name == "pause_storm_warnings" || name == "pause_storm_errors";
}

const CounterDef* FindCounter(v1::Scope scope, std::string_view name) {
  // Called for every sample on the ingest path: a hash lookup, not a scan.
  // Keys view the table's own names: no allocation per lookup.
  using Index = std::unordered_map<std::string_view, const CounterDef*>;
  static const auto* by_scope = [] {
    auto* maps = new std::unordered_map<int, Index>();
    for (const CounterDef& def : kCounters) (*maps)[def.scope][def.name] = &def;
    return maps;
  }();
  auto scope_it = by_scope->find(scope);
  if (scope_it == by_scope->end()) return nullptr;
  auto it = scope_it->second.find(name);
  return it == scope_it->second.end() ? nullptr : it->second;
}

std::string_view ScopeName(v1::Scope scope) {
  switch (scope) {
    case SCOPE_NIC: return "nic";
    case SCOPE_PORT: return "port";
    case SCOPE_QUEUE: return "queue";
    case SCOPE_COLL: return "coll";
    default: return "unspecified";
  }
}

bool ParseScope(std::string_view name, v1::Scope* scope) {
  for (v1::Scope s : {SCOPE_NIC, SCOPE_PORT, SCOPE_QUEUE, SCOPE_COLL}) {
    if (ScopeName(s) == name) {
      *scope = s;
      return true;
    }
  }
  return false;
}

std::string MetricName(const CounterDef& def) {
  std::string base(def.name);
  if (base.ends_with("_us")) base = StrCat(base.substr(0, base.size() - 3), "_seconds");
  // "queue_drops" in scope "queue" is rocefab_queue_drops_total, not
  // rocefab_queue_queue_drops_total.
  const std::string scope_prefix = StrCat(ScopeName(def.scope), "_");
  if (base.starts_with(scope_prefix)) base = base.substr(scope_prefix.size());
  std::string name = StrCat("rocefab_", ScopeName(def.scope), "_", base);
  if (def.kind == v1::VALUE_KIND_COUNTER) StrAppend(&name, "_total");
  return name;
}

double MetricScale(const CounterDef& def) {
  return def.name.ends_with("_us") ? 1e-6 : 1.0;
}

std::vector<std::pair<std::string, std::string>> SeriesLabels(v1::Scope scope,
                                                              const std::string& entity,
                                                              uint32_t port, int64_t prio,
                                                              int64_t queue) {
  const size_t slash = entity.find('/');
  const std::string device = slash == std::string::npos ? entity : entity.substr(0, slash);
  const std::string rest = slash == std::string::npos ? std::string() : entity.substr(slash + 1);
  std::vector<std::pair<std::string, std::string>> labels;
  if (scope == v1::SCOPE_NIC) {
    labels.emplace_back("host", device);
    labels.emplace_back("device", rest);
    labels.emplace_back("port", std::to_string(port));
  } else {
    labels.emplace_back("switch", device);
    labels.emplace_back("port", rest);
  }
  if (prio >= 0) labels.emplace_back("prio", std::to_string(prio));
  if (queue >= 0) labels.emplace_back("queue", std::to_string(queue));
  return labels;
}

}  // namespace rocefab
