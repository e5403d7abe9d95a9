#include "common/agent_metrics.h"

#include <sys/utsname.h>

#include <limits>

#include "common/build_info.h"

namespace rocefab {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(const char* name, const char* help, MetricType type) {
  MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  return family;
}

void Add(std::vector<MetricFamily>* out, const char* name, const char* help, MetricType type, double value) {
  MetricFamily family = Family(name, help, type);
  ClientMetric metric;
  if (type == MetricType::Counter) metric.counter.value = value;
  else metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
  out->push_back(std::move(family));
}

class BuildInfo final : public prometheus::Collectable {
 public:
  explicit BuildInfo(std::string program) : program_(std::move(program)) {}
  std::vector<MetricFamily> Collect() const override {
    MetricFamily family = Family("rocefab_build_info", "The program, its version and the git commit it was built from",
                                 MetricType::Gauge);
    ClientMetric metric;
    metric.label = {{"commit", BuildCommit()}, {"program", program_}, {"version", BuildVersion()}};
    metric.gauge.value = 1;
    family.metric.push_back(std::move(metric));
    return {std::move(family)};
  }

 private:
  std::string program_;
};

class ReadGauge final : public prometheus::Collectable {
 public:
  ReadGauge(std::string name, std::string help, std::function<double()> read)
      : name_(std::move(name)), help_(std::move(help)), read_(std::move(read)) {}
  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> out;
    Add(&out, name_.c_str(), help_.c_str(), MetricType::Gauge, read_());
    return out;
  }

 private:
  std::string name_, help_;
  std::function<double()> read_;
};

}  // namespace

namespace {

class CollectFunction final : public prometheus::Collectable {
 public:
  explicit CollectFunction(std::function<std::vector<MetricFamily>()> collect) : collect_(std::move(collect)) {}
  std::vector<MetricFamily> Collect() const override { return collect_(); }

 private:
  std::function<std::vector<MetricFamily>()> collect_;
};

}  // namespace

std::shared_ptr<prometheus::Collectable> CollectableOf(std::function<std::vector<MetricFamily>()> collect) {
  return std::make_shared<CollectFunction>(std::move(collect));
}

MetricFamily OneValue(const std::string& name, const std::string& help, MetricType type, double value) {
  std::vector<MetricFamily> out;
  Add(&out, name.c_str(), help.c_str(), type, value);
  return std::move(out.front());
}

MetricFamily ByLabel(const std::string& name, const std::string& help, MetricType type, const std::string& label,
                     const std::map<std::string, double>& values) {
  MetricFamily family = Family(name.c_str(), help.c_str(), type);
  for (const auto& [key, value] : values) {
    ClientMetric metric;
    metric.label = {{label, key}};
    if (type == MetricType::Counter) metric.counter.value = value;
    else metric.gauge.value = value;
    family.metric.push_back(std::move(metric));
  }
  return family;
}

std::shared_ptr<prometheus::Collectable> GaugeOf(std::string name, std::string help, std::function<double()> read) {
  return std::make_shared<ReadGauge>(std::move(name), std::move(help), std::move(read));
}

std::map<std::string, std::string> SystemComponents() {
  std::map<std::string, std::string> out;
  utsname names{};
  if (uname(&names) == 0) out["kernel"] = names.release;
  return out;
}

std::shared_ptr<prometheus::Collectable> BuildInfoCollectable(const std::string& program) {
  return std::make_shared<BuildInfo>(program);
}

AgentMetrics::AgentMetrics(std::string program, const AgentLoop& loop, const TelemetryShipper& shipper,
                           std::map<std::string, std::string> components, bool build_info)
    : program_(std::move(program)),
      loop_(loop),
      shipper_(shipper),
      components_(std::move(components)),
      build_info_(build_info) {}

void AgentMetrics::SetComponents(std::map<std::string, std::string> components) {
  std::lock_guard lock(mu_);
  components_ = std::move(components);
}

std::vector<MetricFamily> AgentMetrics::Collect() const {
  std::vector<MetricFamily> out;
  if (build_info_) out = BuildInfo(program_).Collect();
  {
    std::lock_guard lock(mu_);
    MetricFamily family = Family("rocefab_agent_component_info",
                                 "Software and firmware the agent sees, one series per component", MetricType::Gauge);
    for (const auto& [component, version] : components_) {
      ClientMetric metric;
      metric.label = {{"component", component}, {"version", version}};
      metric.gauge.value = 1;
      family.metric.push_back(std::move(metric));
    }
    out.push_back(std::move(family));
  }
  const AgentLoop::PollTimes times = loop_.poll_times();
  MetricFamily polls = Family("rocefab_agent_poll_duration_seconds", "How long each poll of the sources took",
                              MetricType::Histogram);
  ClientMetric histogram;
  histogram.histogram.sample_count = times.polls;
  histogram.histogram.sample_sum = times.total_us / 1e6;
  for (size_t i = 0; i < AgentLoop::kPollBucketsUs.size(); ++i)
    histogram.histogram.bucket.push_back({times.buckets[i], AgentLoop::kPollBucketsUs[i] / 1e6});
  histogram.histogram.bucket.push_back({times.polls, std::numeric_limits<double>::infinity()});
  polls.metric.push_back(std::move(histogram));
  out.push_back(std::move(polls));
  Add(&out, "rocefab_agent_poll_overruns_total", "Polls that took longer than the poll interval",
      MetricType::Counter, static_cast<double>(times.overruns));
  Add(&out, "rocefab_agent_poll_interval_seconds", "The configured poll interval", MetricType::Gauge,
      loop_.interval_us() / 1e6);

  const TelemetryShipper::Stats s = shipper_.stats();
  MetricFamily health = Family("rocefab_agent_source_problems_total",
                               "What the sources could not give, by kind: skipped (a value or table absent), "
                               "parse (a value that was not a number), source (a whole source failed)",
                               MetricType::Counter);
  for (const auto& [kind, value] : {std::pair{"skipped", s.skipped_values}, std::pair{"parse", s.parse_errors},
                                    std::pair{"source", s.source_errors}}) {
    ClientMetric metric;
    metric.label = {{"kind", kind}};
    metric.counter.value = static_cast<double>(value);
    health.metric.push_back(std::move(metric));
  }
  out.push_back(std::move(health));
  Add(&out, "rocefab_agent_stream_up", "1 while the telemetry stream to the collector is open", MetricType::Gauge,
      s.connected ? 1 : 0);
  Add(&out, "rocefab_agent_stream_failures_total", "Telemetry streams that broke or could not open",
      MetricType::Counter, static_cast<double>(s.stream_failures));
  Add(&out, "rocefab_agent_batches_enqueued_total", "Batches built", MetricType::Counter,
      static_cast<double>(s.enqueued));
  Add(&out, "rocefab_agent_batches_acked_total", "Batches the collector acknowledged as stored (or as duplicates)",
      MetricType::Counter, static_cast<double>(s.acked_stored + s.acked_duplicate));
  Add(&out, "rocefab_agent_batches_rejected_total", "Batches the collector rejected as malformed",
      MetricType::Counter, static_cast<double>(s.rejected));
  Add(&out, "rocefab_agent_batches_dropped_total", "Batches dropped because the queue was full",
      MetricType::Counter, static_cast<double>(s.dropped_overflow));
  Add(&out, "rocefab_agent_batches_pending", "Batches waiting for an acknowledgement", MetricType::Gauge,
      static_cast<double>(s.pending));
  Add(&out, "rocefab_agent_batches_replay_pending", "Batches of an earlier run of the agent still to send",
      MetricType::Gauge, static_cast<double>(s.replay_pending));
  Add(&out, "rocefab_agent_spool_bytes", "Bytes of unacknowledged batches kept on disk", MetricType::Gauge,
      static_cast<double>(s.spool_bytes));
  return out;
}

}  // namespace rocefab
