#pragma once
// Runs machine-run playbooks when alerts fire (opt-in per playbook, in the
// collector config's `remediation.auto_run`), with rate limits: at most
// `max_runs_per_hour` runs of a playbook, and one run per target per
// `cooldown`. Runs go one at a time on a worker thread; each is recorded in
// the playbook audit log like a manual `rocefab playbook run`, from its
// first change on ("running", with what it changed so far) rather than only
// once its verification is over. A stop cancels a running playbook between
// two polls; the run is recorded as "cancelled". A run a crashed collector
// left "running" is marked "interrupted" when the next one starts.

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "collector/alerts.h"
#include "collector/fabric_context.h"
#include "collector/query_service.h"
#include "collector/store.h"
#include "common/playbook_engine.h"

namespace rocefab::collector {

struct AutoRunRule {
  v1::Playbook playbook;
  std::string on_kind;
  uint32_t max_runs_per_hour = 2;
  int64_t cooldown_us = 1800LL * 1'000'000;
};

// Loads the playbooks the config names; every problem is reported.
absl::StatusOr<std::vector<AutoRunRule>> LoadAutoRunRules(const v1::RemediationConfig& config);

class AutoRemediator final {
 public:
  AutoRemediator(std::vector<AutoRunRule> rules, Store& store, QueryService& query, Alerter& alerter,
                 FabricContextSource& context, v1::TlsSettings tls, const Clock& clock);
  ~AutoRemediator();
  void Start();
  void Stop();
  // From the alerter: an alert started firing.
  void OnFiring(const v1::Alert& alert);

 private:
  struct Job {
    const AutoRunRule* rule;
    std::string target, fingerprint;
  };
  void Loop();

  std::vector<AutoRunRule> rules_;
  Store& store_;
  QueryService& query_;
  Alerter& alerter_;
  FabricContextSource& context_;
  v1::TlsSettings tls_;  // the identity drains are made as
  const Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<Job> queue_;
  std::map<std::string, std::deque<int64_t>> runs_;       // playbook -> run times
  std::map<std::string, int64_t> target_last_;            // playbook|target -> last run
  std::thread worker_;
};

}  // namespace rocefab::collector
