#include "common/playbook_engine.h"

#include <algorithm>
#include <set>

#include "common/config_loader.h"
#include "common/daemon_setup.h"
#include "common/duration.h"
#include "common/strings.h"

namespace rocefab {
namespace {

const std::set<std::string> kChecks = {"anomaly_active", "fabric_link", "jobs_healthy"};
const std::set<std::string> kActions = {"drain_link", "silence", "remind_undrain"};

// How often a run under way is reported while it waits: its record's
// heartbeat (PlaybookRun.heard_us).
constexpr int64_t kHeartbeatUs = 30'000'000;

int64_t Us(const google::protobuf::Duration& d, int64_t fallback) {
  const int64_t us = DurationToUs(d);
  return us > 0 ? us : fallback;
}

bool Names(const v1::Anomaly& a, const std::string& target) {
  if (a.entity() == target) return true;
  for (const auto& ev : a.evidence())
    if (ev.entity() == target) return true;
  return false;
}

}  // namespace

absl::StatusOr<v1::Playbook> LoadPlaybook(const std::string& path) {
  v1::Playbook pb;
  if (auto status = LoadYamlConfigFile(path, &pb); !status.ok()) return status;
  std::string errors;
  if (pb.name().empty()) StrAppend(&errors, path, ": no name\n");
  if (pb.steps().empty()) StrAppend(&errors, path, ": no steps\n");
  auto check_list = [&](const char* section, const auto& steps, bool checks_allowed, bool actions_allowed) {
    for (int i = 0; i < steps.size(); ++i) {
      const v1::PlaybookStep& s = steps[i];
      const std::string where = StrCat(path, ": ", section, "[", i, "]: ");
      if (s.check().empty() == s.action().empty())
        StrAppend(&errors, where, "needs exactly one of check or action\n");
      else if (!s.check().empty() && (!checks_allowed || !kChecks.count(s.check())))
        StrAppend(&errors, where, "unknown or misplaced check '", s.check(), "'\n");
      else if (!s.action().empty() && (!actions_allowed || !kActions.count(s.action())))
        StrAppend(&errors, where, "unknown or misplaced action '", s.action(), "'\n");
      if (s.check() == "anomaly_active" && s.kind().empty()) StrAppend(&errors, where, "anomaly_active needs kind\n");
      if (s.action() == "silence" && !s.has_duration()) StrAppend(&errors, where, "silence needs duration\n");
    }
  };
  check_list("preconditions", pb.preconditions(), true, false);
  check_list("steps", pb.steps(), false, true);
  check_list("verify", pb.verify(), true, false);
  check_list("followup", pb.followup(), false, true);
  if (!errors.empty()) {
    errors.pop_back();
    return absl::InvalidArgumentError(errors);
  }
  return pb;
}

v1::PlaybookRun RunPlaybook(const v1::Playbook& pb, const std::string& target, bool dry_run, PlaybookEnv& env) {
  v1::PlaybookRun run;
  run.set_playbook(pb.name());
  run.set_target(target);
  run.set_dry_run(dry_run);
  run.set_started_us(env.NowUs());
  auto log = [&](std::string line) { run.add_log(std::move(line)); };
  auto finish = [&](const char* result) {
    run.set_result(result);
    run.set_ended_us(env.NowUs());
    return run;
  };
  // The jobs whose paths the target's anomalies cross: what verification
  // watches.
  std::set<std::string> jobs;
  bool cancelled = false;
  // When the run under way was last reported; 0 until its first change.
  int64_t reported_us = 0;
  auto report = [&] {
    run.set_result("running");
    env.Progress(run);
    reported_us = env.NowUs();
  };

  auto check = [&](const v1::PlaybookStep& s, bool verifying) -> bool {
    if (s.check() == "anomaly_active") {
      auto active = env.ActiveAnomalies();
      if (!active.ok()) {
        log(StrCat("check anomaly_active: ", active.status().message()));
        return false;
      }
      for (const auto& a : *active)
        if (a.kind() == s.kind() && Names(a, target)) {
          for (const auto& j : a.jobs()) jobs.insert(j);
          log(StrCat("check anomaly_active: ", a.kind(), " on ", a.entity(), " open since anomaly ", a.id(),
                     a.jobs().empty() ? "" : StrCat("; jobs on its paths: ", a.jobs_size())));
          return true;
        }
      log(StrCat("check anomaly_active: no open ", s.kind(), " names ", target));
      return false;
    }
    if (s.check() == "fabric_link") {
      auto fabric = env.IsFabricLink(target);
      if (!fabric.ok()) {
        log(StrCat("check fabric_link: ", fabric.status().message()));
        return false;
      }
      log(StrCat("check fabric_link: ", target, *fabric ? " joins two switches" : " is not a switch-to-switch link"));
      return *fabric;
    }
    if (s.check() == "jobs_healthy") {
      if (jobs.empty()) {
        log("check jobs_healthy: no job's paths crossed the target");
        return true;
      }
      if (dry_run && verifying) {
        log(StrCat("would wait up to ", FormatDurationUs(Us(s.timeout(), 300'000'000)), " for ", jobs.size(),
                   " job(s) to be healthy"));
        return true;
      }
      const int64_t deadline = env.NowUs() + Us(s.timeout(), 300'000'000);
      const int64_t window = Us(s.window(), 20'000'000);
      for (;;) {
        std::string unhealthy;
        for (const std::string& job : jobs) {
          auto d = env.Diagnose(job, window);
          if (!d.ok() || d->state() == "degraded" || d->state() == "stalled")
            StrAppend(&unhealthy, unhealthy.empty() ? "" : ", ", job, " (",
                      d.ok() ? d->state() : std::string(d.status().message()), ")");
        }
        if (unhealthy.empty()) {
          log(StrCat("check jobs_healthy: ", jobs.size(), " job(s) healthy over the last ", FormatDurationUs(window)));
          return true;
        }
        const int64_t now = env.NowUs();
        if (now >= deadline) {
          log(StrCat("check jobs_healthy: still not healthy: ", unhealthy));
          return false;
        }
        // A long wait still says the run is alive.
        if (reported_us != 0 && now - reported_us >= kHeartbeatUs) report();
        if (!env.Pause(2'000'000)) {
          cancelled = true;
          log(StrCat("cancelled while waiting for ", unhealthy, ": the run was stopped"));
          return false;
        }
      }
    }
    return false;
  };

  auto act = [&](const v1::PlaybookStep& s) -> bool {
    const std::string reason = StrCat("playbook ", pb.name(), s.reason().empty() ? "" : ": ", s.reason());
    if (s.action() == "drain_link") {
      if (dry_run) {
        // The controller's own capacity check, and what it would push.
        auto r = env.Drain(target, reason, true);
        if (!r.ok() || !r->ok()) {
          log(StrCat("would drain link ", target, ", but the controller would refuse: ",
                     r.ok() ? r->error() : std::string(r.status().message())));
          return false;
        }
        std::string pushed;
        for (const auto& sw : r->pushed()) StrAppend(&pushed, pushed.empty() ? "" : ", ", sw);
        log(StrCat("would drain link ", target, " (", reason, "): the capacity check passes; it would push ",
                   r->pushed_size(), " switch(es)", pushed.empty() ? "" : StrCat(": ", pushed)));
        return true;
      }
      auto r = env.Drain(target, reason, false);
      if (!r.ok() || !r->ok()) {
        log(StrCat("drain_link refused: ", r.ok() ? r->error() : std::string(r.status().message())));
        return false;
      }
      run.add_changes(StrCat("drained link ", target, " (desired generation ", r->generation(), ")"));
      log(StrCat("drained link ", target, "; generation ", r->generation(), " pushed"));
      return true;
    }
    if (s.action() == "silence") {
      const int64_t for_us = Us(s.duration(), 3600'000'000);
      const int64_t until = env.NowUs() + for_us;
      if (dry_run) {
        log(StrCat("would silence alerts on ", target, " for ", FormatDurationUs(for_us)));
        return true;
      }
      auto id = env.Silence(target, until, s.comment().empty() ? reason : s.comment());
      if (!id.ok()) {
        log(StrCat("silence failed: ", id.status().message()));
        return false;
      }
      run.add_changes(StrCat("silence ", *id, " on ", target));
      log(StrCat("silenced alerts on ", target, " (silence ", *id, ")"));
      return true;
    }
    if (s.action() == "remind_undrain") {
      log(StrCat("REMINDER: once the link is repaired, put it back: rocefab undrain link ", target));
      return true;
    }
    return false;
  };

  // A dry run checks every precondition and previews every step, so the
  // operator sees all that stands in the way, not only the first thing.
  bool refused = false;
  for (const auto& s : pb.preconditions()) {
    if (check(s, false)) continue;
    if (!dry_run) return finish("refused");
    refused = true;
  }
  bool failed = false;
  for (int i = 0; i < pb.steps_size(); ++i) {
    const v1::PlaybookStep& s = pb.steps(i);
    if (!dry_run && env.Stopping()) {
      log(StrCat("cancelled before step ", i + 1, " (", s.action(),
                 "): the run was stopped, and no step from this one on ran"));
      return finish("cancelled");
    }
    if (act(s)) {
      if (!dry_run) report();
      continue;
    }
    if (!dry_run) return finish("failed");
    failed = true;
  }
  if (dry_run && (refused || failed)) {
    for (const auto& s : pb.verify()) check(s, true);
    for (const auto& s : pb.followup()) act(s);
    log(refused ? "a real run would be refused: a precondition does not hold"
                : "a real run would fail at the step above");
    return finish(refused ? "refused" : "failed");
  }
  for (const auto& s : pb.verify())
    if (!check(s, true)) return finish(cancelled ? "cancelled" : "failed");
  for (const auto& s : pb.followup()) act(s);
  return finish(dry_run ? "dry_run" : "succeeded");
}

}  // namespace rocefab
