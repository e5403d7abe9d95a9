#include "collector/alerts.h"

#include "common/findings.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/daemon_setup.h"
#include "common/http_client.h"
#include "common/log.h"
#include "common/strings.h"

namespace rocefab::collector {
namespace {

using sqlite::Stmt;

constexpr char kAlertsLog[] = "alerts";

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS alerts(
  fingerprint TEXT PRIMARY KEY,
  status TEXT NOT NULL,
  ends_at_us INTEGER NOT NULL,
  proto BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS silences(
  id INTEGER PRIMARY KEY,
  ends_at_us INTEGER NOT NULL,
  proto BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox(
  id INTEGER PRIMARY KEY,
  target TEXT NOT NULL,
  body TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  next_attempt_us INTEGER NOT NULL,
  created_us INTEGER NOT NULL,
  last_error TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox(next_attempt_us);
)sql";

std::string CamelKind(const std::string& kind) {
  std::string out = "Rocefab";
  bool upper = true;
  for (char c : kind) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out.push_back(upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c);
    upper = false;
  }
  return out;
}

std::string EvidenceText(const v1::Anomaly& a) {
  std::string text;
  int n = 0;
  for (const auto& ev : a.evidence()) {
    if (n++ == 4) break;
    StrAppend(&text, text.empty() ? "" : "; ", FormatEvidence(ev));
  }
  return text;
}

nlohmann::json Labels(const v1::Alert& a) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : a.labels()) j[k] = v;
  return j;
}
nlohmann::json Annotations(const v1::Alert& a) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : a.annotations()) j[k] = v;
  return j;
}

// POSTs `body`; returns the HTTP status, or 0 with `error` set.
long Post(const std::string& url, const std::string& body, std::string* error) {
  HttpPostOptions options;
  options.headers = {"Content-Type: application/json"};
  const HttpResult result = HttpPost(url, body, options);
  if (!result.error.empty()) *error = result.error;
  return result.status;
}

bool Matches(const v1::Silence& s, const v1::Alert& a) {
  auto label = [&](const char* k) {
    auto it = a.labels().find(k);
    return it == a.labels().end() ? std::string() : it->second;
  };
  return (s.kind().empty() || s.kind() == label("kind")) && (s.entity().empty() || s.entity() == label("entity")) &&
         (s.job().empty() || s.job() == label("job"));
}

}  // namespace

absl::StatusOr<AlertOptions> ResolveAlertOptions(const v1::AlertingConfig& c) {
  AlertOptions o;
  std::string errors;
  for (const auto* list : {&c.alertmanager_urls(), &c.webhook_urls()})
    for (const std::string& url : *list)
      if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
        StrAppend(&errors, "alerting: ", url, " is not an http:// or https:// URL\n");
  o.alertmanager_urls.assign(c.alertmanager_urls().begin(), c.alertmanager_urls().end());
  o.webhook_urls.assign(c.webhook_urls().begin(), c.webhook_urls().end());
  o.playbook_base_url = c.playbook_base_url();
  if (c.has_resend_every()) o.resend_every_us = DurationToUs(c.resend_every());
  if (c.has_max_age()) o.max_age_us = DurationToUs(c.max_age());
  if (o.resend_every_us <= 0) StrAppend(&errors, "alerting.resend_every must be positive\n");
  if (o.max_age_us <= 0) StrAppend(&errors, "alerting.max_age must be positive\n");
  if (!errors.empty()) {
    errors.pop_back();
    return absl::InvalidArgumentError(errors);
  }
  return o;
}

std::string AlertmanagerBody(const std::vector<v1::Alert>& alerts, int64_t resend_every_us, int64_t now_us) {
  nlohmann::json body = nlohmann::json::array();
  for (const v1::Alert& a : alerts) {
    // A firing alert lasts four resend periods unless re-sent, as
    // Prometheus does; a resolved one ends when it ended.
    const int64_t ends = a.ends_at_us() ? a.ends_at_us() : now_us + 4 * resend_every_us;
    body.push_back({{"labels", Labels(a)},
                    {"annotations", Annotations(a)},
                    {"startsAt", FormatRfc3339(a.starts_at_us())},
                    {"endsAt", FormatRfc3339(ends)}});
  }
  return body.dump();
}

std::string WebhookBody(const v1::Alert& a, const std::string& receiver) {
  const nlohmann::json labels = Labels(a);
  nlohmann::json group = nlohmann::json::object();
  for (const char* k : {"job", "entity"})
    if (labels.contains(k)) group[k] = labels[k];
  nlohmann::json alert = {{"status", a.status()},
                          {"labels", labels},
                          {"annotations", Annotations(a)},
                          {"startsAt", FormatRfc3339(a.starts_at_us())},
                          {"endsAt", a.ends_at_us() ? FormatRfc3339(a.ends_at_us()) : "0001-01-01T00:00:00Z"},
                          {"generatorURL", ""},
                          {"fingerprint", a.fingerprint()}};
  return nlohmann::json{{"version", "4"},
                        {"groupKey", StrCat("{}:", group.dump())},
                        {"truncatedAlerts", 0},
                        {"status", a.status()},
                        {"receiver", receiver},
                        {"groupLabels", group},
                        {"commonLabels", labels},
                        {"commonAnnotations", Annotations(a)},
                        {"externalURL", ""},
                        {"alerts", nlohmann::json::array({alert})}}
      .dump();
}

absl::StatusOr<std::unique_ptr<Alerter>> Alerter::Open(const std::string& db_path, AlertOptions options,
                                                       CollectorMetrics& metrics, const Clock& clock) {
  std::unique_ptr<Alerter> a(new Alerter(std::move(options), metrics, clock));
  if (auto status = a->Init(db_path); !status.ok()) return status;
  return a;
}

absl::Status Alerter::Init(const std::string& db_path) {
  sqlite::OpenOptions options;
  options.full_mutex = true;
  auto db = sqlite::Db::Open(db_path, options);
  if (!db.ok()) return absl::UnavailableError(StrCat("alerts: ", db.status().message()));
  db_holder_ = std::move(*db);
  db_ = db_holder_.get();
  if (auto status = sqlite::Exec(db_, kSchema); !status.ok())
    return absl::InternalError(StrCat(db_path, ": alerts schema: ", status.message()));
  // Alerts still firing at the last stop go on firing; the next evaluation
  // resolves those whose anomaly is gone.
  Stmt stmt(db_, "SELECT proto FROM alerts WHERE status = 'firing'");
  auto firing = sqlite::ReadMessages<v1::Alert>(stmt);
  if (!firing.ok()) return firing.status();
  for (v1::Alert& a : *firing) firing_[a.fingerprint()] = std::move(a);
  return absl::OkStatus();
}

Alerter::~Alerter() { Stop(); }

void Alerter::Start() {
  if (options_.alertmanager_urls.empty() && options_.webhook_urls.empty()) return;
  sender_ = std::thread([this] { SenderLoop(); });
}

void Alerter::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (sender_.joinable()) sender_.join();
}

void Alerter::SaveAlert(const v1::Alert& a) {
  Stmt stmt(db_, "INSERT OR REPLACE INTO alerts VALUES(?1, ?2, ?3, ?4)");
  stmt.Bind(1, a.fingerprint()).Bind(2, a.status()).Bind(3, a.ends_at_us()).BindBlob(4, a.SerializeAsString());
  if (auto status = stmt.Run(); !status.ok()) LOG_ERROR(kAlertsLog, "storing alert: ", status.message());
}

void Alerter::Enqueue(const std::string& target, const std::string& body, int64_t now_us) {
  Stmt stmt(db_, "INSERT INTO outbox(target, body, attempts, next_attempt_us, created_us, last_error) "
                 "VALUES(?1, ?2, 0, ?3, ?3, '')");
  stmt.Bind(1, target).Bind(2, body).Bind(3, now_us);
  if (auto status = stmt.Run(); !status.ok()) {
    LOG_ERROR(kAlertsLog, "outbox: ", status.message());
    metrics_.notifications_dropped.Increment();
  }
}

std::vector<v1::Silence> Alerter::ActiveSilences(int64_t now_us) {
  Stmt stmt(db_, "SELECT proto FROM silences WHERE ends_at_us > ?1 ORDER BY id");
  stmt.Bind(1, now_us);
  // None when the store cannot be read: nothing is silenced then.
  auto silences = sqlite::ReadMessages<v1::Silence>(stmt);
  return silences.ok() ? std::move(*silences) : std::vector<v1::Silence>();
}

void Alerter::Notify(const std::vector<v1::Alert>& changed, bool state_change, int64_t now_us) {
  std::vector<v1::Alert> loud;
  for (const v1::Alert& a : changed)
    if (a.silenced_by() == 0) loud.push_back(a);
  if (loud.empty()) return;
  for (const std::string& am : options_.alertmanager_urls)
    Enqueue(StrCat(am, am.ends_with("/") ? "" : "/", "api/v2/alerts"),
            AlertmanagerBody(loud, options_.resend_every_us, now_us), now_us);
  if (!state_change) return;
  for (const std::string& hook : options_.webhook_urls)
    for (const v1::Alert& a : loud) Enqueue(hook, WebhookBody(a, "rocefab"), now_us);
  cv_.notify_all();
}

void Alerter::Evaluate(const std::vector<v1::Anomaly>& active, const FabricContext& context,
                       const std::set<std::string>& drained, int64_t now_us) {
  std::lock_guard lock(mu_);
  // Footprints of the running jobs, computed once per job.
  std::set<std::string> running;
  for (const v1::Job& job : context.running_jobs) {
    running.insert(job.id());
    auto& [ranks, fp] = footprints_[job.id()];
    if (ranks != job.ranks_size()) fp = JobFootprint(context.topology.get(), job, drained), ranks = job.ranks_size();
  }
  for (auto it = footprints_.begin(); it != footprints_.end();)
    it = running.count(it->first) ? std::next(it) : footprints_.erase(it);

  const std::vector<v1::Silence> silences = ActiveSilences(now_us);
  std::map<std::string, v1::Alert> want;
  for (const v1::Anomaly& a : active) {
    if (a.caused_by() != 0 || a.severity() < v1::SEVERITY_WARNING) continue;
    std::vector<std::string> jobs;
    if (!a.job().empty()) jobs.push_back(a.job());
    else
      for (const auto& [id, fpr] : footprints_)
        if (Touches(fpr.second, a, id)) jobs.push_back(id);
    if (jobs.empty()) jobs.push_back("");
    std::string zone;
    if (context.topology != nullptr) {
      const std::string device = a.entity().substr(0, a.entity().find('/'));
      if (const auto* h = context.topology->FindHost(device)) zone = h->zone();
      else if (const auto* s = context.topology->FindSwitch(device)) zone = s->zone();
    }
    for (const std::string& job : jobs) {
      v1::Alert alert;
      alert.set_fingerprint(StrCat(a.kind(), "|", a.entity(), "|", job));
      auto& l = *alert.mutable_labels();
      l["alertname"] = CamelKind(a.kind());
      l["severity"] = SeverityName(a.severity(), "info");
      l["kind"] = a.kind();
      l["entity"] = a.entity();
      if (!job.empty()) l["job"] = job;
      if (!zone.empty()) l["zone"] = zone;
      auto& n = *alert.mutable_annotations();
      n["summary"] = a.summary();
      n["evidence"] = EvidenceText(a);
      n["runbook_url"] = StrCat(options_.playbook_base_url, PlaybookFor(a.kind()));
      if (!job.empty()) n["description"] = StrCat("rocefab job diagnose ", job);
      alert.set_starts_at_us(a.start_us());
      alert.set_status("firing");
      alert.set_anomaly_id(a.id());
      for (const v1::Silence& s : silences)
        if (Matches(s, alert)) alert.set_silenced_by(s.id());
      want[alert.fingerprint()] = std::move(alert);
    }
  }

  std::vector<v1::Alert> changed, resend;
  for (auto& [fp, alert] : want) {
    auto it = firing_.find(fp);
    if (it == firing_.end()) {
      SaveAlert(alert);
      changed.push_back(alert);
      last_sent_us_[fp] = now_us;
      firing_[fp] = alert;
      continue;
    }
    // Annotations follow the anomaly (evidence grows); silences come and go.
    const bool unsilenced = it->second.silenced_by() != 0 && alert.silenced_by() == 0;
    it->second = alert;
    if (unsilenced) {
      changed.push_back(alert);
      last_sent_us_[fp] = now_us;
    } else if (now_us - last_sent_us_[fp] >= options_.resend_every_us) {
      resend.push_back(alert);
      last_sent_us_[fp] = now_us;
    }
  }
  for (auto it = firing_.begin(); it != firing_.end();) {
    if (want.count(it->first)) {
      ++it;
      continue;
    }
    v1::Alert resolved = it->second;
    resolved.set_status("resolved");
    resolved.set_ends_at_us(now_us);
    SaveAlert(resolved);
    changed.push_back(resolved);
    last_sent_us_.erase(it->first);
    it = firing_.erase(it);
  }
  Notify(changed, true, now_us);
  Notify(resend, false, now_us);
  if (on_firing_)
    for (const v1::Alert& a : changed)
      if (a.status() == "firing" && a.silenced_by() == 0) on_firing_(a);
  metrics_.alerts_firing.Set(static_cast<double>(firing_.size()));
}

size_t Alerter::DeliverDue() {
  struct Item {
    int64_t id;
    std::string target, body;
    int attempts;
    int64_t created;
  };
  std::vector<Item> due;
  const int64_t now = clock_.NowUs();
  {
    std::lock_guard lock(mu_);
    Stmt stmt(db_, "SELECT id, target, body, attempts, created_us FROM outbox WHERE next_attempt_us <= ?1 "
                   "ORDER BY id LIMIT 100");
    stmt.Bind(1, now);
    while (true) {
      auto row = stmt.Step();
      if (!row.ok() || !*row) break;
      due.push_back({stmt.Int(0), stmt.Text(1), stmt.Text(2), static_cast<int>(stmt.Int(3)), stmt.Int(4)});
    }
  }
  size_t delivered = 0;
  for (const Item& item : due) {
    std::string error;
    const long code = Post(item.target, item.body, &error);
    std::lock_guard lock(mu_);
    Stmt stmt;
    // 2xx: done. 4xx but 408/429: the receiver refuses this body for good.
    const bool ok = code >= 200 && code < 300;
    const bool refused = code >= 400 && code < 500 && code != 408 && code != 429;
    const bool too_old = now - item.created > options_.max_age_us;
    if (ok || refused || too_old) {
      stmt = Stmt(db_, "DELETE FROM outbox WHERE id = ?1");
      stmt.Bind(1, item.id);
      if (ok) {
        metrics_.notifications_delivered.Increment();
        ++delivered;
      } else {
        metrics_.notifications_dropped.Increment();
        LOG_WARN(kAlertsLog, "dropping a notification to ", item.target, ": ",
                 refused ? StrCat("HTTP ", code) : StrCat("undelivered for ", options_.max_age_us / 1'000'000, " s"));
      }
    } else {
      // Exponential backoff from 1 s, at most 5 min.
      const int64_t backoff = std::min<int64_t>(300'000'000, 1'000'000LL << std::min(item.attempts, 9));
      stmt = Stmt(db_, "UPDATE outbox SET attempts = attempts + 1, next_attempt_us = ?2, last_error = ?3 "
                       "WHERE id = ?1");
      const std::string why = code ? StrCat("HTTP ", code) : error;
      stmt.Bind(1, item.id).Bind(2, now + backoff).Bind(3, why);
      metrics_.notifications_retried.Increment();
      if (item.attempts == 0) LOG_WARN(kAlertsLog, "notification to ", item.target, " failed (", why, "); retrying");
    }
    if (auto status = stmt.Run(); !status.ok()) LOG_ERROR(kAlertsLog, "outbox: ", status.message());
  }
  return delivered;
}

void Alerter::SenderLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    DeliverDue();
    lock.lock();
    {
      Stmt count(db_, "SELECT count(*) FROM outbox");
      auto row = count.Step();
      if (row.ok() && *row) metrics_.outbox_pending.Set(count.Double(0));
    }
    cv_.wait_for(lock, std::chrono::milliseconds(500), [this] { return stopping_; });
  }
}

absl::StatusOr<v1::ListAlertsResponse> Alerter::List(bool include_resolved) {
  std::lock_guard lock(mu_);
  v1::ListAlertsResponse out;
  const int64_t now = clock_.NowUs();
  {
    Stmt stmt(db_, "SELECT proto FROM alerts WHERE ?1 OR status = 'firing' ORDER BY ends_at_us = 0 DESC, fingerprint");
    stmt.Bind(1, int64_t{include_resolved ? 1 : 0});
    auto stored = sqlite::ReadMessages<v1::Alert>(stmt);
    if (!stored.ok()) return stored.status();
    for (v1::Alert& a : *stored) {
      if (auto it = firing_.find(a.fingerprint()); it != firing_.end()) a = it->second;
      *out.add_alerts() = std::move(a);
    }
  }
  for (auto& s : ActiveSilences(now)) *out.add_silences() = std::move(s);
  {
    Stmt count(db_, "SELECT count(*) FROM outbox");
    auto row = count.Step();
    if (row.ok() && *row) out.set_outbox_pending(static_cast<uint64_t>(count.Int(0)));
  }
  out.set_now_us(now);
  return out;
}

absl::StatusOr<v1::SilenceResponse> Alerter::AddSilence(v1::Silence silence) {
  if (silence.kind().empty() && silence.entity().empty() && silence.job().empty())
    return absl::InvalidArgumentError("a silence needs at least one of kind, entity or job");
  const int64_t now = clock_.NowUs();
  if (silence.ends_at_us() <= now) return absl::InvalidArgumentError("a silence must end in the future");
  std::lock_guard lock(mu_);
  silence.set_starts_at_us(now);
  {
    Stmt next(db_, "SELECT coalesce(max(id), 0) + 1 FROM silences");
    auto row = next.Step();
    if (!row.ok()) return row.status();
    silence.set_id(*row ? static_cast<uint64_t>(next.Int(0)) : 1);
  }
  Stmt put(db_, "INSERT INTO silences VALUES(?1, ?2, ?3)");
  put.Bind(1, static_cast<int64_t>(silence.id())).Bind(2, silence.ends_at_us()).BindBlob(3, silence.SerializeAsString());
  if (auto status = put.Run(); !status.ok())
    return absl::InternalError(StrCat("storing the silence: ", status.message()));
  v1::SilenceResponse out;
  uint32_t matching = 0;
  for (const auto& [fp, a] : firing_) matching += Matches(silence, a);
  *out.mutable_silence() = silence;
  out.set_matching_alerts(matching);
  return out;
}

absl::Status Alerter::RemoveSilence(uint64_t id) {
  std::lock_guard lock(mu_);
  // Ending it now keeps the record.
  Stmt stmt(db_, "UPDATE silences SET ends_at_us = ?2 WHERE id = ?1 AND ends_at_us > ?2");
  stmt.Bind(1, static_cast<int64_t>(id)).Bind(2, clock_.NowUs());
  if (auto status = stmt.Run(); !status.ok()) return status;
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(StrCat("no active silence ", id));
  return absl::OkStatus();
}

}  // namespace rocefab::collector
