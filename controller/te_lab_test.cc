// Centralized TE in the lab: a traffic matrix measured from the model, the
// CSPF allocator, its overrides compiled as policy rules over the E-ECMP
// fallback, and the model routing by them. For a fragmented placement TE
// evens the rack uplinks better than E-ECMP, and a dead uplink's overrides
// fall back to ECMP without a new config.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <random>

#include "collector/traffic_matrix.h"
#include "common/config_loader.h"
#include "common/strings.h"
#include "controller/compiler.h"
#include "controller/te.h"
#include "lab/fabric_model.h"
#include "lab/study.h"
#include "lab/topology_gen.h"

namespace rocefab {
namespace {

std::shared_ptr<const Topology> TeZone() {
  lab::TopologyParams params;  // the demo zone: 8 racks x 2 hosts x 8 NICs, 4 CTSWs
  return *Topology::Build(*lab::GenerateTopology(params));
}

// The exact traffic matrix (lab/study.h).
std::vector<controller::TeDemand> Demands(const lab::FabricModel& model) { return lab::OfferedDemands(model); }

struct TeOutcome {
  double busbw = 0;
  double max_uplink = 0;  // utilisation of the busiest RTSW uplink
  double imbalance = 0;   // max / mean over the RTSW uplinks that carry traffic
};

TeOutcome Measure(const lab::FabricModel& model) {
  TeOutcome out;
  out.busbw = model.jobs()[0].busbw_gbs;
  double sum = 0;
  int used = 0;
  for (const auto& port : model.ports()) {
    if (port.device.find("rtsw") == std::string::npos) continue;
    if (model.topology().PeerOf(port.link, port.device + "/" + port.name).find("ctsw") == std::string::npos) continue;
    const double u = model.ChannelUtilization(port.out_channel);
    if (u <= 0) continue;
    out.max_uplink = std::max(out.max_uplink, u);
    sum += u;
    ++used;
  }
  out.imbalance = used ? out.max_uplink / (sum / used) : 0;
  return out;
}

// A fragmented placement: `hosts` hosts picked at random over the zone's
// racks (seeded), as a busy scheduler leaves them.
std::string Fragmented(const Topology& topo, int hosts, uint32_t seed) {
  std::vector<std::string> names;
  for (const auto& h : topo.proto().hosts()) names.push_back(h.name());
  std::mt19937 rng(seed);
  std::shuffle(names.begin(), names.end(), rng);
  std::string yaml = "jobs: [{id: \"4711\", qps_per_connection: 4, hosts: [";
  for (int i = 0; i < hosts; ++i) yaml += (i ? ", " : "") + names[i];
  return yaml + "]}]";
}

std::unique_ptr<lab::FabricModel> Apply(std::shared_ptr<const Topology> topo, const std::string& scenario_yaml,
                                        const std::string& scheme, const std::vector<controller::TeOverride>* te) {
  v1::Scenario scenario;
  EXPECT_TRUE(LoadYamlConfig(scenario_yaml, "s.yaml", &scenario).ok()) << scenario_yaml;
  auto model = lab::FabricModel::Create(topo, scenario);
  EXPECT_TRUE(model.ok()) << model.status();
  v1::Policy policy;
  EXPECT_TRUE(LoadYamlConfig("default_scheme: " + scheme, "p.yaml", &policy).ok());
  auto configs = controller::Compile(*topo, *controller::ValidatePolicy(policy), {}, 1, te);
  EXPECT_TRUE(configs.ok()) << configs.status();
  for (const auto& [name, config] : *configs) (*model)->SetAppliedConfig(config);
  return std::move(*model);
}

TEST(TeInTheLab, EvensTheUplinksOfFragmentedJobsBetterThanEecmp) {
  auto topo = TeZone();
  int better = 0;
  const int placements = 8;
  for (uint32_t seed = 1; seed <= placements; ++seed) {
    const std::string scenario = Fragmented(*topo, 8, seed);
    auto eecmp = Apply(topo, scenario, "eecmp", nullptr);
    eecmp->Step(0.5, nullptr);
    const TeOutcome e = Measure(*eecmp);
    auto te = controller::AllocateTe(*topo, Demands(*eecmp), {});
    ASSERT_TRUE(te.ok()) << te.status();
    EXPECT_GT(te->placed, 0u);
    auto with_te = Apply(topo, scenario, "te", &te->overrides);
    with_te->Step(0.5, nullptr);
    const TeOutcome t = Measure(*with_te);
    SCOPED_TRACE(scenario);
    std::cout << "placement " << seed << ": e-ecmp max/mean " << e.imbalance << " busbw " << e.busbw
              << " | te max/mean " << t.imbalance << " busbw " << t.busbw << " (allocator predicted max "
              << te->max_utilization << ", model " << t.max_uplink << ")\n";
    EXPECT_LE(t.imbalance, e.imbalance + 1e-9);
    EXPECT_GE(t.busbw, e.busbw * 0.999);
    // The model agrees with what the allocator predicted for the uplinks.
    EXPECT_LE(t.max_uplink, te->max_utilization + 1e-6);
    if (t.imbalance < e.imbalance - 0.05) ++better;
  }
  EXPECT_GE(better, placements / 2) << "TE should be clearly more even on most placements";
}

TEST(TeInTheLab, ADeadUplinksOverridesFallBackToEcmpAtOnce) {
  auto topo = TeZone();
  const std::string placement = Fragmented(*topo, 8, 3);
  auto probe = Apply(topo, placement, "eecmp", nullptr);
  probe->Step(0.5, nullptr);
  auto te = controller::AllocateTe(*topo, Demands(*probe), {});
  ASSERT_TRUE(te.ok());
  ASSERT_FALSE(te->overrides.empty());
  const auto first_rtsw = std::find_if(te->overrides.begin(), te->overrides.end(),
                                       [](const auto& o) { return o.ingress.find("rtsw") != std::string::npos; });
  ASSERT_NE(first_rtsw, te->overrides.end());
  const std::string uplink = first_rtsw->egress;
  // The uplink goes down at 1 s and stays down; the config is not changed.
  const std::string scenario = placement.substr(0, placement.size()) +
                               "\nfaults: [{kind: link_flap, target: " + uplink +
                               ", at_s: 1, flap_down_s: 1000, flap_up_s: 1}]";
  auto model = Apply(topo, scenario, "te", &te->overrides);
  const int channel = model->ChannelOf(uplink);
  ASSERT_GE(channel, 0);
  model->Step(0.5, nullptr);
  model->Step(0.5, nullptr);
  EXPECT_GT(model->ChannelUtilization(channel), 0) << "the override's uplink carries its traffic";
  const double before = model->jobs()[0].busbw_gbs;
  // The QPs on it wait out their timeout (1 s), then run on the fallback.
  for (int i = 0; i < 6; ++i) model->Step(0.5, nullptr);
  EXPECT_EQ(model->ChannelUtilization(channel), 0);
  EXPECT_FALSE(model->jobs()[0].stalled);
  EXPECT_GT(model->jobs()[0].busbw_gbs, before * 0.5) << "the job runs on the ECMP fallback";
}

// The Llama 3 shape (one link from every RTSW to each of 16 CTSWs, demands
// at line rate): greedy placement strands demands on full links, and the
// edge-colouring placement leaves none. Every NIC's demand gets a path of
// its own, and the job runs at line rate.
TEST(TeInTheLab, OnTheLlamaShapeEveryDemandGetsAFreePath) {
  lab::TopologyParams params;
  params.racks_per_zone = 16;
  params.hosts_per_rack = 2;
  params.nics_per_host = 8;
  params.ctsw_per_zone = 16;
  auto topo = *Topology::Build(*lab::GenerateTopology(params));
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const std::string scenario = Fragmented(*topo, 24, seed);
    auto eecmp = Apply(topo, scenario, "eecmp", nullptr);
    eecmp->Step(0.5, nullptr);
    auto te = controller::AllocateTe(*topo, Demands(*eecmp), {});
    ASSERT_TRUE(te.ok()) << te.status();
    EXPECT_LE(te->max_utilization, 1 + 1e-9) << scenario;
    EXPECT_EQ(te->left_ecmp, 0u);
    auto with_te = Apply(topo, scenario, "te", &te->overrides);
    with_te->Step(0.5, nullptr);
    const auto& job = with_te->jobs()[0];
    std::cout << "placement " << seed << ": e-ecmp busbw " << eecmp->jobs()[0].busbw_gbs << ", te " << job.busbw_gbs
              << " of " << job.ideal_busbw_gbs << " ideal\n";
    EXPECT_GE(job.busbw_gbs, job.ideal_busbw_gbs * 0.99) << scenario;
  }
}

// The matrix as the collector measures it (collector/traffic_matrix.h):
// NIC tx_bytes and the jobs' collective records as agents would report
// them, the registry's rank placement, and no knowledge of who talks to
// whom. The model runs `seconds` under E-ECMP to fill the window.
std::vector<controller::TeDemand> MeasuredDemands(lab::FabricModel& model, const v1::Scenario& scenario,
                                                  double seconds) {
  const Topology& topo = model.topology();
  collector::TrafficRates rates;
  const int64_t t0 = 1'800'000'000'000'000;
  std::map<std::string, double> previous;
  int64_t t = t0;
  for (double s = 0; s < seconds; s += 0.5) {
    std::vector<lab::CollectiveRecord> records;
    model.Step(0.5, &records);
    t += 500'000;
    v1::TelemetryBatch batch;
    for (const auto& port : model.ports()) {
      if (port.host < 0) continue;
      auto* e = batch.add_entities();
      e->set_scope(v1::SCOPE_NIC);
      e->set_entity(port.device + "/" + port.name);
      e->set_port(1);
      e->set_timestamp_us(t);
      auto* sample = e->add_samples();
      sample->set_counter("tx_bytes");
      sample->set_value(static_cast<uint64_t>(port.c.tx_bytes));
      auto it = previous.find(e->entity());
      if (it != previous.end()) sample->set_delta(static_cast<uint64_t>(port.c.tx_bytes - it->second));
      previous[e->entity()] = port.c.tx_bytes;
    }
    for (const auto& r : records) {
      auto* c = batch.add_collectives();
      c->set_job(scenario.jobs(r.job).id());
      c->set_op(scenario.jobs(r.job).collective() == v1::COLLECTIVE_ALL_TO_ALL ? "AllToAll" : "AllReduce");
      c->set_bytes(r.msg_bytes);
      c->set_timestamp_us(t);
    }
    rates.Observe(batch);
  }
  // The registry: each job's hosts in the scheduler's order, a rank per NIC.
  std::vector<v1::Job> jobs;
  for (const auto& spec : scenario.jobs()) {
    v1::Job job;
    job.set_id(spec.id());
    uint32_t rank = 0;
    for (const auto& host : spec.hosts())
      for (const auto& nic : topo.FindHost(host)->nics()) {
        auto* r = job.add_ranks();
        r->set_rank(rank++);
        r->set_host(host);
        r->set_nic(nic.name());
      }
    jobs.push_back(std::move(job));
  }
  const auto matrix = collector::BuildTrafficMatrix(topo, jobs, rates, t, static_cast<int64_t>(seconds * 1e6));
  std::vector<controller::TeDemand> out;
  for (const auto& d : matrix.demands()) out.push_back({d.ingress(), d.dst_prefix(), d.bytes_per_s()});
  return out;
}

// TE from the measured matrix, for ring (AllReduce) and AllToAll jobs on
// fragmented placements it did not choose: more even than E-ECMP on most,
// and never slower by more than the model's noise.
TEST(TeInTheLab, FromTheCollectorsMeasuredMatrixTeEvensTheUplinksToo) {
  auto topo = TeZone();
  for (const char* collective : {"all_reduce", "all_to_all"}) {
    int better = 0;
    const int placements = 6;
    for (uint32_t seed = 11; seed < 11 + placements; ++seed) {
      std::string yaml = Fragmented(*topo, 6, seed);
      yaml.insert(yaml.find("qps_per_connection"), StrCat("collective: ", collective, ", "));
      v1::Scenario scenario;
      ASSERT_TRUE(LoadYamlConfig(yaml, "s.yaml", &scenario).ok());
      auto eecmp = Apply(topo, yaml, "eecmp", nullptr);
      const auto demands = MeasuredDemands(*eecmp, scenario, 5);
      const TeOutcome e = Measure(*eecmp);
      auto te = controller::AllocateTe(*topo, demands, {});
      ASSERT_TRUE(te.ok()) << te.status();
      auto with_te = Apply(topo, yaml, "te", &te->overrides);
      for (int i = 0; i < 4; ++i) with_te->Step(0.5, nullptr);
      const TeOutcome t = Measure(*with_te);
      std::cout << collective << " placement " << seed << ": e-ecmp max/mean " << e.imbalance << " busbw " << e.busbw
                << " max " << e.max_uplink << " | te (measured matrix) max/mean " << t.imbalance << " busbw " << t.busbw
                << " max " << t.max_uplink << " predicted " << te->max_utilization << " placed " << te->placed
                << " left " << te->left_ecmp << "\n";
      EXPECT_GE(t.busbw, e.busbw * 0.98) << yaml;
      if (t.imbalance < e.imbalance - 0.05) ++better;
    }
    EXPECT_GE(better, placements / 2) << collective;
  }
}

TEST(TeAllocator, RejectsADemandThatIsNotAnRtswPortAndARack) {
  auto topo = TeZone();
  auto result = controller::AllocateTe(*topo, {{"z1-ctsw01/Ethernet0", "10.1.1.0/24", 1e9}}, {});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(std::string(result.status().message()).find("not an RTSW port"), std::string::npos);
}

TEST(TeAllocator, NeverUsesAnUnusableUplinkAndIsDeterministic) {
  auto topo = TeZone();
  auto probe = Apply(topo, Fragmented(*topo, 8, 5), "eecmp", nullptr);
  probe->Step(0.5, nullptr);
  const auto demands = Demands(*probe);
  auto first = controller::AllocateTe(*topo, demands, {});
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->overrides.empty());
  const std::string dead = first->overrides[0].egress;
  auto second = controller::AllocateTe(*topo, demands, {dead});
  ASSERT_TRUE(second.ok());
  for (const auto& o : second->overrides) EXPECT_NE(o.egress, dead);
  auto again = controller::AllocateTe(*topo, demands, {dead});
  ASSERT_EQ(again->overrides.size(), second->overrides.size());
  for (size_t i = 0; i < again->overrides.size(); ++i) EXPECT_EQ(again->overrides[i].egress, second->overrides[i].egress);
}

}  // namespace
}  // namespace rocefab
