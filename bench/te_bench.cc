// TE at the Llama 3 cluster's size (24,576 GPUs): the time to compile the
// routes and run the TE allocator, and the allocator's busiest link against
// the optimum of the same instance's linear program, solved by GLPK's
// glpsol in the same run (docs/performance.md, "TE").
//
//   te_bench [--seed 1] [--zones 8] [-o json]
//
// The instance: in each zone, jobs of 16 to 128 hosts placed on randomly
// chosen free hosts (fragmented, as a busy scheduler leaves them) until 90%
// of the hosts are taken; each job's ring sends, on every NIC rail, from
// each host to the next at line rate. The LP is the fractional relaxation:
// each (source rack, destination rack) commodity may split over the zone's
// CTSWs; minimise the busiest RTSW uplink or CTSW downlink. Its optimum is a
// lower bound for any placement that pins each demand to one path.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "common/config_loader.h"
#include "controller/compiler.h"
#include "controller/te.h"
#include "lab/topology_gen.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Instance {
  std::vector<controller::TeDemand> demands;
  int jobs = 0, hosts = 0;
};

Instance Place(const Topology& topo, uint32_t seed, uint32_t zones) {
  Instance out;
  std::mt19937 rng(seed);
  std::map<std::string, std::vector<const v1::TopoHost*>> by_zone;
  for (const auto& h : topo.proto().hosts()) by_zone[h.zone()].push_back(&h);
  uint32_t zone_count = 0;
  for (auto& [zone, hosts] : by_zone) {
    if (zone_count++ >= zones) break;
    std::shuffle(hosts.begin(), hosts.end(), rng);
    size_t next = 0;
    const size_t limit = hosts.size() * 9 / 10;
    std::uniform_int_distribution<int> size_log(4, 7);  // 16 to 128 hosts
    while (next < limit) {
      const size_t size = std::min<size_t>(size_t{1} << size_log(rng), limit - next);
      if (size < 2) break;
      ++out.jobs;
      for (size_t i = 0; i < size; ++i) {
        const v1::TopoHost& src = *hosts[next + i];
        const v1::TopoHost& dst = *hosts[next + (i + 1) % size];
        for (int n = 0; n < src.nics_size() && n < dst.nics_size(); ++n) {
          const std::string nic = src.name() + "/" + src.nics(n).name();
          const int link = topo.LinkOfPort(nic);
          if (link < 0) continue;
          out.demands.push_back({topo.PeerOf(link, nic), RackPrefix(dst.nics(n).ip()),
                                 topo.proto().links(link).speed_gbps() * 1e9 / 8});
        }
      }
      out.hosts += static_cast<int>(size);
      next += size;
    }
  }
  return out;
}

// The LP in CPLEX LP format, for glpsol. Returns the optimum, or -1.
double SolveLp(const Topology& topo, const std::vector<controller::TeDemand>& demands, const std::string& dir,
               double* seconds, std::string* error) {
  // Capacities: RTSW uplinks and CTSW downlinks, by (switch, peer).
  std::map<std::pair<std::string, std::string>, double> cap;
  std::map<std::string, std::string> rack_of_prefix;
  std::map<std::string, std::vector<std::string>> ctsws_of_rtsw;
  for (const auto& link : topo.proto().links()) {
    std::string_view a, ap, b, bp;
    SplitPortName(link.a(), &a, &ap);
    SplitPortName(link.b(), &b, &bp);
    for (int side = 0; side < 2; ++side) {
      const std::string dev(side ? b : a), peer(side ? a : b), peer_port(side ? ap : bp);
      const v1::TopoSwitch* sw = topo.FindSwitch(dev);
      if (sw == nullptr) continue;
      if (const v1::TopoHost* host = topo.FindHost(peer)) {
        for (const auto& nic : host->nics())
          if (nic.name() == peer_port) rack_of_prefix[RackPrefix(nic.ip())] = dev;
        continue;
      }
      const v1::TopoSwitch* other = topo.FindSwitch(peer);
      if (other == nullptr) continue;
      const bool up = sw->role() == v1::SWITCH_ROLE_RTSW && other->role() == v1::SWITCH_ROLE_CTSW;
      const bool down = sw->role() == v1::SWITCH_ROLE_CTSW && other->role() == v1::SWITCH_ROLE_RTSW;
      if (!up && !down) continue;
      cap[{dev, peer}] += link.speed_gbps() * 1e9 / 8;
      if (up && std::find(ctsws_of_rtsw[dev].begin(), ctsws_of_rtsw[dev].end(), peer) == ctsws_of_rtsw[dev].end())
        ctsws_of_rtsw[dev].push_back(peer);
    }
  }
  // Commodities: (source RTSW, destination RTSW) within a zone, in GB/s.
  std::map<std::pair<std::string, std::string>, double> commodity;
  for (const auto& d : demands) {
    std::string_view src, port;
    SplitPortName(d.ingress, &src, &port);
    const std::string& dst = rack_of_prefix[d.dst_prefix];
    if (dst == src || dst.empty()) continue;
    if (topo.FindSwitch(src)->zone() != topo.FindSwitch(dst)->zone()) continue;
    commodity[{std::string(src), dst}] += d.bytes_per_s / 1e9;
  }
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> load;  // link -> terms
  std::ofstream lp(dir + "/te.lp");
  lp << "Minimize\n obj: z\nSubject To\n";
  int k = 0;
  for (const auto& [pair, gbs] : commodity) {
    const auto& [src, dst] = pair;
    std::string sum;
    for (const std::string& c : ctsws_of_rtsw[src]) {
      if (!cap.count({c, dst})) continue;
      const std::string var = "x" + std::to_string(k) + "_" + c.substr(c.rfind('-') + 1);
      sum += (sum.empty() ? " " : " + ") + var;
      load[{src, c}].push_back(std::to_string(gbs) + " " + var);
      load[{c, dst}].push_back(std::to_string(gbs) + " " + var);
    }
    lp << " d" << k << ":" << sum << " = 1\n";
    ++k;
  }
  int l = 0;
  for (const auto& [link, terms] : load) {
    lp << " c" << l++ << ":";
    for (size_t i = 0; i < terms.size(); ++i) lp << (i ? " + " : " ") << terms[i];
    lp << " - " << cap[link] / 1e9 << " z <= 0\n";
  }
  lp << "End\n";
  lp.close();
  const auto start = Clock::now();
  std::string out, err;
  const int rc = testing::RunCommand({"/usr/bin/glpsol", "--lp", dir + "/te.lp", "-o", dir + "/te.out"}, &out, &err);
  *seconds = Ms(Clock::now() - start) / 1e3;
  if (rc != 0) {
    *error = out + err;
    return -1;
  }
  std::ifstream result(dir + "/te.out");
  std::string line;
  const std::regex objective(R"(Objective:\s+obj = ([0-9.eE+-]+))");
  std::smatch m;
  while (std::getline(result, line))
    if (std::regex_search(line, m, objective)) return std::stod(m[1]);
  *error = "no objective in glpsol's output";
  return -1;
}

}  // namespace
}  // namespace rocefab

int main(int argc, char** argv) {
  using namespace rocefab;
  CLI::App app{"TE at 24,576 GPUs: compile and allocator time, and the allocator against GLPK's LP optimum"};
  uint32_t seed = 1, zones = 8;
  std::string output = "table";
  app.add_option("--seed", seed, "placement seed")->capture_default_str();
  app.add_option("--zones", zones, "zones whose jobs make the traffic matrix (at most 8)")->capture_default_str();
  app.add_option("-o", output, "table or json")->capture_default_str();
  bool lp = true;
  app.add_option("--lp", lp, "solve the LP with glpsol too (about 40 s per zone of demands)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto proto = lab::GenerateTopology(lab::Llama3Params());
  if (!proto.ok()) {
    std::cerr << proto.status() << "\n";
    return 1;
  }
  auto topo = Topology::Build(*proto);
  if (!topo.ok()) {
    std::cerr << topo.status() << "\n";
    return 1;
  }
  const Instance instance = Place(**topo, seed, zones);
  v1::Policy policy;
  policy.set_default_scheme(v1::ROUTING_SCHEME_TE);
  auto valid = controller::ValidatePolicy(policy);
  if (!valid.ok()) {
    std::cerr << valid.status() << "\n";
    return 1;
  }
  auto t0 = Clock::now();
  auto te = controller::AllocateTe(**topo, instance.demands, {});
  auto t1 = Clock::now();
  auto configs = controller::Compile(**topo, *valid, {}, 1, te.ok() ? &te->overrides : nullptr);
  auto t2 = Clock::now();
  if (!te.ok() || !configs.ok()) {
    std::cerr << (te.ok() ? configs.status() : te.status()) << "\n";
    return 1;
  }
  size_t items = 0;
  for (const auto& [name, config] : *configs) items += static_cast<size_t>(config.items_size());
  testing::TempDir dir;
  double lp_seconds = 0;
  std::string error;
  const double optimum = lp ? SolveLp(**topo, instance.demands, dir.path(), &lp_seconds, &error) : 0;
  if (lp && optimum < 0) std::cerr << "glpsol: " << error << "\n";
  const double gap = optimum > 0 ? te->max_utilization / optimum - 1 : -1;
  nlohmann::json j = {{"gpus", topo->get()->proto().hosts_size() * 8},
                      {"switches", configs->size()},
                      {"jobs", instance.jobs},
                      {"demands", instance.demands.size()},
                      {"overrides", te->overrides.size()},
                      {"config_items", items},
                      {"te_ms", Ms(t1 - t0)},
                      {"compile_ms", Ms(t2 - t1)},
                      {"total_ms", Ms(t2 - t0)},
                      {"te_max_utilization", te->max_utilization},
                      {"lp_optimum", optimum},
                      {"lp_seconds", lp_seconds},
                      {"gap", gap}};
  if (output == "json") {
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("TE on the Llama 3 fabric: %d GPUs, %zu switches, %d jobs over %u zone(s), %zu demands\n",
                j["gpus"].get<int>(), configs->size(), instance.jobs, zones, instance.demands.size());
    std::printf("  allocator      %8.1f ms (%zu overrides, %zu placed, %zu left to ECMP)\n", Ms(t1 - t0),
                te->overrides.size(), te->placed, te->left_ecmp);
    std::printf("  route compile  %8.1f ms (%zu config items)\n", Ms(t2 - t1), items);
    std::printf("  total          %8.1f ms\n", Ms(t2 - t0));
    if (lp)
      std::printf("  busiest link: TE %.4f, GLPK LP optimum %.4f (glpsol %.1f s): TE is %.2f%% above it\n",
                  te->max_utilization, optimum, lp_seconds, gap * 100);
    else
      std::printf("  busiest link: TE %.4f (no LP asked)\n", te->max_utilization);
  }
  return !lp || optimum > 0 ? 0 : 1;
}
