#include "agents/switch/linux_backend.h"

#include <arpa/inet.h>
#include <linux/nexthop.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/tc.h>
#include <netlink/route/rule.h>

#include <cstring>

#include "common/fs_root.h"
#include "common/log.h"
#include "common/strings.h"

namespace rocefab::switchd {
namespace {

constexpr char kLinuxBackendLog[] = "linux";

bool ParsePrefix(const std::string& text, in_addr* addr, int* len) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return false;
  *len = std::atoi(text.c_str() + slash + 1);
  return *len >= 0 && *len <= 32 && inet_pton(AF_INET, text.substr(0, slash).c_str(), addr) == 1;
}

// Nexthop object ids of a group's members: group * 1000 + index + 1, so
// members never collide with group ids (< 1000).
uint32_t MemberId(uint32_t group, size_t index) { return group * 1000 + static_cast<uint32_t>(index) + 1; }

}  // namespace

LinuxBackend::LinuxBackend(std::string switch_name, std::string proc_sys_root)
    : switch_name_(std::move(switch_name)), proc_sys_(std::move(proc_sys_root)) {
  for (nl_sock** sock : {&sock_, &counters_sock_}) {
    *sock = nl_socket_alloc();
    if (*sock != nullptr && nl_connect(*sock, NETLINK_ROUTE) != 0) {
      nl_socket_free(*sock);
      *sock = nullptr;
    }
  }
  qos_ = LinuxQos(sock_);
  dcb_ = std::make_unique<NetlinkDcbSource>();
}

void AddPfcEnabled(DcbSource& dcb, SwitchReading* reading) {
  for (auto& [name, port] : reading->ports) {
    auto settings = dcb.Read(name);
    // No DCB on the port (veth, most virtual NICs), or no IEEE PFC from its
    // driver: the setting is unknown, so nothing is reported, not 0.
    if (settings.ok() && settings->pfc_en) port.per_prio["pfc_enabled"] = PfcEnabledByPriority(*settings->pfc_en);
  }
}

LinuxBackend::~LinuxBackend() {
  for (nl_sock* sock : {sock_, counters_sock_})
    if (sock != nullptr) nl_socket_free(sock);
}

absl::StatusOr<int> LinuxBackend::IfIndex(const std::string& port) {
  const unsigned index = if_nametoindex(port.c_str());
  if (index == 0) return absl::FailedPreconditionError(StrCat("no interface ", port));
  return static_cast<int>(index);
}

absl::Status LinuxBackend::Send(nl_msg* msg, const std::string& what) {
  if (sock_ == nullptr) {
    nlmsg_free(msg);
    return absl::UnavailableError("no netlink socket");
  }
  const int err = nl_send_sync(sock_, msg);  // frees msg
  if (err < 0) return absl::InternalError(StrCat(what, ": ", nl_geterror(err)));
  return absl::OkStatus();
}

absl::Status LinuxBackend::InstallAddress(const v1::AddressItem& item, bool remove) {
  auto ifindex = IfIndex(item.port());
  if (!ifindex.ok()) return remove ? absl::OkStatus() : ifindex.status();
  nl_addr* local = nullptr;
  if (nl_addr_parse(item.address().c_str(), AF_INET, &local) < 0)
    return absl::InvalidArgumentError(StrCat("address '", item.address(), "' is not IPv4/len"));
  rtnl_addr* addr = rtnl_addr_alloc();
  rtnl_addr_set_ifindex(addr, *ifindex);
  rtnl_addr_set_local(addr, local);
  nl_addr_put(local);
  const int err = remove ? rtnl_addr_delete(sock_, addr, 0) : rtnl_addr_add(sock_, addr, NLM_F_REPLACE);
  rtnl_addr_put(addr);
  if (err < 0 && !remove && err != -NLE_EXIST)
    return absl::InternalError(StrCat("address ", item.address(), " on ", item.port(), ": ", nl_geterror(err)));
  return absl::OkStatus();
}

absl::Status LinuxBackend::InstallGroup(const v1::NexthopGroupItem& group, bool remove) {
  if (group.id() == 0 || group.id() >= 1000) return absl::InvalidArgumentError("group ids must be 1-999");
  if (remove) {
    // The group first, then its members.
    for (int pass = 0; pass < 2; ++pass) {
      const size_t n = pass == 0 ? 1 : group_members_[group.id()];
      for (size_t i = 0; i < n; ++i) {
        nl_msg* msg = nlmsg_alloc_simple(RTM_DELNEXTHOP, 0);
        nhmsg nh{};
        nh.nh_family = AF_INET;
        nlmsg_append(msg, &nh, sizeof nh, NLMSG_ALIGNTO);
        nla_put_u32(msg, NHA_ID, pass == 0 ? group.id() : MemberId(group.id(), i));
        (void)Send(msg, "delete nexthop");  // already gone is fine
      }
    }
    group_members_.erase(group.id());
    return absl::OkStatus();
  }
  std::vector<nexthop_grp> members;
  for (int i = 0; i < group.nexthops_size(); ++i) {
    const v1::Nexthop& hop = group.nexthops(i);
    auto ifindex = IfIndex(hop.port());
    if (!ifindex.ok()) return ifindex.status();
    in_addr gw{};
    if (inet_pton(AF_INET, hop.gateway().c_str(), &gw) != 1)
      return absl::InvalidArgumentError(StrCat("nexthop gateway '", hop.gateway(), "' is not IPv4"));
    nl_msg* msg = nlmsg_alloc_simple(RTM_NEWNEXTHOP, NLM_F_CREATE | NLM_F_REPLACE);
    nhmsg nh{};
    nh.nh_family = AF_INET;
    nh.nh_flags = RTNH_F_ONLINK;  // the /31 peer is on the link
    nlmsg_append(msg, &nh, sizeof nh, NLMSG_ALIGNTO);
    nla_put_u32(msg, NHA_ID, MemberId(group.id(), i));
    nla_put_u32(msg, NHA_OIF, static_cast<uint32_t>(*ifindex));
    nla_put(msg, NHA_GATEWAY, sizeof gw, &gw);
    if (auto s = Send(msg, StrCat("nexthop via ", hop.port())); !s.ok()) return s;
    nexthop_grp member{};
    member.id = MemberId(group.id(), i);
    member.weight = 0;  // weight 1
    members.push_back(member);
  }
  // Stale members of a group that shrank go after the group is replaced.
  const size_t old_count = group_members_[group.id()];
  nl_msg* msg = nlmsg_alloc_simple(RTM_NEWNEXTHOP, NLM_F_CREATE | NLM_F_REPLACE);
  nhmsg nh{};
  nh.nh_family = AF_UNSPEC;
  nlmsg_append(msg, &nh, sizeof nh, NLMSG_ALIGNTO);
  nla_put_u32(msg, NHA_ID, group.id());
  nla_put(msg, NHA_GROUP, static_cast<int>(members.size() * sizeof(nexthop_grp)), members.data());
  if (auto s = Send(msg, StrCat("nexthop group ", group.id())); !s.ok()) return s;
  for (size_t i = members.size(); i < old_count; ++i) {
    nl_msg* del = nlmsg_alloc_simple(RTM_DELNEXTHOP, 0);
    nhmsg d{};
    nlmsg_append(del, &d, sizeof d, NLMSG_ALIGNTO);
    nla_put_u32(del, NHA_ID, MemberId(group.id(), i));
    (void)Send(del, "delete stale nexthop");
  }
  group_members_[group.id()] = members.size();
  return absl::OkStatus();
}

absl::Status LinuxBackend::InstallRoute(const v1::RouteItem& route, bool remove) {
  in_addr dst{};
  int len = 0;
  if (!ParsePrefix(route.prefix(), &dst, &len))
    return absl::InvalidArgumentError(StrCat("route prefix '", route.prefix(), "' is not IPv4/len"));
  nl_msg* msg = nlmsg_alloc_simple(remove ? RTM_DELROUTE : RTM_NEWROUTE,
                                   remove ? 0 : NLM_F_CREATE | NLM_F_REPLACE);
  rtmsg rt{};
  rt.rtm_family = AF_INET;
  rt.rtm_dst_len = static_cast<unsigned char>(len);
  rt.rtm_table = route.table() == 0 ? RT_TABLE_MAIN : RT_TABLE_UNSPEC;
  rt.rtm_protocol = RTPROT_STATIC;
  rt.rtm_scope = route.nexthop_group() == 0 ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
  rt.rtm_type = RTN_UNICAST;
  nlmsg_append(msg, &rt, sizeof rt, NLMSG_ALIGNTO);
  nla_put(msg, RTA_DST, sizeof dst, &dst);
  if (route.table() != 0) nla_put_u32(msg, RTA_TABLE, route.table());
  if (!remove) {
    if (route.nexthop_group() != 0) {
      nla_put_u32(msg, RTA_NH_ID, route.nexthop_group());
    } else {
      auto ifindex = IfIndex(route.port());
      if (!ifindex.ok()) {
        nlmsg_free(msg);
        return ifindex.status();
      }
      nla_put_u32(msg, RTA_OIF, static_cast<uint32_t>(*ifindex));
    }
  }
  absl::Status status = Send(msg, StrCat("route ", route.prefix()));
  if (remove && !status.ok()) return absl::OkStatus();  // already gone
  return status;
}

absl::Status LinuxBackend::InstallRule(const v1::RuleItem& item, bool remove) {
  rtnl_rule* rule = rtnl_rule_alloc();
  rtnl_rule_set_family(rule, AF_INET);
  rtnl_rule_set_prio(rule, item.priority());
  if (!item.iif().empty()) rtnl_rule_set_iif(rule, item.iif().c_str());
  if (!item.prefix().empty()) {
    nl_addr* dst = nullptr;
    if (nl_addr_parse(item.prefix().c_str(), AF_INET, &dst) < 0) {
      rtnl_rule_put(rule);
      return absl::InvalidArgumentError(StrCat("rule prefix '", item.prefix(), "' is not IPv4"));
    }
    rtnl_rule_set_dst(rule, dst);
    nl_addr_put(dst);
  }
  rtnl_rule_set_table(rule, item.table());
  rtnl_rule_set_action(rule, FR_ACT_TO_TBL);
  const int err = remove ? rtnl_rule_delete(sock_, rule, 0) : rtnl_rule_add(sock_, rule, NLM_F_CREATE | NLM_F_REPLACE);
  rtnl_rule_put(rule);
  if (err < 0 && !(remove || err == -NLE_EXIST))
    return absl::InternalError(StrCat("rule ", item.priority(), ": ", nl_geterror(err)));
  return absl::OkStatus();
}

absl::Status LinuxBackend::InstallHash(const v1::HashItem& hash) {
  // Policy 3: the fields of fib_multipath_hash_fields. The kernel cannot hash
  // the RoCE destination QP; the QP-derived UDP source port carries the same
  // entropy, so that field is satisfied by src_port.
  uint32_t mask = 0;
  for (const std::string& field : hash.fields()) {
    if (field == "src_ip") mask |= 0x1;
    else if (field == "dst_ip") mask |= 0x2;
    else if (field == "ip_proto") mask |= 0x4;
    else if (field == "src_port") mask |= 0x10;
    else if (field == "dst_port") mask |= 0x20;
    else if (field == "roce_dst_qp") mask |= 0x10;
    else return absl::UnimplementedError(StrCat("hash field ", field, " is not available in the Linux FIB"));
  }
  for (const auto& [file, value] : {std::pair<std::string, std::string>{"fib_multipath_hash_fields", StrCat(mask)},
                                    {"fib_multipath_hash_policy", "3"}}) {
    const std::string path = StrCat(proc_sys_, "/net/ipv4/", file);
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return absl::UnimplementedError(StrCat("cannot set ", path, ": ", std::strerror(errno)));
    const bool ok = std::fputs(value.c_str(), f) >= 0;
    if (std::fclose(f) != 0 || !ok)
      return absl::InternalError(StrCat("cannot set ", path, " to ", value));
  }
  return absl::OkStatus();
}

absl::Status LinuxBackend::Install(const v1::ConfigItem& item) {
  switch (item.item_case()) {
    case v1::ConfigItem::kNexthopGroup: return InstallGroup(item.nexthop_group(), false);
    case v1::ConfigItem::kRoute: return InstallRoute(item.route(), false);
    case v1::ConfigItem::kRule: return InstallRule(item.rule(), false);
    case v1::ConfigItem::kHash: return InstallHash(item.hash());
    case v1::ConfigItem::kAddress: return InstallAddress(item.address(), false);
    case v1::ConfigItem::kQos: return qos_.Install(item);
    default: return absl::UnimplementedError("unknown item kind");
  }
}

absl::Status LinuxBackend::Remove(const v1::ConfigItem& item) {
  switch (item.item_case()) {
    case v1::ConfigItem::kNexthopGroup: return InstallGroup(item.nexthop_group(), true);
    case v1::ConfigItem::kRoute: return InstallRoute(item.route(), true);
    case v1::ConfigItem::kRule: return InstallRule(item.rule(), true);
    case v1::ConfigItem::kAddress: return InstallAddress(item.address(), true);
    case v1::ConfigItem::kQos: return qos_.Remove(item);
    default: return absl::OkStatus();
  }
}

absl::Status LinuxBackend::Commit(const v1::SwitchConfig&) { return absl::OkStatus(); }

absl::StatusOr<SwitchReading> LinuxBackend::ReadCounters() {
  SwitchReading reading;
  reading.name = switch_name_;
  nl_cache* cache = nullptr;
  if (counters_sock_ == nullptr || rtnl_link_alloc_cache(counters_sock_, AF_UNSPEC, &cache) < 0)
    return absl::UnavailableError("cannot dump links");
  for (nl_object* obj = nl_cache_get_first(cache); obj != nullptr; obj = nl_cache_get_next(obj)) {
    auto* link = reinterpret_cast<rtnl_link*>(obj);
    const std::string name = rtnl_link_get_name(link);
    if (!name.starts_with("Ethernet")) continue;
    PortReading& port = reading.ports[name];
    port.counters["rx_bytes"] = rtnl_link_get_stat(link, RTNL_LINK_RX_BYTES);
    port.counters["tx_bytes"] = rtnl_link_get_stat(link, RTNL_LINK_TX_BYTES);
    port.counters["rx_packets"] = rtnl_link_get_stat(link, RTNL_LINK_RX_PACKETS);
    port.counters["tx_packets"] = rtnl_link_get_stat(link, RTNL_LINK_TX_PACKETS);
    port.counters["rx_fcs_errors"] = rtnl_link_get_stat(link, RTNL_LINK_RX_CRC_ERR);
    port.counters["link_up"] = rtnl_link_get_carrier(link) ? 1 : 0;
    uint32_t changes = 0;
    if (rtnl_link_get_carrier_changes(link, &changes) == 0) port.counters["link_flaps"] = changes / 2;
  }
  // Queue counters from each port's root qdisc (queue 0: veth and most NICs
  // without DCB have one transmit queue discipline).
  std::map<int, std::string> names;
  for (nl_object* obj = nl_cache_get_first(cache); obj != nullptr; obj = nl_cache_get_next(obj)) {
    auto* link = reinterpret_cast<rtnl_link*>(obj);
    names[rtnl_link_get_ifindex(link)] = rtnl_link_get_name(link);
  }
  nl_cache_free(cache);
  AddPfcEnabled(*dcb_, &reading);
  nl_cache* qdiscs = nullptr;
  if (rtnl_qdisc_alloc_cache(counters_sock_, &qdiscs) < 0) {
    ++reading.bad_values;  // counted; port counters stand
    return reading;
  }
  for (nl_object* obj = nl_cache_get_first(qdiscs); obj != nullptr; obj = nl_cache_get_next(obj)) {
    auto* tc = reinterpret_cast<rtnl_tc*>(obj);
    if (rtnl_tc_get_parent(tc) != TC_H_ROOT) continue;
    auto name = names.find(rtnl_tc_get_ifindex(tc));
    if (name == names.end() || !reading.ports.count(name->second)) continue;
    auto& queue = reading.ports[name->second].queues[0];
    queue["queue_tx_bytes"] = rtnl_tc_get_stat(tc, RTNL_TC_BYTES);
    queue["queue_tx_packets"] = rtnl_tc_get_stat(tc, RTNL_TC_PACKETS);
    queue["queue_drops"] = rtnl_tc_get_stat(tc, RTNL_TC_DROPS);
    queue["queue_depth_bytes"] = rtnl_tc_get_stat(tc, RTNL_TC_BACKLOG);
  }
  nl_cache_free(qdiscs);
  return reading;
}

}  // namespace rocefab::switchd
