#pragma once
// What the collector knows of the fabric beyond telemetry, for detectors and
// diagnoses: the topology (a file), the running jobs (the registry, re-read
// every few seconds) and, when a controller is configured, its view of each
// switch's desired vs applied config and the drained links (polled).
//
// Thread-safe: Get and Drained may be called from any thread.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "collector/detectors.h"
#include "collector/store.h"
#include "common/clock.h"
#include "rocefab/v1/config.pb.h"

namespace rocefab::collector {

class FabricContextSource final {
 public:
  // `controller` may be empty (no drift detector, no drained links).
  FabricContextSource(std::shared_ptr<const Topology> topology, Store& store, std::string controller,
                      v1::TlsSettings tls, const Clock& clock);
  ~FabricContextSource();
  FabricContextSource(const FabricContextSource&) = delete;
  FabricContextSource& operator=(const FabricContextSource&) = delete;

  // Starts polling the controller (when one is configured).
  void Start();
  void Stop();
  FabricContext Get();
  std::set<std::string> Drained();
  // The controller's recent audit entries (newest last, at most the last
  // 500), as operator changes; drains whose port is still drained are
  // marked in effect. Empty without a controller.
  std::vector<v1::OperatorChange> OperatorChanges();
  const std::shared_ptr<const Topology>& topology() const { return topology_; }
  const std::string& controller() const { return controller_; }
  const v1::TlsSettings& tls() const { return tls_; }

 private:
  void PollController();

  std::shared_ptr<const Topology> topology_;
  Store& store_;
  std::string controller_;
  v1::TlsSettings tls_;
  const Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<v1::Job> jobs_;
  int64_t jobs_read_us_ = 0;
  bool controller_reachable_ = false;
  std::vector<v1::SwitchStatus> switch_status_;
  std::set<std::string> drained_;
  std::vector<v1::AuditEntry> audit_;
  std::thread thread_;
};

}  // namespace rocefab::collector
