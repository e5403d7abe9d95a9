#include "collector/query_service.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "collector/diagnosis.h"
#include "common/findings.h"
#include "common/strings.h"

namespace rocefab::collector {
namespace {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  if (absl::IsAlreadyExists(status)) code = grpc::StatusCode::ALREADY_EXISTS;
  else if (absl::IsNotFound(status)) code = grpc::StatusCode::NOT_FOUND;
  else if (absl::IsInvalidArgument(status)) code = grpc::StatusCode::INVALID_ARGUMENT;
  else if (absl::IsFailedPrecondition(status)) code = grpc::StatusCode::FAILED_PRECONDITION;
  else if (absl::IsPermissionDenied(status)) code = grpc::StatusCode::PERMISSION_DENIED;
  return grpc::Status(code, std::string(status.message()));
}

}  // namespace

grpc::Status QueryService::ListAgents(grpc::ServerContext* context, const v1::ListAgentsRequest*,
                                      v1::ListAgentsResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/ListAgents", &who); !allowed.ok())
    return allowed;
  auto agents = store_.ListAgents();
  if (!agents.ok()) return ToGrpc(agents.status());
  for (auto& agent : *agents) {
    agent.set_connected(agents_.IsConnected(agent.agent_id()));
    if (components_ != nullptr)
      for (const auto& [name, version] : components_->Current(agent.agent_id()))
        (*agent.mutable_components())[name] = version;
    *response->add_agents() = std::move(agent);
  }
  response->set_now_us(clock_.NowUs());
  return grpc::Status::OK;
}

absl::Status QueryService::KnownEntity(std::string_view entity) const {
  const auto topology = context_ ? context_->topology() : nullptr;
  if (topology == nullptr) return absl::OkStatus();  // nothing to check against
  absl::Status known = topology->CheckEntity(entity);
  if (known.ok()) return known;
  return absl::InvalidArgumentError(StrCat(known.message(), " (--allow-unknown to use it anyway)"));
}

grpc::Status QueryService::GetCounters(grpc::ServerContext* context, const v1::GetCountersRequest* request,
                                       v1::GetCountersResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/GetCounters", &who); !allowed.ok())
    return allowed;
  if (!request->host().empty() && !request->allow_unknown()) {
    const std::string entity =
        request->device().empty() ? request->host() : StrCat(request->host(), "/", request->device());
    if (absl::Status known = KnownEntity(entity); !known.ok()) return ToGrpc(known);
  }
  std::vector<std::string> notes;
  auto rows = store_.GetCounters(*request, history_, &notes);
  if (!rows.ok()) return ToGrpc(rows.status());
  for (auto& row : *rows) *response->add_rows() = std::move(row);
  for (auto& note : notes) response->add_notes(std::move(note));
  response->set_now_us(clock_.NowUs());
  return grpc::Status::OK;
}

grpc::Status QueryService::StartJob(grpc::ServerContext* context, const v1::StartJobRequest* request,
                                   v1::StartJobResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/StartJob", &who); !allowed.ok())
    return allowed;
  v1::Job job = request->job();
  if (job.id().empty() || job.id().size() > 128)
    return ToGrpc(absl::InvalidArgumentError("a job needs an id of 1-128 characters"));
  if (job.ranks().empty()) return ToGrpc(absl::InvalidArgumentError("a job needs at least one rank"));
  std::set<uint32_t> seen;
  for (const auto& r : job.ranks()) {
    if (!seen.insert(r.rank()).second)
      return ToGrpc(absl::InvalidArgumentError("rank " + std::to_string(r.rank()) + " is listed twice"));
    if (r.host().empty()) return ToGrpc(absl::InvalidArgumentError("rank " + std::to_string(r.rank()) + " has no host"));
  }
  if (!request->allow_unknown()) {
    std::set<std::string> checked;
    for (const auto& r : job.ranks()) {
      const std::string entity = r.nic().empty() ? r.host() : StrCat(r.host(), "/", r.nic());
      if (!checked.insert(entity).second) continue;
      if (absl::Status known = KnownEntity(entity); !known.ok())
        return ToGrpc(absl::InvalidArgumentError(StrCat("rank ", r.rank(), ": ", known.message())));
    }
  }
  if (job.start_us() == 0) job.set_start_us(clock_.NowUs());
  if (job.name().empty()) job.set_name(job.id());
  auto stored = store_.jobs().Start(job);
  if (!stored.ok()) return ToGrpc(stored.status());
  *response->mutable_job() = *stored;
  return grpc::Status::OK;
}

grpc::Status QueryService::EndJob(grpc::ServerContext* context, const v1::EndJobRequest* request,
                                 v1::EndJobResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/EndJob", &who); !allowed.ok())
    return allowed;
  auto ended = store_.jobs().End(request->id(), request->end_us() == 0 ? clock_.NowUs() : request->end_us());
  if (!ended.ok()) return ToGrpc(ended.status());
  *response->mutable_job() = *ended;
  return grpc::Status::OK;
}

grpc::Status QueryService::ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                                   v1::ListJobsResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/ListJobs", &who); !allowed.ok())
    return allowed;
  auto jobs = store_.jobs().List(request->include_ended());
  if (!jobs.ok()) return ToGrpc(jobs.status());
  for (auto& job : *jobs) *response->add_jobs() = std::move(job);
  response->set_now_us(clock_.NowUs());
  return grpc::Status::OK;
}

grpc::Status QueryService::JobTimeline(grpc::ServerContext* context, const v1::JobTimelineRequest* request,
                                      v1::JobTimelineResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/JobTimeline", &who); !allowed.ok())
    return allowed;
  if (request->job().empty()) return ToGrpc(absl::InvalidArgumentError("which job?"));
  const int64_t bucket_us = static_cast<int64_t>(request->bucket_seconds() == 0 ? 10 : request->bucket_seconds()) * 1'000'000;
  std::vector<std::string> notes;
  auto points = store_.JobTimeline(request->job(), request->since_us(), bucket_us, history_, &notes);
  if (!points.ok()) return ToGrpc(points.status());
  auto job = store_.jobs().Get(request->job());
  if (!job.ok() && points->empty())
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        StrCat("job ", request->job(), " is not registered and has no collective records "
                               "(rocefab job list --all)"));
  response->set_now_us(clock_.NowUs());
  if (job.ok()) *response->mutable_job() = *job;
  std::map<uint32_t, std::string> where;
  if (job.ok())
    for (const auto& r : job->ranks()) where[r.rank()] = StrCat(r.host(), "/gpu", r.gpu());
  for (auto& p : *points) {
    if (p.has_slowest_rank() && where.count(p.slowest_rank())) p.set_slowest_rank_at(where[p.slowest_rank()]);
    *response->add_points() = std::move(p);
  }
  for (auto& note : notes) response->add_notes(std::move(note));
  return grpc::Status::OK;
}

grpc::Status QueryService::ListAnomalies(grpc::ServerContext* context, const v1::ListAnomaliesRequest* request,
                                         v1::ListAnomaliesResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/ListAnomalies", &who); !allowed.ok())
    return allowed;
  if (!request->settle_agents().empty()) {
    // A health gate: first let the detectors take in what the agents sent
    // after the gate's window.
    if (evaluated_through_ == nullptr) {
      for (const auto& agent : request->settle_agents()) response->add_unsettled(agent);
    } else {
      const auto timeout = std::chrono::milliseconds(request->settle_timeout_ms() ? request->settle_timeout_ms() : 10'000);
      for (auto& agent : evaluated_through_->WaitFor(
               {request->settle_agents().begin(), request->settle_agents().end()}, request->settle_after_us(),
               std::min(timeout, std::chrono::milliseconds(60'000))))
        response->add_unsettled(std::move(agent));
    }
    response->set_settled(response->unsettled().empty());
  }
  const int64_t now = clock_.NowUs();
  auto anomalies = store_.anomalies().List(request->since_us(), 0, request->active_only());
  if (!anomalies.ok()) return ToGrpc(anomalies.status());
  auto jobs = store_.jobs().List(false);
  if (!jobs.ok()) return ToGrpc(jobs.status());
  const Topology* topology = context_ ? context_->topology().get() : nullptr;
  const std::set<std::string> drained = context_ ? context_->Drained() : std::set<std::string>();
  std::vector<Footprint> footprints;
  for (const auto& job : *jobs) footprints.push_back(JobFootprint(topology, job, drained));
  for (auto& a : *anomalies) {
    for (size_t j = 0; j < jobs->size(); ++j)
      if (Touches(footprints[j], a, (*jobs)[j].id())) a.add_jobs((*jobs)[j].id());
    *response->add_anomalies() = std::move(a);
  }
  if (request->include_operator_changes() && context_ != nullptr) {
    // The period's changes, or with active_only the last hour's; drains in
    // effect whatever their age.
    const int64_t from = request->active_only() || request->since_us() == 0 ? now - 3600LL * 1'000'000 : request->since_us();
    for (v1::OperatorChange& c : context_->OperatorChanges())
      if (c.in_effect() || c.at_us() >= from) *response->add_operator_changes() = std::move(c);
  }
  response->set_now_us(now);
  return grpc::Status::OK;
}

grpc::Status QueryService::DiagnoseJob(grpc::ServerContext* context, const v1::DiagnoseJobRequest* request,
                                       v1::DiagnoseJobResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/DiagnoseJob", &who); !allowed.ok())
    return allowed;
  if (request->job().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no job id");
  auto job = store_.jobs().Get(request->job());
  if (!job.ok()) return ToGrpc(job.status());
  DiagnoseInput in;
  in.job = std::move(*job);
  in.window_end_us = request->at_us() > 0 ? request->at_us() : clock_.NowUs();
  const int64_t window = request->window_us() > 0 ? request->window_us() : 600LL * 1'000'000;
  in.window_start_us = std::max(in.window_end_us - window, in.job.start_us());
  if (in.job.end_us() > 0) in.window_end_us = std::min(in.window_end_us, in.job.end_us());
  in.onset_only = request->onset_only();
  // The baseline comes from the job's history before the window: up to
  // three windows (at least 10 min, at most 1 h) back, within the job's life.
  const int64_t lookback = std::clamp<int64_t>(3 * window, 600LL * 1'000'000, 3600LL * 1'000'000);
  const int64_t history_start_us = std::max(in.window_start_us - lookback, in.job.start_us());
  auto anomalies = store_.anomalies().List(history_start_us, in.window_end_us, false);
  if (!anomalies.ok()) return ToGrpc(anomalies.status());
  for (v1::Anomaly& a : *anomalies) {
    const bool in_window = a.start_us() <= in.window_end_us && (a.end_us() == 0 || a.end_us() >= in.window_start_us);
    if (in_window) in.anomalies.push_back(std::move(a));
    else if (IsJobSymptomKind(a.kind()) && a.job() == in.job.id()) in.history_symptoms.push_back(std::move(a));
  }
  in.footprint = JobFootprint(context_ ? context_->topology().get() : nullptr, in.job,
                              context_ ? context_->Drained() : std::set<std::string>());
  if (context_ != nullptr)
    for (v1::OperatorChange& c : context_->OperatorChanges())
      if (c.in_effect() || (c.at_us() >= history_start_us && c.at_us() <= in.window_end_us))
        in.changes.push_back(std::move(c));
  // Versions the job's hosts and switches reported changing, over the
  // history and the window (Diagnose keeps those around the slowdown).
  if (components_ != nullptr)
    for (v1::ComponentChange& c : components_->Changes(history_start_us - kChangeLeadUs, in.window_end_us))
      if (in.footprint.hosts.count(c.device()) || in.footprint.devices.count(c.device()))
        in.component_changes.push_back(std::move(c));
  // About 60 buckets over the window, at least 1 s each.
  in.bucket_us = std::max<int64_t>(1'000'000, (in.window_end_us - in.window_start_us) / 60);
  // Older than the local store: the timeline from the history TSDB. The
  // anomalies stay local (docs/deploy-tsdb.md, records_retention).
  auto timeline = store_.JobTimeline(in.job.id(), history_start_us, in.bucket_us, history_);
  if (!timeline.ok()) return ToGrpc(timeline.status());
  for (auto& p : *timeline) {
    if (p.start_us() > in.window_end_us) continue;
    if (p.records() > 0) in.last_record_us = std::max(in.last_record_us, p.start_us());
    // Buckets are aligned to their size; one that straddles the window's
    // start belongs to the window, so the baseline holds none of it.
    if (p.start_us() + in.bucket_us <= in.window_start_us) in.history.push_back(std::move(p));
    else in.timeline.push_back(std::move(p));
  }
  *response = Diagnose(in);
  // A slow job with no cause on unevenly loaded rack uplinks: flows that
  // collide in the hash. Not a finding (the detectors do not judge it); a
  // pointer to the routing what-if.
  if (traffic_rates_ != nullptr && context_ != nullptr && context_->topology() && response->state() == "degraded") {
    const std::vector<std::string> ports(in.footprint.ports.begin(), in.footprint.ports.end());
    const UplinkLoad load = RackUplinkLoad(*context_->topology(), ports, *traffic_rates_, clock_.NowUs(), 60'000'000);
    if (std::string hint = ImbalanceHint(*response, load); !hint.empty()) response->add_hints(std::move(hint));
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::ListAlerts(grpc::ServerContext* context, const v1::ListAlertsRequest* request,
                                      v1::ListAlertsResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/ListAlerts", &who); !allowed.ok())
    return allowed;
  if (alerter_ == nullptr) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "alerting is not set up");
  auto list = alerter_->List(request->include_resolved());
  if (!list.ok()) return ToGrpc(list.status());
  *response = std::move(*list);
  return grpc::Status::OK;
}

grpc::Status QueryService::Silence(grpc::ServerContext* context, const v1::SilenceRequest* request,
                                   v1::SilenceResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/Silence", &who); !allowed.ok())
    return allowed;
  if (alerter_ == nullptr) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "alerting is not set up");
  v1::Silence silence = request->silence();
  if (!request->allow_unknown()) {
    if (!silence.entity().empty())
      if (absl::Status known = KnownEntity(silence.entity()); !known.ok()) return ToGrpc(known);
    if (!silence.job().empty() && !store_.jobs().Get(silence.job()).ok())
      return ToGrpc(absl::InvalidArgumentError(
          StrCat("job ", silence.job(), " is not registered (rocefab job list --all)")));
  }
  silence.set_created_by(AuditName(who, silence.created_by()));
  auto added = alerter_->AddSilence(silence);
  if (!added.ok()) return ToGrpc(added.status());
  *response = std::move(*added);
  return grpc::Status::OK;
}

grpc::Status QueryService::Unsilence(grpc::ServerContext* context, const v1::UnsilenceRequest* request,
                                     v1::UnsilenceResponse*) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/Unsilence", &who); !allowed.ok())
    return allowed;
  if (alerter_ == nullptr) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "alerting is not set up");
  return ToGrpc(alerter_->RemoveSilence(request->id()));
}

grpc::Status QueryService::RecordPlaybookRun(grpc::ServerContext* context, const v1::RecordPlaybookRunRequest* request,
                                             v1::RecordPlaybookRunResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/RecordPlaybookRun", &who); !allowed.ok())
    return allowed;
  v1::PlaybookRun run = request->run();
  if (run.playbook().empty() || run.result().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a playbook run needs its playbook and result");
  run.set_who(AuditName(who, run.who()));
  run.set_heard_us(clock_.NowUs());
  if (run.id() != 0) {
    // A run under way, continued or ended by whoever recorded it.
    if (auto s = store_.audit().Update(run); !s.ok()) return ToGrpc(s);
    response->set_id(run.id());
    return grpc::Status::OK;
  }
  auto id = store_.audit().Record(std::move(run));
  if (!id.ok()) return ToGrpc(id.status());
  response->set_id(*id);
  return grpc::Status::OK;
}

grpc::Status QueryService::ListPlaybookRuns(grpc::ServerContext* context, const v1::ListPlaybookRunsRequest* request,
                                            v1::ListPlaybookRunsResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/ListPlaybookRuns", &who); !allowed.ok())
    return allowed;
  auto runs = store_.audit().List(request->limit());
  if (!runs.ok()) return ToGrpc(runs.status());
  for (auto& r : *runs) *response->add_runs() = std::move(r);
  return grpc::Status::OK;
}

grpc::Status QueryService::TrafficMatrix(grpc::ServerContext* context, const v1::TrafficMatrixRequest* request,
                                        v1::TrafficMatrixResponse* response) {
  std::string who;
  if (grpc::Status allowed = authorizer_.Check(context, "/rocefab.v1.Query/TrafficMatrix", &who); !allowed.ok())
    return allowed;
  const uint32_t window_s = request->window_seconds() == 0 ? 30 : request->window_seconds();
  if (window_s > 300)
    return ToGrpc(absl::InvalidArgumentError("window_seconds: at most 300 (the collector keeps 5 minutes of rates)"));
  if (traffic_rates_ == nullptr || context_ == nullptr || !context_->topology())
    return ToGrpc(absl::FailedPreconditionError("this collector has no topology (--topology), so no traffic matrix"));
  auto jobs = store_.jobs().List(false);
  if (!jobs.ok()) return ToGrpc(jobs.status());
  *response = BuildTrafficMatrix(*context_->topology(), *jobs, *traffic_rates_, clock_.NowUs(),
                                 static_cast<int64_t>(window_s) * 1'000'000);
  return grpc::Status::OK;
}

}  // namespace rocefab::collector
