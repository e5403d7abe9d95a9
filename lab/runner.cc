#include "lab/runner.h"

#include <wordexp.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <optional>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/clock.h"
#include "common/config_loader.h"
#include "common/fs_root.h"
#include <google/protobuf/util/json_util.h>
#include "common/grpc_util.h"
#include "common/process.h"
#include "common/strings.h"
#include "common/topology.h"
#include "lab/fabric_model.h"
#include "lab/outputs.h"
#include "lab/sonic_lab.h"
#include "lab/topology_gen.h"
#include "rocefab/v1/query.grpc.pb.h"

namespace rocefab::lab {
namespace {

std::atomic<bool> g_interrupted{false};

// The lab's own lateness worth recording: one default poll interval.
constexpr int64_t kLabLateUs = 1'000'000;

void OnSignal(int) { g_interrupted = true; }

std::string FaultName(v1::FaultKind kind) {
  std::string name = v1::FaultKind_Name(kind);
  const std::string prefix = "FAULT_KIND_";
  if (name.starts_with(prefix)) name = name.substr(prefix.size());
  for (char& c : name) c = static_cast<char>(std::tolower(c));
  return name;
}

// The daemons of a run, and how to reach the collector.
class Daemons {
 public:
  Daemons(std::string run_dir, std::string bin_dir)
      : run_dir_(std::move(run_dir)), bin_dir_(std::move(bin_dir)) {}
  ~Daemons() { Stop(); }

  // `live` holds hosts/ and switches/, the trees the agents read.
  // With `with_controller`, rocefab-controllerd will listen on a unix socket
  // in the run directory, and the collector is told to poll it.
  // Switch agents run with the sonic backend on `sonic`'s databases.
  void UseSonic(const SonicLab* sonic) { sonic_ = sonic; }
  // The agents' --fast-interval; none: their default.
  std::optional<double> fast_interval_s;

  absl::Status Start(const v1::Topology& topo, double poll_interval_s, const std::string& live,
                     const std::vector<std::string>& collector_args, bool with_controller,
                     uint32_t collectors = 1) {
    std::filesystem::create_directories(run_dir_ + "/logs");
    controller_listen_ = StrCat("unix:", run_dir_, "/logs/controller.sock");
    // A throwaway CA and one certificate per daemon and for the operator:
    // the lab runs with mutual TLS and authorization on, as production does.
    {
      std::vector<std::string> argv = {bin_dir_ + "/rocefab-dev-ca", pki(), "rocefab-collectord",
                                       "rocefab-controllerd", "lab-operator", "prometheus"};
      for (const auto& h : topo.hosts()) argv.push_back(h.name());
      for (const auto& sw : topo.switches()) argv.push_back(sw.name());
      auto ca = Subprocess::Spawn({argv, {}, run_dir_ + "/logs/dev-ca.out", run_dir_ + "/logs/dev-ca.out"});
      if (!ca.ok()) return ca.status();
      if ((*ca)->Wait() != 0)
        return absl::UnavailableError(StrCat("rocefab-dev-ca failed: ", ReadWholeFile(run_dir_ + "/logs/dev-ca.out").value_or("")));
    }
    // /metrics is HTTPS and asks for a client certificate from the lab's CA
    // (pki/prometheus.pem is one), as a production web config would.
    {
      std::ofstream web(metrics_web_config());
      web << "tls_server_config:\n  cert_file: rocefab-collectord.pem\n  key_file: rocefab-collectord.key\n"
             "  client_ca_file: ca.pem\n  client_auth_type: RequireAndVerifyClientCert\n";
      if (!web) return absl::UnavailableError(StrCat("cannot write ", metrics_web_config()));
    }
    // One collector per shard; zones are dealt out to shards in order.
    const uint32_t shards = std::max<uint32_t>(1, collectors);
    std::vector<std::string> zones;
    for (const auto& h : topo.hosts())
      if (std::find(zones.begin(), zones.end(), h.zone()) == zones.end()) zones.push_back(h.zone());
    std::sort(zones.begin(), zones.end());
    auto shard_of_zone = [&](const std::string& zone) -> size_t {
      const auto it = std::find(zones.begin(), zones.end(), zone);
      return it == zones.end() ? 0 : static_cast<size_t>(it - zones.begin()) % shards;
    };
    for (uint32_t shard = 0; shard < shards; ++shard) {
      const std::string suffix = shard == 0 ? "" : StrCat("-", shard);
      std::vector<std::string> collector_argv = {bin_dir_ + "/rocefab-collectord", "--listen", "127.0.0.1:0",
                                                 "--metrics-listen", "127.0.0.1:0", "--db",
                                                 run_dir_ + "/collector" + suffix + ".db",
                                                 "--topology", run_dir_ + "/topology.yaml",
                                                 "--grant", "operator=lab-operator",
                                                 "--metrics-web-config", metrics_web_config()};
      AddTls(&collector_argv, "rocefab-collectord");
      collector_argv.insert(collector_argv.end(), collector_args.begin(), collector_args.end());
      if (with_controller) {
        collector_argv.push_back("--controller");
        collector_argv.push_back(controller_listen_);
      }
      NotifySocket collector_ready(run_dir_ + "/logs/.notify-collector" + suffix);
      if (!collector_ready.ok()) return absl::UnavailableError("cannot create a notify socket");
      auto collector = Subprocess::Spawn(
          {collector_argv,
           {{"NOTIFY_SOCKET", collector_ready.path()}},
           run_dir_ + "/logs/collectord" + suffix + ".out",
           run_dir_ + "/logs/collectord" + suffix + ".log"});
      if (!collector.ok()) return collector.status();
      processes_.push_back(std::move(*collector));
      auto status = collector_ready.WaitReady(std::chrono::seconds(30));
      if (!status)
        return absl::UnavailableError(
            StrCat("rocefab-collectord did not become ready; see logs/collectord", suffix, ".log"));
      shard_grpc_.push_back(StatusField(*status, "grpc"));
      if (shard == 0) metrics_ = StatusField(*status, "metrics");
    }
    // The CLI (and whatever the scenario runs through it) fans out to every shard.
    grpc_.clear();
    for (const std::string& address : shard_grpc_) grpc_ += (grpc_.empty() ? "" : ",") + address;

    const std::string interval = StrCat(static_cast<int>(poll_interval_s * 1000), "ms");
    std::vector<std::string> fast_interval_args;
    if (fast_interval_s)
      fast_interval_args = {"--fast-interval", StrCat(static_cast<int>(*fast_interval_s * 1000), "ms")};
    NotifySocket agents_ready(run_dir_ + "/logs/.notify-agents");
    size_t expected = 0;
    for (const auto& host : topo.hosts()) {
      const std::string root = live + "/hosts/" + host.name();
      std::vector<std::string> argv = {bin_dir_ + "/rocefab-hostd", "--collector", shard_grpc_[shard_of_zone(host.zone())], "--interval", interval,
            "--host-name", host.name(), "--sysfs-root", root + "/sys", "--proc-root",
            root + "/proc", "--ethtool-dir", root + "/ethtool", "--no-netlink",
            "--inspector-glob", root + "/nccl-inspector-*"};
      argv.insert(argv.end(), fast_interval_args.begin(), fast_interval_args.end());
      AddTls(&argv, host.name());
      auto p = Subprocess::Spawn(
          {argv,
           {{"NOTIFY_SOCKET", agents_ready.path()}},
           run_dir_ + "/logs/hostd-" + host.name() + ".out",
           run_dir_ + "/logs/hostd-" + host.name() + ".log"});
      if (!p.ok()) return p.status();
      processes_.push_back(std::move(*p));
      ++expected;
    }
    for (const auto& sw : topo.switches()) {
      std::vector<std::string> argv = {bin_dir_ + "/rocefab-switchd", "--collector", shard_grpc_[shard_of_zone(sw.zone())], "--interval", interval,
            "--backend", sonic_ != nullptr ? "sonic" : "file", "--state-dir", live + "/switches", "--switch-name",
            sw.name(), "--listen", "127.0.0.1:0"};
      if (sonic_ != nullptr) argv.insert(argv.end(), {"--sonic-db-config", sonic_->DbConfigPath(sw.name())});
      argv.insert(argv.end(), fast_interval_args.begin(), fast_interval_args.end());
      AddTls(&argv, sw.name());
      auto p = Subprocess::Spawn(
          {argv,
           {{"NOTIFY_SOCKET", agents_ready.path()}},
           run_dir_ + "/logs/switchd-" + sw.name() + ".out",
           run_dir_ + "/logs/switchd-" + sw.name() + ".log"});
      if (!p.ok()) return p.status();
      processes_.push_back(std::move(*p));
      ++expected;
    }
    for (size_t i = 0; i < expected; ++i) {
      auto ready = agents_ready.WaitReady(std::chrono::seconds(30));
      if (!ready)
        return absl::UnavailableError(StrCat("only ", i, " of ", expected, " agents became ready"));
      // Switch agents also serve ApplyConfig; remember where.
      const std::string sw = StatusField(*ready, "switch");
      if (!sw.empty()) switch_endpoints_[sw] = StatusField(*ready, "grpc");
    }
    v1::TlsSettings tls;
    tls.set_ca(pki() + "/ca.pem");
    tls.set_cert(pki() + "/lab-operator.pem");
    tls.set_key(pki() + "/lab-operator.key");
    auto channel = MakeChannel(shard_grpc_.front(), tls);
    if (!channel.ok()) return channel.status();
    query_ = v1::Query::NewStub(*channel);
    return absl::OkStatus();
  }

  std::string pki() const { return run_dir_ + "/pki"; }
  std::string metrics_web_config() const { return pki() + "/metrics-web.yaml"; }
  // `identity`'s certificate, as daemon flags.
  void AddTls(std::vector<std::string>* argv, const std::string& identity) const {
    for (const std::string& flag : std::vector<std::string>{"--tls-ca", pki() + "/ca.pem", "--tls-cert",
                                                            pki() + "/" + identity + ".pem", "--tls-key",
                                                            pki() + "/" + identity + ".key"})
      argv->push_back(flag);
  }
  // The operator's certificate, as the CLI (and the Slurm scripts) take it.
  // With a controller running, it is the CLI's controller too.
  std::map<std::string, std::string> CliEnv() const {
    std::map<std::string, std::string> env = {{"ROCEFAB_TLS_CA", pki() + "/ca.pem"},
                                              {"ROCEFAB_TLS_CERT", pki() + "/lab-operator.pem"},
                                              {"ROCEFAB_TLS_KEY", pki() + "/lab-operator.key"}};
    if (!controller_address().empty()) env["ROCEFAB_CONTROLLER"] = controller_address();
    env["ROCEFAB_TOPOLOGY"] = run_dir_ + "/topology.yaml";  // rocefab check roce
    return env;
  }

  // SIGTERM everything (agents first, collector last), then SIGKILL
  // stragglers. Returns how many had to be killed.
  int Stop() {
    int killed = 0;
    if (controller_) {
      controller_->Signal(SIGTERM);
      killed += Reap(*controller_);
      controller_.reset();
    }
    if (processes_.empty()) return killed;
    // Agents flush to the collector, so the collector stops last.
    for (size_t j = 1; j < processes_.size(); ++j) processes_[j]->Signal(SIGTERM);
    for (size_t j = 1; j < processes_.size(); ++j) killed += Reap(*processes_[j]);
    processes_[0]->Signal(SIGTERM);
    killed += Reap(*processes_[0]);
    processes_.clear();
    return killed;
  }

  // Starts (or restarts) rocefab-controllerd with `policy` and applies it.
  absl::Status ApplyPolicy(const std::string& policy, const std::string& why) {
    if (controller_) {
      controller_->Signal(SIGTERM);
      controller_->Wait();
      controller_.reset();
    }
    NotifySocket ready(run_dir_ + "/logs/.notify-controller");
    // TE, when the policy runs it, re-allocates every 5 s and rolls out as
    // the lab's operator does: a canary, then the rest, with a short gate.
    std::ofstream(run_dir_ + "/controllerd.yaml")
        << "# written by rocefab-lab\nte: {period_s: 5, canary: 1, wave_size: 64, gate_seconds: 2}\n";
    std::vector<std::string> argv = {bin_dir_ + "/rocefab-controllerd", "--config", run_dir_ + "/controllerd.yaml",
          "--listen", controller_listen_, "--db",
          run_dir_ + "/controller.db", "--topology", run_dir_ + "/topology.yaml", "--policy", policy,
          "--collector", grpc_, "--switch-agents-json", run_dir_ + "/endpoints.json",
          // The operator may roll out; the collector's automatic remediation may drain.
          "--grant", "admin=lab-operator", "--grant", "operator=rocefab-collectord"};
    AddTls(&argv, "rocefab-controllerd");
    auto controller = Subprocess::Spawn(
        {argv,
         {{"NOTIFY_SOCKET", ready.path()}},
         run_dir_ + "/logs/controllerd.out",
         run_dir_ + "/logs/controllerd.log"});
    if (!controller.ok()) return controller.status();
    controller_ = std::move(*controller);
    auto status = ready.WaitReady(std::chrono::seconds(30));
    if (!status) return absl::UnavailableError("rocefab-controllerd did not become ready; see logs/controllerd.log");
    controller_address_ = StatusField(*status, "grpc");
    const std::string out = run_dir_ + "/logs/apply.out";
    auto apply = Subprocess::Spawn({{bin_dir_ + "/rocefab", "--controller", controller_address_, "config",
                                     "apply", "--canary", "1", "--wave-size", "64", "--gate-seconds",
                                     "0", "--why", why},
                                    CliEnv(),
                                    out,
                                    out});
    if (!apply.ok()) return apply.status();
    if ((*apply)->Wait() != 0)
      return absl::UnavailableError(StrCat("config apply failed; see ", out, ": ", ReadWholeFile(out).value_or("")));
    return absl::OkStatus();
  }
  const std::string& controller_address() const { return controller_address_; }

  size_t count() const { return processes_.size(); }
  const std::map<std::string, std::string>& switch_endpoints() const { return switch_endpoints_; }
  // Every collector shard, comma-separated, as the CLI takes them.
  const std::string& grpc() const { return grpc_; }
  const std::string& first_collector() const { return shard_grpc_.front(); }
  const std::string& metrics() const { return metrics_; }
  v1::Query::Stub* query() { return query_.get(); }

 private:
  static int Reap(Subprocess& p) {
    if (p.Exited()) return 0;
    if (p.WaitFor(std::chrono::seconds(10))) return 0;
    p.Signal(SIGKILL);
    p.Wait();
    return 1;
  }

  std::string run_dir_, bin_dir_, grpc_, metrics_;
  const SonicLab* sonic_ = nullptr;
  std::vector<std::string> shard_grpc_;  // one per collector shard
  std::vector<std::unique_ptr<Subprocess>> processes_;  // [0] is the collector
  std::map<std::string, std::string> switch_endpoints_;  // switch -> SwitchAgent gRPC
  std::unique_ptr<Subprocess> controller_;
  std::string controller_address_;
  std::string controller_listen_;
  std::unique_ptr<v1::Query::Stub> query_;
};

// What the collector sees right now, in one line.
std::string CollectorView(Daemons& daemons) {
  if (daemons.query() == nullptr) return "";
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::ListAgentsResponse agents;
  if (!daemons.query()->ListAgents(&context, {}, &agents).ok()) return "collector: unreachable";
  int connected = 0;
  for (const auto& a : agents.agents()) connected += a.connected();
  std::string view = StrCat("collector: ", connected, "/", daemons.count() - 1, " agents");
  // The loudest PFC sender among switch ports and NICs over the last 5 s.
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::GetCountersRequest request;
  request.set_counter("pfc_tx_pause_frames");
  request.set_since_us(SystemClock::Instance().NowUs() - 5'000'000);
  v1::GetCountersResponse counters;
  if (daemons.query()->GetCounters(&ctx2, request, &counters).ok()) {
    const v1::CounterRow* top = nullptr;
    for (const auto& row : counters.rows())
      if (row.has_rate() && row.rate_per_second() > 0 &&
          (top == nullptr || row.rate_per_second() > top->rate_per_second()))
        top = &row;
    if (top != nullptr) {
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.1fk/s", top->rate_per_second() / 1e3);
      StrAppend(&view, ", top PFC sender ", top->entity(), " ", rate);
    } else {
      StrAppend(&view, ", no PFC pauses");
    }
  }
  return view;
}

// The lab itself fell behind the wall clock: [from, to) in Unix µs.
using LateSpans = std::vector<std::pair<int64_t, int64_t>>;

// Adds [from, to) to spans kept in order, joined to the last one where
// they touch.
void AddSpan(LateSpans* spans, int64_t from, int64_t to) {
  if (!spans->empty() && spans->back().second >= from) spans->back().second = std::max(spans->back().second, to);
  else spans->emplace_back(from, to);
}

nlohmann::json TruthJson(const v1::Scenario& scenario, const FabricModel& model,
                         int64_t start_unix_us, const LateSpans& late, const LateSpans& slips) {
  nlohmann::json faults = nlohmann::json::array();
  for (const ActiveFault& f : model.faults()) {
    const double end = std::min(f.end_s, model.now_s());
    faults.push_back({{"kind", FaultName(f.spec.kind())},
                      {"target", f.spec.target()},
                      {"start_s", f.start_s},
                      {"end_s", f.end_s >= 1e17 ? nlohmann::json(nullptr) : nlohmann::json(f.end_s)},
                      {"start_unix_us", start_unix_us + static_cast<int64_t>(f.start_s * 1e6)},
                      {"end_unix_us", f.end_s >= 1e17 ? nlohmann::json(nullptr)
                                                      : nlohmann::json(start_unix_us + static_cast<int64_t>(f.end_s * 1e6))},
                      {"happened", model.now_s() > f.start_s},
                      {"observable", f.observable},
                      {"observable_from_unix_us",
                       f.observable ? nlohmann::json(start_unix_us + static_cast<int64_t>(f.observable_from_s * 1e6))
                                    : nlohmann::json(nullptr)},
                      {"victim", f.spec.victim()},
                      {"observed_until_s", end}});
    if (f.acts_on_traffic) faults.back()["touched_jobs"] = f.touched_jobs;
  }
  nlohmann::json jobs = nlohmann::json::array();
  for (size_t j = 0; j < model.jobs().size(); ++j) {
    nlohmann::json hosts = nlohmann::json::array();
    for (int h : model.job_hosts(static_cast<int>(j)))
      hosts.push_back(model.topology().proto().hosts(h).name());
    jobs.push_back({{"id", model.jobs()[j].id}, {"name", model.jobs()[j].name}, {"hosts", hosts}});
  }
  // Conditions of the model that are no injected fault but real all the
  // same: flows colliding on a switch's uplinks (FabricModel::collisions),
  // and more offered to a group of links than it carries
  // (FabricModel::oversubscribed).
  nlohmann::json conditions = nlohmann::json::array();
  for (const auto& [kind, by_switch] : {std::pair{"ecmp_collision", &model.collisions()},
                                         std::pair{"oversubscription", &model.oversubscribed()}})
    for (const auto& [sw, spans] : *by_switch)
      for (const auto& [from_s, to_s] : spans)
        conditions.push_back({{"kind", kind},
                              {"target", sw},
                              {"start_unix_us", start_unix_us + static_cast<int64_t>(from_s * 1e6)},
                              {"end_unix_us", start_unix_us + static_cast<int64_t>(to_s * 1e6)}});
  // Seconds ("lab_late") in which the lab wrote nothing because it could not keep up
  // (a loaded machine): the counters and records of that time came late,
  // and a job seen completing nothing meanwhile is the lab's doing.
  // And ("lab_slip") every stretch the lab slipped, however short: a tick
  // that started late pushes everything after it that much later on the
  // wall clock, so slips under a poll interval each still add up (a
  // generated run, seed 61 run 43: a collective every 2 s came 4.9 s after
  // the one before, with one slip of 1.3 s logged and 1.5 s more in
  // shorter ones).
  for (const auto& [kind, spans] : {std::pair{"lab_late", &late}, std::pair{"lab_slip", &slips}})
    for (const auto& [from_us, to_us] : *spans)
      conditions.push_back({{"kind", kind}, {"target", ""}, {"start_unix_us", from_us}, {"end_unix_us", to_us}});
  return {{"scenario", scenario.name()},
          {"start_unix_us", start_unix_us},
          {"duration_s", model.now_s()},
          {"faults", faults},
          {"conditions", conditions},
          {"jobs", jobs}};
}

}  // namespace

void ScaleScenarioTime(v1::Scenario* s, double factor) {
  s->set_duration_s(s->duration_s() * factor);
  for (auto& job : *s->mutable_jobs()) job.set_start_s(job.start_s() * factor);
  for (auto& f : *s->mutable_faults()) {
    f.set_at_s(f.at_s() * factor);
    f.set_duration_s(f.duration_s() * factor);
    f.set_flap_down_s(f.flap_down_s() * factor);
    f.set_flap_up_s(f.flap_up_s() * factor);
  }
  for (auto& c : *s->mutable_policy_changes()) c.set_at_s(c.at_s() * factor);
}

absl::StatusOr<v1::Scenario> LoadScenario(const std::string& path) {
  v1::Scenario scenario;
  if (auto status = LoadYamlConfigFile(path, &scenario); !status.ok()) return status;
  if (scenario.name().empty())
    scenario.set_name(std::filesystem::path(path).stem().string());
  if (scenario.duration_s() <= 0) scenario.set_duration_s(60);
  if (scenario.tick_s() <= 0) scenario.set_tick_s(0.5);
  if (scenario.poll_interval_s() <= 0) scenario.set_poll_interval_s(1);
  if (scenario.tick_s() < 0.05 || scenario.tick_s() > 10)
    return absl::InvalidArgumentError(StrCat(path, ": tick_s must be between 0.05 and 10"));
  if (!scenario.topology().file().empty() == scenario.topology().has_generate())
    return absl::InvalidArgumentError(
        StrCat(path, ": topology needs exactly one of file or generate"));
  if (scenario.has_nic_stall_timeout_ms() && scenario.nic_stall_timeout_ms() != 0 &&
      (scenario.nic_stall_timeout_ms() < 80 || scenario.nic_stall_timeout_ms() > 8000))
    return absl::InvalidArgumentError(
        StrCat(path, ": nic_stall_timeout_ms must be 0 (off) or between 80 and 8000, as mlx5 accepts"));
  for (const auto& fault : scenario.faults()) {
    if (fault.kind() == v1::FAULT_KIND_UNSPECIFIED)
      return absl::InvalidArgumentError(StrCat(path, ": a fault has no kind"));
    if (fault.target().empty())
      return absl::InvalidArgumentError(StrCat(path, ": fault ", FaultName(fault.kind()), " has no target"));
    if (fault.at_s() < 0 || fault.duration_s() < 0)
      return absl::InvalidArgumentError(StrCat(path, ": fault times must not be negative"));
  }
  if (scenario.jobs().empty()) return absl::InvalidArgumentError(StrCat(path, ": no jobs"));
  return scenario;
}

absl::StatusOr<std::shared_ptr<const Topology>> TopologyForScenario(const v1::Scenario& scenario,
                                                                   const std::string& scenario_path) {
  if (!scenario.topology().file().empty()) {
    std::filesystem::path file = scenario.topology().file();
    if (file.is_relative()) file = std::filesystem::path(scenario_path).parent_path() / file;
    return Topology::Load(file.string());
  }
  const v1::GenerateSpec& g = scenario.topology().generate();
  TopologyParams params;
  if (g.zones()) params.zones = g.zones();
  if (g.racks_per_zone()) params.racks_per_zone = g.racks_per_zone();
  if (g.hosts_per_rack()) params.hosts_per_rack = g.hosts_per_rack();
  if (g.nics_per_host()) params.nics_per_host = g.nics_per_host();
  if (g.ctsw_per_zone()) params.ctsw_per_zone = g.ctsw_per_zone();
  params.atsw = g.atsw();
  if (g.uplink_ratio() > 0) params.uplink_ratio = g.uplink_ratio();
  auto proto = GenerateTopology(params);
  if (!proto.ok()) return proto.status();
  return Topology::Build(std::move(*proto));
}

int Run(const RunOptions& options) {
  auto fail = [](const absl::Status& status) {
    std::cerr << "rocefab-lab: " << status.message() << "\n";
    return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  };
  if (options.daemons && !options.write_files)
    return fail(absl::InvalidArgumentError("--no-files needs --no-daemons: daemons read the files"));
  auto scenario = LoadScenario(options.scenario_path);
  if (!scenario.ok()) return fail(scenario.status());
  if (options.time_scale != 1) ScaleScenarioTime(&*scenario, options.time_scale);
  if (options.duration_s > 0) scenario->set_duration_s(options.duration_s);
  auto topology = TopologyForScenario(*scenario, options.scenario_path);
  if (!topology.ok()) return fail(topology.status());
  auto model = FabricModel::Create(*topology, *scenario);
  if (!model.ok()) return fail(model.status());

  // A run directory is ours to fill; refuse to clobber anything else.
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(options.run_dir)) {
    if (!fs::is_directory(options.run_dir) ||
        (!fs::is_empty(options.run_dir) && !fs::exists(options.run_dir + "/.rocefab-lab-run")))
      return fail(absl::InvalidArgumentError(StrCat(
          "--run-dir ", options.run_dir, " exists and is not an earlier lab run; pick another")));
    fs::remove_all(options.run_dir, ec);
  }
  fs::create_directories(options.run_dir, ec);
  if (ec) return fail(absl::UnavailableError(StrCat("cannot create ", options.run_dir, ": ", ec.message())));
  std::ofstream(options.run_dir + "/.rocefab-lab-run") << "rocefab-lab run directory\n";
  {
    std::ofstream topo_out(options.run_dir + "/topology.yaml");
    WriteTopologyYaml((*topology)->proto(), topo_out);
  }

  // The live trees (hosts/, switches/) go on a tmpfs and are linked from the
  // run directory; they are moved back when the run ends.
  std::string live = options.live_dir;
  if (live.empty() && ::access("/dev/shm", W_OK) == 0)
    live = StrCat("/dev/shm/rocefab-lab-", getpid());
  if (live.empty()) live = options.run_dir;
  const bool separate_live = live != options.run_dir;
  if (separate_live) {
    fs::remove_all(live, ec);
    fs::create_directories(live + "/hosts", ec);
    fs::create_directories(live + "/switches", ec);
    fs::create_directory_symlink(live + "/hosts", options.run_dir + "/hosts", ec);
    fs::create_directory_symlink(live + "/switches", options.run_dir + "/switches", ec);
    if (ec) return fail(absl::UnavailableError(StrCat("cannot prepare ", live, ": ", ec.message())));
  }
  auto settle = [&] {
    if (!separate_live) return;
    // Replace the links by the trees themselves.
    for (const char* tree : {"hosts", "switches"}) {
      const std::string link = options.run_dir + "/" + tree;
      std::error_code e;
      fs::remove(link, e);
      fs::copy(live + "/" + tree, link, fs::copy_options::recursive, e);
    }
    std::error_code e;
    fs::remove_all(live, e);
  };
  struct Settle {
    std::function<void()> f;
    ~Settle() { f(); }
  } settle_at_exit{settle};

  OutputWriter writer(live, **model);
  const Clock& clock = SystemClock::Instance();
  const int64_t start_us = clock.NowUs();
  // SONiC switches: their databases in a real redis-server.
  std::unique_ptr<SonicLab> sonic;
  if (scenario->switch_backend() == "sonic" && options.write_files) {
    auto started = SonicLab::Start(options.run_dir + "/sonic", (*topology)->proto(),
                                   static_cast<uint64_t>((*model)->constants().buffer_bytes));
    if (!started.ok()) return fail(started.status());
    sonic = std::move(*started);
    writer.UseSonic(sonic.get());
    std::printf("rocefab-lab: switches run SONiC's databases in redis-server (%s/sonic/redis.sock); "
                "their agents use --backend sonic\n",
                options.run_dir.c_str());
  } else if (!scenario->switch_backend().empty() && scenario->switch_backend() != "file") {
    return fail(absl::InvalidArgumentError(
        StrCat("switch_backend: '", scenario->switch_backend(), "' is neither file nor sonic")));
  }
  if (options.write_files) {
    if (auto s = writer.Init(); !s.ok()) return fail(s);
    if (auto s = writer.WriteCounters(start_us); !s.ok()) return fail(s);
  }

  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  const v1::Topology& topo = (*topology)->proto();
  std::printf("rocefab-lab: scenario %s: %d hosts, %d switches, %d links, %zu jobs, %zu faults\n",
              scenario->name().c_str(), topo.hosts_size(), topo.switches_size(), topo.links_size(),
              static_cast<size_t>(scenario->jobs().size()), static_cast<size_t>(scenario->faults().size()));
  Daemons daemons(options.run_dir, options.bin_dir);
  daemons.UseSonic(sonic.get());
  if (options.daemons) {
    if (scenario->has_fast_interval_s()) daemons.fast_interval_s = scenario->fast_interval_s();
    if (auto s = daemons.Start(topo, scenario->poll_interval_s(), live, options.collector_args,
                                !scenario->policy().empty(), scenario->collectors());
        !s.ok())
      return fail(s);
    std::printf("rocefab-lab: started rocefab-collectord (gRPC %s, metrics https://%s/metrics), "
                "%d rocefab-hostd, %d rocefab-switchd; every channel is mutual TLS with a certificate "
                "per daemon from a throwaway CA (%s/pki)\n",
                daemons.grpc().c_str(), daemons.metrics().c_str(), topo.hosts_size(),
                topo.switches_size(), options.run_dir.c_str());
    std::ofstream(options.run_dir + "/endpoints.json")
        << nlohmann::json{{"collector", daemons.grpc()},
                          {"metrics", daemons.metrics()},
                          {"metrics_url", StrCat("https://", daemons.metrics(), "/metrics")},
                          {"pki", daemons.pki()},
                          {"switch_agents", daemons.switch_endpoints()}}
               .dump(2)
        << "\n";
  }
  auto policy_path = [&](const std::string& file) {
    fs::path path = file;
    if (path.is_relative()) path = fs::path(options.scenario_path).parent_path() / path;
    return path.string();
  };
  if (options.daemons && !scenario->policy().empty()) {
    if (auto s = daemons.ApplyPolicy(policy_path(scenario->policy()), "scenario start"); !s.ok())
      return fail(s);
    std::printf("rocefab-lab: started rocefab-controllerd (gRPC %s) and applied %s\n",
                daemons.controller_address().c_str(), scenario->policy().c_str());
  }
  std::vector<bool> policy_done(scenario->policy_changes_size(), false);
  // Jobs are registered with the collector as they start, as a Slurm prolog
  // would: a ranks file and `rocefab job start`.
  // A job that stops (a noisy neighbour whose fault ended) is ended as a
  // Slurm epilog would: `rocefab job end`.
  std::vector<bool> registered(scenario->jobs_size(), false), job_ended(scenario->jobs_size(), false);
  // `rocefab job <args>` against the collector, its output in logs/<log>.
  auto job_cli = [&](const FabricModel& m, std::vector<std::string> args, const std::string& log,
                     const char* doing, const std::string& id) {
    std::vector<std::string> argv = {options.bin_dir + "/rocefab", "--collector", daemons.grpc(), "job"};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string out = StrCat(options.run_dir, "/logs/", log);
    auto cli = Subprocess::Spawn({argv, daemons.CliEnv(), out, out});
    if (!cli.ok() || (*cli)->Wait() != 0)
      std::printf("t=%6.1fs  JOB    %s job %s failed; see logs/%s\n", m.now_s(), doing, id.c_str(), log.c_str());
  };
  auto register_jobs = [&](const FabricModel& m) {
    for (size_t j = 0; j < m.jobs().size(); ++j) {
      if (registered[j] && !job_ended[j] && !m.jobs()[j].running && options.daemons) {
        job_ended[j] = true;
        job_cli(m, {"end", m.jobs()[j].id}, "job-end.out", "ending", m.jobs()[j].id);
        continue;
      }
      if (registered[j] || !m.jobs()[j].running || !options.daemons) continue;
      registered[j] = true;
      const std::string ranks_path = StrCat(options.run_dir, "/logs/ranks-", m.jobs()[j].id, ".txt");
      std::ofstream ranks(ranks_path);
      const int gpus = m.gpus_per_host(static_cast<int>(j));
      int rank = 0;
      for (int h : m.job_hosts(static_cast<int>(j))) {
        const v1::TopoHost& host = topo.hosts(h);
        for (int g = 0; g < gpus; ++g) {
          std::string nic = StrCat("mlx5_", g);
          for (const auto& n : host.nics())
            if (static_cast<int>(n.gpu()) == g) nic = n.name();
          ranks << rank++ << " " << host.name() << " " << g << " " << nic << "\n";
        }
      }
      ranks.close();
      job_cli(m,
              {"start", "--id", m.jobs()[j].id, "--name", m.jobs()[j].name.empty() ? m.jobs()[j].id : m.jobs()[j].name,
               "--ranks", ranks_path},
              "job-start.out", "registering", m.jobs()[j].id);
    }
  };
  std::ofstream timeline_out(options.run_dir + "/timeline.jsonl");
  std::fflush(stdout);

  const double tick = scenario->tick_s();
  const int64_t tick_us = static_cast<int64_t>(tick * 1e6);
  double next_timeline = 0;
  std::vector<bool> announced(model.value()->faults().size(), false), ended(announced.size(), false);
  std::vector<CollectiveRecord> records;
  int64_t next_tick_mono = clock.MonotonicUs();
  LateSpans late, slips;
  // Fabric time 0 on the wall clock: the daemons are up, the first tick runs now.
  const int64_t zero_us = clock.NowUs();
  bool kept_announced = false, shown = false;
  auto show = [&] {
    if (!options.daemons) return;
    // What an operator would type at this point, against the live collector.
    for (const std::string& command : options.show_commands) {
      std::vector<std::string> argv = {options.bin_dir + "/rocefab", "--collector", daemons.grpc()};
      // The words as a shell would split them (quotes, no substitution).
      wordexp_t words;
      if (wordexp(command.c_str(), &words, WRDE_NOCMD) != 0) {
        std::printf("\n$ rocefab %s\nrocefab-lab: --show: cannot split that command line\n", command.c_str());
        continue;
      }
      for (size_t i = 0; i < words.we_wordc; ++i) argv.push_back(words.we_wordv[i]);
      wordfree(&words);
      std::printf("\n$ rocefab %s\n", command.c_str());
      std::fflush(stdout);
      const std::string out_path = options.run_dir + "/logs/show.out";
      auto cli = Subprocess::Spawn({argv, daemons.CliEnv(), out_path, out_path});
      if (cli.ok()) {
        const int code = (*cli)->Wait();
        std::ifstream in(out_path);
        std::cout << in.rdbuf();
        // Scripts and tests read the exit code here.
        if (code != 0) std::cout << "(exit " << code << ")\n";
        std::fflush(stdout);
        std::filesystem::remove(out_path);
      }
    }
  };

  // Routing follows what the switch agents have applied (applied.json, written
  // by their file backend when a config lands).
  std::map<std::string, fs::file_time_type> applied_seen;
  auto pick_up_applied = [&](FabricModel& m) {
    int changed = 0;
    std::string example;
    for (const auto& sw : topo.switches()) {
      if (sonic) {
        // What orchagent and bgpcfgd would now run, from CONFIG_DB.
        auto config = sonic->ReadConfigIfChanged(sw.name());
        if (!config.ok()) {
          std::printf("t=%6.1fs  CONFIG %s: CONFIG_DB unreadable (%s), routing unchanged\n", m.now_s(),
                      sw.name().c_str(), std::string(config.status().message()).c_str());
          continue;
        }
        if (!config->has_value()) continue;
        m.SetAppliedConfig(**config);
        ++changed;
        if (example.empty()) example = "from CONFIG_DB";
        continue;
      }
      const std::string path = live + "/switches/" + sw.name() + "/applied.json";
      std::error_code e;
      const auto mtime = fs::last_write_time(path, e);
      if (e || applied_seen[sw.name()] == mtime) continue;
      applied_seen[sw.name()] = mtime;
      auto text = ReadWholeFile(path);
      v1::SwitchConfig config;
      if (!text.ok() || !google::protobuf::util::JsonStringToMessage(*text, &config).ok()) {
        std::printf("t=%6.1fs  CONFIG %s: unreadable applied.json, routing unchanged\n", m.now_s(),
                    sw.name().c_str());
        continue;
      }
      m.SetAppliedConfig(config);
      ++changed;
      if (example.empty())
        example = StrCat("generation ", config.generation(), ", scheme ",
                         v1::RoutingScheme_Name(config.scheme()).substr(15));
    }
    if (changed > 0)
      std::printf("t=%6.1fs  CONFIG %d switch(es) now route by applied config (%s)\n", m.now_s(),
                  changed, example.c_str());
  };
  while (!g_interrupted) {
    FabricModel& m = **model;
    if (options.write_files) pick_up_applied(m);
    for (int i = 0; i < scenario->policy_changes_size(); ++i) {
      const v1::PolicyChange& change = scenario->policy_changes(i);
      if (policy_done[i] || m.now_s() < change.at_s() || !options.daemons) continue;
      policy_done[i] = true;
      std::printf("t=%6.1fs  CONTROL rolling out %s\n", m.now_s(), change.policy().c_str());
      std::fflush(stdout);
      if (auto s = daemons.ApplyPolicy(policy_path(change.policy()), StrCat("scenario at ", change.at_s(), "s"));
          !s.ok())
        std::printf("t=%6.1fs  CONTROL rollout failed: %s\n", m.now_s(), std::string(s.message()).c_str());
    }
    if (m.now_s() >= scenario->duration_s()) {
      if (!shown) {
        shown = true;
        show();
      }
      if (!options.keep) break;
      if (!kept_announced && options.daemons) {
        kept_announced = true;
        std::printf("rocefab-lab: scenario time is over; still running for exploration (--keep).\n"
                    "  export ROCEFAB_COLLECTOR=%s\n"
                    "  export ROCEFAB_TLS_CA=%s/ca.pem ROCEFAB_TLS_CERT=%s/lab-operator.pem "
                    "ROCEFAB_TLS_KEY=%s/lab-operator.key\n"
                    "%s%s%s"
                    "  rocefab agents\n"
                    "  metrics: curl --cacert %s/ca.pem --cert %s/prometheus.pem --key %s/prometheus.key "
                    "https://%s/metrics\n  stop with Ctrl-C or: kill %d\n",
                    daemons.grpc().c_str(), daemons.pki().c_str(), daemons.pki().c_str(), daemons.pki().c_str(),
                    daemons.controller_address().empty() ? "" : "  export ROCEFAB_CONTROLLER=",
                    daemons.controller_address().c_str(), daemons.controller_address().empty() ? "" : "\n",
                    daemons.pki().c_str(), daemons.pki().c_str(), daemons.pki().c_str(), daemons.metrics().c_str(),
                    getpid());
        std::fflush(stdout);
      }
    }
    if (options.realtime) {
      // A tick's counters appear when its fabric time has passed on the wall
      // clock. Pacing, not synchronisation: the daemons poll on their own
      // schedule.
      next_tick_mono += tick_us;
      const int64_t wait = next_tick_mono - clock.MonotonicUs();
      if (wait > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(wait));
      } else {
        next_tick_mono = clock.MonotonicUs();
        const int64_t now = clock.NowUs();
        if (wait < 0) AddSpan(&slips, now + wait, now);
        // A tick a whole default poll interval late: what the daemons read
        // in that time was the lab's past. Said, and kept for the score.
        if (-wait >= kLabLateUs) {
          AddSpan(&late, now + wait, now);
          std::fprintf(stderr, "rocefab-lab: t=%.1fs: the lab ran %.1f s behind the wall clock (a loaded machine?)\n",
                       m.now_s(), static_cast<double>(-wait) / 1e6);
        }
      }
    }
    records.clear();
    m.Step(tick, &records);
    register_jobs(m);
    const int64_t now_us = options.realtime ? clock.NowUs()
                                            : zero_us + static_cast<int64_t>(m.now_s() * 1e6);
    if (options.write_files) {
      if (auto s = writer.WriteCounters(now_us); !s.ok()) {
        // Ctrl-C reaches the whole process group: the redis-server of SONiC
        // switches may be gone before this last tick.
        if (g_interrupted) break;
        return fail(s);
      }
      if (auto s = writer.WriteCollectives(records, now_us); !s.ok()) return fail(s);
    }
    for (size_t i = 0; i < m.faults().size(); ++i) {
      const ActiveFault& f = m.faults()[i];
      if (f.active && !announced[i]) {
        announced[i] = true;
        std::printf("t=%6.1fs  FAULT  %s on %s starts\n", m.now_s(), FaultName(f.spec.kind()).c_str(),
                    f.spec.target().c_str());
      }
      if (announced[i] && !f.active && !ended[i]) {
        ended[i] = true;
        std::printf("t=%6.1fs  FAULT  %s on %s ends\n", m.now_s(), FaultName(f.spec.kind()).c_str(),
                    f.spec.target().c_str());
      }
    }
    if (m.now_s() + 1e-9 >= next_timeline) {
      next_timeline += options.timeline_every_s;
      std::string line = StrCat("t=", m.now_s());
      char head[32];
      std::snprintf(head, sizeof head, "t=%6.1fs ", m.now_s());
      line = head;
      for (const JobStatus& job : m.jobs()) {
        char buf[160];
        if (!job.running) std::snprintf(buf, sizeof buf, " job %s %s", job.id.c_str(), job.completed > 0 ? "ended" : "waiting");
        else if (job.stalled) std::snprintf(buf, sizeof buf, " job %s STALLED (0 GB/s)", job.id.c_str());
        else
          std::snprintf(buf, sizeof buf, " job %s busbw %6.1f GB/s (%3.0f%% of ideal)", job.id.c_str(),
                        job.busbw_gbs, job.ideal_busbw_gbs > 0 ? 100 * job.busbw_gbs / job.ideal_busbw_gbs : 0);
        line += buf;
      }
      char imbalance[48];
      std::snprintf(imbalance, sizeof imbalance, "  uplink imbalance %.2f", m.UplinkImbalance());
      line += imbalance;
      nlohmann::json jobs_json = nlohmann::json::array();
      for (const JobStatus& job : m.jobs())
        jobs_json.push_back({{"id", job.id}, {"busbw_gbs", job.busbw_gbs}, {"stalled", job.stalled},
                             {"running", job.running}});
      timeline_out << nlohmann::json{{"t", m.now_s()}, {"jobs", jobs_json},
                                     {"uplink_imbalance", m.UplinkImbalance()}}
                          .dump()
                   << std::endl;
      if (options.daemons) StrAppend(&line, "  | ", CollectorView(daemons));
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }
    // Truth is rewritten as the run goes, so a run cut short still has it.
    std::ofstream(options.run_dir + "/truth.json") << TruthJson(*scenario, m, zero_us, late, slips).dump(2) << "\n";
  }
  if (options.daemons) {
    const int killed = daemons.Stop();
    std::printf("rocefab-lab: stopped all daemons%s\n",
                killed ? StrCat(" (", killed, " needed SIGKILL)").c_str() : " cleanly");
  }
  std::printf("rocefab-lab: %.0f s of fabric time in %.1f s; run directory %s\n", (*model)->now_s(),
              static_cast<double>(clock.NowUs() - start_us) / 1e6, options.run_dir.c_str());
  return 0;
}

}  // namespace rocefab::lab
