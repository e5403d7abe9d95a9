#include "collector/traffic_matrix.h"

#include <gtest/gtest.h>

#include <map>

namespace rocefab::collector {
namespace {

// Three racks of two one-NIC hosts.
const char* kMatrixTopology = R"yaml(
switches:
  - {name: z1-rtsw01, role: rtsw, zone: z1}
  - {name: z1-rtsw02, role: rtsw, zone: z1}
  - {name: z1-rtsw03, role: rtsw, zone: z1}
  - {name: z1-ctsw01, role: ctsw, zone: z1}
hosts:
  - {name: z1-r01-h1, zone: z1, rack: 1, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.1.1}]}
  - {name: z1-r01-h2, zone: z1, rack: 1, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.1.2}]}
  - {name: z1-r02-h1, zone: z1, rack: 2, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.2.1}]}
  - {name: z1-r02-h2, zone: z1, rack: 2, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.2.2}]}
  - {name: z1-r03-h1, zone: z1, rack: 3, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.3.1}]}
  - {name: z1-r03-h2, zone: z1, rack: 3, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.3.2}]}
links:
  - {a: z1-r01-h1/mlx5_0, b: z1-rtsw01/Ethernet0, speed_gbps: 400}
  - {a: z1-r01-h2/mlx5_0, b: z1-rtsw01/Ethernet1, speed_gbps: 400}
  - {a: z1-r02-h1/mlx5_0, b: z1-rtsw02/Ethernet0, speed_gbps: 400}
  - {a: z1-r02-h2/mlx5_0, b: z1-rtsw02/Ethernet1, speed_gbps: 400}
  - {a: z1-r03-h1/mlx5_0, b: z1-rtsw03/Ethernet0, speed_gbps: 400}
  - {a: z1-r03-h2/mlx5_0, b: z1-rtsw03/Ethernet1, speed_gbps: 400}
  - {a: z1-rtsw01/Ethernet8, b: z1-ctsw01/Ethernet0, speed_gbps: 400}
  - {a: z1-rtsw02/Ethernet8, b: z1-ctsw01/Ethernet4, speed_gbps: 400}
  - {a: z1-rtsw03/Ethernet8, b: z1-ctsw01/Ethernet8, speed_gbps: 400}
)yaml";

constexpr int64_t kMatrixT0 = 1'800'000'000'000'000;

// One batch with a counter sample for `entity` at `t`, increased by `delta`.
v1::TelemetryBatch Sample(v1::Scope scope, const std::string& entity, const std::string& counter, int64_t t,
                          std::optional<uint64_t> delta, uint64_t value = 0) {
  v1::TelemetryBatch batch;
  auto* e = batch.add_entities();
  e->set_scope(scope);
  e->set_entity(entity);
  e->set_port(scope == v1::SCOPE_NIC ? 1 : 0);
  e->set_timestamp_us(t);
  auto* s = e->add_samples();
  s->set_counter(counter);
  s->set_kind(counter == "link_up" ? v1::VALUE_KIND_GAUGE : v1::VALUE_KIND_COUNTER);
  s->set_value(value);
  if (delta) s->set_delta(*delta);
  return batch;
}

// `bytes_per_s` on `entity` for `seconds`, one sample a second from kMatrixT0.
void Send(TrafficRates& rates, v1::Scope scope, const std::string& entity, double bytes_per_s, int seconds) {
  for (int i = 0; i <= seconds; ++i)
    rates.Observe(Sample(scope, entity, scope == v1::SCOPE_NIC ? "tx_bytes" : "rx_bytes", kMatrixT0 + i * 1'000'000,
                         i == 0 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(bytes_per_s))));
}

v1::Job Job(const std::string& id, std::initializer_list<const char*> hosts) {
  v1::Job job;
  job.set_id(id);
  uint32_t rank = 0;
  for (const char* host : hosts) {
    auto* r = job.add_ranks();
    r->set_rank(rank++);
    r->set_host(host);
    r->set_nic("mlx5_0");
  }
  return job;
}

TEST(TrafficRates, RateOverTheWindowFromDeltasWithBoundedPoints) {
  TrafficRates rates(/*keep_us=*/60'000'000, /*step_us=*/5'000'000);
  // 1 GB/s for 100 s, then 3 GB/s for 30 s.
  for (int i = 0; i <= 130; ++i)
    rates.Observe(Sample(v1::SCOPE_NIC, "z1-r01-h1/mlx5_0", "tx_bytes", kMatrixT0 + i * 1'000'000,
                         i == 0 ? std::nullopt : std::optional<uint64_t>(i <= 100 ? 1'000'000'000 : 3'000'000'000)));
  const int64_t now = kMatrixT0 + 130'000'000;
  auto last30 = rates.Rate("z1-r01-h1/mlx5_0", "tx_bytes", now, 30'000'000);
  ASSERT_TRUE(last30.has_value());
  EXPECT_NEAR(*last30, 3e9, 0.2e9) << "the last 30 s ran at 3 GB/s";
  auto last60 = rates.Rate("z1-r01-h1/mlx5_0", "tx_bytes", now, 60'000'000);
  ASSERT_TRUE(last60.has_value());
  EXPECT_NEAR(*last60, 2e9, 0.2e9) << "half at 1 GB/s, half at 3";
  // Nothing newer than half a window ago: unknown, not 0.
  EXPECT_FALSE(rates.Rate("z1-r01-h1/mlx5_0", "tx_bytes", now + 20'000'000, 30'000'000).has_value());
  EXPECT_FALSE(rates.Rate("z1-r02-h1/mlx5_0", "tx_bytes", now, 30'000'000).has_value());
  // A replayed older sample changes nothing.
  rates.Observe(Sample(v1::SCOPE_NIC, "z1-r01-h1/mlx5_0", "tx_bytes", kMatrixT0 + 10'000'000, 1'000'000'000'000));
  EXPECT_NEAR(*rates.Rate("z1-r01-h1/mlx5_0", "tx_bytes", now, 30'000'000), *last30, 1);
}

TEST(TrafficMatrix, SpreadsEachNicOverItsJobsRacksByTheirNics) {
  auto topo = Topology::FromYaml(kMatrixTopology, "test");
  ASSERT_TRUE(topo.ok()) << topo.status();
  TrafficRates rates;
  // Job A on racks 1, 2, 2 (h1 of rack 1, both of rack 2); job B on rack 3
  // and rack 1 h2. Every NIC sends 12 GB/s; r02-h2 does not report and its
  // RTSW port tells its rate instead. r03-h2 is in no job.
  Send(rates, v1::SCOPE_NIC, "z1-r01-h1/mlx5_0", 12e9, 40);
  Send(rates, v1::SCOPE_NIC, "z1-r02-h1/mlx5_0", 12e9, 40);
  Send(rates, v1::SCOPE_PORT, "z1-rtsw02/Ethernet1", 12e9, 40);
  Send(rates, v1::SCOPE_NIC, "z1-r03-h1/mlx5_0", 12e9, 40);
  Send(rates, v1::SCOPE_NIC, "z1-r01-h2/mlx5_0", 12e9, 40);
  Send(rates, v1::SCOPE_NIC, "z1-r03-h2/mlx5_0", 5e9, 40);
  rates.Observe(Sample(v1::SCOPE_PORT, "z1-rtsw03/Ethernet8", "link_up", kMatrixT0 + 40'000'000, std::nullopt, 0));
  rates.Observe(Sample(v1::SCOPE_PORT, "z1-rtsw01/Ethernet8", "link_up", kMatrixT0 + 40'000'000, std::nullopt, 1));
  const auto m = BuildTrafficMatrix(**topo, {Job("A", {"z1-r01-h1", "z1-r02-h1", "z1-r02-h2"}),
                                             Job("B", {"z1-r03-h1", "z1-r01-h2"})},
                                    rates, kMatrixT0 + 40'000'000, 30'000'000);
  std::map<std::pair<std::string, std::string>, double> demand;
  for (const auto& d : m.demands()) demand[{d.ingress(), d.dst_prefix()}] = d.bytes_per_s();
  // r01-h1's peers are both in rack 2.
  EXPECT_NEAR((demand[{"z1-rtsw01/Ethernet0", "10.1.2.0/24"}]), 12e9, 1e6);
  // r02-h1's peers: one in rack 1, one in its own rack.
  EXPECT_NEAR((demand[{"z1-rtsw02/Ethernet0", "10.1.1.0/24"}]), 6e9, 1e6);
  EXPECT_NEAR((demand[{"z1-rtsw02/Ethernet0", "10.1.2.0/24"}]), 6e9, 1e6);
  // From the port counter.
  EXPECT_NEAR((demand[{"z1-rtsw02/Ethernet1", "10.1.1.0/24"}]), 6e9, 1e6);
  EXPECT_NEAR((demand[{"z1-rtsw03/Ethernet0", "10.1.1.0/24"}]), 12e9, 1e6);
  EXPECT_NEAR((demand[{"z1-rtsw01/Ethernet1", "10.1.3.0/24"}]), 12e9, 1e6);
  EXPECT_EQ(m.nics_from_nic_counters(), 5u);
  EXPECT_EQ(m.nics_from_port_counters(), 1u);
  EXPECT_EQ(m.nics_unattributed(), 1u);
  EXPECT_NEAR(m.unattributed_bytes_per_s(), 5e9, 1e6);
  std::map<std::pair<std::string, std::string>, double> racks;
  for (const auto& r : m.racks()) racks[{r.src_prefix(), r.dst_prefix()}] = r.bytes_per_s();
  EXPECT_NEAR((racks[{"10.1.2.0/24", "10.1.1.0/24"}]), 12e9, 1e6);
  EXPECT_NEAR((racks[{"10.1.1.0/24", "10.1.2.0/24"}]), 12e9, 1e6);
  ASSERT_EQ(m.down_ports_size(), 1);
  EXPECT_EQ(m.down_ports(0), "z1-rtsw03/Ethernet8");
}

TEST(TrafficMatrix, NoCountersSaysSoInsteadOfAnEmptyAnswer) {
  auto topo = Topology::FromYaml(kMatrixTopology, "test");
  ASSERT_TRUE(topo.ok());
  TrafficRates rates;
  const auto m = BuildTrafficMatrix(**topo, {Job("A", {"z1-r01-h1", "z1-r02-h1"})}, rates, kMatrixT0, 30'000'000);
  EXPECT_EQ(m.demands_size(), 0);
  ASSERT_EQ(m.notes_size(), 1);
  EXPECT_NE(m.notes(0).find("no NIC or RTSW port"), std::string::npos);
}

// Collective records of `job`: `bytes` of `op` at `t`.
v1::TelemetryBatch Records(const std::string& job, const std::string& op, int64_t t, uint64_t bytes) {
  v1::TelemetryBatch batch;
  auto* r = batch.add_collectives();
  r->set_job(job);
  r->set_op(op);
  r->set_timestamp_us(t);
  r->set_bytes(bytes);
  return batch;
}

TEST(TrafficMatrix, RingJobsSendRailToRailToTheNextHostInRankOrder) {
  auto topo = Topology::FromYaml(kMatrixTopology, "test");
  ASSERT_TRUE(topo.ok());
  TrafficRates rates;
  // r03-h1 reports nothing: as a member of its job's collectives it sends
  // what the others of its job send. r02-h1 sends less than its job's mean.
  for (const char* nic : {"z1-r01-h1/mlx5_0", "z1-r01-h2/mlx5_0", "z1-r02-h2/mlx5_0", "z1-r03-h2/mlx5_0"})
    Send(rates, v1::SCOPE_NIC, nic, 10e9, 40);
  Send(rates, v1::SCOPE_NIC, "z1-r02-h1/mlx5_0", 6e9, 40);
  // Job R runs AllReduce (and a little AllToAll); its ranks are listed out
  // of order: rank order is r02-h1, r03-h1, r01-h1. Job A runs AllToAll.
  rates.Observe(Records("R", "AllReduce", kMatrixT0 + 30'000'000, 900));
  rates.Observe(Records("R", "AllToAll", kMatrixT0 + 31'000'000, 100));
  rates.Observe(Records("A", "AllToAll", kMatrixT0 + 30'000'000, 1000));
  v1::Job ring = Job("R", {"z1-r01-h1", "z1-r02-h1", "z1-r03-h1"});
  ring.mutable_ranks(0)->set_rank(2);
  ring.mutable_ranks(1)->set_rank(0);
  ring.mutable_ranks(2)->set_rank(1);
  const auto m = BuildTrafficMatrix(**topo, {ring, Job("A", {"z1-r01-h2", "z1-r02-h2", "z1-r03-h2"})}, rates,
                                    kMatrixT0 + 40'000'000, 30'000'000);
  EXPECT_EQ(m.job_patterns().at("R"), "ring");
  EXPECT_EQ(m.job_patterns().at("A"), "all_to_all");
  std::map<std::pair<std::string, std::string>, double> demand;
  for (const auto& d : m.demands()) demand[{d.ingress(), d.dst_prefix()}] = d.bytes_per_s();
  // The ring r02-h1 -> r03-h1 -> r01-h1 -> r02-h1, each at the job's mean.
  EXPECT_NEAR((demand[{"z1-rtsw02/Ethernet0", "10.1.3.0/24"}]), 8e9, 1e6);
  EXPECT_NEAR((demand[{"z1-rtsw03/Ethernet0", "10.1.1.0/24"}]), 8e9, 1e6);
  EXPECT_NEAR((demand[{"z1-rtsw01/Ethernet0", "10.1.2.0/24"}]), 8e9, 1e6);
  EXPECT_EQ((demand.count({"z1-rtsw01/Ethernet0", "10.1.3.0/24"})), 0u) << "not the ring's direction";
  // AllToAll: half to each other rack.
  EXPECT_NEAR((demand[{"z1-rtsw01/Ethernet1", "10.1.2.0/24"}]), 5e9, 1e6);
  EXPECT_NEAR((demand[{"z1-rtsw01/Ethernet1", "10.1.3.0/24"}]), 5e9, 1e6);
  // Records older than the window are not counted: R looks unknown later.
  const auto later = BuildTrafficMatrix(**topo, {ring}, rates, kMatrixT0 + 120'000'000, 30'000'000);
  EXPECT_EQ(later.job_patterns().at("R"), "spread");
}

TEST(RackUplinkLoad, BusiestAndMeanOverTheUplinksThatCarryTraffic) {
  auto topo = Topology::FromYaml(kMatrixTopology, "test");
  ASSERT_TRUE(topo.ok());
  TrafficRates rates;
  Send(rates, v1::SCOPE_PORT, "z1-rtsw01/Ethernet8", 0, 40);  // rx only: no tx rate yet
  for (int i = 0; i <= 40; ++i) {
    const int64_t t = kMatrixT0 + i * 1'000'000;
    auto tx = [&](const char* port, double bps) {
      rates.Observe(Sample(v1::SCOPE_PORT, port, "tx_bytes", t,
                           i == 0 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(bps))));
    };
    tx("z1-rtsw01/Ethernet8", 40e9);  // 80% of 400G
    tx("z1-rtsw02/Ethernet8", 10e9);  // 20%
    tx("z1-rtsw03/Ethernet8", 1e8);   // 0.2%: idle
    tx("z1-rtsw01/Ethernet0", 50e9);  // a host port, not an uplink
  }
  const auto load = RackUplinkLoad(**topo,
                                   {"z1-rtsw01/Ethernet8", "z1-rtsw02/Ethernet8", "z1-rtsw03/Ethernet8",
                                    "z1-rtsw01/Ethernet0", "z1-ctsw01/Ethernet0"},
                                   rates, kMatrixT0 + 40'000'000, 30'000'000);
  EXPECT_EQ(load.uplinks, 3u);
  EXPECT_EQ(load.loaded, 2u);
  EXPECT_NEAR(load.max_utilization, 0.8, 1e-6);
  EXPECT_NEAR(load.mean_loaded_utilization, 0.5, 1e-6);
}

TEST(ImbalanceHint, OnlyForADegradedJobWithNoCauseOnUnevenUplinks) {
  v1::DiagnoseJobResponse d;
  d.mutable_job()->set_id("4711");
  d.set_state("degraded");
  const UplinkLoad uneven{.uplinks = 16, .loaded = 8, .max_utilization = 1.0, .mean_loaded_utilization = 0.55};
  const std::string hint = ImbalanceHint(d, uneven);
  EXPECT_NE(hint.find("busiest at 100%, 1.82x the mean of the 8"), std::string::npos) << hint;
  EXPECT_NE(hint.find("--placement-from-registry --job 4711"), std::string::npos) << hint;
  // Even enough, too few links, healthy, or a cause found: no hint.
  EXPECT_EQ(ImbalanceHint(d, {.uplinks = 16, .loaded = 8, .max_utilization = 0.8, .mean_loaded_utilization = 0.6}), "");
  EXPECT_EQ(ImbalanceHint(d, {.uplinks = 3, .loaded = 3, .max_utilization = 1.0, .mean_loaded_utilization = 0.4}), "");
  v1::DiagnoseJobResponse healthy = d;
  healthy.set_state("healthy");
  EXPECT_EQ(ImbalanceHint(healthy, uneven), "");
  v1::DiagnoseJobResponse caused = d;
  caused.add_findings()->set_role("cause");
  EXPECT_EQ(ImbalanceHint(caused, uneven), "");
  caused.mutable_findings(0)->set_role("symptom");
  EXPECT_NE(ImbalanceHint(caused, uneven), "") << "a symptom alone is no cause";
}

}  // namespace
}  // namespace rocefab::collector
