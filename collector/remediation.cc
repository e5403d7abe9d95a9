#include "collector/remediation.h"

#include "common/daemon_setup.h"
#include "common/grpc_util.h"
#include "common/log.h"
#include "common/strings.h"
#include "rocefab/v1/control.grpc.pb.h"

namespace rocefab::collector {
namespace {

constexpr char kRemediationLog[] = "remediation";
// Who automatic runs are recorded as, and how they are told apart.
constexpr char kAutomaticWho[] = "rocefab-collectord";

// The fabric as the collector itself sees it: its own queries, alerter and
// topology, and the controller it polls.
class CollectorEnv final : public PlaybookEnv {
 public:
  CollectorEnv(QueryService& query, Alerter& alerter, FabricContextSource& context, const v1::TlsSettings& tls,
               const Clock& clock, std::mutex& mu, std::condition_variable& cv, const bool& stopping)
      : query_(query), alerter_(alerter), context_(context), tls_(tls), clock_(clock), mu_(mu), cv_(cv),
        stopping_(stopping) {}

  absl::StatusOr<std::vector<v1::Anomaly>> ActiveAnomalies() override {
    v1::ListAnomaliesRequest req;
    req.set_active_only(true);
    v1::ListAnomaliesResponse resp;
    const grpc::Status s = query_.ListAnomalies(nullptr, &req, &resp);  // in-process
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    return std::vector<v1::Anomaly>(resp.anomalies().begin(), resp.anomalies().end());
  }
  absl::StatusOr<v1::DiagnoseJobResponse> Diagnose(const std::string& job, int64_t window_us) override {
    v1::DiagnoseJobRequest req;
    req.set_job(job);
    req.set_window_us(window_us);
    v1::DiagnoseJobResponse resp;
    const grpc::Status s = query_.DiagnoseJob(nullptr, &req, &resp);  // in-process
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    return resp;
  }
  absl::StatusOr<v1::DrainResponse> Drain(const std::string& port, const std::string& reason,
                                          bool dry_run) override {
    if (context_.controller().empty()) return absl::FailedPreconditionError("no controller configured");
    // As the remediation identity: the controller authorizes and audits it.
    auto channel = MakeChannel(context_.controller(), tls_);
    if (!channel.ok()) return channel.status();
    auto stub = v1::Controller::NewStub(*channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    v1::DrainRequest req;
    req.set_kind("link");
    req.set_name(port);
    req.set_reason(reason);
    req.set_dry_run(dry_run);
    v1::DrainResponse resp;
    const grpc::Status s = stub->Drain(&ctx, req, &resp);
    if (!s.ok()) return absl::UnavailableError(StrCat("controller: ", s.error_message()));
    return resp;
  }
  absl::StatusOr<uint64_t> Silence(const std::string& entity, int64_t until_us, const std::string& comment) override {
    v1::Silence s;
    s.set_entity(entity);
    s.set_ends_at_us(until_us);
    s.set_comment(comment);
    s.set_created_by("rocefab-collectord (automatic remediation)");
    auto added = alerter_.AddSilence(s);
    if (!added.ok()) return added.status();
    return added->silence().id();
  }
  absl::StatusOr<bool> IsFabricLink(const std::string& port) override {
    const Topology* topo = context_.topology().get();
    if (topo == nullptr) return absl::FailedPreconditionError("the collector has no topology (topology:)");
    return IsSwitchToSwitchLink(*topo, port);
  }
  int64_t NowUs() override { return clock_.NowUs(); }
  bool Pause(int64_t us) override {
    // Between two polls of a verification; a stop cancels the run.
    std::unique_lock lock(mu_);
    return !cv_.wait_for(lock, std::chrono::microseconds(us), [this] { return stopping_; });
  }
  bool Stopping() override {
    std::lock_guard lock(mu_);
    return stopping_;
  }
  // The audit record of the run under way: written at its first change,
  // replaced as it goes on, and closed by Finish.
  void Begin(AuditLog& audit, std::string who) {
    audit_ = &audit;
    who_ = std::move(who);
    id_ = 0;
  }
  void Progress(const v1::PlaybookRun& run) override { Write(run); }
  void Finish(const v1::PlaybookRun& run) { Write(run); }

 private:
  QueryService& query_;
  Alerter& alerter_;
  FabricContextSource& context_;
  const v1::TlsSettings& tls_;
  const Clock& clock_;
  std::mutex& mu_;
  std::condition_variable& cv_;
  const bool& stopping_;
  AuditLog* audit_ = nullptr;
  std::string who_;
  uint64_t id_ = 0;  // 0 until the run's first record

  void Write(v1::PlaybookRun run) {
    if (audit_ == nullptr) return;
    run.set_who(who_);
    run.set_id(id_);
    run.set_heard_us(clock_.NowUs());
    if (id_ != 0) {
      if (auto s = audit_->Update(run); !s.ok())
        LOG_ERROR(kRemediationLog, "recording the playbook run: ", s.message());
      return;
    }
    if (auto id = audit_->Record(run); id.ok()) id_ = *id;
    else LOG_ERROR(kRemediationLog, "recording the playbook run: ", id.status().message());
  }
};

}  // namespace

absl::StatusOr<std::vector<AutoRunRule>> LoadAutoRunRules(const v1::RemediationConfig& config) {
  std::vector<AutoRunRule> rules;
  std::string errors;
  const std::string dir = config.playbooks_dir().empty() ? "/usr/share/rocefab/playbooks/auto" : config.playbooks_dir();
  for (const v1::AutoRun& a : config.auto_run()) {
    if (a.playbook().empty() || a.on_kind().empty()) {
      StrAppend(&errors, "remediation.auto_run: each entry needs playbook and on_kind\n");
      continue;
    }
    auto pb = LoadPlaybook(StrCat(dir, "/", a.playbook(), ".yaml"));
    if (!pb.ok()) {
      StrAppend(&errors, pb.status().message(), "\n");
      continue;
    }
    AutoRunRule rule;
    rule.playbook = *pb;
    rule.on_kind = a.on_kind();
    if (a.max_runs_per_hour()) rule.max_runs_per_hour = a.max_runs_per_hour();
    if (a.has_cooldown()) rule.cooldown_us = DurationToUs(a.cooldown());
    rules.push_back(std::move(rule));
  }
  if (!errors.empty()) {
    errors.pop_back();
    return absl::InvalidArgumentError(errors);
  }
  return rules;
}

AutoRemediator::AutoRemediator(std::vector<AutoRunRule> rules, Store& store, QueryService& query, Alerter& alerter,
                               FabricContextSource& context, v1::TlsSettings tls, const Clock& clock)
    : rules_(std::move(rules)), store_(store), query_(query), alerter_(alerter), context_(context),
      tls_(std::move(tls)), clock_(clock) {}

AutoRemediator::~AutoRemediator() { Stop(); }

void AutoRemediator::Start() {
  // Runs a previous collector left under way: they are over.
  if (auto n = store_.audit().CloseInterrupted(kAutomaticWho, clock_.NowUs()); !n.ok())
    LOG_ERROR(kRemediationLog, "closing interrupted playbook runs: ", n.status().message());
  else if (*n > 0)
    LOG_WARN(kRemediationLog, *n, " automatic playbook run(s) were under way when the collector last stopped: "
             "marked interrupted (rocefab playbook runs)");
  if (!rules_.empty()) worker_ = std::thread([this] { Loop(); });
}

void AutoRemediator::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void AutoRemediator::OnFiring(const v1::Alert& alert) {
  auto kind = alert.labels().find("kind");
  auto entity = alert.labels().find("entity");
  if (kind == alert.labels().end() || entity == alert.labels().end()) return;
  const int64_t now = clock_.NowUs();
  std::lock_guard lock(mu_);
  for (const AutoRunRule& rule : rules_) {
    if (rule.on_kind != kind->second) continue;
    const std::string key = StrCat(rule.playbook.name(), "|", entity->second);
    if (auto last = target_last_.find(key); last != target_last_.end() && now - last->second < rule.cooldown_us) continue;
    std::deque<int64_t>& runs = runs_[rule.playbook.name()];
    while (!runs.empty() && now - runs.front() > 3600LL * 1'000'000) runs.pop_front();
    if (runs.size() >= rule.max_runs_per_hour) {
      LOG_WARN(kRemediationLog, "not running ", rule.playbook.name(), " on ", entity->second, ": ", runs.size(),
               " runs in the last hour (max_runs_per_hour)");
      continue;
    }
    runs.push_back(now);
    target_last_[key] = now;
    queue_.push_back({&rule, entity->second, alert.fingerprint()});
    cv_.notify_all();
  }
}

void AutoRemediator::Loop() {
  CollectorEnv env(query_, alerter_, context_, tls_, clock_, mu_, cv_, stopping_);
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) break;
    Job job = queue_.front();
    queue_.pop_front();
    lock.unlock();
    LOG_INFO(kRemediationLog, "running playbook ", job.rule->playbook.name(), " on ", job.target, " (alert ", job.fingerprint, ")");
    env.Begin(store_.audit(), StrCat(kAutomaticWho, " (automatic, alert ", job.fingerprint, ")"));
    const v1::PlaybookRun run = RunPlaybook(job.rule->playbook, job.target, false, env);
    for (const auto& line : run.log()) LOG_INFO(kRemediationLog, job.rule->playbook.name(), ": ", line);
    LOG_INFO(kRemediationLog, "playbook ", job.rule->playbook.name(), " on ", job.target, ": ", run.result());
    env.Finish(run);
    lock.lock();
  }
}

}  // namespace rocefab::collector
