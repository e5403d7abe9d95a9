// /metrics at Llama 3 scale: the collector's latest values for every NIC
// (24,576, with the full mlx5 counter set) and every switch port (105,472
// ends of 52,736 links, plus their lossless queues), as after one poll of
// the whole fabric with a PFC storm's pause tree in it. Reports how many
// series a scrape carries with the default bounded export (top-K plus the
// entities anomalies name) against exporting every entity, and what one
// scrape's Collect costs.
#include <benchmark/benchmark.h>
#include <prometheus/text_serializer.h>

#include <chrono>

#include "collector/latest_values.h"
#include "common/counters.h"
#include "lab/topology_gen.h"

namespace {

using namespace rocefab;

const std::vector<v1::TelemetryBatch>& Batches() {
  static std::vector<v1::TelemetryBatch>* batches = [] {
    auto* out = new std::vector<v1::TelemetryBatch>;
    auto topo = *Topology::Build(*lab::GenerateTopology(lab::Llama3Params()));
    int n = 0;
    auto add = [&](v1::TelemetryBatch& b, v1::Scope scope, const std::string& entity, bool paused) {
      auto* e = b.add_entities();
      e->set_scope(scope);
      e->set_entity(entity);
      e->set_port(scope == v1::SCOPE_NIC ? 1 : 0);
      e->set_timestamp_us(1'800'000'000'000'000);
      for (const CounterDef& def : CountersOfScope(scope)) {
        const int prios = def.per_prio ? 8 : 1;
        for (int p = 0; p < prios; ++p) {
          auto* s = e->add_samples();
          s->set_counter(std::string(def.name));
          if (def.per_prio) s->set_prio(static_cast<uint32_t>(p));
          if (def.per_queue) s->set_queue(3);
          s->set_kind(def.kind);
          s->set_value(1000);
          const bool pause = paused && def.name.find("pause_us") != std::string_view::npos && p == 3;
          s->set_delta(pause ? 400'000 : 0);
        }
      }
      ++n;
    };
    for (const auto& host : topo->proto().hosts()) {
      v1::TelemetryBatch& b = out->emplace_back();
      for (const auto& nic : host.nics()) add(b, v1::SCOPE_NIC, host.name() + "/" + nic.name(), n % 997 == 0);
    }
    for (const auto& sw : topo->proto().switches()) {
      v1::TelemetryBatch& b = out->emplace_back();
      for (const auto& port : topo->PortsOf(sw.name())) {
        add(b, v1::SCOPE_PORT, sw.name() + "/" + port, n % 1999 == 0);
        add(b, v1::SCOPE_QUEUE, sw.name() + "/" + port, false);
      }
    }
    return out;
  }();
  return *batches;
}

void Run(benchmark::State& state, collector::ExportOptions options) {
  static auto topo = *Topology::Build(*lab::GenerateTopology(lab::Llama3Params()));
  collector::LatestValues latest(options, topo);
  for (const auto& b : Batches()) latest.Update(b);
  // 100 open anomalies name 100 NICs and switch ports.
  std::set<std::string> named;
  for (int i = 0; i < 50; ++i) named.insert(Batches()[static_cast<size_t>(i * 50)].entities(0).entity());
  for (int i = 0; i < 50; ++i) named.insert(Batches()[3072 + static_cast<size_t>(i * 30)].entities(0).entity());
  latest.SetHighlighted(named);
  size_t series = 0, bytes = 0;
  double collect_s = 0, serialize_s = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto families = latest.Collect();
    const auto t1 = std::chrono::steady_clock::now();
    series = 0;
    for (const auto& f : families) series += f.metric.size();
    bytes = prometheus::TextSerializer().Serialize(families).size();
    const auto t2 = std::chrono::steady_clock::now();
    collect_s += std::chrono::duration<double>(t1 - t0).count();
    serialize_s += std::chrono::duration<double>(t2 - t1).count();
    benchmark::DoNotOptimize(families);
  }
  // One scrape is Collect plus the text encoding; both are reported.
  state.counters["collect_ms"] = 1e3 * collect_s / static_cast<double>(state.iterations());
  state.counters["serialize_ms"] = 1e3 * serialize_s / static_cast<double>(state.iterations());
  state.counters["series"] = static_cast<double>(series);
  state.counters["scrape_bytes"] = static_cast<double>(bytes);
  state.counters["stored_series"] = static_cast<double>(latest.size());
}

void BM_ScrapeLlamaBounded(benchmark::State& state) { Run(state, collector::ExportOptions{}); }
void BM_ScrapeLlamaEveryEntity(benchmark::State& state) { Run(state, collector::ExportOptions{20, true}); }
BENCHMARK(BM_ScrapeLlamaBounded)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_ScrapeLlamaEveryEntity)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
