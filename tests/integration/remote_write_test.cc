// Real peers for remote-write: a real VictoriaMetrics and a real Prometheus
// (Debian victoria-metrics and prometheus) receive every counter sample that
// two real host agents send to a real collector, read back through their
// PromQL HTTP API. VictoriaMetrics is stopped for a minute in the middle
// (ROCEFAB_TSDB_OUTAGE_S overrides the length); when it returns, the
// collector's durable cursor sends what it missed and no series has a gap.
#include <curl/curl.h>
#include <signal.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <fstream>
#include <thread>

#include "collector/store.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

using testing::BinDir;
using testing::Subprocess;

constexpr char kVictoria[] = "/usr/bin/victoria-metrics";
constexpr char kPrometheus[] = "/usr/bin/prometheus";
const char* kHosts[] = {"z1-r01-h1", "z1-r01-h2"};

std::string Escape(const std::string& text) {
  char* escaped = curl_easy_escape(nullptr, text.c_str(), static_cast<int>(text.size()));
  std::string out = escaped ? escaped : "";
  curl_free(escaped);
  return out;
}

// An instant PromQL query; the result array (empty on any failure).
nlohmann::json Query(const std::string& server, const std::string& expr) {
  auto body = testing::HttpGet(server, "/api/v1/query?query=" + Escape(expr));
  if (!body) return nlohmann::json::array();
  auto j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return nlohmann::json::array();
  return j["data"]["result"];
}

int64_t Scalar(const nlohmann::json& result) {
  if (!result.is_array() || result.empty()) return -1;
  return std::stoll(result[0]["value"][1].get<std::string>());
}

// Raw samples of every rocefab_nic_* series in the last 30 minutes: one
// count_over_time per metric name (it drops the name, so names cannot mix).
int64_t NicSamples(const std::string& server) {
  auto body = testing::HttpGet(server, "/api/v1/label/__name__/values");
  if (!body) return -1;
  auto names = nlohmann::json::parse(*body, nullptr, false);
  if (names.is_discarded() || !names.contains("data")) return -1;
  int64_t total = 0;
  for (const auto& name : names["data"]) {
    const std::string n = name.get<std::string>();
    if (n.rfind("rocefab_nic_", 0) != 0) continue;
    const int64_t count = Scalar(Query(server, "sum(count_over_time(" + n + "[30m]))"));
    if (count < 0) return -1;
    total += count;
  }
  return total;
}

// A gauge or counter of the collector's own /metrics, -1 when absent.
double Metric(const std::string& metrics_address, const std::string& series) {
  auto body = testing::HttpGet(metrics_address, "/metrics");
  if (!body) return -1;
  const size_t at = body->find(series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(body->substr(at + series.size() + 1));
}

class RemoteWritePeers : public ::testing::Test {
 protected:
  void StartVictoria() {
    victoria_ = std::make_unique<Subprocess>(Subprocess::Options{
        {kVictoria, "-httpListenAddr=" + victoria_addr_, "-storageDataPath=" + dir_ / "vm",
         "-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=ERROR"},
        {},
        dir_ / "vm.log",
        dir_ / "vm.log"});
    ASSERT_TRUE(testing::WaitFor([&] { return testing::HttpGet(victoria_addr_, "/health") == "OK"; },
                                 std::chrono::seconds(30)))
        << testing::ReadFile(dir_ / "vm.log");
  }
  // Samples VictoriaMetrics holds in the last 30 minutes, made visible first.
  int64_t VictoriaSamples() {
    testing::HttpGet(victoria_addr_, "/internal/force_flush");
    return NicSamples(victoria_addr_);
  }

  testing::TempDir dir_;
  testing::DevCa ca_{{"rocefab-collectord", "z1-r01-h1", "z1-r01-h2", "alice"}};
  std::string victoria_addr_ = "127.0.0.1:" + std::to_string(testing::FreeTcpPort());
  std::unique_ptr<Subprocess> victoria_;
};

TEST_F(RemoteWritePeers, EverySampleArrivesAtVictoriaMetricsAndPrometheusAcrossAnOutage) {
  if (!std::filesystem::exists(kVictoria) || !std::filesystem::exists(kPrometheus))
    GTEST_SKIP() << "needs the victoria-metrics and prometheus packages (make test installs them)";
  const char* outage_env = std::getenv("ROCEFAB_TSDB_OUTAGE_S");
  const int outage_s = outage_env ? std::atoi(outage_env) : 60;
  ASSERT_NO_FATAL_FAILURE(StartVictoria());
  const std::string prom = "127.0.0.1:" + std::to_string(testing::FreeTcpPort());
  std::ofstream(dir_ / "prometheus.yml") << "global:\n  scrape_interval: 1m\n";
  Subprocess prometheus({{kPrometheus, "--config.file=" + dir_ / "prometheus.yml",
                          "--storage.tsdb.path=" + dir_ / "tsdb", "--web.listen-address=" + prom,
                          "--web.enable-remote-write-receiver"},
                         {},
                         dir_ / "prometheus.log",
                         dir_ / "prometheus.log"});
  ASSERT_TRUE(testing::WaitFor([&] { return testing::HttpGet(prom, "/-/ready").has_value(); },
                               std::chrono::seconds(30)))
      << testing::ReadFile(dir_ / "prometheus.log");

  auto collector = testing::StartDaemon(
      {BinDir() + "/rocefab-collectord", "--listen", "127.0.0.1:0", "--db", dir_ / "collector.db",
       "--metrics-listen", "127.0.0.1:0", "--remote-write",
       "http://" + victoria_addr_ + "/api/v1/write", "--remote-write",
       "http://" + prom + "/api/v1/write", "--tls-ca", ca_.ca(), "--tls-cert", ca_.cert("rocefab-collectord"),
       "--tls-key", ca_.key("rocefab-collectord")},
      dir_ / "collector.log");
  ASSERT_TRUE(collector.process) << testing::ReadFile(dir_ / "collector.log");
  const std::string grpc = testing::StatusField(collector.status, "grpc");
  const std::string metrics = testing::StatusField(collector.status, "metrics");
  std::vector<testing::Daemon> hosts;
  for (const char* host : kHosts) {
    const std::string root = dir_ / host;
    testing::CopyTree(testing::FixturesDir() + "/hosts/" + host, root);
    hosts.push_back(testing::StartDaemon(
        {BinDir() + "/rocefab-hostd", "--collector", grpc, "--interval", "200ms", "--sysfs-root",
         root + "/sys", "--proc-root", root + "/proc", "--ethtool-dir", root + "/ethtool",
         "--host-name", host, "--no-netlink", "--tls-ca", ca_.ca(), "--tls-cert", ca_.cert(host), "--tls-key",
         ca_.key(host)},
        dir_ / (std::string(host) + ".log")));
    ASSERT_TRUE(hosts.back().process) << testing::ReadFile(dir_ / (std::string(host) + ".log"));
  }
  const std::string vm_write = "http://" + victoria_addr_ + "/api/v1/write";
  ASSERT_TRUE(testing::WaitFor([&] { return VictoriaSamples() > 1000; }, std::chrono::seconds(30)));

  // The outage: the collector keeps acking the agents and retries.
  // (SIGTERM: VictoriaMetrics acks a write before it reaches its disk, so
  // a SIGKILL would lose its own last second, which no sender can prevent.)
  victoria_->Signal(SIGTERM);
  victoria_->Wait();
  const std::string failed = "rocefab_collector_remote_write_samples_total{remote=\"" + vm_write +
                             "\",result=\"failed\"}";
  ASSERT_TRUE(testing::WaitFor([&] { return Metric(metrics, failed) > 0; }, std::chrono::seconds(20)));
  std::this_thread::sleep_for(std::chrono::seconds(std::max(0, outage_s - 5)));  // the outage itself
  const double pending_during = Metric(
      metrics, "rocefab_collector_remote_write_pending_samples{remote=\"" + vm_write + "\"}");
  EXPECT_GT(pending_during, 0) << "samples wait in the store while the receiver is down";
  ASSERT_NO_FATAL_FAILURE(StartVictoria());
  // A few more polls after it returns, then the agents stop.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (auto& h : hosts) h.process->Signal(SIGTERM);
  for (auto& h : hosts) EXPECT_EQ(h.process->Wait(), 0);

  // Both receivers catch up to everything the collector stored.
  collector::StoreOptions options;
  options.path = dir_ / "collector.db";
  options.read_only = true;
  auto store = collector::Store::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  auto local = (*store)->ReadSamples("", "", 0, INT64_MAX);
  ASSERT_TRUE(local.ok()) << local.status();
  const int64_t stored = static_cast<int64_t>(local->size());
  ASSERT_GT(stored, 5000);
  for (const std::string& remote : {vm_write, "http://" + prom + "/api/v1/write"}) {
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          return Metric(metrics, "rocefab_collector_remote_write_pending_samples{remote=\"" + remote +
                                     "\"}") == 0;
        },
        std::chrono::seconds(60)))
        << remote << "\n" << testing::ReadFile(dir_ / "collector.log");
  }
  int64_t at_vm = -1, at_prom = -1;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        at_vm = VictoriaSamples();
        at_prom = NicSamples(prom);
        return at_vm == stored && at_prom == stored;
      },
      std::chrono::seconds(30)))
      << "stored " << stored << ", VictoriaMetrics " << at_vm << ", Prometheus " << at_prom;

  // No gap: one series' raw samples at VictoriaMetrics, poll after poll
  // through the outage, with the values the agent sent.
  std::vector<int64_t> local_ts;
  uint64_t local_last = 0;
  for (const collector::SampleRow& r : *local)
    if (r.series.entity == "z1-r01-h1/mlx5_0" && r.series.counter == "rx_bytes") {
      local_ts.push_back(r.ts_us / 1000);
      local_last = r.value;
    }
  auto raw = Query(victoria_addr_,
                   "rocefab_nic_rx_bytes_total{host=\"z1-r01-h1\",device=\"mlx5_0\"}[30m]");
  ASSERT_EQ(raw.size(), 1u);
  const auto& values = raw[0]["values"];
  ASSERT_EQ(values.size(), local_ts.size());
  int64_t max_gap_ms = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t ts_ms = std::llround(values[i][0].get<double>() * 1000);
    EXPECT_EQ(ts_ms, local_ts[i]) << i;
    if (i > 0) max_gap_ms = std::max<int64_t>(max_gap_ms, ts_ms - std::llround(values[i - 1][0].get<double>() * 1000));
  }
  EXPECT_LT(max_gap_ms, 1000) << "a 200 ms poll leaves no second without a sample";
  EXPECT_EQ(std::stoull(values[values.size() - 1][1].get<std::string>()), local_last);
  std::cout << "[remote-write] stored=" << stored << " victoriametrics=" << at_vm
            << " prometheus=" << at_prom << " outage_s=" << outage_s << " max_gap_ms=" << max_gap_ms
            << "\n";
  collector.process->Signal(SIGTERM);
  EXPECT_EQ(collector.process->Wait(), 0);
  prometheus.Signal(SIGTERM);
  prometheus.Wait();
}

// Reads at scale: a collector whose local store holds nothing of a host
// answers `rocefab counters --since` from the TSDB that another collector's
// remote-write filled, with the same newest values and the same rates as
// the store that wrote them.
TEST_F(RemoteWritePeers, CountersOlderThanTheLocalStoreComeBackFromVictoriaMetrics) {
  if (!std::filesystem::exists(kVictoria)) GTEST_SKIP() << "needs the victoria-metrics package (make test installs it)";
  ASSERT_NO_FATAL_FAILURE(StartVictoria());
  const std::string vm_write = "http://" + victoria_addr_ + "/api/v1/write";
  auto writer = testing::StartDaemon({BinDir() + "/rocefab-collectord", "--listen", "127.0.0.1:0", "--db",
                                      dir_ / "writer.db", "--metrics-listen", "127.0.0.1:0", "--remote-write",
                                      vm_write, "--tls-ca", ca_.ca(), "--tls-cert", ca_.cert("rocefab-collectord"),
                                      "--tls-key", ca_.key("rocefab-collectord")},
                                     dir_ / "writer.log");
  ASSERT_TRUE(writer.process) << testing::ReadFile(dir_ / "writer.log");
  const std::string root = dir_ / "host";
  testing::CopyTree(testing::FixturesDir() + "/hosts/z1-r01-h1", root);
  // Job 4711's NCCL Inspector log (format v4.0): two ranks, one AllReduce
  // every 1.5 s over the last two minutes, slower in the second minute.
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::filesystem::create_directories(dir_ / "nccl-inspector-4711");
  {
    std::ofstream log(dir_ / "nccl-inspector-4711/z1-r01-h1-pid1000.log");
    for (int i = 0; i < 80; ++i) {
      const int64_t ts = now_us - 120'000'000 + i * 1'500'000;
      const double busbw = (i < 40 ? 380.0 : 190.0) + i % 3;
      log << nlohmann::json{{"header", {{"id", "0x5eed"}, {"comm_name", "llm"}, {"rank", i % 2}, {"n_ranks", 2},
                                        {"nnodes", 1}}},
                            {"metadata", {{"inspector_output_format_version", "v4.0"},
                                          {"dump_timestamp_us", ts},
                                          {"hostname", "z1-r01-h1"},
                                          {"pid", 1000}}},
                            {"coll_perf", {{"coll", "AllReduce"},
                                           {"coll_sn", i},
                                           {"coll_msg_size_bytes", 1 << 30},
                                           {"coll_exec_time_us", 5000 + 10 * i},
                                           {"coll_timing_source", "kernel_gpu"},
                                           {"coll_algobw_gbs", busbw / 2},
                                           {"coll_busbw_gbs", busbw}}}}
                 .dump()
          << "\n";
    }
  }
  auto host = testing::StartDaemon(
      {BinDir() + "/rocefab-hostd", "--collector", testing::StatusField(writer.status, "grpc"), "--interval",
       "200ms", "--sysfs-root", root + "/sys", "--proc-root", root + "/proc", "--ethtool-dir", root + "/ethtool",
       "--host-name", "z1-r01-h1", "--no-netlink", "--inspector-glob", dir_ / "nccl-inspector-*", "--tls-ca",
       ca_.ca(), "--tls-cert", ca_.cert("z1-r01-h1"), "--tls-key", ca_.key("z1-r01-h1")},
      dir_ / "hostd.log");
  ASSERT_TRUE(host.process) << testing::ReadFile(dir_ / "hostd.log");
  ASSERT_TRUE(testing::WaitFor([&] { return VictoriaSamples() > 2000; }, std::chrono::seconds(30)));
  host.process->Signal(SIGTERM);
  EXPECT_EQ(host.process->Wait(), 0);
  const std::string metrics = testing::StatusField(writer.status, "metrics");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return Metric(metrics, "rocefab_collector_remote_write_pending_samples{remote=\"" + vm_write + "\"}") == 0;
      },
      std::chrono::seconds(60)));
  writer.process->Signal(SIGTERM);
  EXPECT_EQ(writer.process->Wait(), 0);
  testing::HttpGet(victoria_addr_, "/internal/force_flush");

  // The reference: the writer's own store, which holds every sample.
  collector::StoreOptions options;
  options.path = dir_ / "writer.db";
  options.read_only = true;
  auto store = collector::Store::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  v1::GetCountersRequest request;
  request.set_host("z1-r01-h1");
  request.set_since_us(0);
  auto reference = (*store)->GetCounters(request);
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_GT(reference->size(), 20u);
  auto reference_timeline = (*store)->JobTimeline("4711", now_us - 30LL * 60 * 1'000'000, 10'000'000);
  ASSERT_TRUE(reference_timeline.ok()) << reference_timeline.status();
  ASSERT_GE(reference_timeline->size(), 12u) << testing::ReadFile(dir_ / "hostd.log");

  // A collector with an empty store and the TSDB as its history.
  auto reader = testing::StartDaemon({BinDir() + "/rocefab-collectord", "--listen", "127.0.0.1:0", "--db",
                                      dir_ / "reader.db", "--metrics-listen", "127.0.0.1:0", "--history-url",
                                      "http://" + victoria_addr_, "--tls-ca", ca_.ca(), "--tls-cert",
                                      ca_.cert("rocefab-collectord"), "--tls-key", ca_.key("rocefab-collectord")},
                                     dir_ / "reader.log");
  ASSERT_TRUE(reader.process) << testing::ReadFile(dir_ / "reader.log");
  std::string out, err;
  ASSERT_EQ(testing::RunCommand({BinDir() + "/rocefab", "--tls-ca", ca_.ca(), "--tls-cert", ca_.cert("alice"), "--tls-key", ca_.key("alice"), "--collector", testing::StatusField(reader.status, "grpc"),
                                 "counters", "--host", "z1-r01-h1", "--since", "30m", "-o", "json"},
                                &out, &err),
            0)
      << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  ASSERT_TRUE(j.contains("notes")) << out;
  EXPECT_NE(j["notes"][0].get<std::string>().find("read from the history TSDB"), std::string::npos);
  std::map<std::string, nlohmann::json> got;
  for (const auto& row : j["rows"]) {
    std::string key = row["entity"].get<std::string>() + "|" + row["counter"].get<std::string>();
    if (row.contains("prio")) key += "|" + std::to_string(row["prio"].get<int>());
    got[key] = row;
  }
  size_t compared = 0, rated = 0;
  for (const v1::CounterRow& want : *reference) {
    std::string key = want.entity() + "|" + want.counter();
    if (want.has_prio()) key += "|" + std::to_string(want.prio());
    ASSERT_TRUE(got.count(key)) << key << " is missing from the history answer";
    const nlohmann::json& row = got[key];
    // Protobuf's JSON mapping: 64-bit integers are strings.
    EXPECT_EQ(std::stoull(row["value"].get<std::string>()), want.value()) << key;
    EXPECT_EQ(std::stoll(row["timestamp_us"].get<std::string>()) / 1000, want.timestamp_us() / 1000)
        << key << " (ms: the TSDB's unit)";
    if (want.has_rate()) {
      ASSERT_TRUE(row["has_rate"].get<bool>()) << key;
      EXPECT_NEAR(row["rate_per_second"].get<double>(), want.rate_per_second(), 1e-6 * want.rate_per_second() + 1e-3)
          << key;
      ++rated;
    }
    ++compared;
  }
  EXPECT_GT(rated, 0u);
  std::cout << "[history] series=" << compared << " with rates=" << rated << "\n";

  // The job's collective timeline, read back as `rocefab job show` shows it.
  ASSERT_EQ(testing::RunCommand({BinDir() + "/rocefab", "--tls-ca", ca_.ca(), "--tls-cert", ca_.cert("alice"), "--tls-key", ca_.key("alice"), "--collector", testing::StatusField(reader.status, "grpc"),
                                 "job", "show", "4711", "--since", "30m", "--bucket", "10s", "-o", "json"},
                                &out, &err),
            0)
      << err;
  auto timeline = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(timeline.is_discarded()) << out;
  ASSERT_TRUE(timeline.contains("notes")) << out;
  const auto& points = timeline["points"];
  ASSERT_EQ(points.size(), reference_timeline->size()) << out;
  for (size_t i = 0; i < points.size(); ++i) {
    const v1::JobTimelinePoint& want = (*reference_timeline)[i];
    EXPECT_EQ(std::stoll(points[i]["start_us"].get<std::string>()), want.start_us()) << i;
    EXPECT_EQ(points[i]["op"], want.op());
    EXPECT_EQ(std::stoull(points[i]["records"].get<std::string>()), want.records()) << i;
    EXPECT_EQ(points[i]["ranks"].get<uint32_t>(), want.ranks()) << i;
    EXPECT_NEAR(points[i]["mean_busbw_gbs"].get<double>(), want.mean_busbw_gbs(), 1e-6) << i;
    EXPECT_NEAR(points[i]["min_busbw_gbs"].get<double>(), want.min_busbw_gbs(), 1e-6) << i;
    EXPECT_NEAR(points[i]["max_exec_time_us"].get<double>(), want.max_exec_time_us(), 1e-3) << i;
  }
  std::cout << "[history] timeline buckets=" << points.size() << "\n";
  EXPECT_GT(Metric(testing::StatusField(reader.status, "metrics"),
                   "rocefab_collector_history_queries_total{result=\"ok\"}"),
            0);

  // The TSDB gone: the CLI still answers from the local store (which holds
  // nothing older than 30 min here: rc 1, nothing matched), and says why the
  // older part is missing.
  victoria_->Signal(SIGTERM);
  victoria_->Wait();
  ASSERT_EQ(testing::RunCommand({BinDir() + "/rocefab", "--tls-ca", ca_.ca(), "--tls-cert", ca_.cert("alice"), "--tls-key", ca_.key("alice"), "--collector", testing::StatusField(reader.status, "grpc"),
                                 "counters", "--host", "z1-r01-h1", "--since", "30m"},
                                &out, &err),
            1)
      << err;
  EXPECT_NE(err.find("note: history unavailable"), std::string::npos) << err;
  reader.process->Signal(SIGTERM);
  EXPECT_EQ(reader.process->Wait(), 0);
}

}  // namespace
}  // namespace rocefab
