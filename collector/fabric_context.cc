#include "collector/fabric_context.h"

#include <algorithm>

#include "common/topology.h"

#include "common/grpc_util.h"
#include "common/log.h"
#include "rocefab/v1/control.grpc.pb.h"

namespace rocefab::collector {
namespace {
constexpr char kFabricContextLog[] = "context";
constexpr int64_t kJobsEveryUs = 2'000'000;
constexpr auto kControllerEvery = std::chrono::seconds(5);
}  // namespace

FabricContextSource::FabricContextSource(std::shared_ptr<const Topology> topology, Store& store,
                                         std::string controller, v1::TlsSettings tls, const Clock& clock)
    : topology_(std::move(topology)),
      store_(store),
      controller_(std::move(controller)),
      tls_(std::move(tls)),
      clock_(clock) {}

FabricContextSource::~FabricContextSource() { Stop(); }

void FabricContextSource::Start() {
  if (controller_.empty()) return;
  thread_ = std::thread([this] { PollController(); });
}

void FabricContextSource::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

FabricContext FabricContextSource::Get() {
  const int64_t now = clock_.MonotonicUs();
  bool refresh = false;
  {
    std::lock_guard lock(mu_);
    refresh = jobs_read_us_ == 0 || now - jobs_read_us_ >= kJobsEveryUs;
  }
  if (refresh) {
    auto jobs = store_.jobs().List(false);
    std::lock_guard lock(mu_);
    jobs_read_us_ = now;
    if (jobs.ok()) jobs_ = std::move(*jobs);
    else LOG_WARN(kFabricContextLog, "reading the job registry: ", jobs.status().message());
  }
  std::lock_guard lock(mu_);
  FabricContext context;
  context.topology = topology_;
  context.running_jobs = jobs_;
  context.controller_reachable = controller_reachable_;
  context.switch_status = switch_status_;
  return context;
}

std::set<std::string> FabricContextSource::Drained() {
  std::lock_guard lock(mu_);
  return drained_;
}

std::vector<v1::OperatorChange> FabricContextSource::OperatorChanges() {
  std::lock_guard lock(mu_);
  std::vector<v1::OperatorChange> out;
  for (const v1::AuditEntry& e : audit_) {
    // A recompile is the controller's own step inside a drain or start,
    // which has its own entry.
    if (e.action() == "compile") continue;
    v1::OperatorChange c;
    c.set_at_us(e.timestamp_us());
    c.set_who(e.who());
    c.set_action(e.action());
    c.set_target(e.target());
    c.set_why(e.why());
    c.set_generation(e.generation());
    out.push_back(std::move(c));
  }
  // A drain is in effect when it is the newest change of its target and
  // the controller still lists the target's ports as drained.
  std::set<std::string> seen;
  for (auto it = out.rbegin(); it != out.rend(); ++it) {
    if (!seen.insert(it->target()).second) continue;
    if (!it->action().starts_with("drain")) continue;
    bool drained = drained_.count(it->target()) > 0;
    for (const std::string& port : drained_) drained |= EntityDevice(port) == it->target();
    it->set_in_effect(drained);
  }
  return out;
}

void FabricContextSource::PollController() {
  auto channel = MakeChannel(controller_, tls_);
  if (!channel.ok()) {
    LOG_ERROR(kFabricContextLog, "controller ", controller_, ": ", channel.status().message());
    return;
  }
  auto stub = v1::Controller::NewStub(*channel);
  bool warned = false;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    grpc::ClientContext call;
    call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    v1::StatusResponse response;
    const grpc::Status status = stub->Status(&call, v1::StatusRequest(), &response);
    lock.lock();
    controller_reachable_ = status.ok();
    if (status.ok()) {
      switch_status_.assign(response.switches().begin(), response.switches().end());
      drained_ = std::set<std::string>(response.drained().begin(), response.drained().end());
      warned = false;
      // The audit log, for operator changes in diagnoses (newest first from
      // the controller; kept oldest first).
      lock.unlock();
      grpc::ClientContext history_call;
      history_call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
      v1::HistoryRequest history_request;
      history_request.set_limit(500);
      v1::HistoryResponse history;
      const grpc::Status read = stub->History(&history_call, history_request, &history);
      lock.lock();
      if (read.ok()) {
        audit_.assign(history.entries().begin(), history.entries().end());
        std::sort(audit_.begin(), audit_.end(), [](const v1::AuditEntry& a, const v1::AuditEntry& b) {
          return a.timestamp_us() < b.timestamp_us();
        });
      }
    } else if (!warned) {
      warned = true;
      LOG_WARN(kFabricContextLog, "controller ", controller_, " unreachable (", status.error_message(),
                  "): no drift detection until it answers");
    }
    cv_.wait_for(lock, kControllerEvery, [this] { return stopping_; });
  }
}

}  // namespace rocefab::collector
