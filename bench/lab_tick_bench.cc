// rocefab-lab's model, the tick cost at Llama 3 scale (24,576 NICs, 3,072
// hosts, 1,680 switches) and at the demo's scale, in model-only mode.
//
//   BM_LlamaTick/<qps>     one Step of a job on all 3,072 hosts (AllReduce on
//                          8 rail rings), with a PFC storm active
//   BM_DemoTickWithFiles   one Step plus writing every host's sysfs/ethtool
//                          files and every switch's counters.json (demo fabric),
//                          on a tmpfs as `rocefab-lab run` does
#include <benchmark/benchmark.h>

#include "common/config_loader.h"
#include "lab/fabric_model.h"
#include "lab/outputs.h"
#include "lab/topology_gen.h"
#include "tests/support/test_support.h"

namespace {

using namespace rocefab;

std::shared_ptr<const Topology> LlamaTopology() {
  static auto topo = *Topology::Build(*lab::GenerateTopology(lab::Llama3Params()));
  return topo;
}

v1::Scenario Scenario(const std::string& yaml) {
  v1::Scenario scenario;
  if (!LoadYamlConfig(yaml, "bench.yaml", &scenario).ok()) std::abort();
  return scenario;
}

void BM_LlamaTick(benchmark::State& state) {
  const std::string yaml =
      "jobs: [{id: \"1\", num_hosts: 3072, qps_per_connection: " + std::to_string(state.range(0)) +
      "}]\nfaults: [{kind: pfc_storm, target: z3-r100-h1/mlx5_3, at_s: 0}]\n";
  auto model = lab::FabricModel::Create(LlamaTopology(), Scenario(yaml));
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  (*model)->Step(0.5, nullptr);  // routes are computed on the first step
  for (auto _ : state) (*model)->Step(0.5, nullptr);
  state.counters["flows"] = static_cast<double>((*model)->flow_count());
  state.counters["channels"] = static_cast<double>((*model)->channel_count());
  state.counters["busbw_gbs"] = (*model)->jobs()[0].busbw_gbs;
}
BENCHMARK(BM_LlamaTick)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DemoTickWithFiles(benchmark::State& state) {
  lab::TopologyParams params;  // the demo fabric: 16 hosts x 8 NICs, 12 switches
  auto topo = *Topology::Build(*lab::GenerateTopology(params));
  auto model = *lab::FabricModel::Create(
      topo, Scenario("jobs: [{id: \"4711\", num_hosts: 8, placement: spread}]\n"
                     "faults: [{kind: pfc_storm, target: z1-r03-h1/mlx5_3, at_s: 0}]\n"));
  // On a tmpfs, as rocefab-lab run places these trees.
  setenv("TMPDIR", "/dev/shm", 1);
  testing::TempDir dir;
  lab::OutputWriter writer(dir.path(), *model);
  if (!writer.Init().ok()) std::abort();
  std::vector<lab::CollectiveRecord> records;
  int64_t now = 1'700'000'000'000'000;
  for (auto _ : state) {
    records.clear();
    model->Step(0.5, &records);
    now += 500'000;
    if (!writer.WriteCounters(now).ok() || !writer.WriteCollectives(records, now).ok()) std::abort();
  }
  state.counters["files_per_tick"] =
      static_cast<double>(writer.files_written()) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_DemoTickWithFiles)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
