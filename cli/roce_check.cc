#include "cli/roce_check.h"

#include <algorithm>
#include <optional>
#include <set>

#include "common/strings.h"

namespace rocefab::cli {
namespace {

std::string Prios(const std::set<uint32_t>& prios) {
  if (prios.empty()) return "none";
  std::string out;
  for (uint32_t p : prios) StrAppend(&out, out.empty() ? "" : ",", p);
  return out;
}

}  // namespace

const std::vector<std::string>& RoceSettingNames() {
  static const std::vector<std::string> names = {"mtu_bytes", "roce_tos", "roce_prio", "dscp_trust", "pfc_enabled",
                                                 "roce_ecn_rp_enabled", "roce_ecn_np_enabled", "cnp_dscp", "cnp_prio"};
  return names;
}

RoceCheck CheckRoce(const Topology& topology, const std::map<std::string, NicRoce>& nics,
                    const std::map<std::string, v1::QosPolicy>& switch_qos) {
  RoceCheck out;
  size_t no_qos = 0, no_link = 0;
  for (const auto& [nic, s] : nics) {
    const int link = topology.LinkOfPort(nic);
    if (link < 0) {
      ++no_link;
      continue;
    }
    const std::string& port = topology.PeerOf(link, nic);
    auto q_it = switch_qos.find(EntityDevice(port));
    if (q_it == switch_qos.end()) {
      ++no_qos;
      continue;
    }
    const v1::QosPolicy& q = q_it->second;
    ++out.nics_checked;
    auto value = [&](const char* name) -> std::optional<uint64_t> {
      auto it = s.values.find(name);
      if (it == s.values.end()) {
        ++out.unknown[name];
        return std::nullopt;
      }
      return it->second;
    };
    auto add = [&](std::string setting, std::string nic_value, std::string switch_value, std::string why) {
      out.mismatches.push_back({nic, port, std::move(setting), std::move(nic_value), std::move(switch_value), std::move(why)});
    };
    std::map<uint32_t, uint32_t> dscp_to_tc;
    for (const auto& m : q.dscp_to_tc()) dscp_to_tc[m.dscp()] = m.tc();
    const std::set<uint32_t> lossless(q.lossless_tcs().begin(), q.lossless_tcs().end());
    const std::set<uint32_t> pfc(q.pfc_priorities().begin(), q.pfc_priorities().end());
    std::set<uint32_t> ecn;
    for (const auto& e : q.ecn()) ecn.insert(e.tc());

    // PFC: both ends of the link pause the same priorities.
    if (auto it = s.per_prio.find("pfc_enabled"); it != s.per_prio.end() && !q.pfc_priorities().empty()) {
      std::set<uint32_t> on;
      for (const auto& [prio, v] : it->second)
        if (v) on.insert(prio);
      if (on != pfc)
        add("pfc_enabled", Prios(on), Prios(pfc),
            "the NIC and its switch port pause different priorities: one side drops or stalls what the other "
            "treats as lossless");
    } else if (it == s.per_prio.end()) {
      ++out.unknown["pfc_enabled"];
    }
    // Trust: a switch that classifies by DSCP needs a NIC that does too.
    const auto trust = value("dscp_trust");
    if (trust && *trust == 0 && !dscp_to_tc.empty())
      add("dscp_trust", "pcp", "dscp",
          "the switch classifies by DSCP, the NIC by PCP: its RoCE traffic and its pauses use different classes");
    // The RoCE class: the NIC's DSCP must reach a lossless class, on the
    // priority the NIC queues it on.
    std::optional<uint32_t> roce_tc;
    if (const auto tos = value("roce_tos"); tos && !dscp_to_tc.empty()) {
      const uint32_t dscp = static_cast<uint32_t>(*tos >> 2);
      auto tc = dscp_to_tc.find(dscp);
      if (tc == dscp_to_tc.end()) {
        add("roce_tos", StrCat("DSCP ", dscp, " (ToS ", *tos, ")"), "no class for it",
            "the switch puts RoCE in its default class, which is lossy");
      } else {
        roce_tc = tc->second;
        if (!lossless.count(tc->second))
          add("roce_tos", StrCat("DSCP ", dscp, " (ToS ", *tos, ")"), StrCat("tc ", tc->second, ", lossy"),
              "RoCE rides a class the switch drops in, not one PFC protects");
      }
    }
    if (!roce_tc && lossless.size() == 1) roce_tc = *lossless.begin();
    if (const auto prio = value("roce_prio"); prio && roce_tc && *prio != *roce_tc)
      add("roce_prio", StrCat(*prio), StrCat(*roce_tc),
          "the NIC queues RoCE on one priority, the switch classifies it into another: pauses do not reach it");
    // ECN: a switch that marks the RoCE class needs NICs that answer with CNPs.
    if (roce_tc && ecn.count(*roce_tc)) {
      if (auto it = s.per_prio.find("roce_ecn_np_enabled"); it != s.per_prio.end()) {
        auto v = it->second.find(*roce_tc);
        if (v != it->second.end() && v->second == 0)
          add("roce_ecn_np_enabled", StrCat("off on priority ", *roce_tc), StrCat("ECN marking on tc ", *roce_tc),
              "marked packets reach a NIC that sends no CNPs: congestion is signalled to no one, PFC does all the "
              "work");
      } else {
        ++out.unknown["roce_ecn_np_enabled"];
      }
    }
    // CNPs (and CTS) ride the strict-priority class.
    if (const auto cnp = value("cnp_dscp"); cnp && q.strict_priority_tc() != 0 && !dscp_to_tc.empty()) {
      auto tc = dscp_to_tc.find(static_cast<uint32_t>(*cnp));
      if (tc == dscp_to_tc.end() || tc->second != q.strict_priority_tc())
        add("cnp_dscp", StrCat("DSCP ", *cnp),
            tc == dscp_to_tc.end() ? std::string("no class for it") : StrCat("tc ", tc->second),
            StrCat("CNPs queue behind data instead of in the strict-priority class (tc ", q.strict_priority_tc(), ")"));
    }
    (void)value("mtu_bytes");
  }
  if (no_qos > 0)
    out.notes.push_back(StrCat(no_qos, " NIC(s) face a switch that reports no applied QoS: not checked"));
  if (no_link > 0) out.notes.push_back(StrCat(no_link, " NIC(s) are not in the topology: not checked"));
  out.notes.push_back("MTU is reported (mtu_bytes) but not compared: switch configs carry no MTU");
  return out;
}

}  // namespace rocefab::cli
