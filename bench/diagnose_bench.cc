// `rocefab job diagnose` over one hour of a 3,072-host job (24,576 ranks,
// the Llama 3 fabric): the collector's Query service answering DiagnoseJob
// in process, against a real SQLite file holding
//  - one NCCL Inspector record per rank every 30 s for an hour (2.9M rows),
//  - 2,000 anomalies spread over the hour and the fabric (storms with their
//    pause trees, flaps, link errors), 5% of them on the job's paths.
//
// The peer is the sqlite3 shell running the timeline aggregate diagnose
// needs, over the same file in the same run: the unavoidable cost of reading
// the hour. The ratio says what diagnose adds on top.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <random>

#include "collector/fabric_context.h"
#include "collector/query_service.h"
#include "collector/store.h"
#include "common/clock.h"
#include "common/strings.h"
#include "lab/topology_gen.h"
#include "tests/support/test_support.h"

namespace {

using namespace rocefab;

constexpr int64_t kHourUs = 3600LL * 1'000'000;
constexpr int64_t kEveryUs = 30LL * 1'000'000;

struct Fixture {
  testing::TempDir dir;
  std::unique_ptr<collector::Store> store;
  std::shared_ptr<const Topology> topology;
  int64_t end_us = 0;
  size_t records = 0;
};

Fixture& Setup() {
  static Fixture* f = [] {
    auto* fx = new Fixture;
    fx->topology = *Topology::Build(*lab::GenerateTopology(lab::Llama3Params()));
    fx->store = std::move(*collector::Store::Open({.path = fx->dir / "collector.db", .relaxed_durability = true}));
    const int64_t start = SystemClock::Instance().NowUs() - kHourUs;
    fx->end_us = start + kHourUs;
    v1::Job job;
    job.set_id("3072");
    job.set_name("llama3-405b");
    job.set_start_us(start);
    uint32_t rank = 0;
    for (const auto& host : fx->topology->proto().hosts())
      for (const auto& nic : host.nics()) {
        auto* r = job.add_ranks();
        r->set_rank(rank++);
        r->set_host(host.name());
        r->set_gpu(nic.gpu());
        r->set_nic(nic.name());
      }
    if (!fx->store->jobs().Start(job).ok()) std::abort();
    // The hour of collective records, one batch per host per dump.
    std::mt19937 rng(42);
    std::uniform_real_distribution<double> jitter(0.97, 1.03);
    uint64_t seq = 0;
    for (int64_t t = start; t < fx->end_us; t += kEveryUs) {
      ++seq;
      const double busbw = (t - start > kHourUs / 2 && t - start < kHourUs / 2 + 300'000'000) ? 88 : 144;
      std::vector<v1::TelemetryBatch> batches;
      batches.reserve(fx->topology->proto().hosts_size());
      uint32_t r = 0;
      for (const auto& host : fx->topology->proto().hosts()) {
        v1::TelemetryBatch& b = batches.emplace_back();
        b.set_agent_id(host.name());
        b.set_agent_boot_id("bench");
        b.set_seq(seq);
        b.set_created_us(t);
        for (int g = 0; g < host.nics_size(); ++g) {
          auto* rec = b.add_collectives();
          rec->set_job("3072");
          rec->set_comm("0xbench");
          rec->set_rank(r++);
          rec->set_n_ranks(24576);
          rec->set_host(host.name());
          rec->set_op("AllReduce");
          rec->set_seq(seq);
          rec->set_bytes(1 << 28);
          rec->set_busbw_gbs(busbw * jitter(rng));
          rec->set_algbw_gbs(rec->busbw_gbs() / 2);
          rec->set_exec_time_us(3700 * 144 / busbw);
          rec->set_timestamp_us(t);
          ++fx->records;
        }
      }
      std::vector<const v1::TelemetryBatch*> ptrs;
      for (const auto& b : batches) ptrs.push_back(&b);
      if (!fx->store->WriteBatches(ptrs, t).ok()) std::abort();
    }
    // Anomalies over the hour and the whole fabric.
    std::vector<v1::Anomaly> anomalies;
    const auto& links = fx->topology->proto().links();
    std::uniform_int_distribution<int> pick(0, links.size() - 1);
    std::uniform_int_distribution<int64_t> when(start, fx->end_us - 60'000'000);
    const char* kinds[] = {"pfc_storm", "pfc_pause", "link_flap", "link_errors", "silent_loss", "pfc_pause"};
    for (uint64_t id = 1; id <= 2000; ++id) {
      v1::Anomaly a;
      a.set_id(id);
      a.set_kind(kinds[id % 6]);
      a.set_entity(links[pick(rng)].a());
      a.set_start_us(when(rng));
      a.set_end_us(a.start_us() + 30'000'000);
      a.set_detected_us(a.start_us() + 1'000'000);
      a.set_updated_us(a.end_us());
      a.set_severity(v1::SEVERITY_WARNING);
      a.set_magnitude(0.5);
      if (a.kind() == "pfc_pause") a.set_caused_by(id - 1);
      auto* ev = a.add_evidence();
      ev->set_entity(a.entity());
      ev->set_counter("pfc_tx_pause_us");
      ev->set_total(1e6);
      anomalies.push_back(std::move(a));
    }
    v1::Anomaly regression;
    regression.set_id(2001);
    regression.set_kind("busbw_regression");
    regression.set_entity("3072");
    regression.set_job("3072");
    regression.set_start_us(start + kHourUs / 2);
    regression.set_end_us(start + kHourUs / 2 + 300'000'000);
    regression.set_magnitude(0.39);
    anomalies.push_back(regression);
    if (!fx->store->anomalies().Write(anomalies).ok()) std::abort();
    return fx;
  }();
  return *f;
}

void BM_DiagnoseJobOneHour(benchmark::State& state) {
  Fixture& f = Setup();
  collector::FabricContextSource context(f.topology, *f.store, "", {}, SystemClock::Instance());
  collector::AgentRegistry* agents = nullptr;
  prometheus::Registry registry;
  collector::CollectorMetrics metrics(registry);
  collector::AgentRegistry agent_registry(metrics);
  agents = &agent_registry;
  const Authorizer in_process({}, /*enforce=*/false);
  collector::QueryService query(*f.store, *agents, SystemClock::Instance(), in_process, &context);
  v1::DiagnoseJobRequest request;
  request.set_job("3072");
  request.set_window_us(kHourUs);
  request.set_at_us(f.end_us);
  size_t findings = 0;
  for (auto _ : state) {
    v1::DiagnoseJobResponse response;
    const grpc::Status status = query.DiagnoseJob(nullptr, &request, &response);  // in-process
    if (!status.ok()) {
      state.SkipWithError(status.error_message().c_str());
      return;
    }
    findings = static_cast<size_t>(response.findings_size());
    benchmark::DoNotOptimize(response);
  }
  state.counters["records"] = static_cast<double>(f.records);
  state.counters["findings"] = static_cast<double>(findings);
}
BENCHMARK(BM_DiagnoseJobOneHour)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

// The peer: the sqlite3 shell aggregating the same hour (what any tool
// reading these records must do at least).
void BM_Sqlite3ShellTimelineScan(benchmark::State& state) {
  Fixture& f = Setup();
  const std::string sql = StrCat(
      "SELECT (ts_us / 60000000) * 60000000 AS bucket, op, count(*), count(DISTINCT rank), avg(busbw_gbs), "
      "min(busbw_gbs), max(exec_time_us) FROM collectives WHERE job = '3072' AND ts_us >= ",
      f.end_us - kHourUs, " GROUP BY bucket, op ORDER BY bucket, op;");
  for (auto _ : state) {
    std::string out, err;
    if (testing::RunCommand({"/usr/bin/sqlite3", f.dir / "collector.db", sql}, &out, &err) != 0) {
      state.SkipWithError(err.c_str());
      return;
    }
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_Sqlite3ShellTimelineScan)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
