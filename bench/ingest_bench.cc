// Ingest side by side: the running rocefab-collectord fed by Telemetry.Push
// streams, and a real Prometheus and a real VictoriaMetrics fed the same
// series and values by a remote-write sender, one after the other on this
// machine in the same run. For each receiver it prints samples/s, server
// CPU-seconds per million samples, bytes on disk per sample, peak RSS and,
// for the collector, ack latency p50/p99 (docs/performance.md, "Ingest").
//
//   ingest_bench [--agents 96] [--nics 8] [--counters 20] [--seconds 30]
//                [--rate 0] [--peers prometheus,victoria-metrics] [--mtls] [-o json]
//
// --rate 0 sends as fast as acks allow (64 batches in flight per stream);
// --rate N paces each agent at N batches a second (the load test: --agents
// 400 --counters 65 --rate 1 --seconds 600). Each batch is one poll of an
// agent's NICs: the first four counters grow by about 10^6 a poll with
// noise, the rest stay flat, as on a quiet fabric. --mtls adds a row for the
// collector under mutual TLS, a certificate and a connection per agent.
#include <curl/curl.h>
#include <signal.h>
#include <snappy.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "common/counters.h"
#include "common/grpc_util.h"
#include "prometheus/remote.pb.h"
#include "rocefab/v1/telemetry.grpc.pb.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// CPU seconds and peak RSS of a process, from /proc.
struct ProcStats {
  double cpu_s = 0;
  double peak_rss_mb = 0;
};
ProcStats ReadProc(pid_t pid) {
  ProcStats out;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    uint64_t utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    out.cpu_s = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) out.peak_rss_mb = std::stod(line.substr(6)) / 1024.0;
  return out;
}

uint64_t DiskBytes(const std::string& path) {
  uint64_t total = 0;
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return std::filesystem::file_size(path, ec);
  for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    struct stat st;
    if (it->is_regular_file(ec) && ::stat(it->path().c_str(), &st) == 0)
      total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

// One agent's series: the NIC vocabulary as hostd sends it (per-priority
// counters expanded), cut to `counters` per NIC.
struct SeriesDef {
  const CounterDef* def;
  std::optional<uint32_t> prio;
};
std::vector<SeriesDef> NicSeries(int counters) {
  std::vector<SeriesDef> all;
  for (const CounterDef& def : CountersOfScope(v1::SCOPE_NIC)) {
    if (def.per_prio)
      for (uint32_t p = 0; p < 8; ++p) all.push_back({&def, p});
    else
      all.push_back({&def, std::nullopt});
  }
  if (counters < static_cast<int>(all.size())) all.resize(static_cast<size_t>(counters));
  return all;
}

// The values every receiver gets: agent a, poll p, nic n, counter c.
class Values {
 public:
  Values(int agents, int nics, int counters) : nics_(nics), counters_(counters) {
    state_.assign(static_cast<size_t>(agents * nics * counters), 1'000'000'000);
    rngs_.reserve(agents);
    for (int a = 0; a < agents; ++a) rngs_.emplace_back(static_cast<uint64_t>(a) + 1);
  }
  // Advances agent `a` by one poll; fills its values.
  void Next(int a, std::vector<uint64_t>* out) {
    out->resize(static_cast<size_t>(nics_ * counters_));
    for (int i = 0; i < nics_ * counters_; ++i) {
      uint64_t& v = state_[static_cast<size_t>(a * nics_ * counters_ + i)];
      if (i % counters_ < 4) v += 1'000'000 + rngs_[a]() % 65'536;
      (*out)[static_cast<size_t>(i)] = v;
    }
  }

 private:
  int nics_, counters_;
  std::vector<uint64_t> state_;
  std::vector<std::mt19937_64> rngs_;
};

struct Options {
  int agents = 96, nics = 8, counters = 20, seconds = 30;
  double rate = 0;
  std::vector<std::string> peers = {"prometheus", "victoria-metrics"};
  std::string output = "table";
  bool mtls = false;  // also run the collector with mutual TLS
};

struct Result {
  std::string receiver;
  uint64_t samples = 0;
  double seconds = 0;
  ProcStats proc;
  double cpu_s = 0;
  uint64_t disk_bytes = 0;
  double ack_p50_ms = -1, ack_p99_ms = -1;
  uint64_t lost = 0;
  nlohmann::json Json() const {
    return {{"receiver", receiver},
            {"samples", samples},
            {"samples_per_s", samples / seconds},
            {"cpu_s_per_million", cpu_s / (static_cast<double>(samples) / 1e6)},
            {"bytes_per_sample", static_cast<double>(disk_bytes) / static_cast<double>(samples)},
            {"peak_rss_mb", proc.peak_rss_mb},
            {"ack_p50_ms", ack_p50_ms},
            {"ack_p99_ms", ack_p99_ms},
            {"lost", lost}};
  }
};

// ---- the collector: Telemetry.Push streams on the callback API -----------

std::string AgentName(int index) { return "bench-h" + std::to_string(index); }

class AgentStream final : public grpc::ClientBidiReactor<v1::TelemetryBatch, v1::Ack> {
 public:
  AgentStream(int index, const Options& o, const std::vector<SeriesDef>& series, Values& values,
              std::mutex& values_mu)
      : index_(index), o_(o), series_(series), values_(values), values_mu_(values_mu) {
    name_ = AgentName(index);
    batch_.set_agent_id(name_);
    batch_.set_agent_boot_id("bench-boot");
    batch_.set_agent_kind(v1::AGENT_KIND_HOST);
    for (int n = 0; n < o.nics; ++n) {
      auto* e = batch_.add_entities();
      e->set_scope(v1::SCOPE_NIC);
      e->set_entity(name_ + "/mlx5_" + std::to_string(n));
      e->set_port(1);
      for (const SeriesDef& s : series) {
        auto* sample = e->add_samples();
        sample->set_counter(std::string(s.def->name));
        if (s.prio) sample->set_prio(*s.prio);
        sample->set_kind(s.def->kind);
      }
    }
  }

  void Begin(v1::Telemetry::Stub* stub) {
    stub->async()->Push(&context_, this);
    StartRead(&ack_);
    StartCall();
    if (o_.rate == 0) {
      std::lock_guard lock(mu_);
      MaybeWriteLocked();
    }
  }

  // Paced mode: one more poll is due.
  void Due() {
    std::lock_guard lock(mu_);
    ++due_;
    MaybeWriteLocked();
  }

  void Stop() {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (!writing_ && !done_writing_) {
      done_writing_ = true;
      StartWritesDone();
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!ok) return;
    if (stopping_ && !done_writing_) {
      done_writing_ = true;
      StartWritesDone();
      return;
    }
    MaybeWriteLocked();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    {
      std::lock_guard lock(mu_);
      auto it = sent_at_.find(ack_.seq());
      if (it != sent_at_.end()) {
        const auto now = Clock::now();
        latencies_us_.push_back(std::chrono::duration_cast<std::chrono::microseconds>(now - it->second).count());
        acked_at_.push_back(now);
        sent_at_.erase(it);
      }
      if (ack_.status() == v1::ACK_STATUS_STORED) acked_samples_ += samples_per_batch();
      --in_flight_;
      MaybeWriteLocked();
    }
    StartRead(&ack_);
  }

  void OnDone(const grpc::Status& status) override {
    std::lock_guard lock(mu_);
    finished_ = true;
    status_ = status;
    cv_.notify_all();
  }

  void Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return finished_; });
  }

  uint64_t samples_per_batch() const { return static_cast<uint64_t>(o_.nics) * series_.size(); }
  uint64_t sent_samples() const { return sent_batches_ * samples_per_batch(); }
  uint64_t acked_samples() const { return acked_samples_; }
  std::vector<int64_t>& latencies() { return latencies_us_; }
  const std::vector<Clock::time_point>& acked_at() const { return acked_at_; }

 private:
  void MaybeWriteLocked() {
    if (writing_ || stopping_ || done_writing_) return;
    if (in_flight_ >= 64) return;
    if (o_.rate > 0 && due_ == 0) return;
    if (o_.rate > 0) --due_;
    std::vector<uint64_t> values;
    {
      std::lock_guard lock(values_mu_);
      values_.Next(index_, &values);
    }
    const int64_t now = NowUs();
    size_t i = 0;
    for (auto& e : *batch_.mutable_entities()) {
      e.set_timestamp_us(now);
      for (auto& s : *e.mutable_samples()) {
        const uint64_t before = s.value();
        s.set_value(values[i++]);
        if (seq_ > 0) s.set_delta(s.value() - before);
      }
    }
    batch_.set_seq(++seq_);
    batch_.set_created_us(now);
    sent_at_[seq_] = Clock::now();
    ++in_flight_;
    ++sent_batches_;
    writing_ = true;
    StartWrite(&batch_);
  }

  int index_;
  const Options& o_;
  const std::vector<SeriesDef>& series_;
  Values& values_;
  std::mutex& values_mu_;
  std::string name_;
  grpc::ClientContext context_;
  v1::TelemetryBatch batch_;
  v1::Ack ack_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t seq_ = 0, sent_batches_ = 0, acked_samples_ = 0;
  int in_flight_ = 0, due_ = 0;
  bool writing_ = false, stopping_ = false, done_writing_ = false, finished_ = false;
  std::map<uint64_t, Clock::time_point> sent_at_;
  std::vector<int64_t> latencies_us_;
  std::vector<Clock::time_point> acked_at_;
  grpc::Status status_;
};

double Percentile(std::vector<int64_t>& v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))]) / 1000.0;
}

// `remote_write`: a receiver's write URL; the collector forwards every
// sample to it, and the run ends once the receiver has them all.
// With `mtls`, every agent has its own certificate (its identity is its
// agent id, as in production) and the collector authorizes each stream by
// it; without, all is plaintext, as the peers are fed. Either way each agent
// has its own channel and connection, as separate agent processes do.
Result RunCollector(const Options& o, const std::string& dir, const std::string& remote_write = "",
                    bool mtls = false) {
  Result r;
  r.receiver = remote_write.empty() ? "rocefab-collectord" : "collectord+rw";
  if (mtls) r.receiver += " (mTLS)";
  std::unique_ptr<testing::DevCa> ca;
  if (mtls) {
    std::vector<std::string> identities = {"rocefab-collectord"};
    for (int a = 0; a < o.agents; ++a) identities.push_back(AgentName(a));
    ca = std::make_unique<testing::DevCa>(identities);
  }
  std::vector<std::string> argv = {testing::BinDir() + "/rocefab-collectord", "--listen", "127.0.0.1:0",
                                   "--db", dir + "/collector.db", "--metrics-listen", "127.0.0.1:0"};
  if (mtls) argv = testing::With(argv, ca->Flags("rocefab-collectord"));
  else argv.push_back("--insecure");
  if (!remote_write.empty()) argv.insert(argv.end(), {"--remote-write", remote_write});
  auto daemon = testing::StartDaemon(argv, dir + "/collector.log");
  if (!daemon.process) {
    std::cerr << "collector did not start: " << testing::ReadFile(dir + "/collector.log");
    return r;
  }
  const std::string address = testing::StatusField(daemon.status, "grpc");
  std::vector<std::unique_ptr<v1::Telemetry::Stub>> stubs;
  for (int a = 0; a < o.agents; ++a) {
    v1::TlsSettings tls;
    if (mtls) {
      tls.set_ca(ca->ca());
      tls.set_cert(ca->cert(AgentName(a)));
      tls.set_key(ca->key(AgentName(a)));
    }
    auto credentials = MakeChannelCredentials(tls);
    if (!credentials.ok()) {
      std::cerr << "agent credentials: " << credentials.status() << "\n";
      return r;
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    stubs.push_back(v1::Telemetry::NewStub(grpc::CreateCustomChannel(address, *credentials, args)));
  }
  const auto series = NicSeries(o.counters);
  Values values(o.agents, o.nics, static_cast<int>(series.size()));
  std::mutex values_mu;
  std::vector<std::unique_ptr<AgentStream>> streams;
  for (int a = 0; a < o.agents; ++a)
    streams.push_back(std::make_unique<AgentStream>(a, o, series, values, values_mu));
  const ProcStats before = ReadProc(daemon.process->pid());
  const auto start = Clock::now();
  for (size_t a = 0; a < streams.size(); ++a) streams[a]->Begin(stubs[a].get());
  const auto end = start + std::chrono::seconds(o.seconds);
  if (o.rate > 0) {
    // Each agent's polls spread over the period, as real agents' are.
    const auto period = std::chrono::duration<double>(1.0 / o.rate);
    for (int64_t tick = 0;; ++tick) {
      for (int a = 0; a < o.agents; ++a) {
        const auto at = start + std::chrono::duration_cast<Clock::duration>(
                                    period * (static_cast<double>(tick) +
                                              static_cast<double>(a) / o.agents));
        if (at >= end) goto paced_done;
        std::this_thread::sleep_until(at);
        streams[static_cast<size_t>(a)]->Due();
      }
    }
  paced_done:;
  } else {
    std::this_thread::sleep_until(end);
  }
  for (auto& s : streams) s->Stop();
  for (auto& s : streams) s->Wait();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // The detectors and latest values follow the store: their work counts
  // too, so CPU is read once they have caught up.
  const std::string metrics = testing::StatusField(daemon.status, "metrics");
  testing::WaitFor(
      [&] {
        auto body = testing::HttpGet(metrics, "/metrics");
        return body && body->find("rocefab_collector_observe_queue_batches 0\n") != std::string::npos;
      },
      std::chrono::seconds(120));
  if (!remote_write.empty()) {
    const std::string pending = "rocefab_collector_remote_write_pending_samples{remote=\"" + remote_write + "\"} 0\n";
    const bool drained = testing::WaitFor(
        [&] {
          auto body = testing::HttpGet(metrics, "/metrics");
          return body && body->find(pending) != std::string::npos;
        },
        std::chrono::seconds(600));
    const double total = std::chrono::duration<double>(Clock::now() - start).count();
    std::cerr << "remote-write: " << (drained ? "every sample delivered " : "NOT drained after 600 s; ")
              << total - r.seconds << " s after the load ended (" << total << " s in all)\n";
    r.seconds = total;  // samples/s is then what reached the receiver
  }
  const ProcStats after = ReadProc(daemon.process->pid());
  r.cpu_s = after.cpu_s - before.cpu_s;
  r.proc = after;
  std::vector<int64_t> latencies;
  uint64_t sent = 0;
  for (auto& s : streams) {
    r.samples += s->acked_samples();
    sent += s->sent_samples();
    latencies.insert(latencies.end(), s->latencies().begin(), s->latencies().end());
  }
  r.lost = sent - r.samples;
  {
    // Ack p99 per 10 s of the run, to see when the tail happens.
    std::map<int64_t, std::vector<int64_t>> windows;
    for (auto& s : streams)
      for (size_t i = 0; i < s->acked_at().size(); ++i)
        windows[std::chrono::duration_cast<std::chrono::seconds>(s->acked_at()[i] - start).count() / 10].push_back(
            s->latencies()[i]);
    std::cerr << "collector: ack p99 per 10 s:";
    for (auto& [w, v] : windows) std::cerr << " " << w * 10 << "s=" << Percentile(v, 0.99) << "ms";
    std::cerr << "\n";
  }
  r.ack_p50_ms = Percentile(latencies, 0.5);
  r.ack_p99_ms = Percentile(latencies, 0.99);
  if (auto body = testing::HttpGet(metrics, "/metrics")) {
    const size_t at = body->find("\nrocefab_collector_observe_backpressure_seconds_total ");
    if (at != std::string::npos)
      std::cerr << "collector: observation held the store back "
                << body->substr(at + 55, body->find('\n', at + 1) - at - 55) << " s\n";
  }
  daemon.process->Signal(SIGTERM);
  daemon.process->Wait();
  const uint64_t db = DiskBytes(dir + "/collector.db"), wal = DiskBytes(dir + "/collector.db-wal");
  r.disk_bytes = db + wal;
  std::cerr << "collector: database " << db << " bytes, WAL " << wal << " bytes\n";
  return r;
}

// ---- the peers: the same series by remote-write ---------------------------

Result RunPeer(const Options& o, const std::string& name, const std::string& dir) {
  Result r;
  r.receiver = name;
  const int port = testing::FreeTcpPort();
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  std::vector<std::string> argv;
  std::string data;
  if (name == "prometheus") {
    data = dir + "/tsdb";
    std::ofstream(dir + "/prometheus.yml") << "global:\n  scrape_interval: 1m\n";
    argv = {"/usr/bin/prometheus", "--config.file=" + dir + "/prometheus.yml",
            "--storage.tsdb.path=" + data, "--web.listen-address=" + addr,
            "--web.enable-remote-write-receiver"};
  } else {
    data = dir + "/vm";
    argv = {"/usr/bin/victoria-metrics", "-httpListenAddr=" + addr, "-storageDataPath=" + data,
            "-loggerLevel=ERROR"};
  }
  testing::Subprocess peer({argv, {}, dir + "/" + name + ".log", dir + "/" + name + ".log"});
  if (!testing::WaitFor([&] { return testing::HttpGet(addr, name == "prometheus" ? "/-/ready" : "/health").has_value(); },
                        std::chrono::seconds(30))) {
    std::cerr << name << " did not start: " << testing::ReadFile(dir + "/" + name + ".log");
    return r;
  }
  const auto series = NicSeries(o.counters);
  Values values(o.agents, o.nics, static_cast<int>(series.size()));
  // Labels of every series, built once: a sender keeps them.
  std::vector<std::vector<std::vector<std::pair<std::string, std::string>>>> labels(o.agents);
  for (int a = 0; a < o.agents; ++a)
    for (int n = 0; n < o.nics; ++n)
      for (const SeriesDef& s : series) {
        auto l = SeriesLabels(v1::SCOPE_NIC, "bench-h" + std::to_string(a) + "/mlx5_" + std::to_string(n), 1,
                              s.prio ? *s.prio : -1, -1);
        l.emplace_back("__name__", MetricName(*s.def));
        std::sort(l.begin(), l.end());
        labels[a].push_back(std::move(l));
      }
  // Two sender threads (as the load generator has two cores to share),
  // each with a kept-alive connection; one request per agent poll.
  std::atomic<uint64_t> accepted{0}, sent{0};
  const ProcStats before = ReadProc(peer.pid());
  const auto start = Clock::now();
  const auto end = start + std::chrono::seconds(o.seconds);
  std::vector<std::thread> senders;
  std::mutex values_mu;
  for (int t = 0; t < 2; ++t) {
    senders.emplace_back([&, t] {
      CURL* curl = curl_easy_init();
      curl_slist* headers = nullptr;
      for (const char* h : {"Content-Type: application/x-protobuf", "Content-Encoding: snappy",
                            "X-Prometheus-Remote-Write-Version: 0.1.0"})
        headers = curl_slist_append(headers, h);
      const std::string url = "http://" + addr + "/api/v1/write";
      curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
      curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
      curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION,
                       +[](char*, size_t s, size_t n, void*) -> size_t { return s * n; });
      std::vector<uint64_t> v;
      std::string body, raw;
      const double per_agent_period = o.rate > 0 ? 1.0 / o.rate : 0;
      for (int64_t i = t;; i += 2) {
        const int a = static_cast<int>(i % o.agents);
        const int64_t tick = i / o.agents;
        if (per_agent_period > 0) {
          const auto at = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                                      per_agent_period * (static_cast<double>(tick) + static_cast<double>(a) / o.agents)));
          if (at >= end) break;
          std::this_thread::sleep_until(at);
        } else if (Clock::now() >= end) {
          break;
        }
        {
          std::lock_guard lock(values_mu);
          values.Next(a, &v);
        }
        prometheus::WriteRequest request;
        const int64_t ts_ms = NowUs() / 1000;
        for (size_t k = 0; k < v.size(); ++k) {
          auto* ts = request.add_timeseries();
          for (const auto& [ln, lv] : labels[a][k]) {
            auto* label = ts->add_labels();
            label->set_name(ln);
            label->set_value(lv);
          }
          auto* sample = ts->add_samples();
          sample->set_value(static_cast<double>(v[k]));
          sample->set_timestamp(ts_ms);
        }
        request.SerializeToString(&raw);
        body.clear();
        snappy::Compress(raw.data(), raw.size(), &body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
        sent += v.size();
        long code = 0;
        if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200 && code < 300) accepted += v.size();
      }
      curl_slist_free_all(headers);
      curl_easy_cleanup(curl);
    });
  }
  for (auto& s : senders) s.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (name == "victoria-metrics") testing::HttpGet(addr, "/internal/force_flush");
  const ProcStats after = ReadProc(peer.pid());
  r.cpu_s = after.cpu_s - before.cpu_s;
  r.proc = after;
  r.samples = accepted;
  r.lost = sent - accepted;
  peer.Signal(SIGTERM);
  peer.Wait();
  r.disk_bytes = DiskBytes(data);
  return r;
}

}  // namespace
}  // namespace rocefab

int main(int argc, char** argv) {
  using namespace rocefab;
  CLI::App app{"Ingest benchmark: rocefab-collectord against real remote-write receivers"};
  Options o;
  app.add_option("--agents", o.agents, "agent streams")->capture_default_str();
  app.add_option("--nics", o.nics, "NICs per agent")->capture_default_str();
  app.add_option("--counters", o.counters, "series per NIC (at most 65)")->capture_default_str();
  app.add_option("--seconds", o.seconds, "length of each run")->capture_default_str();
  app.add_option("--rate", o.rate, "batches per second per agent; 0: as fast as acks allow")
      ->capture_default_str();
  app.add_option("--peers", o.peers, "peers to run beside the collector (empty: none)")->delimiter(',');
  app.add_option("-o", o.output, "table or json")->capture_default_str();
  std::string keep;
  app.add_option("--keep", keep, "copy the receivers' data directories here after the run");
  bool remote_write = false;
  app.add_flag("--remote-write", remote_write,
               "also run the collector forwarding by remote-write to a real VictoriaMetrics (its row: "
               "collectord+rw; samples/s counts until the receiver has every sample)");
  app.add_flag("--mtls", o.mtls,
               "also run the collector with mutual TLS: a certificate per agent, each stream authorized "
               "by its identity (its row: rocefab-collectord (mTLS))");
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  testing::TempDir dir;
  std::vector<Result> results;
  std::filesystem::create_directories(dir / "collector");
  results.push_back(RunCollector(o, dir / "collector"));
  if (o.mtls) {
    std::filesystem::create_directories(dir / "collector-mtls");
    results.push_back(RunCollector(o, dir / "collector-mtls", "", /*mtls=*/true));
  }
  if (remote_write && std::filesystem::exists("/usr/bin/victoria-metrics")) {
    std::filesystem::create_directories(dir / "rw");
    const std::string addr = "127.0.0.1:" + std::to_string(testing::FreeTcpPort());
    testing::Subprocess vm({{"/usr/bin/victoria-metrics", "-httpListenAddr=" + addr,
                             "-storageDataPath=" + dir / "rw/vm", "-loggerLevel=ERROR"},
                            {},
                            dir / "rw/vm.log",
                            dir / "rw/vm.log"});
    if (testing::WaitFor([&] { return testing::HttpGet(addr, "/health").has_value(); }, std::chrono::seconds(30))) {
      const ProcStats vm_before = ReadProc(vm.pid());
      results.push_back(RunCollector(o, dir / "rw", "http://" + addr + "/api/v1/write"));
      const ProcStats vm_after = ReadProc(vm.pid());
      std::cerr << "remote-write: the receiving VictoriaMetrics spent " << vm_after.cpu_s - vm_before.cpu_s
                << " CPU-s\n";
    }
    vm.Signal(SIGTERM);
    vm.Wait();
  }
  for (const std::string& peer : o.peers) {
    if (peer.empty()) continue;
    const std::string bin = peer == "prometheus" ? "/usr/bin/prometheus" : "/usr/bin/victoria-metrics";
    if (!std::filesystem::exists(bin)) {
      std::cerr << "skipping " << peer << ": " << bin << " is not installed\n";
      continue;
    }
    std::filesystem::create_directories(dir / peer);
    results.push_back(RunPeer(o, peer, dir / peer));
  }
  if (!keep.empty()) std::filesystem::copy(dir.path(), keep, std::filesystem::copy_options::recursive);
  const uint64_t per_batch = static_cast<uint64_t>(o.nics) * NicSeries(o.counters).size();
  if (o.output == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const Result& r : results) j.push_back(r.Json());
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("ingest: %d agents x %llu samples per batch, %s, %d s each\n", o.agents,
              static_cast<unsigned long long>(per_batch),
              o.rate > 0 ? (std::to_string(o.rate) + " batch/s per agent").c_str() : "as fast as acked",
              o.seconds);
  std::printf("%-28s %12s %14s %14s %12s %10s %10s %10s\n", "RECEIVER", "SAMPLES/S", "CPU-S/M SAMPLES",
              "BYTES/SAMPLE", "PEAK RSS MB", "ACK P50", "ACK P99", "LOST");
  for (const Result& r : results) {
    const nlohmann::json j = r.Json();
    std::printf("%-28s %12.0f %14.2f %14.2f %12.0f %10s %10s %10llu\n", r.receiver.c_str(),
                j["samples_per_s"].get<double>(), j["cpu_s_per_million"].get<double>(),
                j["bytes_per_sample"].get<double>(), r.proc.peak_rss_mb,
                r.ack_p50_ms < 0 ? "-" : (std::to_string(r.ack_p50_ms).substr(0, 6) + "ms").c_str(),
                r.ack_p99_ms < 0 ? "-" : (std::to_string(r.ack_p99_ms).substr(0, 6) + "ms").c_str(),
                static_cast<unsigned long long>(r.lost));
  }
  return 0;
}
