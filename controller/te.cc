#include "controller/te.h"

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <tuple>

#include "common/strings.h"

namespace rocefab::controller {
namespace {

struct Link {
  std::string port;       // this end, "z1-rtsw01/Ethernet32"
  std::string peer_port;  // the other end, "z1-ctsw01/Ethernet0"
  std::string peer;       // the other switch
  double capacity = 0;    // bytes/s
  double load = 0;
};

using Uplinks = std::map<std::string, std::vector<Link>>;
using Downlinks = std::map<std::pair<std::string, std::string>, std::vector<Link>>;

// The exact placement for the Llama 3 shape: one link from every RTSW to
// every CTSW of its zone, every demand the size of a link. Placing demands
// is then colouring the edges of a bipartite graph (senders' RTSWs on one
// side, receivers' on the other, a demand an edge, a CTSW a colour) so that
// no RTSW sends or receives twice on one colour: possible with as many
// colours as the largest degree (Konig), which is at most the CTSW count
// when no RTSW sends or receives more than line rate. Each edge takes a
// colour free at both ends, or else a colour free at its sender after the
// two-colour alternating path from its receiver is swapped (Kempe chain).
// Empty when the fabric or the demands are not of that shape.
std::optional<TeResult> ColorEdges(const Topology& topology, const std::vector<TeDemand>& demands,
                                   const Uplinks& uplinks, const Downlinks& downlinks,
                                   const std::map<std::string, std::string>& rack_of_prefix) {
  double size = 0;
  std::map<std::string, std::map<std::string, const Link*>> up_to;  // RTSW -> CTSW -> its one uplink
  for (const auto& [rtsw, list] : uplinks)
    for (const Link& l : list) {
      if (up_to[rtsw].count(l.peer)) return std::nullopt;  // parallel uplinks
      if (size == 0) size = l.capacity;
      if (l.capacity != size) return std::nullopt;
      up_to[rtsw][l.peer] = &l;
    }
  for (const auto& [key, list] : downlinks)
    if (list.size() != 1 || list[0].capacity != size) return std::nullopt;
  struct Edge {
    const TeDemand* demand;
    std::string src, dst;
    int color = -1;
  };
  std::vector<Edge> edges;
  std::map<std::string, std::vector<std::string>> colors_of_zone;  // zone -> its CTSWs, sorted
  for (const TeDemand& d : demands) {
    if (!(d.bytes_per_s > 0)) continue;
    std::string_view src, port;
    SplitPortName(d.ingress, &src, &port);
    const auto owner = rack_of_prefix.find(d.dst_prefix);
    if (owner == rack_of_prefix.end() || owner->second == src) continue;
    const v1::TopoSwitch* a = topology.FindSwitch(src);
    const v1::TopoSwitch* b = topology.FindSwitch(owner->second);
    if (a == nullptr || b == nullptr || a->zone() != b->zone()) continue;
    if (d.bytes_per_s != size) return std::nullopt;
    edges.push_back({&d, std::string(src), owner->second});
  }
  // Every RTSW of a zone must have one usable link up to each CTSW of the
  // zone and one down from it: a drained or dead link breaks the shape,
  // and the greedy placement stands.
  std::map<std::string, std::set<std::string>> zone_ctsws;
  for (const auto& [rtsw, targets] : up_to) {
    const v1::TopoSwitch* sw = topology.FindSwitch(rtsw);
    for (const auto& [ctsw, link] : targets) zone_ctsws[sw->zone()].insert(ctsw);
  }
  for (const auto& [rtsw, targets] : up_to) {
    const std::set<std::string>& all = zone_ctsws[topology.FindSwitch(rtsw)->zone()];
    if (targets.size() != all.size()) return std::nullopt;
    for (const std::string& ctsw : all)
      if (!downlinks.count({ctsw, rtsw})) return std::nullopt;
  }
  for (const Edge& edge : edges)
    if (!up_to.count(edge.src) || !up_to.count(edge.dst)) return std::nullopt;
  // Colours are CTSW names; every RTSW of a zone reaches all of them.
  std::map<std::string, int> color_index;
  std::vector<std::string> color_name;
  for (const auto& [rtsw, targets] : up_to)
    for (const auto& [ctsw, link] : targets)
      if (color_index.emplace(ctsw, static_cast<int>(color_name.size())).second) color_name.push_back(ctsw);
  // at_src[s][c] / at_dst[d][c]: the edge using colour c there, or -1.
  std::map<std::string, std::vector<int>> at_src, at_dst;
  auto slot = [&](std::map<std::string, std::vector<int>>& side, const std::string& rtsw) -> std::vector<int>& {
    auto& v = side[rtsw];
    if (v.empty()) v.assign(color_name.size(), -1);
    return v;
  };
  auto usable = [&](const std::string& src, const std::string& dst, int c) {
    const auto targets = up_to.find(src);
    return targets != up_to.end() && targets->second.count(color_name[c]) &&
           downlinks.count({color_name[c], dst});
  };
  TeResult result;
  for (int e = 0; e < static_cast<int>(edges.size()); ++e) {
    Edge& edge = edges[e];
    std::vector<int>& src_slots = slot(at_src, edge.src);
    std::vector<int>& dst_slots = slot(at_dst, edge.dst);
    int a = -1, b = -1;
    for (int c = 0; c < static_cast<int>(color_name.size()); ++c) {
      if (!usable(edge.src, edge.dst, c)) continue;
      if (a < 0 && src_slots[c] < 0) a = c;
      if (b < 0 && dst_slots[c] < 0) b = c;
      if (src_slots[c] < 0 && dst_slots[c] < 0) {
        a = b = c;
        break;
      }
    }
    if (a < 0 || b < 0) {
      ++result.left_ecmp;  // more than line rate at one end: left to ECMP
      continue;
    }
    if (a != b) {
      // The a/b path from the receiver: its a-edge, that edge's sender's
      // b-edge, and so on. Swapping a and b along it frees a at the
      // receiver; it never reaches this sender, where a is free.
      std::vector<int> path;
      std::string at = edge.dst;
      bool receiver_side = true;
      int want = a;
      while (true) {
        std::vector<int>& slots = slot(receiver_side ? at_dst : at_src, at);
        const int next = slots[want];
        if (next < 0) break;
        path.push_back(next);
        at = receiver_side ? edges[next].src : edges[next].dst;
        receiver_side = !receiver_side;
        want = want == a ? b : a;
      }
      for (int p : path) {
        slot(at_src, edges[p].src)[edges[p].color] = -1;
        slot(at_dst, edges[p].dst)[edges[p].color] = -1;
      }
      for (int p : path) {
        edges[p].color = edges[p].color == a ? b : a;
        slot(at_src, edges[p].src)[edges[p].color] = p;
        slot(at_dst, edges[p].dst)[edges[p].color] = p;
      }
      // A swapped edge must still have both links (the fabric is uniform,
      // so it has; a drained link would have failed the shape check).
    }
    edge.color = a;
    slot(at_src, edge.src)[a] = e;
    slot(at_dst, edge.dst)[a] = e;
  }
  for (const Edge& edge : edges) {
    if (edge.color < 0) continue;
    const Link* up = up_to[edge.src][color_name[edge.color]];
    const Link& down = downlinks.at({color_name[edge.color], edge.dst})[0];
    result.overrides.push_back({edge.demand->ingress, edge.demand->dst_prefix, up->port});
    result.overrides.push_back({up->peer_port, edge.demand->dst_prefix, down.port});
    ++result.placed;
  }
  // Each link carries one demand at most: the busiest is full, no more.
  result.max_utilization = result.placed > 0 ? 1.0 : 0.0;
  result.spread = static_cast<double>(2 * result.placed);
  return result;
}

// The zone's RTSW-CTSW links that `unusable` leaves, and which RTSW owns
// each rack prefix.
struct TeFabric {
  Uplinks uplinks;
  Downlinks downlinks;
  std::map<std::string, std::string> rack_of_prefix;  // /24 -> RTSW
  std::set<std::string> unusable_links;              // "switch/port" of links left out, both ends
};

TeFabric BuildTeFabric(const Topology& topology, const std::set<std::string>& unusable) {
  TeFabric f;
  for (const auto& link : topology.proto().links()) {
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
            if (nic.name() == peer_port) f.rack_of_prefix[RackPrefix(nic.ip())] = dev;
        continue;
      }
      const v1::TopoSwitch* other = topology.FindSwitch(peer);
      if (other == nullptr) continue;
      if (!usable) {
        f.unusable_links.insert(port);
        continue;
      }
      if (sw->role() == v1::SWITCH_ROLE_RTSW && other->role() == v1::SWITCH_ROLE_CTSW)
        f.uplinks[dev].push_back({port, other_port, peer, capacity, 0});
      if (sw->role() == v1::SWITCH_ROLE_CTSW && other->role() == v1::SWITCH_ROLE_RTSW)
        f.downlinks[{dev, peer}].push_back({port, other_port, peer, capacity, 0});
    }
  }
  return f;
}

}  // namespace

absl::StatusOr<TeResult> AllocateTe(const Topology& topology, std::vector<TeDemand> demands,
                                    const std::set<std::string>& unusable) {
  TeFabric fabric = BuildTeFabric(topology, unusable);
  Uplinks& uplinks = fabric.uplinks;                     // RTSW -> links up to CTSWs
  Downlinks& downlinks = fabric.downlinks;               // (CTSW, RTSW) -> parallel links
  const auto& rack_of_prefix = fabric.rack_of_prefix;  // /24 -> RTSW
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
    std::set<std::pair<std::string, std::string>> placed;  // (ingress, prefix): one rule each
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
          placed.count({demand.ingress, demand.dst_prefix})) {
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
      placed.insert({demand.ingress, demand.dst_prefix});
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
  // The Llama 3 shape has an exact placement; anything else gets the best
  // of the greedy orders.
  if (auto exact = ColorEdges(topology, demands, fresh_up, fresh_down, rack_of_prefix);
      exact.has_value() && exact->left_ecmp == 0) {
    std::sort(exact->overrides.begin(), exact->overrides.end(), [](const TeOverride& x, const TeOverride& y) {
      return std::tie(x.ingress, x.dst_prefix) < std::tie(y.ingress, y.dst_prefix);
    });
    return std::move(*exact);
  }
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

TeEvaluation EvaluateTe(const Topology& topology, const std::vector<TeDemand>& demands,
                        const std::vector<TeOverride>& overrides, const std::set<std::string>& unusable) {
  TeFabric fabric = BuildTeFabric(topology, unusable);
  TeEvaluation out;
  std::map<std::pair<std::string, std::string>, std::string> egress;  // (ingress, prefix) -> egress
  for (const TeOverride& o : overrides) {
    egress[{o.ingress, o.dst_prefix}] = o.egress;
    if (fabric.unusable_links.count(o.egress)) ++out.broken;
  }
  std::map<std::string, Link*> by_port;
  for (auto& [rtsw, list] : fabric.uplinks)
    for (Link& l : list) by_port[l.port] = &l;
  for (auto& [key, list] : fabric.downlinks)
    for (Link& l : list) by_port[l.port] = &l;
  double smallest = 0;
  for (const auto& [port, link] : by_port)
    if (smallest == 0 || link->capacity < smallest) smallest = link->capacity;
  std::set<std::pair<std::string, std::string>> carried;  // demands worth an override
  for (const TeDemand& d : demands) {
    if (!(d.bytes_per_s > 0)) continue;
    std::string_view src, port;
    SplitPortName(d.ingress, &src, &port);
    const auto owner = fabric.rack_of_prefix.find(d.dst_prefix);
    const v1::TopoSwitch* src_sw = topology.FindSwitch(src);
    if (owner == fabric.rack_of_prefix.end() || src_sw == nullptr || owner->second == src) continue;
    const v1::TopoSwitch* dst_sw = topology.FindSwitch(owner->second);
    auto ups = fabric.uplinks.find(std::string(src));
    if (dst_sw == nullptr || dst_sw->zone() != src_sw->zone() || ups == fabric.uplinks.end()) continue;
    if (d.bytes_per_s >= 0.01 * smallest) {
      carried.insert({d.ingress, d.dst_prefix});
      if (!egress.count({d.ingress, d.dst_prefix})) ++out.uncovered;
    }
    // An override whose link is usable carries the demand; else ECMP
    // spreads it evenly over the uplinks that reach the rack, and each
    // CTSW over its links down to it.
    auto o = egress.find({d.ingress, d.dst_prefix});
    auto up = o == egress.end() ? by_port.end() : by_port.find(o->second);
    if (up != by_port.end()) {
      up->second->load += d.bytes_per_s;
      auto down_o = egress.find({up->second->peer_port, d.dst_prefix});
      auto down = down_o == egress.end() ? by_port.end() : by_port.find(down_o->second);
      if (down != by_port.end()) {
        down->second->load += d.bytes_per_s;
      } else if (auto list = fabric.downlinks.find({up->second->peer, owner->second}); list != fabric.downlinks.end()) {
        for (Link& l : list->second) l.load += d.bytes_per_s / static_cast<double>(list->second.size());
      }
      continue;
    }
    std::vector<Link*> reach;
    for (Link& l : ups->second)
      if (fabric.downlinks.count({l.peer, owner->second})) reach.push_back(&l);
    for (Link* l : reach) {
      const double share = d.bytes_per_s / static_cast<double>(reach.size());
      l->load += share;
      auto& downs = fabric.downlinks[{l->peer, owner->second}];
      for (Link& dl : downs) dl.load += share / static_cast<double>(downs.size());
    }
  }
  for (const auto& [port, link] : by_port) out.max_utilization = std::max(out.max_utilization, link->load / link->capacity);
  for (const TeOverride& o : overrides) {
    const v1::TopoSwitch* sw = topology.FindSwitch(EntityDevice(o.ingress));
    if (sw != nullptr && sw->role() == v1::SWITCH_ROLE_RTSW && !carried.count({o.ingress, o.dst_prefix})) ++out.stale;
  }
  return out;
}

}  // namespace rocefab::controller
