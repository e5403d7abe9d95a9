#pragma once
// The versions each agent reports (TelemetryBatch.components) and their
// changes, for the latency_regression detector and `job diagnose`'s "what
// changed" view. Agents report their versions when they start, when one
// changes, and about once a minute besides, so a collector that restarted
// knows them again within a minute; changes seen before it restarted are
// not kept.
//
// Thread-safe: the observer thread feeds it, query threads read it.

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "rocefab/v1/diagnosis.pb.h"

namespace rocefab::collector {

class ComponentLog final {
 public:
  explicit ComponentLog(size_t max_changes = 10'000) : max_changes_(max_changes) {}

  // `agent` reported `components` (its whole set) at `at_us`. The first
  // report of an agent is no change, nor is one older than its newest (a
  // replayed batch). Returns how many changes it made.
  size_t Observe(const std::string& agent, const std::map<std::string, std::string>& components, int64_t at_us);
  // Changes at [from_us, to_us], oldest first.
  std::vector<v1::ComponentChange> Changes(int64_t from_us, int64_t to_us) const;
  // What `agent` reported last; empty when it never did.
  std::map<std::string, std::string> Current(const std::string& agent) const;

 private:
  const size_t max_changes_;
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, std::string>> current_;
  std::map<std::string, int64_t> last_us_;  // the newest report of each agent
  std::deque<v1::ComponentChange> changes_;  // oldest first
};

}  // namespace rocefab::collector
