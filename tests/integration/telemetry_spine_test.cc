// Tier 3: the telemetry spine as real processes on loopback. One
// rocefab-collectord and two rocefab-hostd over fixture hosts; checks the
// SQLite rows, the CLI and /metrics, then SIGKILLs the collector mid-stream
// and proves that no acknowledged batch is lost or stored twice.
#include <signal.h>
#include <sqlite3.h>

#include <filesystem>
#include <set>
#include <tuple>

#include "collector/store.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <sstream>

#include "tests/support/test_support.h"

namespace rocefab {
namespace {

using testing::BinDir;
using testing::NotifySocket;
using testing::Subprocess;
using testing::TempDir;

const char* kHosts[] = {"z1-r01-h1", "z1-r01-h2"};

// Read-only queries against the collector's live database (WAL allows it).
class Db {
 public:
  explicit Db(const std::string& path) {
    sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_busy_timeout(db_, 5000);
  }
  ~Db() { sqlite3_close(db_); }
  // The first column of the first row as an integer; -1 on error.
  int64_t Int(const std::string& sql, const std::vector<std::string>& args = {}) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) return -1;
    for (size_t i = 0; i < args.size(); ++i)
      sqlite3_bind_text(stmt, static_cast<int>(i + 1), args[i].c_str(), -1, SQLITE_TRANSIENT);
    int64_t value = -1;
    if (sqlite3_step(stmt) == SQLITE_ROW) value = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return value;
  }

 private:
  sqlite3* db_ = nullptr;
};

class TelemetrySpine : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* host : kHosts)
      testing::CopyTree(testing::FixturesDir() + "/hosts/" + host, dir_ / host);
  }

  void StartCollector(const std::string& listen = "127.0.0.1:0", const std::vector<std::string>& extra = {}) {
    NotifySocket notify;
    std::vector<std::string> argv = {BinDir() + "/rocefab-collectord", "--listen", listen, "--db", db_path(),
                                     "--metrics-listen", "127.0.0.1:0", "--metrics-all-entities", "--grant",
                                     "operator=alice,slurm"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    collector_ = std::make_unique<Subprocess>(Subprocess::Options{
        testing::With(argv, ca_.Flags("rocefab-collectord")),
        {{"NOTIFY_SOCKET", notify.path()}},
        dir_ / "collector.out",
        dir_ / "collector.log"});
    auto status = notify.WaitReady(std::chrono::seconds(20));
    ASSERT_TRUE(status.has_value()) << testing::ReadFile(dir_ / "collector.log");
    grpc_address_ = testing::StatusField(*status, "grpc");
    metrics_address_ = testing::StatusField(*status, "metrics");
    ASSERT_FALSE(grpc_address_.empty()) << *status;
  }

  void StartHostd(const std::string& host, const std::string& interval,
                  const std::vector<std::string>& extra = {}, const std::string& out_name = "") {
    NotifySocket notify;
    const std::string root = dir_ / host;
    std::vector<std::string> argv = {
        BinDir() + "/rocefab-hostd", "--collector", grpc_address_, "--interval", interval,
        "--sysfs-root", root + "/sys", "--proc-root", root + "/proc", "--ethtool-dir",
        root + "/ethtool", "--host-name", host, "--no-netlink"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    for (const auto& flag : ca_.Flags(host)) argv.push_back(flag);
    const std::string out = out_name.empty() ? host : out_name;
    hostds_.push_back(std::make_unique<Subprocess>(Subprocess::Options{
        argv, {{"NOTIFY_SOCKET", notify.path()}}, dir_ / (out + ".out"), dir_ / (out + ".log")}));
    auto status = notify.WaitReady(std::chrono::seconds(20));
    ASSERT_TRUE(status.has_value()) << testing::ReadFile(dir_ / (host + ".log"));
    hostd_status_ = *status;
  }

  int64_t Batches(const std::string& host) {
    Db db(db_path());
    return db.Int("SELECT batches FROM agents WHERE agent_id = ?1", {host});
  }

  // The collector's sample store, read beside the running collector.
  std::unique_ptr<collector::Store> OpenStore() {
    collector::StoreOptions options;
    options.path = db_path();
    options.read_only = true;
    auto store = collector::Store::Open(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // The newest stored value of a series, or -1.
  int64_t Latest(const std::string& entity, const std::string& counter) {
    auto store = OpenStore();
    if (!store) return -1;
    auto rows = store->ReadSamples(entity, counter, 0, INT64_MAX);
    if (!rows.ok() || rows->empty()) return -1;
    return static_cast<int64_t>(rows->back().value);
  }

  bool WaitForBatches(int64_t at_least, std::chrono::seconds timeout) {
    return testing::WaitFor(
        [&] {
          for (const char* host : kHosts)
            if (Batches(host) < at_least) return false;
          return true;
        },
        timeout);
  }

  int Cli(const std::vector<std::string>& args, std::string* out, std::string* err) {
    std::vector<std::string> argv = {BinDir() + "/rocefab", "--collector", grpc_address_};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const auto& flag : ca_.Flags("alice")) argv.push_back(flag);
    return testing::RunCommand(argv, out, err);
  }

  std::string db_path() const { return dir_ / "collector.db"; }

  testing::DevCa ca_{{"rocefab-collectord", "z1-r01-h1", "z1-r01-h2", "alice", "slurm"}};

  TempDir dir_;
  std::unique_ptr<Subprocess> collector_;
  std::vector<std::unique_ptr<Subprocess>> hostds_;
  std::string grpc_address_, metrics_address_;
  std::string hostd_status_;  // the last started hostd's STATUS= line
};

TEST_F(TelemetrySpine, TwoHostAgentsReportAndTheCliShowsThem) {
  ASSERT_NO_FATAL_FAILURE(StartCollector());
  for (const char* host : kHosts) ASSERT_NO_FATAL_FAILURE(StartHostd(host, "100ms"));
  ASSERT_TRUE(WaitForBatches(3, std::chrono::seconds(30)));

  {
    Db db(db_path());
    EXPECT_EQ(db.Int("SELECT count(*) FROM agents"), 2);
    // rx_bytes is port_rcv_data x 4.
    EXPECT_EQ(Latest("z1-r01-h1/mlx5_0", "rx_bytes"), 1'000'000'000);
    EXPECT_EQ(Latest("z1-r01-h2/mlx5_0", "rx_bytes"), 20'000'000'000);
    // N/A and garbage values never become series.
    EXPECT_EQ(db.Int("SELECT count(*) FROM series WHERE entity = 'z1-r01-h1/mlx5_1' AND "
                     "counter IN ('symbol_errors', 'rx_errors', 'link_error_recovery')"),
              0);
    auto store = OpenStore();
    ASSERT_TRUE(store);
    EXPECT_GT(store->ReadSamples("", "", 0, INT64_MAX)->size(), 100u);
  }

  // Traffic: the NIC receives 1 MB more; the rate shows up in the CLI.
  testing::WriteFile(dir_ / "z1-r01-h1/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data",
                     "250250000\n");
  std::string out, err;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        Cli({"counters", "--host", "z1-r01-h1", "--device", "mlx5_0", "--counter", "rx_bytes",
             "-o", "json", "--since", "1h"},
            &out, &err);
        auto json = nlohmann::json::parse(out, nullptr, false);
        // Protobuf's JSON mapping writes 64-bit integers as strings.
        return !json.is_discarded() && json["rows"].size() == 1 && json["rows"][0]["value"] == "1001000000";
      },
      std::chrono::seconds(20)))
      << out << err;
  auto counters = nlohmann::json::parse(out);
  EXPECT_EQ(counters["rows"][0]["entity"], "z1-r01-h1/mlx5_0");
  EXPECT_EQ(counters["rows"][0]["scope"], "SCOPE_NIC");
  EXPECT_TRUE(counters["rows"][0]["has_rate"].get<bool>());
  EXPECT_GT(counters["rows"][0]["rate_per_second"].get<double>(), 0.0);

  ASSERT_EQ(Cli({"agents", "-o", "json"}, &out, &err), 0) << err;
  auto agents = nlohmann::json::parse(out);
  ASSERT_EQ(agents["agents"].size(), 2u);
  for (const auto& agent : agents["agents"]) {
    EXPECT_TRUE(agent["connected"].get<bool>());
    EXPECT_GT(std::stoull(agent["samples"].get<std::string>()), 0u);
    EXPECT_EQ(agent["kind"], "AGENT_KIND_HOST");
    // The versions it reported with its first batch.
    EXPECT_TRUE(agent["components"].contains("rocefab-hostd")) << agent.dump();
    EXPECT_TRUE(agent["components"].contains("kernel")) << agent.dump();
  }
  EXPECT_EQ(agents["agents"][0]["agent_id"], "z1-r01-h1");
  EXPECT_GT(std::stoull(agents["agents"][0]["health"]["parse_errors"].get<std::string>()), 0u);  // the garbage file

  ASSERT_EQ(Cli({"agents"}, &out, &err), 0);
  EXPECT_NE(out.find("AGENT"), std::string::npos);
  EXPECT_NE(out.find("RECONNECTS"), std::string::npos);
  EXPECT_NE(out.find("z1-r01-h2"), std::string::npos);
  {
    // Every row has a cell under every header (LAST SEEN is two words).
    std::istringstream lines(out);
    std::string line;
    std::getline(lines, line);
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      int cells = 0;
      for (std::string w; words >> w;) ++cells;
      EXPECT_EQ(cells, 13) << line;
    }
  }
  // --top keeps the fastest-moving series: the NIC that just received 1 MB.
  ASSERT_EQ(Cli({"counters", "--host", "z1-r01-h1", "--since", "1h", "--top", "1", "-o", "json"},
                &out, &err),
            0)
      << err;
  auto top = nlohmann::json::parse(out)["rows"];
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0]["entity"], "z1-r01-h1/mlx5_0");
  EXPECT_EQ(top[0]["counter"], "rx_bytes");
  ASSERT_EQ(Cli({"counters", "--host", "z1-r01-h1", "--counter", "pfc_rx_pause_frames"}, &out, &err),
            0);
  EXPECT_NE(out.find("pfc_rx_pause_frames"), std::string::npos);
  EXPECT_NE(out.find("42"), std::string::npos) << out;

  // The job registry, as Slurm's prolog and epilog drive it.
  {
    const std::string prolog = std::string(ROCEFAB_SOURCE_DIR) + "/deploy/slurm/prolog.sh";
    Subprocess run({{"/bin/bash", prolog},
                    {{"PATH", BinDir() + ":/usr/bin:/bin"},
                     {"ROCEFAB_COLLECTOR", grpc_address_},
                     {"ROCEFAB_TLS_CA", ca_.ca()},
                     {"ROCEFAB_TLS_CERT", ca_.cert("slurm")},
                     {"ROCEFAB_TLS_KEY", ca_.key("slurm")},
                     {"SLURM_JOB_ID", "4711"},
                     {"SLURM_JOB_NAME", "llama-pretrain"},
                     {"SLURM_JOB_NODELIST", "z1-r01-h[1-2]"},
                     {"SLURM_GPUS_ON_NODE", "2"}},
                    dir_ / "prolog.out",
                    dir_ / "prolog.out"});
    ASSERT_EQ(run.Wait(), 0);
  }
  ASSERT_EQ(Cli({"job", "list", "-o", "json"}, &out, &err), 0) << err;
  {
    const nlohmann::json jobs = nlohmann::json::parse(out);
    ASSERT_EQ(jobs["jobs"].size(), 1u) << out << testing::ReadFile(dir_ / "prolog.out");
    EXPECT_EQ(jobs["jobs"][0]["id"], "4711");
    EXPECT_EQ(jobs["jobs"][0]["ranks"].size(), 4u);
    std::set<std::string> hosts;
    for (const auto& rank : jobs["jobs"][0]["ranks"]) hosts.insert(rank["host"].get<std::string>());
    EXPECT_EQ(hosts, (std::set<std::string>{"z1-r01-h1", "z1-r01-h2"}));
  }
  EXPECT_EQ(Cli({"job", "start", "--id", "4711", "--hostlist", "z1-r01-h1"}, &out, &err), 1);
  EXPECT_NE(err.find("already running"), std::string::npos) << err;
  EXPECT_EQ(Cli({"job", "start", "--id", "4712", "--hostlist", "z1-r01-h["}, &out, &err), 2);
  ASSERT_EQ(Cli({"job", "end", "4711"}, &out, &err), 0) << err;
  EXPECT_EQ(Cli({"job", "end", "4711"}, &out, &err), 1);
  ASSERT_EQ(Cli({"job", "list"}, &out, &err), 0);
  EXPECT_NE(out.find("no jobs"), std::string::npos);
  ASSERT_EQ(Cli({"job", "list", "--all"}, &out, &err), 0);
  EXPECT_NE(out.find("4711"), std::string::npos);

  // Usage errors exit 2; an unreachable collector exits 3.
  EXPECT_EQ(Cli({"counters", "--counter", "rx_bogons"}, &out, &err), 2);
  EXPECT_NE(err.find("not in the counter vocabulary"), std::string::npos);
  EXPECT_EQ(testing::RunCommand({BinDir() + "/rocefab", "--collector", "127.0.0.1:1", "--insecure",
                                 "--timeout-ms", "2000", "agents"},
                                &out, &err),
            3);
  EXPECT_NE(err.find("is rocefab-collectord running"), std::string::npos) << err;

  auto metrics = testing::HttpGet(metrics_address_, "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_NE(metrics->find("rocefab_nic_rx_bytes_total{host=\"z1-r01-h2\",device=\"mlx5_0\",port=\"1\"} 20000000000"),
            std::string::npos);
  EXPECT_NE(metrics->find("rocefab_nic_pfc_rx_pause_frames_total{host=\"z1-r01-h1\",device=\"mlx5_0\",port=\"1\",prio=\"3\"} 42"),
            std::string::npos);
  EXPECT_NE(metrics->find("rocefab_collector_connected_agents 2"), std::string::npos);
  // Summaries are there whatever the per-entity export (no topology: zone unknown).
  EXPECT_NE(metrics->find("rocefab_fabric_ports{zone=\"unknown\",tier=\"nic\"}"), std::string::npos) << *metrics;
  EXPECT_NE(metrics->find("rocefab_controller_reachable 0"), std::string::npos);
  EXPECT_NE(metrics->find("rocefab_collector_batches_total{result=\"stored\"}"), std::string::npos);
}

TEST_F(TelemetrySpine, SigkillOfTheCollectorLosesAndDuplicatesNoAckedBatch) {
  ASSERT_NO_FATAL_FAILURE(StartCollector());
  const std::string listen = grpc_address_;
  for (const char* host : kHosts) ASSERT_NO_FATAL_FAILURE(StartHostd(host, "20ms"));
  ASSERT_TRUE(WaitForBatches(25, std::chrono::seconds(30)));

  // Mid-stream: the agents are sending every 20 ms.
  collector_->Signal(SIGKILL);
  EXPECT_EQ(collector_->Wait(), 128 + SIGKILL);
  int64_t before_restart = 0;
  for (const char* host : kHosts) before_restart = std::max(before_restart, Batches(host));
  ASSERT_NO_FATAL_FAILURE(StartCollector(listen));
  ASSERT_TRUE(WaitForBatches(before_restart + 25, std::chrono::seconds(30)));

  // The agents' reconnects are visible centrally.
  std::string out, err;
  ASSERT_EQ(Cli({"agents", "-o", "json"}, &out, &err), 0) << err;
  const nlohmann::json parsed_agents = nlohmann::json::parse(out);
  for (const auto& agent : parsed_agents["agents"]) {
    EXPECT_GE(std::stoull(agent["delivery"]["stream_failures"].get<std::string>()), 1u) << agent.dump();
    EXPECT_EQ(agent["delivery"]["dropped_overflow"], "0");
  }

  for (auto& hostd : hostds_) hostd->Signal(SIGTERM);
  for (auto& hostd : hostds_) EXPECT_EQ(hostd->Wait(), 0);

  Db db(db_path());
  for (const char* host : kHosts) {
    const std::string report_text = testing::ReadFile(dir_ / (std::string(host) + ".out"));
    auto report = nlohmann::json::parse(report_text, nullptr, false);
    ASSERT_FALSE(report.is_discarded()) << report_text;
    const std::string boot = report["agent_boot_id"];
    const int64_t max_acked = report["max_acked_seq"];
    const int64_t last_seq = report["last_seq"];
    auto store = OpenStore();
    ASSERT_TRUE(store);
    auto seqs = store->GetStoredSeqs(host, boot);
    ASSERT_TRUE(seqs.ok()) << seqs.status();
    // Stored seqs: 1..watermark, plus any above it (a gap would leave some).
    int64_t acked_present = std::min<int64_t>(static_cast<int64_t>(seqs->watermark), max_acked);
    for (uint64_t seq : seqs->above)
      if (static_cast<int64_t>(seq) <= max_acked) ++acked_present;
    const int64_t stored = static_cast<int64_t>(seqs->watermark + seqs->above.size());
    const int64_t max_stored = static_cast<int64_t>(
        seqs->above.empty() ? seqs->watermark : std::max(seqs->watermark, *seqs->above.rbegin()));
    const int64_t declared = db.Int("SELECT samples FROM agents WHERE agent_id = ?1", {host});
    auto rows = store->ReadSamples("", "", 0, INT64_MAX);
    ASSERT_TRUE(rows.ok()) << rows.status();
    int64_t sample_rows = 0;
    std::set<std::tuple<std::string, std::string, int64_t, int64_t, int64_t>> distinct;
    for (const collector::SampleRow& r : *rows) {
      if (r.series.entity.rfind(std::string(host) + "/", 0) != 0) continue;
      ++sample_rows;
      distinct.emplace(r.series.entity, r.series.counter, r.series.prio, r.series.queue, r.ts_us);
    }
    const int64_t distinct_rows = static_cast<int64_t>(distinct.size());

    std::cout << "[accounting] " << host << ": last_seq=" << last_seq
              << " max_acked_seq=" << max_acked << " acked_stored=" << report["acked_stored"]
              << " acked_duplicate=" << report["acked_duplicate"]
              << " stream_failures=" << report["stream_failures"]
              << " pending_at_exit=" << report["pending"] << " | db: batches=" << stored
              << " max_seq=" << max_stored << " acked_seqs_present=" << acked_present << "/"
              << max_acked << " sample_rows=" << sample_rows << " declared=" << declared
              << " distinct=" << distinct_rows << "\n";

    EXPECT_GE(report["stream_failures"].get<int64_t>(), 1) << "the kill was not mid-stream";
    EXPECT_EQ(report["pending"], 0);
    EXPECT_EQ(report["dropped_overflow"], 0);
    // Nothing acknowledged is missing: every seq 1..max_acked is stored.
    EXPECT_EQ(acked_present, max_acked);
    EXPECT_EQ(max_acked, last_seq);
    // No gaps and nothing extra.
    EXPECT_EQ(stored, max_stored);
    EXPECT_EQ(stored, last_seq);
    // Nothing stored twice: every batch's samples are there exactly once.
    EXPECT_EQ(sample_rows, declared);
    EXPECT_EQ(distinct_rows, sample_rows);
    EXPECT_EQ(report["acked_stored"].get<int64_t>() + report["acked_duplicate"].get<int64_t>(),
              last_seq);
  }
}

TEST_F(TelemetrySpine, TheSpoolKeepsEveryBatchThroughACollectorOutageAndAnAgentRestart) {
  ASSERT_NO_FATAL_FAILURE(StartCollector());
  const std::string listen = grpc_address_;
  const std::string host = kHosts[0];
  const std::vector<std::string> spool = {"--spool-dir", dir_ / "spool"};
  ASSERT_NO_FATAL_FAILURE(StartHostd(host, "50ms", spool, "first"));
  ASSERT_TRUE(testing::WaitFor([&] { return Batches(host) >= 5; }, std::chrono::seconds(30)));

  // The collector goes away; the agent keeps polling, then restarts.
  collector_->Signal(SIGTERM);
  EXPECT_EQ(collector_->Wait(), 0);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        std::error_code ec;
        size_t files = 0;
        for (auto it = std::filesystem::recursive_directory_iterator(dir_ / "spool", ec);
             it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
          files += it->is_regular_file() ? 1 : 0;
        return files >= 10;
      },
      std::chrono::seconds(30)))
      << "unacked batches are spooled while the collector is down";
  hostds_.back()->Signal(SIGTERM);
  EXPECT_EQ(hostds_.back()->Wait(), 0);
  auto first = nlohmann::json::parse(testing::ReadFile(dir_ / "first.out"));
  ASSERT_GT(first["pending"].get<int64_t>(), 0) << first.dump();
  ASSERT_NO_FATAL_FAILURE(StartHostd(host, "50ms", spool, "second"));
  ASSERT_NO_FATAL_FAILURE(StartCollector(listen));

  // Both incarnations' batches arrive: every seq of each boot.
  const std::string first_boot = first["agent_boot_id"];
  const uint64_t first_last = first["last_seq"];
  auto seqs_of = [&](const std::string& boot) {
    auto store = OpenStore();
    auto seqs = store ? store->GetStoredSeqs(host, boot) : absl::StatusOr<collector::Store::StoredSeqs>();
    return seqs.ok() ? *seqs : collector::Store::StoredSeqs{};
  };
  ASSERT_TRUE(testing::WaitFor([&] { return seqs_of(first_boot).watermark == first_last; },
                               std::chrono::seconds(30)))
      << "first boot: " << seqs_of(first_boot).watermark << " of " << first_last;
  EXPECT_TRUE(seqs_of(first_boot).above.empty());
  hostds_.back()->Signal(SIGTERM);
  EXPECT_EQ(hostds_.back()->Wait(), 0);
  auto second = nlohmann::json::parse(testing::ReadFile(dir_ / "second.out"));
  EXPECT_EQ(second["pending"], 0) << second.dump();
  EXPECT_EQ(second["replay_pending"], 0) << second.dump();
  const auto second_seqs = seqs_of(second["agent_boot_id"]);
  EXPECT_EQ(second_seqs.watermark, second["last_seq"].get<uint64_t>());
  EXPECT_TRUE(second_seqs.above.empty());
  EXPECT_EQ(second["dropped_overflow"], 0);
  std::cout << "[spool] first boot: " << first_last << " batches, " << first["pending"]
            << " of them spooled at exit; second boot: " << second["last_seq"] << " batches\n";
}

TEST_F(TelemetrySpine, HostdOnceOnAFixtureTree) {
  std::string out, err;
  const std::string root = dir_ / "z1-r01-h1";
  ASSERT_EQ(testing::RunCommand({BinDir() + "/rocefab-hostd", "--once", "-o", "json",
                                 "--sysfs-root", root + "/sys", "--ethtool-dir", root + "/ethtool",
                                 "--host-name", "z1-r01-h1", "--no-netlink"},
                                &out, &err),
            0)
      << err;
  auto json = nlohmann::json::parse(out);
  EXPECT_EQ(json["host"], "z1-r01-h1");
  EXPECT_EQ(json["nics"][0]["netdev"], "eth2");
  EXPECT_EQ(json["nics"][0]["counters"]["pfc_tx_pause_frames"]["3"], 17);
  // Bad flags and config are usage errors.
  EXPECT_EQ(testing::RunCommand({BinDir() + "/rocefab-hostd", "--interval", "fast"}, &out, &err), 2);
  EXPECT_EQ(testing::RunCommand({BinDir() + "/rocefab-hostd", "--no-such-flag"}, &out, &err), 2);
  EXPECT_EQ(testing::RunCommand({BinDir() + "/rocefab-collectord", "--db"}, &out, &err), 2);
  EXPECT_EQ(testing::RunCommand({BinDir() + "/rocefab-hostd", "--help"}, &out, &err), 0);
  EXPECT_NE(out.find("--sysfs-root"), std::string::npos);
  testing::WriteFile(dir_ / "bad.yaml", "collector: a:1\nintervall: 1s\n");
  EXPECT_EQ(testing::RunCommand({BinDir() + "/rocefab-hostd", "--config", dir_ / "bad.yaml"}, &out,
                                &err),
            2);
  EXPECT_NE(err.find("bad.yaml:2: key 'intervall': unknown key"), std::string::npos) << err;
}

// The agent's own /metrics, as node_exporter serves its own: versions, polls
// and the stream, read live.
TEST_F(TelemetrySpine, HostdServesItsOwnMetrics) {
  StartCollector();
  StartHostd("z1-r01-h1", "100ms", {"--metrics-listen", "127.0.0.1:0"});
  const std::string address = testing::StatusField(hostd_status_, "metrics");
  ASSERT_FALSE(address.empty()) << hostd_status_;
  std::string body;
  const auto acked = [&] {
    auto scraped = testing::HttpGet(address, "/metrics");
    if (!scraped) return false;
    body = *scraped;
    return body.find("rocefab_agent_batches_acked_total ") != std::string::npos &&
           body.find("rocefab_agent_batches_acked_total 0\n") == std::string::npos &&
           body.find("rocefab_agent_stream_up 1\n") != std::string::npos;
  };
  ASSERT_TRUE(testing::WaitFor(acked, std::chrono::seconds(20))) << body;
  EXPECT_NE(body.find("rocefab_build_info{commit=\""), std::string::npos) << body;
  EXPECT_NE(body.find("program=\"rocefab-hostd\""), std::string::npos) << body;
  EXPECT_NE(body.find("rocefab_agent_component_info{component=\"mlx5_0 firmware\",version=\"28.39.1002\"} 1"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("rocefab_agent_component_info{component=\"kernel\""), std::string::npos) << body;
  EXPECT_NE(body.find("rocefab_agent_poll_duration_seconds_count "), std::string::npos) << body;
  EXPECT_NE(body.find("rocefab_agent_poll_interval_seconds 0.1\n"), std::string::npos) << body;
  EXPECT_NE(body.find("rocefab_agent_source_problems_total{kind=\"source\",source=\"sysfs\"} 0\n"), std::string::npos) << body;
}

}  // namespace
// What an operator mistypes gets an error that names the word and what
// exists, with an exit code a script can act on.
TEST_F(TelemetrySpine, MistypedNamesAndCommandsAreUsageErrorsNamingTheNearestKnown) {
  testing::WriteFile(dir_ / "topology.yaml", R"yaml(
switches:
  - {name: z1-rtsw01, role: rtsw, zone: z1}
hosts:
  - {name: z1-r01-h1, zone: z1, rack: 1, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.1.1}]}
  - {name: z1-r01-h2, zone: z1, rack: 1, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.1.2}]}
links:
  - {a: z1-r01-h1/mlx5_0, b: z1-rtsw01/Ethernet0, speed_gbps: 400}
  - {a: z1-r01-h2/mlx5_0, b: z1-rtsw01/Ethernet4, speed_gbps: 400}
)yaml");
  ASSERT_NO_FATAL_FAILURE(StartCollector("127.0.0.1:0", {"--topology", dir_ / "topology.yaml"}));
  std::string out, err;
  EXPECT_EQ(Cli({"counters", "--host", "z1-r99-h1"}, &out, &err), 2);
  EXPECT_NE(err.find("'z1-r99-h1' is no host or switch of the topology; nearest known: z1-r01-h1"),
            std::string::npos) << err;
  EXPECT_EQ(Cli({"counters", "--host", "z1-r99-h1", "--allow-unknown"}, &out, &err), 1) << "nothing matched";
  EXPECT_EQ(Cli({"alert", "silence", "--entity", "z1-r01-h1/mlx5_9", "--comment", "typo"}, &out, &err), 2);
  EXPECT_NE(err.find("nearest known: z1-r01-h1/mlx5_0"), std::string::npos) << err;
  EXPECT_EQ(Cli({"alert", "silence", "--job", "9999", "--comment", "typo"}, &out, &err), 2);
  EXPECT_NE(err.find("job 9999 is not registered"), std::string::npos) << err;
  EXPECT_EQ(Cli({"job", "start", "--id", "5", "--hostlist", "gpu-node[1-2]", "--gpus-per-host", "1"}, &out, &err), 2);
  EXPECT_NE(err.find("'gpu-node1' is no host or switch"), std::string::npos) << err;
  EXPECT_EQ(Cli({"job", "show", "9999"}, &out, &err), 1);
  EXPECT_NE(err.find("job 9999 is not registered and has no collective records"), std::string::npos) << err;
  EXPECT_EQ(Cli({"job", "diagnose", "9999", "--at", "-10m"}, &out, &err), 1) << err;
  EXPECT_EQ(Cli({"job", "diagnose", "9999", "--at", "yesterday"}, &out, &err), 2);
  EXPECT_EQ(Cli({"fabric", "helth"}, &out, &err), 2);
  EXPECT_NE(err.find("unknown command 'helth' for 'rocefab fabric'; did you mean 'rocefab fabric health'?"),
            std::string::npos) << err;
  EXPECT_EQ(Cli({"agent"}, &out, &err), 2);
  EXPECT_NE(err.find("did you mean 'rocefab agents'?"), std::string::npos) << err;
}

}  // namespace rocefab

namespace rocefab {
namespace {

// The routing what-if on a job the real registry holds, over mutual TLS:
// `rocefab-lab study --placement-from-registry` reads the job's placement
// and predicts every scheme on it.
TEST_F(TelemetrySpine, RoutingWhatIfReadsAJobsPlacementFromTheRegistryAndRecommendsAScheme) {
  std::string out, err;
  const std::string topology = dir_ / "topology.yaml";
  ASSERT_EQ(testing::RunCommand({BinDir() + "/rocefab-lab", "topology", "-o", topology}, &out, &err), 0) << err;
  StartCollector("127.0.0.1:0", {"--topology", topology});
  ASSERT_EQ(Cli({"job", "start", "--id", "4711", "--hostlist", "z1-r0[1-4]-h1,z1-r0[5-8]-h2", "--gpus-per-host", "8",
                 "--topology", topology},
                &out, &err),
            0)
      << err;
  auto study = [&](const std::string& job, std::vector<std::string> extra) {
    std::vector<std::string> argv = {BinDir() + "/rocefab-lab", "study", "--placement-from-registry", "--job", job,
                                     "--topology", topology, "--collector", grpc_address_};
    argv.insert(argv.end(), extra.begin(), extra.end());
    out.clear();
    err.clear();
    return testing::RunCommand(argv, &out, &err);
  };
  ASSERT_EQ(study("4711", ca_.Flags("alice")), 0) << out << err;
  EXPECT_NE(out.find("job 4711: 8 hosts, AllReduce; no collective records"), std::string::npos) << out;
  for (const char* scheme : {"ecmp", "path_pinning", "eecmp", "te"}) EXPECT_NE(out.find(scheme), std::string::npos);
  EXPECT_NE(out.find("<- recommended"), std::string::npos) << out;
  EXPECT_NE(out.find("recommended: "), std::string::npos) << out;
  EXPECT_EQ(out.find("recommended: path_pinning"), std::string::npos) << out;
  // JSON for scripts: a row per scheme.
  ASSERT_EQ(study("4711", testing::With(ca_.Flags("alice"), {"-o", "json"})), 0) << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["rows"].size(), 6u);
  EXPECT_EQ(j["hosts"], 8);
  // A job the registry does not hold, and a caller without a certificate.
  EXPECT_EQ(study("999", ca_.Flags("alice")), 1);
  EXPECT_NE(err.find("job 999 is not running in the registry"), std::string::npos) << err;
  EXPECT_EQ(study("4711", {}), 2);
  EXPECT_NE(err.find("certificate"), std::string::npos) << err;
}

}  // namespace
}  // namespace rocefab
