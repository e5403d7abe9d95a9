#pragma once
// Counter history older than the collector's local hot window, read back
// from a TSDB that remote-write fills (VictoriaMetrics, Mimir, Thanos,
// Prometheus), through its PromQL HTTP API.
//
// A read asks for raw samples, not evaluated points: an instant query of a
// range selector, `{__name__=~"rocefab_nic_.+",host="h"}[Ns]` at the end of
// the range, which Prometheus and VictoriaMetrics both answer with every
// stored sample. Series names and labels are those of docs/metrics.md, so a
// returned series maps back to (scope, entity, port, counter, prio, queue),
// and values go back to vocabulary units (seconds become microseconds).
// Counter values travel as float64: exact below 2^53.
//
// Any thread; each read is one or two blocking HTTP requests.

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "collector/store.h"
#include "rocefab/v1/config.pb.h"

namespace rocefab::collector {

struct HistoryOptions {
  std::string url;  // PromQL API base
  std::vector<std::pair<std::string, std::string>> match_labels;
  int64_t timeout_us = 30'000'000;
  std::string basic_auth;
  size_t max_response_bytes = 256 << 20;
};

absl::StatusOr<HistoryOptions> ResolveHistory(const v1::HistoryConfig& config);

// Parses a PromQL matrix response (the JSON body of /api/v1/query) into
// samples, skipping series whose name or labels are not rocefab's, and
// counting them in `*skipped`. Exposed for tests and the fuzz target.
absl::StatusOr<std::vector<SampleRow>> ParseMatrix(std::string_view body, uint64_t* skipped);

// Parses a /api/v1/query_range answer whose series are labelled by `op`
// alone (an aggregation `by (op)`): (evaluation time in ms, op) -> value.
absl::StatusOr<std::map<std::pair<int64_t, std::string>, double>> ParseOpMatrix(std::string_view body,
                                                                                 uint64_t* skipped);

class PromqlHistory final : public HistorySource {
 public:
  PromqlHistory(HistoryOptions options, prometheus::Registry& registry);

  absl::StatusOr<std::vector<SampleRow>> Read(const std::string& device, int64_t from_us,
                                              int64_t to_us) override;
  // From the rocefab_collective_* series remote-write sends: per bucket and
  // op, the records, ranks, mean and lowest bus bandwidth and the longest
  // kernel time, each one query_range evaluated at every bucket's last
  // millisecond.
  absl::StatusOr<std::vector<v1::JobTimelinePoint>> ReadTimeline(const std::string& job, int64_t from_us,
                                                                 int64_t to_us, int64_t bucket_us) override;

 private:
  absl::StatusOr<std::string> Post(const std::string& path, const std::string& form);
  absl::StatusOr<std::vector<SampleRow>> Query(const std::string& selector, int64_t from_us, int64_t to_us);

  std::string MatchLabels() const;

  HistoryOptions options_;
  prometheus::Family<prometheus::Counter>& queries_;
  prometheus::Counter &ok_, &failed_, &samples_, &skipped_;
};

}  // namespace rocefab::collector
