// QoS as the controller compiles it and the lab's switches apply it: the
// shipped policy (lab/scenarios/policies/ecmp.yaml) and variants of it,
// compiled for every switch and applied to the model, which then marks,
// pauses, drops and watches its queues as each variant says.
#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <set>

#include "common/config_loader.h"
#include "controller/compiler.h"
#include "lab/fabric_model.h"
#include "lab/topology_gen.h"

namespace rocefab {
namespace {

// Four racks of two hosts with four NICs, two CTSWs.
std::shared_ptr<const Topology> Zone() {
  return *lab::BuildGenerated({.racks_per_zone = 4, .hosts_per_rack = 2, .nics_per_host = 4, .ctsw_per_zone = 2});
}

// The shipped policy, edited by `edit`, compiled and applied to every switch.
std::unique_ptr<lab::FabricModel> ModelWith(const std::string& scenario_yaml,
                                            const std::function<void(v1::QosPolicy*)>& edit) {
  auto topo = Zone();
  v1::Scenario scenario;
  EXPECT_TRUE(LoadYamlConfig(scenario_yaml, "s.yaml", &scenario).ok());
  auto model = lab::FabricModel::Create(topo, scenario);
  EXPECT_TRUE(model.ok()) << model.status();
  v1::Policy policy;
  const auto loaded = LoadYamlConfigFile(std::string(ROCEFAB_SOURCE_DIR) + "/lab/scenarios/policies/ecmp.yaml", &policy);
  EXPECT_TRUE(loaded.ok()) << loaded;
  edit(policy.mutable_qos());
  auto valid = controller::ValidatePolicy(policy);
  EXPECT_TRUE(valid.ok()) << valid.status();
  auto configs = controller::Compile(*topo, *valid, {}, 1);
  EXPECT_TRUE(configs.ok()) << configs.status();
  for (const auto& [name, config] : *configs) (*model)->SetAppliedConfig(config);
  return std::move(*model);
}

constexpr char kSpread[] = R"(jobs: [{id: "1", num_hosts: 8, placement: spread}])";

struct Totals {
  double marks = 0, pfc_tx = 0, drops = 0;
};
Totals Sum(const lab::FabricModel& model) {
  Totals t;
  for (const auto& port : model.ports()) {
    t.marks += port.c.queue_ecn_marked;
    t.pfc_tx += port.c.pfc_tx_frames;
    t.drops += port.c.queue_drops;
  }
  return t;
}

TEST(QosInTheLab, TheShippedPolicyIsWhatTheSwitchesApply) {
  auto model = ModelWith(kSpread, [](v1::QosPolicy*) {});
  const lab::SwitchQos& q = model->switch_qos(model->SwitchIndex("z1-rtsw01"));
  EXPECT_TRUE(q.managed);
  EXPECT_EQ(q.roce_tc, 3u);
  EXPECT_TRUE(q.lossless);
  EXPECT_TRUE(q.ecn);
  EXPECT_DOUBLE_EQ(q.kmin_bytes, 150000);
  EXPECT_DOUBLE_EQ(q.kmax_bytes, 1500000);
  EXPECT_DOUBLE_EQ(q.pmax, 0.1);
  EXPECT_DOUBLE_EQ(q.wd_detect_s, 0.2);
  EXPECT_DOUBLE_EQ(q.wd_restore_s, 0.4);
  EXPECT_EQ(q.wd_action, "drop");
  EXPECT_TRUE(q.control_priority);
}

// ECN thresholds removed: the queues DCQCN held between Kmin and Kmax now
// fill to XOFF, and their switches pause the hops feeding them.
TEST(QosInTheLab, WithoutEcnThresholdsPausesRiseWhereMarksWere) {
  auto with = ModelWith(kSpread, [](v1::QosPolicy*) {});
  auto without = ModelWith(kSpread, [](v1::QosPolicy* q) { q->clear_ecn(); });
  for (int i = 0; i < 6; ++i) {
    with->Step(0.5, nullptr);
    without->Step(0.5, nullptr);
  }
  const Totals a = Sum(*with), b = Sum(*without);
  std::cout << "shipped QoS: ECN marks " << a.marks << ", PFC frames sent " << a.pfc_tx << ", drops " << a.drops
            << ", busbw " << with->jobs()[0].busbw_gbs << " GB/s\n"
            << "without ECN: ECN marks " << b.marks << ", PFC frames sent " << b.pfc_tx << ", drops " << b.drops
            << ", busbw " << without->jobs()[0].busbw_gbs << " GB/s\n";
  ASSERT_GT(a.marks, 0) << "hash collisions congest some uplinks; DCQCN marks them";
  EXPECT_EQ(a.pfc_tx, 0);
  EXPECT_EQ(b.marks, 0);
  EXPECT_GT(b.pfc_tx, 0);
  EXPECT_EQ(a.drops + b.drops, 0) << "lossless either way";
  std::set<std::string> marking_queues, pausing_switches;
  for (const auto& port : with->ports())
    if (port.c.queue_ecn_marked > 0) marking_queues.insert(port.device + "/" + port.name);
  for (const auto& port : without->ports())
    if (port.c.pfc_tx_frames > 0) pausing_switches.insert(port.device);
  for (const std::string& name : marking_queues) {
    const auto& port = without->ports()[without->PortIndex(name)];
    EXPECT_GE(port.c.queue_depth_bytes, without->constants().xoff_bytes) << name << " fills to XOFF";
    EXPECT_TRUE(pausing_switches.count(port.device)) << port.device << " pauses the hops feeding " << name;
  }
  EXPECT_LE(without->jobs()[0].busbw_gbs, with->jobs()[0].busbw_gbs * 1.001);
}

// PFC on the RoCE priority decides lossless or lossy: with ECN off too, the
// same congestion pauses with PFC, and drops without it.
TEST(QosInTheLab, PfcOffOnTheRocePriorityTurnsPausesIntoDrops) {
  auto lossless = ModelWith(kSpread, [](v1::QosPolicy* q) { q->clear_ecn(); });
  auto lossy = ModelWith(kSpread, [](v1::QosPolicy* q) {
    q->clear_ecn();
    q->clear_pfc_priorities();
    q->clear_lossless_tcs();
  });
  EXPECT_FALSE(lossy->switch_qos(0).lossless);
  for (int i = 0; i < 6; ++i) {
    lossless->Step(0.5, nullptr);
    lossy->Step(0.5, nullptr);
  }
  const Totals a = Sum(*lossless), b = Sum(*lossy);
  std::cout << "no ECN, PFC on: PFC frames sent " << a.pfc_tx << ", drops " << a.drops << ", busbw "
            << lossless->jobs()[0].busbw_gbs << " GB/s\n"
            << "no ECN, PFC off: PFC frames sent " << b.pfc_tx << ", drops " << b.drops << ", busbw "
            << lossy->jobs()[0].busbw_gbs << " GB/s\n";
  EXPECT_GT(a.pfc_tx, 0);
  EXPECT_EQ(a.drops, 0);
  EXPECT_EQ(b.pfc_tx, 0) << "no PFC on the priority: nobody pauses";
  EXPECT_GT(b.drops, 0);
  // Go-back-N pays for every drop: the lossy fabric is the slower one.
  EXPECT_LT(lossy->jobs()[0].busbw_gbs, lossless->jobs()[0].busbw_gbs);
  double nak = 0;
  for (const auto& port : lossy->ports()) nak += port.c.out_of_sequence;
  EXPECT_GT(nak, 0) << "receivers see the holes";
}

// A full storm (the NIC never stops pausing). Returns the seconds during
// which pauses had spread beyond the storming link, and the model.
struct Spread {
  double seconds = 0;  // time with any other channel paused
  int widest = 0;      // most channels paused at once, besides the storming one
  double discarded = 0;  // most of the storming link's traffic its RTSW discarded at once
  std::unique_ptr<lab::FabricModel> model;
};
Spread StormWith(const std::function<void(v1::QosPolicy*)>& edit, double storm_s = 6) {
  Spread out;
  out.model = ModelWith(std::string(kSpread) +
                            "\nfaults: [{kind: pfc_storm, target: z1-r02-h1/mlx5_1, at_s: 1, duration_s: " +
                            std::to_string(storm_s) + ", pause_fraction: 1.0}]",
                        edit);
  lab::FabricModel& m = *out.model;
  const int storming = m.ports()[m.PortIndex("z1-r02-h1/mlx5_1")].in_channel;
  const double dt = 0.1;
  for (int i = 0; i < static_cast<int>((storm_s + 3) / dt); ++i) {
    m.Step(dt, nullptr);
    int paused = 0;
    for (size_t ch = 0; ch < m.channel_count(); ++ch)
      if (static_cast<int>(ch) != storming && m.ChannelPausedFraction(static_cast<int>(ch)) > 0.01) ++paused;
    if (paused > 0) out.seconds += dt;
    out.discarded = std::max(out.discarded, m.ChannelCongestionDrop(storming));
    out.widest = std::max(out.widest, paused);
  }
  return out;
}

TEST(QosInTheLab, ThePfcWatchdogBoundsAStormsSpread) {
  // A watchdog that only alerts leaves the storm to climb the fabric for as
  // long as it lasts.
  const Spread alert = StormWith([](v1::QosPolicy* q) { q->mutable_pfc_watchdog()->set_action("alert"); });
  std::cout << "watchdog alert only: pauses spread for " << alert.seconds << " s to up to " << alert.widest
            << " other channels\n";
  EXPECT_GT(alert.widest, 4) << "the storm pauses the RTSW's uplinks and the CTSWs' downlinks";
  EXPECT_NEAR(alert.seconds, 6, 0.25);
  // The shipped one (200 ms, drop) cuts it off within its detection time
  // (one 100 ms tick of the model later).
  const Spread drop = StormWith([](v1::QosPolicy*) {});
  std::cout << "watchdog 200 ms drop: pauses spread for " << drop.seconds << " s to up to " << drop.widest
            << " other channels\n";
  EXPECT_LE(drop.seconds, 0.2 + 0.1 + 1e-9);
  // A slower one lets it spread for about its detection time.
  const Spread slow = StormWith([](v1::QosPolicy* q) { q->mutable_pfc_watchdog()->set_detect_ms(2000); });
  std::cout << "watchdog 2000 ms drop: pauses spread for " << slow.seconds << " s to up to " << slow.widest
            << " other channels\n";
  EXPECT_GE(slow.seconds, 1.9);
  EXPECT_LE(slow.seconds, 2.0 + 0.1 + 1e-9);
  // The watchdog's own counters: one storm, detected once, restored once
  // the NIC has been quiet for the restoration time.
  lab::FabricModel& m = *drop.model;
  const std::string rtsw_port = m.topology().PeerOf(m.ports()[m.PortIndex("z1-r02-h1/mlx5_1")].link,
                                                    "z1-r02-h1/mlx5_1");
  const auto& port = m.ports()[m.PortIndex(rtsw_port)];
  EXPECT_EQ(port.c.pfcwd_detected, 1);
  EXPECT_EQ(port.c.pfcwd_restored, 1);
  EXPECT_EQ(drop.discarded, 1) << "drop: the stormed queue's packets are discarded";
  EXPECT_EQ(alert.discarded, 0);
  EXPECT_GT(port.c.pfc_rx_frames, 0) << "the pause frames still arrive and are counted";
}

// The strict-priority class carries CNPs: without one, DCQCN's feedback
// waits behind data and PFC takes over at a lower overload.
TEST(QosInTheLab, CnpsWithoutAPriorityClassLetPfcInEarlier) {
  auto with = ModelWith(kSpread, [](v1::QosPolicy*) {});
  auto without = ModelWith(kSpread, [](v1::QosPolicy* q) { q->set_strict_priority_tc(0); });
  EXPECT_FALSE(without->switch_qos(0).control_priority);
  for (int i = 0; i < 6; ++i) {
    with->Step(0.5, nullptr);
    without->Step(0.5, nullptr);
  }
  EXPECT_EQ(Sum(*with).pfc_tx, 0);
  EXPECT_GT(Sum(*without).pfc_tx, 0);
}

}  // namespace
}  // namespace rocefab
