#pragma once
// The centralized TE loop (`scheme: te`, docs/controller.md "TE"): every
// period it asks the collectors for the traffic matrix, runs the allocator
// around drained and down links, and when the new overrides are worth it
// makes them the desired state and rolls them out through the same canary,
// waves and health gates as any config (Controller::Apply). A failed gate
// rolls the overrides back with the rest.
//
// It keeps the overrides it runs unless the new allocation lowers the
// busiest link's predicted utilisation by `min_gain` or an override points
// at an unusable link, so that counter noise does not churn the fabric.
// Between periods a dead link's overrides fall back to ECMP by themselves
// (the kernel ignores routes over a link that is down; the lab does the
// same).

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"
#include "controller/controller.h"
#include "controller/gate.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "rocefab/v1/control.pb.h"

namespace rocefab::controller {

// TeLoopConfig with its defaults filled in.
v1::TeLoopConfig ResolveTeLoopConfig(v1::TeLoopConfig config);

class TeLoop final {
 public:
  // `registry` may be null (no metrics).
  TeLoop(Controller& controller, std::shared_ptr<const Topology> topology, Gate& collectors,
         v1::TeLoopConfig config, const Clock& clock, prometheus::Registry* registry = nullptr);
  ~TeLoop();
  TeLoop(const TeLoop&) = delete;
  TeLoop& operator=(const TeLoop&) = delete;

  // Runs a period every period_s on its own thread until Stop().
  void Start();
  // Ends the loop: no new period starts, and none rolls out after this.
  void RequestStop();
  // RequestStop(), then waits for a period in progress to end.
  void Stop();

  struct Outcome {
    // "idle" (TE not running), "unchanged", "applied", "rolled-back" or
    // "error".
    std::string result;
    std::string detail;
    uint64_t generation = 0;
    double current_max_utilization = 0;    // the running overrides under the new matrix
    double predicted_max_utilization = 0;  // the new allocation
    size_t overrides = 0;                  // running after this period
  };
  // One period, on the caller's thread.
  Outcome RunOnce();

 private:
  void Loop();
  void Count(const Outcome& outcome);

  Controller& controller_;
  std::shared_ptr<const Topology> topology_;
  Gate& collectors_;
  const v1::TeLoopConfig config_;
  const Clock& clock_;
  prometheus::Family<prometheus::Counter>* runs_ = nullptr;
  prometheus::Gauge* overrides_gauge_ = nullptr;
  prometheus::Gauge* predicted_gauge_ = nullptr;
  prometheus::Gauge* current_gauge_ = nullptr;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace rocefab::controller
