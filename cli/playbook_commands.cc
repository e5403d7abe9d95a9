#include "cli/playbook_commands.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "common/playbook_engine.h"
#include "cli/table.h"
#include "common/clock.h"
#include "common/grpc_util.h"
#include "common/strings.h"
#include "common/topology.h"
#include "rocefab/v1/control.grpc.pb.h"
#include "rocefab/v1/query.grpc.pb.h"

namespace rocefab::cli {
namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& who) {
  return s.ok() ? absl::OkStatus() : absl::UnavailableError(StrCat(who, ": ", s.error_message()));
}

volatile std::sig_atomic_t g_interrupted = 0;

// The fabric as the collector and the controller show it.
class GrpcEnv final : public PlaybookEnv {
 public:
  GrpcEnv(const GlobalOptions& g, const ControlOptions& c, std::string topology_path, std::string who)
      : g_(g), c_(c), topology_path_(std::move(topology_path)), who_(std::move(who)) {}

  absl::Status Connect() {
    auto query = ConnectCollector(g_);
    if (!query.ok()) return query.status();
    query_ = std::move(*query);
    auto tls = ClientTls(g_);
    if (!tls.ok()) return tls.status();
    auto channel = MakeChannel(c_.controller, *tls);
    if (!channel.ok()) return channel.status();
    controller_ = v1::Controller::NewStub(*channel);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<v1::Anomaly>> ActiveAnomalies() override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, g_);
    v1::ListAnomaliesRequest req;
    req.set_active_only(true);
    v1::ListAnomaliesResponse resp;
    if (auto s = FromGrpc(query_->ListAnomalies(&ctx, req, &resp), "collector"); !s.ok()) return s;
    return std::vector<v1::Anomaly>(resp.anomalies().begin(), resp.anomalies().end());
  }
  absl::StatusOr<v1::DiagnoseJobResponse> Diagnose(const std::string& job, int64_t window_us) override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, g_);
    v1::DiagnoseJobRequest req;
    req.set_job(job);
    req.set_window_us(window_us);
    v1::DiagnoseJobResponse resp;
    if (auto s = FromGrpc(query_->DiagnoseJob(&ctx, req, &resp), "collector"); !s.ok()) return s;
    return resp;
  }
  absl::StatusOr<v1::DrainResponse> Drain(const std::string& port, const std::string& reason,
                                          bool dry_run) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    v1::DrainRequest req;
    req.set_kind("link");
    req.set_name(port);
    req.set_reason(reason);
    req.set_who(who_);
    req.set_dry_run(dry_run);
    v1::DrainResponse resp;
    if (auto s = FromGrpc(controller_->Drain(&ctx, req, &resp), "controller"); !s.ok()) return s;
    return resp;
  }
  absl::StatusOr<uint64_t> Silence(const std::string& entity, int64_t until_us, const std::string& comment) override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, g_);
    v1::SilenceRequest req;
    req.mutable_silence()->set_entity(entity);
    req.mutable_silence()->set_ends_at_us(until_us);
    req.mutable_silence()->set_comment(comment);
    req.mutable_silence()->set_created_by(who_);
    v1::SilenceResponse resp;
    if (auto s = FromGrpc(query_->Silence(&ctx, req, &resp), "collector"); !s.ok()) return s;
    return resp.silence().id();
  }
  absl::StatusOr<bool> IsFabricLink(const std::string& port) override {
    if (!topology_) {
      auto loaded = Topology::Load(topology_path_);
      if (!loaded.ok())
        return absl::FailedPreconditionError(StrCat("the topology is needed (--topology): ", loaded.status().message()));
      topology_ = *loaded;
    }
    return IsSwitchToSwitchLink(*topology_, port);
  }
  int64_t NowUs() override { return SystemClock::Instance().NowUs(); }
  bool Pause(int64_t us) override {
    // In slices, so that Ctrl-C ends a verification within a tenth of a second.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (!Stopping()) {
      const auto left = until - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) return true;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(100)));
    }
    return false;
  }
  bool Stopping() override { return g_interrupted != 0; }
  // The run is in the collector's audit log from its first change: another
  // operator sees it under way. The final Record replaces that record.
  void Progress(const v1::PlaybookRun& run) override {
    if (auto s = Record(run); !s.ok() && progress_error_.empty()) progress_error_ = std::string(s.status().message());
  }
  // Why the run could not be recorded while under way; empty when it was.
  const std::string& progress_error() const { return progress_error_; }
  // Records the run, or replaces its record once it has one.
  absl::StatusOr<uint64_t> Record(v1::PlaybookRun run) {
    run.set_who(who_);
    run.set_id(record_id_);
    v1::RecordPlaybookRunRequest req;
    *req.mutable_run() = std::move(run);
    v1::RecordPlaybookRunResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx, g_);
    if (auto s = FromGrpc(query_->RecordPlaybookRun(&ctx, req, &resp), "collector"); !s.ok()) return s;
    record_id_ = resp.id();
    return record_id_;
  }

 private:
  const GlobalOptions& g_;
  const ControlOptions& c_;
  std::string topology_path_, who_;
  std::unique_ptr<v1::Query::Stub> query_;
  std::unique_ptr<v1::Controller::Stub> controller_;
  std::shared_ptr<const Topology> topology_;
  uint64_t record_id_ = 0;  // the run's audit record, once it has one
  std::string progress_error_;
};

// Ctrl-C (or SIGTERM) during a real run: no further step starts, a
// verification stops waiting, and the run is recorded as cancelled. A
// second one ends the process at once (SA_RESETHAND).
class InterruptsCancelTheRun {
 public:
  InterruptsCancelTheRun() {
    g_interrupted = 0;
    struct sigaction sa = {};
    sa.sa_handler = [](int) { g_interrupted = 1; };
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~InterruptsCancelTheRun() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  InterruptsCancelTheRun(const InterruptsCancelTheRun&) = delete;
  InterruptsCancelTheRun& operator=(const InterruptsCancelTheRun&) = delete;

 private:
  struct sigaction old_int_ = {}, old_term_ = {};
};

// user@host, a claim (see ClaimedUser).
std::string ClaimedUserAtHost() {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  return StrCat(ClaimedUser(), "@", host);
}

}  // namespace

std::string ShippedPath(const std::string& relative) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      for (const fs::path& candidate : {dir / relative, dir / "share" / "rocefab" / relative})
        if (fs::exists(candidate, ec)) return candidate.lexically_normal().string();
      if (dir == dir.root_path()) break;
    }
  }
  const fs::path installed = fs::path("/usr/share/rocefab") / relative;
  return fs::exists(installed, ec) ? installed.string() : relative;
}

int RunPlaybookRun(const GlobalOptions& g, const ControlOptions& c, const PlaybookOptions& o, std::ostream& out,
                   std::ostream& err) {
  if (o.target.empty()) {
    err << "rocefab: playbook run needs --target (e.g. z1-rtsw03/Ethernet44)\n";
    return 2;
  }
  std::string path = o.name;
  if (!path.ends_with(".yaml")) path = StrCat(o.dir, "/", o.name, ".yaml");
  auto pb = LoadPlaybook(path);
  if (!pb.ok()) {
    err << "rocefab: " << pb.status().message() << "\n";
    return 2;
  }
  GrpcEnv env(g, c, o.topology, ClaimedUserAtHost());
  if (auto s = env.Connect(); !s.ok()) {
    err << "rocefab: " << s.message() << "\n";
    return 2;
  }
  std::optional<InterruptsCancelTheRun> interrupts;
  if (!o.dry_run) interrupts.emplace();
  const v1::PlaybookRun run = RunPlaybook(*pb, o.target, o.dry_run, env);
  interrupts.reset();
  // Every run is audited, refused and dry ones too.
  const absl::StatusOr<uint64_t> recorded = env.Record(run);
  out << "playbook " << run.playbook() << " on " << run.target() << (run.dry_run() ? " (dry run)" : "") << "\n";
  for (const auto& line : run.log()) out << "  " << line << "\n";
  out << "result: " << run.result();
  if (recorded.ok()) out << " (audit record " << *recorded << ": rocefab playbook runs)\n";
  else out << "\n";
  if (!env.progress_error().empty())
    err << "rocefab: the run under way could not be recorded in the collector's audit log: " << env.progress_error()
        << "\n";
  if (!recorded.ok()) err << "rocefab: the run could not be recorded in the collector's audit log: "
                          << recorded.status().message() << "\n";
  if (run.result() == "succeeded" || run.result() == "dry_run") return recorded.ok() ? 0 : 1;
  return 1;
}

int RunPlaybookList(const PlaybookOptions& o, std::ostream& out, std::ostream& err) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(o.dir, ec))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  if (ec) {
    err << "rocefab: --dir " << o.dir << ": " << ec.message() << " (set --dir or ROCEFAB_PLAYBOOKS)\n";
    return kExitUsage;
  }
  std::sort(files.begin(), files.end());
  Table t({"PLAYBOOK", "TARGET", "WHAT IT DOES"});
  int broken = 0;
  for (const fs::path& file : files) {
    auto pb = LoadPlaybook(file.string());
    if (!pb.ok()) {
      err << "rocefab: " << pb.status().message() << "\n";
      ++broken;
      continue;
    }
    t.AddRow({pb->name(), pb->target(), pb->description()});
  }
  out << "machine-run playbooks in " << fs::absolute(o.dir).lexically_normal().string()
      << " (rocefab playbook run NAME --target X --dry-run):\n";
  if (t.rows() == 0) out << "  none\n";
  else t.Print(out);
  const std::string guides = ShippedPath("playbooks");
  out << "\nguides for each finding kind (job diagnose prints the one to follow): " << guides << "/<kind>.md\n";
  return broken > 0 ? kExitNoResult : kExitOk;
}

std::string RunResultText(const v1::PlaybookRun& run, int64_t now_us) {
  constexpr int64_t kUnheardUs = 180'000'000;
  if (run.dry_run()) return StrCat(run.result() == "dry_run" ? "ok" : run.result(), " (dry run)");
  if (run.result() != "running") return run.result();
  // Records from before heard_us have only their start.
  const int64_t heard_us = run.heard_us() > 0 ? run.heard_us() : run.started_us();
  if (heard_us <= 0 || now_us - heard_us < kUnheardUs) return "running";
  return StrCat("running? last heard from ", Ago(now_us, heard_us),
                ": its process may have died; what it changed stays");
}

int RunPlaybookRuns(const GlobalOptions& g, const PlaybookOptions& o, std::ostream& out, std::ostream& err) {
  v1::ListPlaybookRunsRequest req;
  req.set_limit(o.limit);
  v1::ListPlaybookRunsResponse resp;
  if (int code = WithCollector(g, err, [&](auto& stub, auto* ctx) { return stub.ListPlaybookRuns(ctx, req, &resp); });
      code != 0)
    return code;
  const int64_t now = SystemClock::Instance().NowUs();
  Table t({"ID", "PLAYBOOK", "TARGET", "WHEN", "WHO", "RESULT", "CHANGES"});
  for (const auto& r : resp.runs()) {
    std::string changes;
    for (const auto& ch : r.changes()) StrAppend(&changes, changes.empty() ? "" : "; ", ch);
    t.AddRow({StrCat(r.id()), r.playbook(), r.target(), Ago(now, r.started_us()), r.who(), RunResultText(r, now),
              changes.empty() ? "-" : changes});
  }
  if (t.rows() == 0) out << "no playbook runs\n";
  else t.Print(out);
  return 0;
}

}  // namespace rocefab::cli
