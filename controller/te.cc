#include "controller/te.h"

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "common/strings.h"

namespace rocefab::controller {
namespace {

std::string Prefix24Of(const std::string& ip) {
  const size_t last_dot = ip.rfind('.');
  return last_dot == std::string::npos ? "" : StrCat(ip.substr(0, last_dot), ".0/24");
}

struct Link {
  std::string port;       // this end, "z1-rtsw01/Ethernet32"
  std::string peer_port;  // the other end, "z1-ctsw01/Ethernet0"
  std::string peer;       // the other switch
  double capacity = 0;    // bytes/s
  double load = 0;
};

}  // namespace

absl::StatusOr<TeResult> AllocateTe(const Topology& topology, std::vector<TeDemand> demands,
                                    const std::set<std::string>& unusable) {
  const v1::Topology& p = topology.proto();
  std::map<std::string, std::vector<Link>> uplinks;                                // RTSW -> links up to CTSWs
  std::map<std::pair<std::string, std::string>, std::vector<Link>> downlinks;      // (CTSW, RTSW) -> parallel links
  std::map<std::string, std::string> rack_of_prefix;                               // /24 -> RTSW
  for (const auto& link : p.links()) {
    std::string_view a_dev, a_port, b_dev, b_port;
    SplitPortName(link.a(), &a_dev, &a_port);
    SplitPortName(link.b(), &b_dev, &b_port);
    const double capacity = link.speed_gbps() * 1e9 / 8;
    const bool usable = !unusable.count(link.a()) && !unusable.count(link.b());
    for (int side = 0; side < 2; ++side) {
      const std::string dev(side == 0 ? a_dev : b_dev), peer(side == 0 ? b_dev : a_dev);
      const std::string& port = side == 0 ? link.a() : link.b();
      const std::string& other_port = side == 0 ? link.b() : link.a();
      const std::string peer_port(side == 0 ? b_port : a_port);
      const v1::TopoSwitch* sw = topology.FindSwitch(dev);
      if (sw == nullptr) continue;
      if (const v1::TopoHost* host = topology.FindHost(peer)) {
        if (sw->role() == v1::SWITCH_ROLE_RTSW)
          for (const auto& nic : host->nics())
            if (nic.name() == peer_port) rack_of_prefix[Prefix24Of(nic.ip())] = dev;
        continue;
      }
      const v1::TopoSwitch* other = topology.FindSwitch(peer);
      if (other == nullptr || !usable) continue;
      if (sw->role() == v1::SWITCH_ROLE_RTSW && other->role() == v1::SWITCH_ROLE_CTSW)
        uplinks[dev].push_back({port, other_port, peer, capacity, 0});
      if (sw->role() == v1::SWITCH_ROLE_CTSW && other->role() == v1::SWITCH_ROLE_RTSW)
        downlinks[{dev, peer}].push_back({port, other_port, peer, capacity, 0});
    }
  }
  auto by_port = [](const Link& x, const Link& y) { return x.port < y.port; };
  for (auto& [rtsw, list] : uplinks) std::sort(list.begin(), list.end(), by_port);
  for (auto& [key, list] : downlinks) std::sort(list.begin(), list.end(), by_port);

  // Largest demands first; ties in a fixed order, so the same matrix gives
  // the same overrides.
  std::sort(demands.begin(), demands.end(), [](const TeDemand& x, const TeDemand& y) {
    return std::tie(y.bytes_per_s, x.ingress, x.dst_prefix) < std::tie(x.bytes_per_s, y.ingress, y.dst_prefix);
  });
  // Greedy CSPF is order-sensitive: equal demands placed in one order can
  // strand the last ones on a full link that another order would have left
  // free. It runs over a few fixed orders (the sorted one, then seeded
  // shuffles within each size class) and keeps the placement whose busiest
  // link is least busy, then whose load is most even.
  const auto fresh_up = uplinks;
  const auto fresh_down = downlinks;
  auto place = [&](const std::vector<TeDemand>& order) -> absl::StatusOr<TeResult> {
    uplinks = fresh_up;
    downlinks = fresh_down;
  TeResult result;
    // A CTSW rule matches (its ingress port, prefix): every demand that
    // reaches it by the same uplink for the same rack shares one downlink.
    std::map<std::pair<std::string, std::string>, Link*> ctsw_choice;
    std::map<std::pair<std::string, std::string>, std::string> rtsw_choice;  // (ingress, prefix) -> uplink
    for (const TeDemand& demand : order) {
      if (!(demand.bytes_per_s > 0)) continue;
      std::string_view src, port;
      SplitPortName(demand.ingress, &src, &port);
      const auto owner = rack_of_prefix.find(demand.dst_prefix);
      const v1::TopoSwitch* src_sw = topology.FindSwitch(src);
      if (owner == rack_of_prefix.end() || src_sw == nullptr || src_sw->role() != v1::SWITCH_ROLE_RTSW)
        return absl::InvalidArgumentError(
            StrCat("TE demand ", demand.ingress, " -> ", demand.dst_prefix, ": not an RTSW port and a rack prefix"));
      const std::string& dst = owner->second;
      if (dst == src) continue;  // within the rack
      const v1::TopoSwitch* dst_sw = topology.FindSwitch(dst);
      auto list = uplinks.find(std::string(src));
      if (dst_sw == nullptr || dst_sw->zone() != src_sw->zone() || list == uplinks.end() ||
          rtsw_choice.count({demand.ingress, demand.dst_prefix})) {
        ++result.left_ecmp;
        continue;
      }
      // CSPF: the (uplink, downlink) pair whose busier link is least busy
      // once this demand is on it; ties to the less loaded uplink, then the
      // first in port order.
      Link* best_up = nullptr;
      Link* best_down = nullptr;
      double best_cost = 0;
      for (Link& up : list->second) {
        auto down = downlinks.find({up.peer, dst});
        if (down == downlinks.end()) continue;
        std::vector<Link*> options;
        if (auto fixed = ctsw_choice.find({up.peer_port, demand.dst_prefix}); fixed != ctsw_choice.end())
          options.push_back(fixed->second);
        else
          for (Link& d : down->second) options.push_back(&d);
        for (Link* d : options) {
          const double cost = std::max((up.load + demand.bytes_per_s) / up.capacity,
                                       (d->load + demand.bytes_per_s) / d->capacity);
          if (best_up == nullptr || cost < best_cost - 1e-12 ||
              (cost < best_cost + 1e-12 && up.load + d->load < best_up->load + best_down->load - 1e-9)) {
            best_up = &up;
            best_down = d;
            best_cost = cost;
          }
        }
      }
      if (best_up == nullptr) {
        ++result.left_ecmp;
        continue;
      }
      best_up->load += demand.bytes_per_s;
      best_down->load += demand.bytes_per_s;
      rtsw_choice[{demand.ingress, demand.dst_prefix}] = best_up->port;
      result.overrides.push_back({demand.ingress, demand.dst_prefix, best_up->port});
      if (ctsw_choice.emplace(std::pair{best_up->peer_port, demand.dst_prefix}, best_down).second)
        result.overrides.push_back({best_up->peer_port, demand.dst_prefix, best_down->port});
      ++result.placed;
    }
    for (const auto& [rtsw, list] : uplinks)
      for (const Link& up : list) {
        result.max_utilization = std::max(result.max_utilization, up.load / up.capacity);
        result.spread += (up.load / up.capacity) * (up.load / up.capacity);
      }
    for (const auto& [key, list] : downlinks)
      for (const Link& d : list) {
        result.max_utilization = std::max(result.max_utilization, d.load / d.capacity);
        result.spread += (d.load / d.capacity) * (d.load / d.capacity);
      }
    return result;
  };
  absl::StatusOr<TeResult> best = place(demands);
  if (!best.ok()) return best.status();
  std::mt19937 rng(1);
  for (int attempt = 0; attempt < 7; ++attempt) {
    std::vector<TeDemand> order = demands;
    for (size_t i = 0; i < order.size();) {
      size_t j = i;
      while (j < order.size() && order[j].bytes_per_s == order[i].bytes_per_s) ++j;
      std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(i), order.begin() + static_cast<std::ptrdiff_t>(j), rng);
      i = j;
    }
    auto next = place(order);
    if (!next.ok()) return next.status();
    if (next->max_utilization < best->max_utilization - 1e-9 ||
        (next->max_utilization < best->max_utilization + 1e-9 && next->spread < best->spread - 1e-9))
      best = std::move(next);
  }
  TeResult result = std::move(*best);
  std::sort(result.overrides.begin(), result.overrides.end(), [](const TeOverride& x, const TeOverride& y) {
    return std::tie(x.ingress, x.dst_prefix) < std::tie(y.ingress, y.dst_prefix);
  });
  return result;
}

}  // namespace rocefab::controller
