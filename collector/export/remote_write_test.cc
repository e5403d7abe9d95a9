// Remote-write requests as built from stored rows: names, labels and units
// as docs/metrics.md says, splits only between commits, the scope and
// counter filters, and the collective series. Delivery against real
// receivers is in tests/integration/remote_write_test.cc.
#include "collector/export/remote_write.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>

namespace rocefab::collector {
namespace {

SampleRow Row(v1::Scope scope, const std::string& entity, const std::string& counter, uint64_t value,
              uint64_t commit, int64_t prio = -1) {
  SampleRow r;
  r.series = SeriesInfo{scope, entity, scope == v1::SCOPE_NIC ? 1u : 0u, counter, prio, -1, v1::VALUE_KIND_COUNTER};
  r.ts_us = 1'700'000'000'123'456;
  r.value = value;
  r.commit = commit;
  return r;
}

// Stored rows as runs: one run of one series and one poll each.
struct Runs {
  std::deque<SeriesInfo> infos;
  CommitRuns runs;
  explicit Runs(const std::vector<SampleRow>& rows) {
    for (const SampleRow& row : rows) {
      infos.push_back(row.series);
      DecodedRun run;
      run.layout.entity_sizes = {1};
      run.layout.series = {static_cast<int64_t>(infos.size())};
      run.layout.gauge = {0};
      blocks::Poll p;
      p.commit = row.commit;
      p.ts_us = {row.ts_us};
      p.value = {row.value};
      p.delta = {0};
      p.flags = {0};
      run.polls.push_back(p);
      runs.runs.push_back(std::move(run));
      runs.series.push_back({&infos.back()});
    }
  }
};

std::vector<std::pair<prometheus::WriteRequest, uint64_t>> Build(const std::vector<SampleRow>& rows,
                                                                 const RemoteWriteOptions& options) {
  Runs runs(rows);
  SeriesOutCache cache;
  return BuildWriteRequests(runs.runs, options, &cache);
}

std::map<std::string, std::string> Labels(const prometheus::TimeSeries& ts) {
  std::map<std::string, std::string> out;
  for (const auto& l : ts.labels()) out[l.name()] = l.value();
  return out;
}

TEST(RemoteWrite, SeriesCarryTheDocumentedNamesLabelsAndUnits) {
  RemoteWriteOptions options;
  options.extra_labels = {{"cluster", "a"}};
  auto requests = Build({Row(v1::SCOPE_NIC, "z1-r01-h1/mlx5_0", "pfc_rx_pause_us", 2'500'000, 1, 3),
                                      Row(v1::SCOPE_PORT, "z1-rtsw01/Ethernet0", "rx_bytes", 42, 1),
                                      Row(v1::SCOPE_NIC, "z1-r01-h1/mlx5_0", "not_a_counter", 1, 1)},
                                     options);
  ASSERT_EQ(requests.size(), 1u);
  const auto& [request, last] = requests[0];
  EXPECT_EQ(last, 1u);
  ASSERT_EQ(request.timeseries_size(), 2) << "a name outside the vocabulary is not sent";
  auto nic = Labels(request.timeseries(0));
  EXPECT_EQ(nic["__name__"], "rocefab_nic_pfc_rx_pause_seconds_total");
  EXPECT_EQ(nic["host"], "z1-r01-h1");
  EXPECT_EQ(nic["device"], "mlx5_0");
  EXPECT_EQ(nic["port"], "1");
  EXPECT_EQ(nic["prio"], "3");
  EXPECT_EQ(nic["cluster"], "a");
  EXPECT_DOUBLE_EQ(request.timeseries(0).samples(0).value(), 2.5) << "microseconds become seconds";
  EXPECT_EQ(request.timeseries(0).samples(0).timestamp(), 1'700'000'000'123) << "milliseconds";
  // Labels sorted by name, as the spec requires.
  std::string previous;
  for (const auto& l : request.timeseries(1).labels()) {
    EXPECT_LT(previous, l.name());
    previous = l.name();
  }
  EXPECT_EQ(Labels(request.timeseries(1))["switch"], "z1-rtsw01");
}

TEST(RemoteWrite, RequestsSplitOnlyBetweenCommitsAndFiltersApply) {
  RemoteWriteOptions options;
  options.max_samples_per_request = 2;
  std::vector<SampleRow> rows;
  for (uint64_t commit = 1; commit <= 3; ++commit)
    for (int i = 0; i < 3; ++i) rows.push_back(Row(v1::SCOPE_NIC, "h/mlx5_0", "rx_bytes", commit * 10 + i, commit));
  auto requests = Build(rows, options);
  ASSERT_EQ(requests.size(), 3u) << "three samples of one commit stay together past the limit";
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(requests[i].second, i + 1);
  options.scopes = {v1::SCOPE_PORT};
  size_t samples = 0;
  for (const auto& [request, last] : Build(rows, options))
    for (const auto& ts : request.timeseries()) samples += ts.samples_size();
  EXPECT_EQ(samples, 0u);
}

TEST(RemoteWrite, CollectiveRecordsBecomeBusbwAndKernelTimeSeries) {
  RemoteWriteOptions options;
  CollectiveRow row;
  row.record.set_job("4711");
  row.record.set_comm("0x1f");
  row.record.set_op("AllReduce");
  row.record.set_rank(5);
  row.record.set_host("z1-r01-h1");
  row.record.set_busbw_gbs(123.5);
  row.record.set_exec_time_us(4650);
  row.record.set_timestamp_us(1'700'000'000'000'000);
  auto requests = BuildCollectiveRequests({row, row}, options);
  ASSERT_EQ(requests.size(), 1u);
  ASSERT_EQ(requests[0].timeseries_size(), 2);
  auto busbw = Labels(requests[0].timeseries(0));
  EXPECT_EQ(busbw["__name__"], "rocefab_collective_busbw_gbs");
  EXPECT_EQ(busbw["job_id"], "4711");
  EXPECT_EQ(busbw["rank"], "5");
  EXPECT_EQ(busbw["op"], "AllReduce");
  EXPECT_EQ(requests[0].timeseries(0).samples_size(), 2);
  EXPECT_DOUBLE_EQ(requests[0].timeseries(1).samples(0).value(), 0.00465);
  options.scopes = {v1::SCOPE_NIC};
  EXPECT_TRUE(BuildCollectiveRequests({row}, options).empty()) << "scopes without coll leave them out";
}

TEST(RemoteWrite, ConfigErrorsNameTheKey) {
  v1::RemoteWriteConfig config;
  config.set_url("victoria:8428/api/v1/write");
  EXPECT_NE(std::string(ResolveRemoteWrite(config).status().message()).find("remote_write url"), std::string::npos);
  config.set_url("http://victoria:8428/api/v1/write");
  config.add_scopes("links");
  EXPECT_NE(std::string(ResolveRemoteWrite(config).status().message()).find("scopes"), std::string::npos);
  config.clear_scopes();
  config.add_scopes("coll");
  EXPECT_TRUE(ResolveRemoteWrite(config).ok());
  config.add_counters("rx_bites");
  EXPECT_NE(std::string(ResolveRemoteWrite(config).status().message()).find("rx_bites"), std::string::npos);
}

}  // namespace
}  // namespace rocefab::collector
