// One rocefab-hostd poll of a host with 8 mlx5 RoCE ports (the Llama 3 host
// shape: one 400G NIC per GPU), against the same work done by a real peer:
// node_exporter's infiniband collector scraped over the same sysfs tree.
//
//   BM_HostdPoll            sysfs + ethtool text + delta batch (what each tick does)
//   BM_HostdPollSysfsOnly   the sysfs half alone, to compare like with like
//   BM_EthtoolIoctlPort     the ethtool ioctl source on an mlx5-sized port (user space)
//   BM_HostdDaemon          the running rocefab-hostd, polling the same tree every
//                           100 ms and streaming to a real rocefab-collectord over
//                           mTLS: the daemon's own CPU per batch the collector stored
//   BM_NodeExporterScrape   GET /metrics of prometheus-node-exporter with only
//                           --collector.infiniband, --path.sysfs on the same tree:
//                           /0 back to back, /100 every 100 ms (the daemon's cadence)
//   BM_HostdDaemonEverySecond  the same at the default 1 s interval
//   BM_NodeExporterByPrometheus  the peer as users run it: a real Prometheus
//                           scraping node_exporter (/0 plain HTTP, /1 mutual
//                           TLS, as the daemon speaks), every 100 or 1000 ms
//   BM_HostdAgainstNodeExporter  the daemon and the peer by Prometheus side by
//                           side, at once, every second: the ratio of the two
//
// The peer runs when ROCEFAB_BENCH_NODE_EXPORTER (and, for the scrapes by
// Prometheus, ROCEFAB_BENCH_PROMETHEUS) names its binary (scripts/bench.sh
// does that); otherwise those benchmarks are skipped with a message.
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "agents/host/ethtool_stats.h"
#include "agents/host/host_poller.h"
#include "common/batch_builder.h"
#include "tests/support/fake_ethtool_driver.h"
#include "tests/support/test_support.h"

namespace {

using namespace rocefab;

// Builds <dir>/sys with mlx5_0..mlx5_7 and <dir>/ethtool/eth2..eth9 from the
// fixture host's first port, which has the full mlx5 counter set.
struct EightNicHost {
  testing::TempDir dir;
  EightNicHost() {
    const std::string fixture = std::string(ROCEFAB_FIXTURES) + "/hosts/z1-r01-h1";
    for (int i = 0; i < 8; ++i) {
      const std::string dev = "mlx5_" + std::to_string(i);
      const std::string netdev = "eth" + std::to_string(i + 2);
      const std::string base = dir / ("sys/class/infiniband/" + dev);
      testing::CopyTree(fixture + "/sys/class/infiniband/mlx5_0", base);
      std::filesystem::remove_all(base + "/device/net");
      testing::WriteFile(base + "/device/net/" + netdev + "/ifindex", std::to_string(i + 4) + "\n");
      testing::WriteFile(dir / ("ethtool/" + netdev + "/statistics"),
                         testing::ReadFile(fixture + "/ethtool/eth2/statistics"));
    }
  }
};

EightNicHost& Host() {
  static EightNicHost host;
  return host;
}

void BM_HostdPoll(benchmark::State& state) {
  FsRoot sysfs(Host().dir / "sys");
  hostd::TextEthtoolSource ethtool(Host().dir / "ethtool");
  // One poller across iterations, as the daemon keeps one: its counter
  // files stay open between polls.
  hostd::HostPoller poller("z1-r01-h1", {&sysfs, &ethtool, nullptr}, SystemClock::Instance());
  BatchBuilder builder;
  size_t samples = 0;
  for (auto _ : state) {
    hostd::HostSnapshot snapshot = poller.Poll();
    // On an arena, as the daemon builds its batches (HostAgent::PollOnce).
    std::shared_ptr<v1::TelemetryBatch> batch = builder.NewArenaBatch(snapshot.timestamp_us);
    hostd::AppendSnapshot(snapshot, &builder, batch.get());
    samples = 0;
    for (const auto& e : batch->entities()) samples += e.samples_size();
    benchmark::DoNotOptimize(batch);
  }
  state.counters["samples_per_poll"] = static_cast<double>(samples);
  state.counters["nics"] = 8;
}
BENCHMARK(BM_HostdPoll)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The ethtool ioctl source on one mlx5-sized port: 63 channels of about
// 45 statistics each (mlx5e's rq, sq and ch groups) around the PFC ones,
// 2,874 in all. The driver answers in the ioctl's own structures
// (tests/support/fake_ethtool_driver.h); what is timed is the user-space
// side: /0 reads names and values and maps them by name, as each poll did;
// /1 is ReadInto, which keeps the positions of the ~40 statistics wanted.
void BM_EthtoolIoctlPort(benchmark::State& state) {
  testing::FakeEthtoolDriver driver;
  testing::Mlx5LikeStatistics(&driver, 63);
  for (int ch = 0; ch < 63; ++ch)
    for (int k = 0; k < 43; ++k) driver.Add("rx" + std::to_string(ch) + "_s" + std::to_string(k), k);
  hostd::IoctlEthtoolSource source(std::ref(driver));
  int64_t now_us = 1'000'000;
  size_t values = 0;
  for (auto _ : state) {
    source.BeginPoll(now_us += 100'000);
    hostd::NicReading nic;
    if (state.range(0) == 0) hostd::MapEthtoolStats(*source.Read("eth2"), &nic);
    else benchmark::DoNotOptimize(source.ReadInto("eth2", &nic));
    values = nic.counters.size();
    for (const auto& entry : nic.per_prio) values += entry.second.size();
  }
  state.counters["statistics"] = static_cast<double>(driver.names.size());
  state.counters["values"] = static_cast<double>(values);
}
BENCHMARK(BM_EthtoolIoctlPort)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_HostdPollSysfsOnly(benchmark::State& state) {
  FsRoot sysfs(Host().dir / "sys");
  hostd::RdmaSysfsReader reader(sysfs);
  int64_t now_us = 1;
  for (auto _ : state) {
    hostd::ReadHealth health;
    auto nics = reader.ReadAll(&health, ++now_us);
    benchmark::DoNotOptimize(nics);
  }
  state.counters["open_files"] = static_cast<double>(reader.files().open_files());
}
BENCHMARK(BM_HostdPollSysfsOnly)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The same read with every file opened afresh, as before files were kept
// open (and as `--once` does).
void BM_HostdPollSysfsReopening(benchmark::State& state) {
  FsRoot sysfs(Host().dir / "sys");
  for (auto _ : state) {
    hostd::ReadHealth health;
    auto nics = hostd::RdmaSysfsReader(sysfs).ReadAll(&health);
    benchmark::DoNotOptimize(nics);
  }
}
BENCHMARK(BM_HostdPollSysfsReopening)->Unit(benchmark::kMicrosecond)->UseRealTime();

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// CPU time of a process in microseconds, or -1: the sum of its threads'
// se.sum_exec_runtime (/proc/<pid>/task/<tid>/sched, nanosecond
// precision) where the kernel has it, else utime + stime from
// /proc/<pid>/stat, which moves in clock ticks (10 ms: 100 µs per poll over
// 100 polls).
int64_t ProcessCpuUs(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::error_code ec;
  double ms = 0;
  bool any = false;
  for (const auto& task : std::filesystem::directory_iterator(proc + "/task", ec)) {
    std::istringstream lines(testing::ReadFile(task.path().string() + "/sched"));
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("se.sum_exec_runtime", 0) != 0) continue;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      ms += std::stod(line.substr(colon + 1));
      any = true;
    }
  }
  if (any) return static_cast<int64_t>(ms * 1000);
  const std::string stat = testing::ReadFile(proc + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  long long utime = 0, stime = 0;
  // Fields after the command name start at 3 (state); utime is 14, stime 15.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  return (utime + stime) * 1'000'000 / sysconf(_SC_CLK_TCK);
}

// A counter of a Prometheus text exposition, summed over its series that
// carry `label`; -1 when absent.
double ScrapeCounter(const std::string& text, const std::string& name, const std::string& label) {
  double total = -1;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) != 0 || line.find(label) == std::string::npos) continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    total = std::max(total, 0.0) + std::stod(line.substr(space + 1));
  }
  return total;
}

// A process's CPU per event (a stored batch, a served scrape, one every
// `every`) over 100 events, once `count` (the events so far, -1 while
// unknown) has passed 10: the first carry start-up. {CPU µs per event,
// events}, or nullopt after `no_start` or `stalled` was reported on `state`.
std::optional<std::pair<double, double>> CpuPerEvent(benchmark::State& state, pid_t pid,
                                                     const std::function<double()>& count,
                                                     std::chrono::milliseconds every,
                                                     const char* no_start, const char* stalled) {
  const auto start_timeout = std::chrono::seconds(40) + 20 * every;
  if (!testing::WaitFor([&] { return count() >= 10; }, start_timeout)) {
    state.SkipWithError(no_start);
    return std::nullopt;
  }
  constexpr int kEvents = 100;
  double cpu_us = 0, events = 0;
  for (auto _ : state) {
    const double first = count();
    const int64_t cpu_before = ProcessCpuUs(pid);
    const auto timeout = std::chrono::seconds(60) + 2 * kEvents * every;
    if (!testing::WaitFor([&] { return count() >= first + kEvents; }, timeout)) {
      state.SkipWithError(stalled);
      return std::nullopt;
    }
    cpu_us += static_cast<double>(ProcessCpuUs(pid) - cpu_before);
    events += count() - first;
  }
  return std::make_pair(cpu_us / events, events);
}

// The daemon as a user runs it (see BM_HostdDaemon): a real
// rocefab-collectord and a real rocefab-hostd polling `sys` and `ethtool`
// every `every`, shipping over mTLS. `error` says why it did not start.
struct RunningDaemon {
  RunningDaemon(const std::string& sys, const std::string& ethtool, std::chrono::milliseconds every) {
    // Each run starts afresh: no batches of an earlier run to replay.
    std::filesystem::remove_all(Host().dir / "spool");
    for (const char* suffix : {"", "-wal", "-shm"})
      std::filesystem::remove(Host().dir / (std::string("collector.db") + suffix));
    testing::NotifySocket collector_ready;
    collector.emplace(Subprocess::Options{
        testing::With({testing::BinDir() + "/rocefab-collectord", "--listen", "127.0.0.1:0", "--db",
                       Host().dir / "collector.db", "--metrics-listen", "127.0.0.1:0"},
                      ca.Flags("rocefab-collectord")),
        {{"NOTIFY_SOCKET", collector_ready.path()}},
        "",
        Host().dir / "collector.log"});
    const auto status = collector_ready.WaitReady(std::chrono::seconds(20));
    if (!status) {
      error = "rocefab-collectord did not start";
      return;
    }
    const std::string grpc = testing::StatusField(*status, "grpc");
    metrics = testing::StatusField(*status, "metrics");
    testing::NotifySocket hostd_ready;
    hostd.emplace(Subprocess::Options{
        testing::With({testing::BinDir() + "/rocefab-hostd", "--collector", grpc, "--interval",
                       std::to_string(every.count()) + "ms",
                       // Full polls only, as the peer makes (the fast path
                       // reads PFC counters between them; at 100 ms there is
                       // no room for it anyway).
                       "--fast-interval", "0s", "--sysfs-root", sys, "--ethtool-dir", ethtool, "--host-name",
                       "z1-r01-h1", "--no-netlink", "--spool-dir", Host().dir / "spool"},
                      ca.Flags("z1-r01-h1")),
        {{"NOTIFY_SOCKET", hostd_ready.path()}},
        "",
        Host().dir / "hostd.log"});
    if (!hostd_ready.WaitReady(std::chrono::seconds(20))) error = "rocefab-hostd did not start";
  }
  pid_t pid() const { return hostd->pid(); }
  // Batches the collector stored; -1 while unknown.
  double Stored() const {
    auto body = testing::HttpGet(metrics, "/metrics");
    return body ? ScrapeCounter(*body, "rocefab_collector_batches_total", "result=\"stored\"") : -1;
  }

  testing::DevCa ca{{"rocefab-collectord", "z1-r01-h1"}};
  std::optional<Subprocess> collector, hostd;
  std::string metrics;
  std::string error;
};

void RunDaemon(benchmark::State& state, const std::string& sys, const std::string& ethtool,
               std::chrono::milliseconds every = std::chrono::milliseconds(100)) {
  RunningDaemon daemon(sys, ethtool, every);
  if (!daemon.error.empty()) {
    state.SkipWithError(daemon.error.c_str());
    return;
  }
  // Past start-up: the first batches carry the first reading of everything.
  const auto cpu = CpuPerEvent(state, daemon.pid(), [&] { return daemon.Stored(); }, every,
                               "the collector stored no batches from rocefab-hostd",
                               "rocefab-hostd stopped shipping");
  if (!cpu) return;
  state.counters["hostd_cpu_us_per_poll"] = cpu->first;
  state.counters["polls"] = cpu->second;
}

void BM_HostdDaemon(benchmark::State& state) {
  RunDaemon(state, Host().dir / "sys", Host().dir / "ethtool");
}
BENCHMARK(BM_HostdDaemon)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same at the default interval of one second, without the fast path
// (the peer has none): the cadence a host runs, and colder still.
void BM_HostdDaemonEverySecond(benchmark::State& state) {
  RunDaemon(state, Host().dir / "sys", Host().dir / "ethtool", std::chrono::seconds(1));
}
BENCHMARK(BM_HostdDaemonEverySecond)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same daemon on a host without RDMA devices: each poll still ships a
// batch (health, and the components now and then) over the mTLS stream and
// reads its ack. What it costs is the floor of a poll, whatever the NICs.
void BM_HostdDaemonNoNics(benchmark::State& state) {
  std::filesystem::create_directories(Host().dir / "empty/sys");
  std::filesystem::create_directories(Host().dir / "empty/ethtool");
  RunDaemon(state, Host().dir / "empty/sys", Host().dir / "empty/ethtool");
}
BENCHMARK(BM_HostdDaemonNoNics)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The peer scraped back to back (state.range(0) == 0), or every
// state.range(0) ms: the daemon's own cadence (BM_HostdDaemon polls every
// 100 ms), so that both run as cold between rounds as the other.
void BM_NodeExporterScrape(benchmark::State& state) {
  const char* binary = std::getenv("ROCEFAB_BENCH_NODE_EXPORTER");
  if (binary == nullptr || access(binary, X_OK) != 0) {
    state.SkipWithError("peer not run: set ROCEFAB_BENCH_NODE_EXPORTER (make bench does)");
    return;
  }
  const std::string address = "127.0.0.1:" + std::to_string(FreePort());
  testing::Subprocess peer({{binary, "--path.sysfs=" + Host().dir / "sys",
                             "--collector.disable-defaults", "--collector.infiniband",
                             "--web.listen-address=" + address},
                            {},
                            "",
                            Host().dir / "node_exporter.log"});
  if (!testing::WaitFor([&] { return testing::HttpGet(address, "/metrics").has_value(); },
                        std::chrono::seconds(10))) {
    state.SkipWithError("node_exporter did not start");
    return;
  }
  auto first = testing::HttpGet(address, "/metrics");
  if (first->find("node_infiniband_port_data_received_bytes_total") == std::string::npos) {
    state.SkipWithError("node_exporter did not read the infiniband tree");
    return;
  }
  // The peer's own CPU per scrape, measured as the daemon's is.
  const auto every = std::chrono::milliseconds(state.range(0));
  auto next = std::chrono::steady_clock::now();
  const int64_t cpu_before = ProcessCpuUs(peer.pid());
  for (auto _ : state) {
    auto body = testing::HttpGet(address, "/metrics");
    benchmark::DoNotOptimize(body);
    if (every.count() > 0) {
      // Pacing, as a scraping server paces its scrapes.
      next += every;
      std::this_thread::sleep_until(next);
    }
  }
  const int64_t cpu_after = ProcessCpuUs(peer.pid());
  if (cpu_before >= 0 && cpu_after >= 0 && state.iterations() > 0)
    state.counters["peer_cpu_us_per_scrape"] =
        static_cast<double>(cpu_after - cpu_before) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_NodeExporterScrape)->Arg(0)->Unit(benchmark::kMicrosecond)->UseRealTime();
// 100 scrapes, as BM_HostdDaemon measures 100 polls.
BENCHMARK(BM_NodeExporterScrape)->Arg(100)->Iterations(100)->Unit(benchmark::kMillisecond)->UseRealTime();

// The peer as its users run it: a real Prometheus (Debian's) scraping
// node_exporter every `every`. Prometheus keeps the connection alive and
// asks for gzip, as it does in production; with `mtls` the two also speak
// mutual TLS (node_exporter's --web.config.file), as the daemon does.
// `error` says why it did not start.
struct RunningPeer {
  RunningPeer(bool mtls, std::chrono::milliseconds every) {
    const char* binary = std::getenv("ROCEFAB_BENCH_NODE_EXPORTER");
    const char* prometheus = std::getenv("ROCEFAB_BENCH_PROMETHEUS");
    if (binary == nullptr || access(binary, X_OK) != 0 || prometheus == nullptr || access(prometheus, X_OK) != 0) {
      error = "peer not run: set ROCEFAB_BENCH_NODE_EXPORTER and ROCEFAB_BENCH_PROMETHEUS (make bench does)";
      return;
    }
    const std::string dir = Host().dir / (mtls ? "prometheus-mtls" : "prometheus");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::vector<std::string> peer_argv = {binary, "--path.sysfs=" + Host().dir / "sys",
                                          "--collector.disable-defaults", "--collector.infiniband"};
    const std::string address = "127.0.0.1:" + std::to_string(FreePort());
    peer_argv.push_back("--web.listen-address=" + address);
    std::string scrape_tls;
    if (mtls) {
      testing::WriteFile(dir + "/web.yml", "tls_server_config:\n  cert_file: " + ca.cert("node-exporter") +
                                               "\n  key_file: " + ca.key("node-exporter") +
                                               "\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: " +
                                               ca.ca() + "\n");
      peer_argv.push_back("--web.config.file=" + dir + "/web.yml");
      scrape_tls = "    scheme: https\n    tls_config:\n      ca_file: " + ca.ca() + "\n      cert_file: " +
                   ca.cert("prometheus") + "\n      key_file: " + ca.key("prometheus") +
                   "\n      server_name: node-exporter\n";
    }
    peer.emplace(Subprocess::Options{peer_argv, {}, "", dir + "/node_exporter.log"});
    testing::WriteFile(dir + "/prometheus.yml",
                       "global:\n  scrape_interval: " + std::to_string(every.count()) + "ms\n  scrape_timeout: " +
                           std::to_string(std::min<int64_t>(every.count(), 10'000)) + "ms\nscrape_configs:\n"
                       "  - job_name: node\n" + scrape_tls + "    static_configs:\n      - targets: ['" + address +
                           "']\n");
    api = "127.0.0.1:" + std::to_string(FreePort());
    server.emplace(Subprocess::Options{{prometheus, "--config.file=" + dir + "/prometheus.yml",
                                        "--storage.tsdb.path=" + dir + "/data", "--web.listen-address=" + api},
                                       {},
                                       "",
                                       dir + "/prometheus.log"});
  }
  pid_t pid() const { return peer->pid(); }
  // Requests node_exporter served, as of Prometheus's latest scrape; -1
  // before the first. Read from what Prometheus stored, so that the bench
  // never sends the peer a request of its own.
  double Served() const {
    auto body = testing::HttpGet(api, "/api/v1/query?query=promhttp_metric_handler_requests_total%7Bcode%3D%22200%22%7D");
    if (!body) return -1;
    const auto json = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || !json.contains("data")) return -1;
    const auto& result = json["data"]["result"];
    if (!result.is_array() || result.empty()) return -1;
    return std::stod(result[0]["value"][1].get<std::string>());
  }

  testing::DevCa ca{{"node-exporter", "prometheus"}};
  std::optional<Subprocess> peer, server;
  std::string api;
  std::string error;
};

// The peer scraped by Prometheus (state.range(0) == 1: over mutual TLS)
// every state.range(1) ms. Its CPU per scrape is counted between two
// readings of node_exporter's own request counter as Prometheus stored it.
void BM_NodeExporterByPrometheus(benchmark::State& state) {
  const auto every = std::chrono::milliseconds(state.range(1));
  RunningPeer peer(state.range(0) == 1, every);
  if (!peer.error.empty()) {
    state.SkipWithError(peer.error.c_str());
    return;
  }
  // Past start-up: Prometheus starts scraping within a few seconds.
  const auto cpu = CpuPerEvent(state, peer.pid(), [&] { return peer.Served(); }, every,
                               "Prometheus did not scrape node_exporter (see its logs in the bench's directory)",
                               "Prometheus stopped scraping node_exporter");
  if (!cpu) return;
  state.counters["peer_cpu_us_per_scrape"] = cpu->first;
  state.counters["scrapes"] = cpu->second;
}
BENCHMARK(BM_NodeExporterByPrometheus)
    ->Args({0, 100})
    ->Args({1, 100})
    ->Args({0, 1000})
    ->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The daemon and the peer side by side: both at once, at the same cadence
// (state.range(1) ms), their CPU counted over the same window of at least
// 100 polls and 100 scrapes, so that whatever else the machine does falls
// on both alike. state.range(0) == 1: the peer speaks mutual TLS, as the
// daemon does. `ratio` is the daemon's CPU per poll over the peer's per
// scrape.
void BM_HostdAgainstNodeExporter(benchmark::State& state) {
  const auto every = std::chrono::milliseconds(state.range(1));
  RunningPeer peer(state.range(0) == 1, every);
  if (!peer.error.empty()) {
    state.SkipWithError(peer.error.c_str());
    return;
  }
  RunningDaemon daemon(Host().dir / "sys", Host().dir / "ethtool", every);
  if (!daemon.error.empty()) {
    state.SkipWithError(daemon.error.c_str());
    return;
  }
  // Past start-up for both.
  if (!testing::WaitFor([&] { return daemon.Stored() >= 10 && peer.Served() >= 10; },
                        std::chrono::seconds(40) + 20 * every)) {
    state.SkipWithError("the daemon or the peer did not start (see the logs in the bench's directory)");
    return;
  }
  constexpr int kEvents = 100;
  double daemon_us = 0, polls = 0, peer_us = 0, scrapes = 0;
  for (auto _ : state) {
    const double first_poll = daemon.Stored(), first_scrape = peer.Served();
    const int64_t daemon_before = ProcessCpuUs(daemon.pid()), peer_before = ProcessCpuUs(peer.pid());
    if (!testing::WaitFor(
            [&] { return daemon.Stored() >= first_poll + kEvents && peer.Served() >= first_scrape + kEvents; },
            std::chrono::seconds(60) + 2 * kEvents * every)) {
      state.SkipWithError("the daemon or the peer stopped");
      return;
    }
    daemon_us += static_cast<double>(ProcessCpuUs(daemon.pid()) - daemon_before);
    peer_us += static_cast<double>(ProcessCpuUs(peer.pid()) - peer_before);
    polls += daemon.Stored() - first_poll;
    scrapes += peer.Served() - first_scrape;
  }
  state.counters["hostd_cpu_us_per_poll"] = daemon_us / polls;
  state.counters["peer_cpu_us_per_scrape"] = peer_us / scrapes;
  state.counters["ratio"] = (daemon_us / polls) / (peer_us / scrapes);
}
BENCHMARK(BM_HostdAgainstNodeExporter)
    ->Args({0, 1000})
    ->Args({1, 1000})
    ->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
