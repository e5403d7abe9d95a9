#include "lab/fabric_model.h"

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <set>

#include "common/config_loader.h"
#include "common/strings.h"
#include "lab/topology_gen.h"

namespace rocefab::lab {
namespace {

std::shared_ptr<const Topology> Fabric(uint32_t racks = 4, uint32_t hosts = 2, uint32_t nics = 4,
                                       uint32_t ctsw = 2) {
  TopologyParams params;
  params.racks_per_zone = racks;
  params.hosts_per_rack = hosts;
  params.nics_per_host = nics;
  params.ctsw_per_zone = ctsw;
  auto proto = GenerateTopology(params);
  EXPECT_TRUE(proto.ok()) << proto.status();
  auto topo = Topology::Build(*proto);
  EXPECT_TRUE(topo.ok()) << topo.status();
  return *topo;
}

v1::Scenario ScenarioFrom(const std::string& yaml) {
  v1::Scenario scenario;
  auto status = LoadYamlConfig(yaml, "test.yaml", &scenario);
  EXPECT_TRUE(status.ok()) << status;
  return scenario;
}

std::unique_ptr<FabricModel> Model(const std::string& yaml,
                                   std::shared_ptr<const Topology> topo = Fabric()) {
  auto model = FabricModel::Create(std::move(topo), ScenarioFrom(yaml));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

constexpr char kSpreadJob[] = R"(
jobs: [{id: "1", num_hosts: 8, placement: spread, qps_per_connection: 4}]
)";

TEST(BusBwFactor, FollowsNccl) {
  EXPECT_DOUBLE_EQ(BusBwFactor(v1::COLLECTIVE_ALL_REDUCE, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBwFactor(v1::COLLECTIVE_ALL_GATHER, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusBwFactor(v1::COLLECTIVE_REDUCE_SCATTER, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(BusBwFactor(v1::COLLECTIVE_ALL_TO_ALL, 8), 1.0);
}

TEST(FabricModel, FlowConservationAtEverySwitch) {
  auto model = Model(kSpreadJob);
  for (int i = 0; i < 4; ++i) model->Step(0.5, nullptr);
  std::map<std::string, double> in, out;
  double nic_tx = 0, nic_rx = 0;
  for (const PortState& port : model->ports()) {
    if (port.sw >= 0) {
      in[port.device] += port.c.rx_bytes;
      out[port.device] += port.c.tx_bytes;
    } else {
      nic_tx += port.c.tx_bytes;
      nic_rx += port.c.rx_bytes;
    }
  }
  EXPECT_GT(nic_tx, 1e9);
  EXPECT_NEAR(nic_tx, nic_rx, nic_tx * 1e-9);
  for (const auto& [sw, bytes] : in) EXPECT_NEAR(bytes, out[sw], bytes * 1e-9 + 1) << sw;
}

TEST(FabricModel, EcmpSpreadsQpsOverEveryUplink) {
  // 16 QPs per connection from one rack to another: the RTSW's 8 uplinks
  // (2 CTSWs x 4 parallel links) all carry some, none carries most.
  auto model = Model(R"(jobs: [{id: "1", hosts: [z1-r01-h1, z1-r02-h1], qps_per_connection: 16}])");
  model->Step(0.5, nullptr);
  std::vector<double> uplink_tx;
  for (const PortState& port : model->ports()) {
    if (port.device != "z1-rtsw01") continue;
    const std::string peer = model->topology().PeerOf(port.link, "z1-rtsw01/" + port.name);
    if (peer.starts_with("z1-ctsw")) uplink_tx.push_back(port.c.tx_bytes);
  }
  ASSERT_EQ(uplink_tx.size(), 8u);  // 2 CTSWs x 4 parallel links
  double total = 0;
  for (double b : uplink_tx) {
    EXPECT_GT(b, 0);
    total += b;
  }
  for (double b : uplink_tx) EXPECT_LT(b / total, 0.5);
}

TEST(FabricModel, CollisionsAreRecordedWhereFlowsShareAnUplinkWithOthersIdle) {
  // Two hosts in two racks, 4 NICs each, one QP per connection: rack 1's
  // NICs send over its RTSW's 8 uplinks, and rack 2's reach it over the
  // spines' links toward it. A NIC's flow fills a 400G link, so two on one
  // over-offer it while others idle: a collision, which every hash seed
  // either makes or not (pigeonhole on the links that carry traffic).
  int with = 0, without = 0;
  for (int seed = 1; seed <= 24; ++seed) {
    auto model = Model(StrCat("seed: ", seed, "\njobs: [{id: \"1\", hosts: [z1-r01-h1, z1-r02-h1], qps_per_connection: 1}]"));
    model->Step(0.5, nullptr);
    int senders = 0, used_uplinks = 0, used_toward = 0;
    for (const PortState& port : model->ports()) {
      if (port.device == "z1-r01-h1" && port.c.tx_bytes > 0) ++senders;
      if (port.c.tx_bytes <= 0 || port.sw < 0) continue;
      const std::string peer = model->topology().PeerOf(port.link, port.device + "/" + port.name);
      if (port.device == "z1-rtsw01" && peer.starts_with("z1-ctsw")) ++used_uplinks;
      if (port.device.starts_with("z1-ctsw") && peer.starts_with("z1-rtsw01/")) ++used_toward;
    }
    ASSERT_EQ(senders, 4) << "seed " << seed;
    const bool collided = used_uplinks < senders || used_toward < senders;
    EXPECT_EQ(model->collisions().count("z1-rtsw01") > 0, collided)
        << "seed " << seed << ": " << used_uplinks << " uplinks carry " << senders << " flows, " << used_toward
        << " links toward it carry rack 2's " << senders;
    (collided ? with : without)++;
  }
  EXPECT_GT(with, 0);
  EXPECT_GT(without, 0);
}

// An AllToAll across two zones sends half of each NIC's traffic over the
// CTSWs' uplinks to the ATSWs, 7:1 oversubscribed: the model records every
// CTSW over-offered as a group. The same job inside one zone, whose pod is
// not oversubscribed, over-offers no group.
TEST(FabricModel, OversubscriptionIsRecordedWhereAGroupIsOfferedMoreThanItCarries) {
  TopologyParams params;
  params.zones = 2;
  params.racks_per_zone = 2;
  params.hosts_per_rack = 2;
  params.nics_per_host = 4;
  params.ctsw_per_zone = 2;
  params.atsw = 2;
  auto topo = BuildGenerated(params);
  ASSERT_TRUE(topo.ok()) << topo.status();
  auto across = Model(R"(jobs: [{id: "1", hosts: [z1-r01-h1, z1-r02-h1, z2-r01-h1, z2-r02-h1],
                                  collective: all_to_all, qps_per_connection: 4}])",
                      *topo);
  ASSERT_NE(across, nullptr);
  across->Step(0.5, nullptr);
  for (const char* ctsw : {"z1-ctsw01", "z1-ctsw02", "z2-ctsw01", "z2-ctsw02"})
    EXPECT_EQ(across->oversubscribed().count(ctsw), 1u) << ctsw;
  auto inside = Model(R"(jobs: [{id: "1", hosts: [z1-r01-h1, z1-r01-h2, z1-r02-h1, z1-r02-h2],
                                  collective: all_to_all, qps_per_connection: 4}])",
                      *topo);
  ASSERT_NE(inside, nullptr);
  inside->Step(0.5, nullptr);
  EXPECT_TRUE(inside->oversubscribed().empty()) << inside->oversubscribed().begin()->first;
}

TEST(FabricModel, HashIsDeterministicAndSportSensitive) {
  auto model = Model(kSpreadJob);
  const int src = model->PortIndex("z1-r01-h1/mlx5_0");
  const int dst = model->PortIndex("z1-r03-h1/mlx5_0");
  EXPECT_EQ(model->Route(src, dst, 0xC001), model->Route(src, dst, 0xC001));
  std::set<std::vector<int>> paths;
  for (uint16_t sport = 0xC000; sport < 0xC040; ++sport) paths.insert(model->Route(src, dst, sport));
  EXPECT_GT(paths.size(), 2u);
  for (const auto& path : paths) EXPECT_EQ(path.size(), 4u);  // NIC-RTSW-CTSW-RTSW-NIC
}

double TotalPfc(const FabricModel& model, bool tx) {
  double total = 0;
  for (const PortState& port : model.ports()) total += tx ? port.c.pfc_tx_frames : port.c.pfc_rx_frames;
  return total;
}

TEST(FabricModel, NoPfcWhileEcnWorksEvenWithCongestion) {
  auto model = Model(R"(jobs: [{id: "1", num_hosts: 8, placement: spread}])");
  double max_util = 0;
  for (int i = 0; i < 6; ++i) {
    model->Step(0.5, nullptr);
    for (size_t ch = 0; ch < model->channel_count(); ++ch)
      max_util = std::max(max_util, model->ChannelUtilization(static_cast<int>(ch)));
  }
  double marked = 0;
  for (const PortState& port : model->ports()) marked += port.c.ecn_marked_packets;
  EXPECT_EQ(TotalPfc(*model, true), 0);
  EXPECT_GT(marked, 0) << "hash collisions congest some uplinks; DCQCN marks them";
}

TEST(FabricModel, PfcOnlyWhereEcnIsMisconfigured) {
  // Same traffic, but no queue of either CTSW marks: their congested queues
  // pass XOFF and pause the RTSW uplinks feeding them, and on upstream.
  auto model = Model(R"(
jobs: [{id: "1", num_hosts: 8, placement: spread}]
faults:
  - {kind: ecn_misconfig, target: z1-ctsw01, at_s: 0}
  - {kind: ecn_misconfig, target: z1-ctsw02, at_s: 0}
)");
  for (int i = 0; i < 6; ++i) model->Step(0.5, nullptr);
  ASSERT_GT(TotalPfc(*model, true), 0);
  double from_ctsw = 0;
  for (const PortState& port : model->ports()) {
    // Pauses come from switches only, starting at the CTSWs and climbing
    // hop by hop towards the senders; no NIC sends any.
    if (port.host >= 0) {
      EXPECT_EQ(port.c.pfc_tx_frames, 0) << port.device << "/" << port.name;
    }
    if (port.device.find("ctsw") != std::string::npos) from_ctsw += port.c.pfc_tx_frames;
  }
  EXPECT_GT(from_ctsw, 0);
}

// The same congestion with PFC off at every port of one CTSW: the links it
// ends are lossy for the class, so what its pauses (and the pauses toward
// it) would have held back is dropped, and it reports PFC off.
TEST(FabricModel, PfcOffOnASwitchDropsWhatPausesWouldHaveHeld) {
  auto run = [](bool pfc_off) {
    auto model = Model(std::string(R"(
jobs: [{id: "1", num_hosts: 8, placement: spread}]
faults:
  - {kind: ecn_misconfig, target: z1-ctsw01, at_s: 0}
  - {kind: ecn_misconfig, target: z1-ctsw02, at_s: 0}
)") + (pfc_off ? "  - {kind: pfc_misconfig, target: z1-ctsw01, at_s: 0}\n" : ""));
    for (int i = 0; i < 6; ++i) model->Step(0.5, nullptr);
    return model;
  };
  auto healthy = run(false), off = run(true);
  auto sum = [](const FabricModel& m, const std::string& device, bool drops) {
    double total = 0;
    for (const PortState& port : m.ports())
      if (device.empty() || port.device == device) total += drops ? port.c.queue_drops : port.c.pfc_tx_frames;
    return total;
  };
  EXPECT_EQ(sum(*healthy, "", true), 0) << "PFC holds the class: nothing drops";
  EXPECT_GT(sum(*healthy, "z1-ctsw01", false), 0);
  EXPECT_GT(sum(*off, "", true), 0) << "the excess PFC no longer holds is dropped";
  EXPECT_EQ(sum(*off, "z1-ctsw01", false), 0) << "no pause asked over a link without PFC";
  EXPECT_GT(sum(*off, "z1-ctsw02", false), 0) << "the other CTSW still pauses";
  for (const PortState& port : off->ports()) {
    if (port.sw >= 0) {
      EXPECT_EQ(port.pfc_on, port.device != "z1-ctsw01") << port.device << "/" << port.name;
    }
  }
}

TEST(FabricModel, PfcStormStartsAtTheNicAndSpreadsUpstream) {
  auto model = Model(R"(
jobs: [{id: "1", num_hosts: 8, placement: spread}]
faults: [{kind: pfc_storm, target: z1-r02-h1/mlx5_1, at_s: 1, pause_fraction: 0.9}]
)");
  model->Step(0.5, nullptr);
  model->Step(0.5, nullptr);
  EXPECT_EQ(TotalPfc(*model, true), 0) << "nothing before the fault";
  const double before = model->jobs()[0].busbw_gbs;
  for (int i = 0; i < 4; ++i) model->Step(0.5, nullptr);
  const PortState& nic = model->ports()[model->PortIndex("z1-r02-h1/mlx5_1")];
  EXPECT_GT(nic.c.pfc_tx_frames, 0);
  EXPECT_EQ(nic.c.pause_storm_warnings, 0) << "pausing 90% of the time is no stall to the NIC";
  // Its RTSW port receives the pauses; no other NIC sends any.
  for (const PortState& port : model->ports()) {
    if (port.host >= 0 && &port != &nic) {
      EXPECT_EQ(port.c.pfc_tx_frames, 0) << port.device << "/" << port.name;
    }
  }
  const int link = nic.link;
  const auto& peer = model->topology().PeerOf(link, "z1-r02-h1/mlx5_1");
  EXPECT_GT(model->ports()[model->PortIndex(peer)].c.pfc_rx_frames, 0);
  // Its queue still drains a tenth of the time: not a storm to the watchdog,
  // which waits for a queue that cannot drain at all.
  EXPECT_EQ(model->ports()[model->PortIndex(peer)].c.pfcwd_detected, 0);
  EXPECT_LT(model->jobs()[0].busbw_gbs, before * 0.8);
}

// mlx5's PFC stall prevention: a NIC that pauses without a break counts a
// warning at max(80 ms, 85% of its timeout) and an error at the timeout,
// then stops pausing and drops what it cannot receive; the queue that was
// paused drains. Off (0), it pauses for as long as it stalls.
TEST(FabricModel, ANicsStallPreventionWarnsThenStopsPausingAndDrops) {
  const char* faults = R"(
jobs: [{id: "1", num_hosts: 8, placement: spread}]
faults: [{kind: pfc_storm, target: z1-r02-h1/mlx5_1, at_s: 1, pause_fraction: 1.0}]
)";
  auto model = Model(StrCat(faults, "nic_stall_timeout_ms: 1000\n"));
  auto off = Model(StrCat(faults, "nic_stall_timeout_ms: 0\n"));
  const int n = model->PortIndex("z1-r02-h1/mlx5_1");
  const std::string peer = model->topology().PeerOf(model->ports()[n].link, "z1-r02-h1/mlx5_1");
  const int p = model->PortIndex(peer);
  auto step_to = [](FabricModel& m, double t) {
    while (m.now_s() + 1e-9 < t) m.Step(0.05, nullptr);
  };
  step_to(*model, 1.8);
  const PortCounters& c = model->ports()[n].c;
  EXPECT_EQ(c.pause_storm_warnings, 0) << "0.8 s into the stall, before the 850 ms watermark";
  step_to(*model, 1.9);
  EXPECT_EQ(c.pause_storm_warnings, 1);
  EXPECT_EQ(c.pause_storm_errors, 0);
  EXPECT_GT(model->ports()[p].c.pfc_rx_frames, 0) << "its switch port is paused";
  step_to(*model, 2.1);
  EXPECT_EQ(c.pause_storm_errors, 1) << "at the 1 s timeout";
  const double frames = c.pfc_tx_frames, drops = c.rx_discards_phy;
  const double received = model->ports()[p].c.pfc_rx_frames;
  step_to(*model, 3);
  EXPECT_EQ(c.pfc_tx_frames, frames) << "no pause after the timeout";
  EXPECT_EQ(model->ports()[p].c.pfc_rx_frames, received);
  EXPECT_GT(c.rx_discards_phy, drops) << "what it cannot take, it drops";
  EXPECT_LT(model->ports()[p].c.queue_depth_bytes, model->constants().xoff_bytes) << "the queue toward it drains";
  EXPECT_EQ(c.pause_storm_warnings, 1) << "one event per stall";
  EXPECT_EQ(c.pause_storm_errors, 1);

  step_to(*off, 3);
  const PortCounters& o = off->ports()[n].c;
  EXPECT_EQ(o.pause_storm_warnings + o.pause_storm_errors + o.rx_discards_phy, 0);
  EXPECT_GT(o.pfc_tx_frames, frames) << "without stall prevention it pauses on";
}

TEST(FabricModel, NicDownStallsTheJobAndCountsTheFlap) {
  auto model = Model(R"(
jobs: [{id: "1", num_hosts: 4}]
faults: [{kind: nic_down, target: z1-r01-h1/mlx5_2, at_s: 1, duration_s: 1}]
)");
  std::vector<CollectiveRecord> records;
  model->Step(0.5, &records);
  model->Step(0.5, &records);
  EXPECT_FALSE(model->jobs()[0].stalled);
  model->Step(0.5, &records);
  EXPECT_TRUE(model->jobs()[0].stalled);
  records.clear();
  model->Step(0.5, &records);
  EXPECT_TRUE(records.empty()) << "a hung collective completes nothing";
  EXPECT_EQ(model->ports()[model->PortIndex("z1-r01-h1/mlx5_2")].c.link_downed, 1);
  for (int i = 0; i < 2; ++i) model->Step(0.5, &records);
  EXPECT_FALSE(model->jobs()[0].stalled) << "recovers after the fault";
}

TEST(FabricModel, LossyLinkShowsAtReceiversAndTheLinksReceivers) {
  auto model = Model(R"(
jobs: [{id: "1", num_hosts: 8, placement: spread, qps_per_connection: 4}]
faults: [{kind: lossy_link, target: z1-r02-h1/mlx5_0, at_s: 0, drop_rate: 0.001}]
)");
  for (int i = 0; i < 4; ++i) model->Step(0.5, nullptr);
  const PortState& nic = model->ports()[model->PortIndex("z1-r02-h1/mlx5_0")];
  const std::string peer = model->topology().PeerOf(nic.link, "z1-r02-h1/mlx5_0");
  EXPECT_GT(model->ports()[model->PortIndex(peer)].c.rx_fcs_errors, 0);
  EXPECT_GT(nic.c.symbol_errors, 0);
  double fcs_elsewhere = 0, ooo = 0;
  for (const PortState& port : model->ports()) {
    if (port.device + "/" + port.name != peer) fcs_elsewhere += port.c.rx_fcs_errors;
    ooo += port.c.out_of_sequence;
  }
  EXPECT_EQ(fcs_elsewhere, 0);
  EXPECT_GT(ooo, 0);
  EXPECT_GT(nic.c.retransmits + nic.c.packet_seq_errors, 0) << "the sender behind the link retransmits";
}

TEST(FabricModel, StragglerIsFastestInItsOwnRecords) {
  auto model = Model(R"(
jobs: [{id: "1", num_hosts: 2, compute_ms: 50}]
faults: [{kind: straggler, target: z1-r01-h2/gpu2, at_s: 0, slowdown: 1.0}]
)");
  std::vector<CollectiveRecord> records;
  for (int i = 0; i < 4; ++i) model->Step(0.5, &records);
  ASSERT_FALSE(records.empty());
  // The straggler arrives late; everyone else waits for it inside the kernel.
  double straggler = 0, others = 0;
  for (const auto& rec : records) {
    if (rec.host == 1 && rec.gpu == 2) straggler = rec.exec_time_us;
    else others = rec.exec_time_us;
  }
  EXPECT_GT(straggler, 0);
  EXPECT_GT(others, straggler + 40000);
}

// Two stragglers in one job: every kernel ends when the later has arrived,
// so the later's is the shortest and the earlier's short by its own delay.
// Neither hides the other, and each counts as one that could show.
TEST(FabricModel, TwoStragglersInOneJobAreEachShortByTheirOwnDelay) {
  auto model = Model(R"(
jobs: [{id: "1", num_hosts: 2, compute_ms: 50}]
faults:
  - {kind: straggler, target: z1-r01-h2/gpu2, at_s: 0, slowdown: 1.0}
  - {kind: straggler, target: z1-r01-h1/gpu0, at_s: 0, slowdown: 0.4}
)");
  std::vector<CollectiveRecord> records;
  for (int i = 0; i < 4; ++i) model->Step(0.5, &records);
  ASSERT_FALSE(records.empty());
  double later = 0, earlier = 0, others = 0;
  for (const auto& rec : records) {
    if (rec.host == 1 && rec.gpu == 2) later = rec.exec_time_us;
    else if (rec.host == 0 && rec.gpu == 0) earlier = rec.exec_time_us;
    else others = rec.exec_time_us;
  }
  ASSERT_GT(later, 0);
  // 50 ms and 20 ms late: the others wait 50 ms, the earlier one 30 ms.
  EXPECT_NEAR(others - later, 50000, 5000);
  EXPECT_NEAR(others - earlier, 20000, 5000);
  ASSERT_EQ(model->faults().size(), 2u);
  EXPECT_TRUE(model->faults()[0].observable);
  EXPECT_TRUE(model->faults()[1].observable) << "the earlier straggler is not hidden by the later";
}

// A straggler on a job another fault keeps stalled runs no collective to
// be late in: it could not show, and the truth says so.
TEST(FabricModel, AStragglerOnAStalledJobIsNotObservable) {
  auto model = Model(R"(
jobs: [{id: "1", num_hosts: 2, compute_ms: 50}, {id: "2", num_hosts: 2, compute_ms: 50}]
faults:
  - {kind: nic_down, target: z1-r01-h1/mlx5_0, at_s: 0}
  - {kind: straggler, target: z1-r01-h2/gpu1, at_s: 1, slowdown: 0.3}
  - {kind: straggler, target: z1-r02-h1/gpu1, at_s: 1, slowdown: 0.3}
)");
  for (int i = 0; i < 6; ++i) model->Step(0.5, nullptr);
  ASSERT_EQ(model->faults().size(), 3u);
  EXPECT_TRUE(model->faults()[0].observable);
  EXPECT_FALSE(model->faults()[1].observable) << "its job is stalled by the NIC down the whole time";
  EXPECT_TRUE(model->faults()[2].observable) << "the other job runs";
  EXPECT_DOUBLE_EQ(model->faults()[2].observable_from_s, 1.0) << "from its start";
}

// A link slowed while its NIC is down negotiated no speed to show: the
// truth counts it from when the link is up again, not from its onset.
TEST(FabricModel, ASlowLinkHeldDownShowsOnlyOnceItIsUp) {
  auto model = Model(R"(
jobs: [{id: "1", num_hosts: 2, compute_ms: 50}]
faults:
  - {kind: nic_down, target: z1-r01-h1/mlx5_0, at_s: 0, duration_s: 2}
  - {kind: degraded_link, target: z1-r01-h1/mlx5_0, at_s: 1, speed_gbps: 100}
)");
  for (int i = 0; i < 4; ++i) model->Step(0.5, nullptr);
  ASSERT_EQ(model->faults().size(), 2u);
  EXPECT_FALSE(model->faults()[1].observable) << "its link is down";
  for (int i = 0; i < 2; ++i) model->Step(0.5, nullptr);
  EXPECT_TRUE(model->faults()[1].observable) << "up again, at 100G";
  EXPECT_DOUBLE_EQ(model->faults()[1].observable_from_s, 2.0);
}

// A straggler's few milliseconds on a job another fault made many times
// slower are within its kernels' jitter: below the slowdown stragglers are
// specified down to, it is not counted as one that could show.
TEST(FabricModel, AStragglerDwarfedByAnotherFaultsSlowdownIsNotObservable) {
  auto model = Model(R"(
jobs: [{id: "1", hosts: [z1-r01-h1, z1-r02-h1], compute_ms: 10}, {id: "2", hosts: [z1-r03-h1, z1-r04-h1], compute_ms: 10}]
faults:
  - {kind: degraded_link, target: z1-r01-h1/mlx5_0, at_s: 0, speed_gbps: 1}
  - {kind: straggler, target: z1-r02-h1/gpu1, at_s: 1, slowdown: 0.3}
  - {kind: straggler, target: z1-r04-h1/gpu1, at_s: 1, slowdown: 0.3}
)");
  for (int i = 0; i < 6; ++i) model->Step(0.5, nullptr);
  ASSERT_EQ(model->faults().size(), 3u);
  EXPECT_FALSE(model->faults()[1].observable) << "3 ms late in collectives a 1G link makes seconds long";
  EXPECT_TRUE(model->faults()[2].observable) << "3 ms late in a 10 ms compute step";
}

// Loss on a link no frame crosses corrupts nothing: a lossy link of a job
// that a NIC down or a NIC pausing without end keeps hung could not show.
// A hung job's flows keep their rates but send nothing (a generated run
// drew a storm's case, and scored the detectors for not naming a link that
// read no error).
TEST(FabricModel, ALossyLinkNoTrafficCrossesIsNotObservable) {
  for (const std::string hang : {"{kind: nic_down, target: z1-r01-h1/mlx5_0, at_s: 0}",
                                 "{kind: pfc_storm, target: z1-r01-h1/mlx5_0, at_s: 0, pause_fraction: 1}"}) {
    SCOPED_TRACE(hang);
    auto model = Model(R"(
jobs: [{id: "1", hosts: [z1-r01-h1, z1-r02-h1]}, {id: "2", hosts: [z1-r03-h1, z1-r04-h1]}]
faults:
  - )" + hang + R"(
  - {kind: lossy_link, target: z1-r02-h1/mlx5_0, at_s: 3, drop_rate: 0.01}
  - {kind: lossy_link, target: z1-r03-h1/mlx5_0, at_s: 3, drop_rate: 0.01}
)");
    for (int i = 0; i < 12; ++i) model->Step(0.5, nullptr);
    ASSERT_TRUE(model->jobs()[0].stalled) << "job 1 hangs";
    ASSERT_FALSE(model->jobs()[1].stalled);
    ASSERT_EQ(model->faults().size(), 3u);
    EXPECT_TRUE(model->faults()[0].observable);
    EXPECT_FALSE(model->faults()[1].observable) << "job 1 is hung, its links idle";
    EXPECT_TRUE(model->faults()[2].observable) << "job 2 runs across it";
  }
}

// ECN off shows only where marking would have held a queue: one over full
// with DCQCN senders and not held by pauses. A rack-local job's queues carry
// their flows at line rate and never reach Kmin, with ECN on or off.
TEST(FabricModel, EcnOffIsObservableOnlyWhereAQueueWouldHaveMarked) {
  auto local = Model(R"(
jobs: [{id: "1", hosts: [z1-r01-h1, z1-r01-h2]}]
faults: [{kind: ecn_misconfig, target: z1-rtsw01, at_s: 0}]
)");
  for (int i = 0; i < 6; ++i) local->Step(0.5, nullptr);
  ASSERT_EQ(local->faults().size(), 1u);
  EXPECT_FALSE(local->faults()[0].observable) << "the job crosses the switch, but no queue of it fills";
  EXPECT_EQ(TotalPfc(*local, true), 0);

  // The spread job's collisions fill CTSW queues that DCQCN held before.
  auto spread = Model(R"(
jobs: [{id: "1", num_hosts: 8, placement: spread}]
faults: [{kind: ecn_misconfig, target: z1-ctsw01, at_s: 0}, {kind: ecn_misconfig, target: z1-ctsw02, at_s: 0}]
)");
  for (int i = 0; i < 6; ++i) spread->Step(0.5, nullptr);
  ASSERT_EQ(spread->faults().size(), 2u);
  EXPECT_TRUE(spread->faults()[0].observable || spread->faults()[1].observable)
      << "a CTSW queue the collisions fill no longer marks";
  ASSERT_GT(TotalPfc(*spread, true), 0);
}

// ECN off shows as a deep queue whose mark counter did not move between two
// readings: it can show only once it has acted for a whole poll interval.
// Here a NIC of the job goes down (and hangs it) 1 s after ECN went off,
// under agents polling every 2 s: not observable. Three seconds after, it
// is, from when it began acting.
TEST(FabricModel, EcnOffIsObservableOnlyAfterActingForAWholePollInterval) {
  for (const double down_s : {2.0, 4.0}) {
    SCOPED_TRACE(down_s);
    auto model = Model(StrCat(R"(
poll_interval_s: 2
jobs: [{id: "1", num_hosts: 8, placement: spread}]
faults:
  - {kind: ecn_misconfig, target: z1-ctsw01, at_s: 1}
  - {kind: ecn_misconfig, target: z1-ctsw02, at_s: 1}
  - {kind: nic_down, target: z1-r01-h1/mlx5_0, at_s: )",
                              down_s, "}\n"));
    for (int i = 0; i < 16; ++i) model->Step(0.5, nullptr);
    ASSERT_TRUE(model->jobs()[0].stalled) << "the NIC down hangs the job";
    ASSERT_EQ(model->faults().size(), 3u);
    bool touched = false, observable = false;
    for (int i = 0; i < 2; ++i) {
      const ActiveFault& ecn = model->faults()[static_cast<size_t>(i)];
      touched |= !ecn.touched_jobs.empty();
      if (!ecn.observable) continue;
      observable = true;
      EXPECT_GE(ecn.observable_from_s, 1.0);
      EXPECT_LE(ecn.observable_from_s + 2.0, down_s) << "a whole interval of acting before the job hung";
    }
    EXPECT_TRUE(touched) << "ECN off acted on the job's queues";
    EXPECT_EQ(observable, down_s == 4.0);
  }
}

TEST(FabricModel, BusBwNearIdealWithoutContention) {
  // Two hosts in one rack: no uplinks, no collisions.
  auto model = Model(R"(jobs: [{id: "1", hosts: [z1-r01-h1, z1-r01-h2]}])");
  model->Step(0.5, nullptr);
  const JobStatus& job = model->jobs()[0];
  EXPECT_NEAR(job.busbw_gbs, job.ideal_busbw_gbs, job.ideal_busbw_gbs * 0.01);
  // AllReduce over 8 ranks of 400G NICs: busbw = r (n-1)/(H-1) ~ 50 GB/s * 7.
  EXPECT_NEAR(job.ideal_busbw_gbs, 50.0 * 7 / 1, 50.0 * 7 * 0.05);
}

TEST(FabricModel, ANoisyNeighbourRunsWhileItsFaultLastsAndSlowsTheJobWhoseUplinksItShares) {
  // Job 1 on the first host of every rack, job 2 (AllToAll) on the second:
  // every rack uplink carries both. Job 2 runs from 2 s to 4 s only.
  auto model = Model(R"(
jobs:
  - {id: "1", num_hosts: 4, placement: spread, qps_per_connection: 4}
  - {id: "2", num_hosts: 4, placement: spread, collective: all_to_all, message_bytes: 1073741824,
     qps_per_connection: 4, compute_ms: 2, start_s: 100}
faults: [{kind: job_contention, target: "2", victim: "1", at_s: 2, duration_s: 2}]
)",
                     Fabric(4, 2, 4, 1));
  ASSERT_NE(model, nullptr);
  std::map<double, std::pair<bool, double>> seen;  // time -> (job 2 running, job 1 busbw)
  for (int i = 0; i < 12; ++i) {
    model->Step(0.5, nullptr);
    seen[model->now_s()] = {model->jobs()[1].running, model->jobs()[0].busbw_gbs};
  }
  EXPECT_FALSE(seen[1.5].first) << "its start_s is ignored: the fault starts it";
  EXPECT_TRUE(seen[2.5].first && seen[3.5].first);
  EXPECT_FALSE(seen[4.5].first) << "it stops when the fault ends";
  const double alone = seen[1.5].second, shared = seen[3.5].second;
  EXPECT_LT(shared, 0.9 * alone) << "alone " << alone << " GB/s, beside the neighbour " << shared;
  EXPECT_NEAR(seen[6.0].second, alone, 0.02 * alone) << "it recovers once the neighbour is gone";
}

TEST(FabricModel, ALatencyRegressionSlowsTheJobsThroughTheSwitchAndMovesNoQueue) {
  // Job 1 spread over the racks crosses z1-ctsw01; job 2, inside one rack,
  // crosses no CTSW.
  auto model = Model(R"(
jobs:
  - {id: "1", num_hosts: 3, placement: spread, qps_per_connection: 4}
  - {id: "2", hosts: [z1-r04-h1, z1-r04-h2]}
faults: [{kind: latency_regression, target: z1-ctsw01, at_s: 2, added_latency_us: 500, os_version: lab-2.3}]
)");
  ASSERT_NE(model, nullptr);
  const int ctsw = model->SwitchIndex("z1-ctsw01");
  std::map<double, std::array<double, 2>> busbw;
  double deepest_before = 0, deepest_after = 0;
  for (int i = 0; i < 8; ++i) {
    model->Step(0.5, nullptr);
    busbw[model->now_s()] = {model->jobs()[0].busbw_gbs, model->jobs()[1].busbw_gbs};
    for (const PortState& p : model->ports())
      if (p.sw >= 0) (model->now_s() <= 2 ? deepest_before : deepest_after) =
                         std::max(model->now_s() <= 2 ? deepest_before : deepest_after, p.c.queue_depth_bytes);
    if (model->now_s() == 1.5) {
      EXPECT_EQ(model->SwitchOsVersion(ctsw), "lab-1.0");
    }
  }
  EXPECT_EQ(model->SwitchOsVersion(ctsw), "lab-2.3");
  EXPECT_EQ(model->SwitchOsVersion(model->SwitchIndex("z1-ctsw02")), "lab-1.0");
  EXPECT_LT(busbw[3.5][0], 0.9 * busbw[1.5][0]) << "every ring step of job 1 waits at z1-ctsw01";
  EXPECT_NEAR(busbw[3.5][1], busbw[1.5][1], 1e-9) << "job 2 never crosses it";
  EXPECT_LE(deepest_after, deepest_before * 1.01 + 1) << "no queue grows: latency is not congestion";
}

TEST(FabricModel, RejectsBadJobsAndFaults) {
  auto topo = Fabric();
  for (const char* yaml : {
           R"(jobs: [{id: "1", hosts: [nope, z1-r01-h1]}])",
           R"(jobs: [{id: "1", num_hosts: 99}])",
           R"(jobs: [{num_hosts: 2}])",
           R"(jobs: [{id: "1", num_hosts: 2, placement: random}])",
           R"(jobs: [{id: "1", num_hosts: 2}, {id: "2", hosts: [z1-r01-h1, z1-r02-h1]}])",
           R"(jobs: [{id: "1", num_hosts: 2}]
faults: [{kind: pfc_storm, target: z1-rtsw01/Ethernet0}])",
           R"(jobs: [{id: "1", num_hosts: 2}]
faults: [{kind: straggler, target: z1-r01-h1/mlx5_0}])",
           R"(jobs: [{id: "1", num_hosts: 2}]
faults: [{kind: lossy_link, target: z1-r01-h1/mlx5_0, drop_rate: 1.5}])",
           R"(jobs: [{id: "1", num_hosts: 2}]
faults: [{kind: ecn_misconfig, target: z1-r01-h1}])",
           R"(jobs: [{id: "1", num_hosts: 2}]
faults: [{kind: pfc_misconfig, target: z1-r01-h1/mlx5_0}])",
           R"(jobs: [{id: "1", num_hosts: 2}, {id: "2", num_hosts: 2}]
faults: [{kind: job_contention, target: "3", victim: "1"}])",
           R"(jobs: [{id: "1", num_hosts: 2}, {id: "2", num_hosts: 2}]
faults: [{kind: job_contention, target: "2"}])",
           R"(jobs: [{id: "1", num_hosts: 2}, {id: "2", num_hosts: 2}]
faults: [{kind: job_contention, target: "2", victim: "2"}])",
           R"(jobs: [{id: "1", num_hosts: 2}]
faults: [{kind: latency_regression, target: z1-r01-h1}])",
           R"(jobs: [{id: "1", num_hosts: 2}]
faults: [{kind: latency_regression, target: z1-ctsw01, added_latency_us: -1}])"}) {
    EXPECT_FALSE(FabricModel::Create(topo, ScenarioFrom(yaml)).ok()) << yaml;
  }
}

// A fault that acts only on the traffic through its target touches the
// jobs whose sending flows cross it, while it is active: a rack-local job
// never leaves its RTSW, so a CTSW's added latency does not touch it. A
// fault on a link is not judged that way, and one not yet begun has
// touched nothing.
TEST(FabricModel, AFaultOnTrafficTouchesOnlyTheJobsWhoseFlowsCrossIt) {
  auto model = Model(R"(
jobs: [{id: "1", hosts: [z1-r01-h1, z1-r01-h2]}, {id: "2", hosts: [z1-r03-h1, z1-r04-h1]}]
faults:
  - {kind: latency_regression, target: z1-ctsw01, at_s: 0}
  - {kind: lossy_link, target: z1-r03-h1/mlx5_0, at_s: 0, drop_rate: 0.01}
  - {kind: ecmp_skew, target: z1-rtsw01, at_s: 0}
  - {kind: latency_regression, target: z1-ctsw02, at_s: 100}
)");
  for (int i = 0; i < 4; ++i) model->Step(0.5, nullptr);
  const auto& faults = model->faults();
  ASSERT_EQ(faults.size(), 4u);
  EXPECT_TRUE(faults[0].acts_on_traffic);
  EXPECT_EQ(faults[0].touched_jobs, std::set<std::string>{"2"});
  EXPECT_FALSE(faults[1].acts_on_traffic);
  EXPECT_TRUE(faults[1].touched_jobs.empty());
  EXPECT_EQ(faults[2].touched_jobs, std::set<std::string>{"1"}) << "only the rack-local job crosses z1-rtsw01";
  EXPECT_TRUE(faults[3].acts_on_traffic);
  EXPECT_TRUE(faults[3].touched_jobs.empty()) << "not begun";
}

// A lowered drop threshold acts only on a queue that needed more than it.
// Two jobs cross the one CTSW, each between its own two racks; the CTSW's
// link to the first job's second rack runs at a quarter of its speed, so
// the CTSW's queue onto it fills, and at 500 KB it tail-drops. The first job is touched; the
// second crosses the CTSW (its added latency touches both) by queues that
// never fill, and is not. A threshold above what any queue needs drops
// nothing, touches no job, and could not show at all.
TEST(FabricModel, ADropThresholdTouchesOnlyTheJobsOfTheQueuesItDropped) {
  auto model = Model(R"(
jobs: [{id: "1", hosts: [z1-r01-h1, z1-r02-h1]}, {id: "2", hosts: [z1-r03-h1, z1-r04-h1]}]
faults:
  - {kind: degraded_link, target: z1-ctsw01/Ethernet4, at_s: 0, speed_gbps: 100}
  - {kind: buffer_threshold, target: z1-ctsw01, at_s: 0, queue_limit_bytes: 500000}
  - {kind: latency_regression, target: z1-ctsw01, at_s: 0}
)", Fabric(4, 1, 1, 1));
  for (int i = 0; i < 6; ++i) model->Step(0.5, nullptr);
  ASSERT_EQ(model->faults().size(), 3u);
  EXPECT_TRUE(model->faults()[1].observable);
  EXPECT_EQ(model->faults()[1].touched_jobs, std::set<std::string>{"1"});
  EXPECT_EQ(model->faults()[2].touched_jobs, (std::set<std::string>{"1", "2"}));

  auto roomy = Model(R"(
jobs: [{id: "1", hosts: [z1-r01-h1, z1-r02-h1]}, {id: "2", hosts: [z1-r03-h1, z1-r04-h1]}]
faults:
  - {kind: degraded_link, target: z1-ctsw01/Ethernet4, at_s: 0, speed_gbps: 100}
  - {kind: buffer_threshold, target: z1-ctsw01, at_s: 0, queue_limit_bytes: 100000000}
)", Fabric(4, 1, 1, 1));
  for (int i = 0; i < 6; ++i) roomy->Step(0.5, nullptr);
  ASSERT_EQ(roomy->faults().size(), 2u);
  EXPECT_FALSE(roomy->faults()[1].observable) << "no queue needs 100 MB";
  EXPECT_TRUE(roomy->faults()[1].touched_jobs.empty());
}

}  // namespace
}  // namespace rocefab::lab

namespace rocefab::lab {
namespace {

// Receiver-driven admission: a slow receiver (its link degraded to 100G)
// grants only what it can take, so its last hop never queues; under DCQCN
// the same incast sits between Kmin and Kmax and is marked.
TEST(FabricModelTransport, CtsAdmitsNoMoreThanASlowReceiverTakes) {
  auto run = [](const std::string& transport) {
    auto model = Model("transport: " + transport + R"(
jobs: [{id: "1", num_hosts: 8, placement: spread}]
faults: [{kind: degraded_link, target: z1-r02-h1/mlx5_1, at_s: 0, speed_gbps: 100}]
)");
    for (int i = 0; i < 6; ++i) model->Step(0.5, nullptr);
    return model;
  };
  auto dcqcn = run("dcqcn");
  auto cts = run("cts");
  ASSERT_FALSE(dcqcn->job_uses_cts(0));
  ASSERT_TRUE(cts->job_uses_cts(0));
  const std::string last_hop = dcqcn->topology().PeerOf(
      dcqcn->ports()[dcqcn->PortIndex("z1-r02-h1/mlx5_1")].link, "z1-r02-h1/mlx5_1");
  const PortState& d = dcqcn->ports()[dcqcn->PortIndex(last_hop)];
  const PortState& c = cts->ports()[cts->PortIndex(last_hop)];
  EXPECT_GE(d.c.queue_depth_bytes, dcqcn->constants().ecn_kmin_bytes) << "DCQCN holds it between Kmin and Kmax";
  EXPECT_GT(d.c.queue_ecn_marked, 0);
  EXPECT_LT(c.c.queue_depth_bytes, cts->constants().ecn_kmin_bytes) << "CTS admits no more than the receiver takes";
  double cnps = 0;
  for (const PortState& port : cts->ports()) cnps += port.c.cnp_sent;
  EXPECT_EQ(cnps, 0) << "DCQCN is off under CTS";
}

// What CTS does not do: collisions in the core are not at a receiver, and
// with DCQCN off nothing but PFC holds them. The same fabric and job that
// DCQCN holds with marks alone pause under CTS.
TEST(FabricModelTransport, UnderCtsCoreCollisionsArePausedNotMarked) {
  auto dcqcn = Model("transport: dcqcn\njobs: [{id: \"1\", num_hosts: 8, placement: spread}]");
  auto cts = Model("jobs: [{id: \"1\", num_hosts: 8, placement: spread, transport: cts}]");
  for (int i = 0; i < 6; ++i) {
    dcqcn->Step(0.5, nullptr);
    cts->Step(0.5, nullptr);
  }
  double dcqcn_marks = 0, cts_marks = 0;
  for (const PortState& port : dcqcn->ports()) dcqcn_marks += port.c.queue_ecn_marked;
  for (const PortState& port : cts->ports()) cts_marks += port.c.queue_ecn_marked;
  EXPECT_GT(dcqcn_marks, 0);
  EXPECT_EQ(TotalPfc(*dcqcn, true), 0);
  EXPECT_EQ(cts_marks, 0);
  EXPECT_GT(TotalPfc(*cts, true), 0);
}

TEST(FabricModelTransport, AnUnknownTransportIsAClearError) {
  auto model = FabricModel::Create(Fabric(), ScenarioFrom("jobs: [{id: \"1\", num_hosts: 2, transport: rdma}]"));
  ASSERT_FALSE(model.ok());
  EXPECT_NE(std::string(model.status().message()).find("transport 'rdma' is not dcqcn or cts"), std::string::npos);
}

}  // namespace
}  // namespace rocefab::lab
