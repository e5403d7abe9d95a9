// What the lab writes must read back through the agents' real parsers as the
// very values the model holds: the lab feeds the daemons only through their
// real input formats.
#include "lab/outputs.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "agents/host/ethtool_stats.h"
#include "agents/host/host_poller.h"
#include "agents/switch/file_backend.h"
#include "common/config_loader.h"
#include "lab/topology_gen.h"
#include "tests/mocks/fake_clock.h"
#include "tests/support/test_support.h"

namespace rocefab::lab {
namespace {

class OutputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TopologyParams params;
    params.racks_per_zone = 2;
    params.hosts_per_rack = 2;
    params.nics_per_host = 2;
    params.ctsw_per_zone = 2;
    auto topo = Topology::Build(*GenerateTopology(params));
    ASSERT_TRUE(topo.ok());
    v1::Scenario scenario;
    ASSERT_TRUE(LoadYamlConfig(R"(
jobs: [{id: "4711", name: pretrain, num_hosts: 4, placement: spread}]
faults: [{kind: pfc_storm, target: z1-r02-h1/mlx5_1, at_s: 0, pause_fraction: 0.98}]
nic_stall_timeout_ms: 2000
)",
                               "s.yaml", &scenario)
                    .ok());
    auto model = FabricModel::Create(*topo, scenario);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    writer_ = std::make_unique<OutputWriter>(dir_.path(), *model_);
    ASSERT_TRUE(writer_->Init().ok());
    for (int i = 0; i < 4; ++i) {
      records_.clear();
      model_->Step(0.5, &records_);
    }
    ASSERT_TRUE(writer_->WriteCounters(1'700'000'000'000'000).ok());
    ASSERT_TRUE(writer_->WriteCollectives(records_, 1'700'000'000'000'000).ok());
  }
  testing::TempDir dir_;
  std::unique_ptr<FabricModel> model_;
  std::unique_ptr<OutputWriter> writer_;
  std::vector<CollectiveRecord> records_;
};

TEST_F(OutputsTest, HostdReadsBackTheModelsNicCounters) {
  const std::string root = dir_ / "hosts/z1-r02-h1";
  FsRoot sysfs(root + "/sys");
  hostd::TextEthtoolSource ethtool(root + "/ethtool");
  testing::FakeClock clock;
  hostd::HostPoller poller("z1-r02-h1", {&sysfs, &ethtool, nullptr}, clock);
  hostd::HostSnapshot snapshot = poller.Poll();
  ASSERT_EQ(snapshot.nics.size(), 2u);
  EXPECT_EQ(snapshot.health.skipped_values, 0u);
  EXPECT_EQ(snapshot.health.parse_errors, 0u);
  const hostd::NicReading& nic = snapshot.nics[1];
  EXPECT_EQ(nic.device, "mlx5_1");
  EXPECT_EQ(nic.netdev, "eth1");
  const PortState& port = model_->ports()[model_->PortIndex("z1-r02-h1/mlx5_1")];
  // Bytes travel as 4-byte words, so the last two bits are lost.
  EXPECT_NEAR(static_cast<double>(nic.counters.at("rx_bytes")), port.c.rx_bytes, 4);
  EXPECT_EQ(nic.counters.at("cnp_sent"), static_cast<uint64_t>(port.c.cnp_sent));
  EXPECT_GT(nic.per_prio.at("pfc_tx_pause_frames").at(3), 0u);
  EXPECT_EQ(nic.per_prio.at("pfc_tx_pause_frames").at(3), static_cast<uint64_t>(port.c.pfc_tx_frames));
  EXPECT_EQ(nic.per_prio.at("pfc_tx_pause_frames").at(0), 0u);
  // Stalled 2 s against a 2 s stall prevention timeout: warned at 1.7 s,
  // timed out at the last step.
  EXPECT_EQ(nic.counters.at("pause_storm_warnings"), 1u);
  EXPECT_EQ(nic.counters.at("pause_storm_errors"), 1u);
  EXPECT_EQ(nic.counters.at("rx_discards_phy"), static_cast<uint64_t>(port.c.rx_discards_phy));
  EXPECT_EQ(nic.rate_bytes_per_second, 50'000'000'000u);
  EXPECT_EQ(nic.link_up, true);
}

TEST_F(OutputsTest, SwitchdReadsBackTheModelsSwitchCounters) {
  switchd::FileBackend backend(dir_ / "switches", "z1-rtsw02");
  auto reading = backend.ReadCounters();
  ASSERT_TRUE(reading.ok()) << reading.status();
  EXPECT_EQ(reading->unknown_keys, 0u);
  EXPECT_EQ(reading->bad_values, 0u);
  // The RTSW port facing the storming NIC receives its pauses.
  const std::string peer = model_->topology().PeerOf(
      model_->topology().LinkOfPort("z1-r02-h1/mlx5_1"), "z1-r02-h1/mlx5_1");
  const std::string port_name = peer.substr(peer.find('/') + 1);
  const PortState& port = model_->ports()[model_->PortIndex(peer)];
  const auto& read = reading->ports.at(port_name);
  EXPECT_EQ(read.per_prio.at("pfc_rx_pause_frames").at(3), static_cast<uint64_t>(port.c.pfc_rx_frames));
  EXPECT_GT(read.per_prio.at("pfc_rx_pause_frames").at(3), 0u);
  EXPECT_EQ(read.port_queue.at("pfcwd_storms_detected").at(3), 1u);
  EXPECT_EQ(read.counters.at("link_up"), 1u);
  EXPECT_EQ(read.queues.at(3).count("queue_depth_bytes"), 1u);
}

TEST_F(OutputsTest, InspectorLinesHaveTheV4Fields) {
  ASSERT_FALSE(records_.empty());
  const std::string file = dir_ / "hosts/z1-r01-h1/nccl-inspector-4711/z1-r01-h1-pid20000.log";
  std::ifstream in(file);
  ASSERT_TRUE(in.good()) << file;
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    auto json = nlohmann::json::parse(line);
    EXPECT_EQ(json["metadata"]["inspector_output_format_version"], "v4.0");
    EXPECT_EQ(json["metadata"]["hostname"], "z1-r01-h1");
    EXPECT_EQ(json["header"]["n_ranks"], 8);
    EXPECT_EQ(json["header"]["nnodes"], 4);
    EXPECT_TRUE(json["header"]["id"].get<std::string>().starts_with("0x"));
    EXPECT_EQ(json["coll_perf"]["coll"], "AllReduce");
    EXPECT_EQ(json["coll_perf"]["coll_timing_source"], "kernel_gpu");
    const double algbw = json["coll_perf"]["coll_algobw_gbs"];
    const double busbw = json["coll_perf"]["coll_busbw_gbs"];
    EXPECT_NEAR(busbw, algbw * 2 * 7 / 8, 1e-3);
    const double exec_us = json["coll_perf"]["coll_exec_time_us"];
    EXPECT_NEAR(algbw, 268435456 / (exec_us / 1e6) / 1e9, algbw * 1e-3);
    ++lines;
  }
  // One line per collective this rank completed in the step.
  size_t of_rank0 = 0;
  for (const auto& rec : records_) of_rank0 += rec.rank == 0;
  EXPECT_EQ(static_cast<size_t>(lines), of_rank0);
  EXPECT_GT(lines, 1);
}

TEST(RateText, KernelFormat) {
  EXPECT_EQ(RateText(400), "400 Gb/sec (4X NDR)\n");
  EXPECT_EQ(RateText(100), "100 Gb/sec (4X EDR)\n");
  uint64_t bps = 0;
  EXPECT_TRUE(hostd::ParseRate(RateText(200), &bps));
  EXPECT_EQ(bps, 25'000'000'000u);
}

}  // namespace
}  // namespace rocefab::lab
