#include "collector/history/promql_history.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <unordered_map>

#include "common/counters.h"
#include "common/http_client.h"
#include "common/strings.h"
#include "common/daemon_setup.h"

namespace rocefab::collector {
namespace {

// Metric name -> vocabulary counter, built once.
const CounterDef* CounterOfMetric(const std::string& name) {
  static const auto* by_name = [] {
    auto* m = new std::unordered_map<std::string, const CounterDef*>;
    for (const CounterDef& def : AllCounters())
      if (def.scope != v1::SCOPE_COLL) m->emplace(MetricName(def), &def);
    return m;
  }();
  auto it = by_name->find(name);
  return it == by_name->end() ? nullptr : it->second;
}

bool ParseIndex(const nlohmann::json& metric, const char* label, int64_t* out) {
  auto it = metric.find(label);
  if (it == metric.end()) {
    *out = -1;
    return true;
  }
  if (!it->is_string()) return false;
  const std::string& text = it->get_ref<const std::string&>();
  if (text.empty() || text.size() > 9 || !std::all_of(text.begin(), text.end(), ::isdigit)) return false;
  *out = std::stoll(text);
  return true;
}

std::string Label(const nlohmann::json& metric, const char* label) {
  auto it = metric.find(label);
  return it != metric.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The series a PromQL series stands for, or false when it is not one of ours.
bool SeriesOf(const nlohmann::json& metric, SeriesInfo* info) {
  if (!metric.is_object()) return false;
  const CounterDef* def = CounterOfMetric(Label(metric, "__name__"));
  if (def == nullptr) return false;
  info->scope = def->scope;
  info->counter = std::string(def->name);
  info->kind = def->kind;
  if (!ParseIndex(metric, "prio", &info->prio) || !ParseIndex(metric, "queue", &info->queue)) return false;
  if (def->per_prio != (info->prio >= 0)) return false;
  if (def->scope == v1::SCOPE_NIC) {
    const std::string host = Label(metric, "host"), device = Label(metric, "device");
    int64_t port = 0;
    if (host.empty() || device.empty() || !ParseIndex(metric, "port", &port) || port < 0) return false;
    info->entity = StrCat(host, "/", device);
    info->port = static_cast<uint32_t>(port);
  } else {
    const std::string sw = Label(metric, "switch"), port = Label(metric, "port");
    if (sw.empty() || port.empty()) return false;
    info->entity = StrCat(sw, "/", port);
    info->port = 0;
  }
  return true;
}

// o[key] when it is a string, else "" (json::value throws on other types).
std::string StringAt(const nlohmann::json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// The result array of a successful matrix answer.
absl::StatusOr<nlohmann::json> MatrixResult(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("history: the response is not JSON");
  if (StringAt(j, "status") != "success") {
    const std::string error = StringAt(j, "error");
    return absl::UnavailableError(StrCat("history: the query failed: ", error.empty() ? "no status" : error));
  }
  auto data = j.find("data");
  if (data == j.end() || !data->is_object() || StringAt(*data, "resultType") != "matrix" ||
      !data->contains("result") || !(*data)["result"].is_array())
    return absl::DataLossError("history: expected a matrix result");
  return std::move((*data)["result"]);
}

// One [ <unix seconds>, "<value>" ] point: finite, at a plausible time.
bool ParsePoint(const nlohmann::json& point, double* ts, double* value) {
  if (!point.is_array() || point.size() != 2 || !point[0].is_number() || !point[1].is_string()) return false;
  const std::string& text = point[1].get_ref<const std::string&>();
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  *ts = point[0].get<double>();
  return end != text.c_str() && *end == '\0' && std::isfinite(*value) && std::isfinite(*ts) && *ts >= 0 &&
         *ts <= 1e11;
}

std::string Quote(const std::string& value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

absl::StatusOr<HistoryOptions> ResolveHistory(const v1::HistoryConfig& config) {
  HistoryOptions o;
  o.url = config.url();
  while (!o.url.empty() && o.url.back() == '/') o.url.pop_back();
  if (o.url.rfind("http://", 0) != 0 && o.url.rfind("https://", 0) != 0)
    return absl::InvalidArgumentError(
        StrCat("history url '", config.url(), "' must start with http:// or https:// (the PromQL API base)"));
  for (const auto& [name, value] : config.match_labels()) o.match_labels.emplace_back(name, value);
  std::sort(o.match_labels.begin(), o.match_labels.end());
  if (config.has_timeout()) {
    o.timeout_us = DurationToUs(config.timeout());
    if (o.timeout_us <= 0) return absl::InvalidArgumentError("history timeout must be positive");
  }
  if (!config.basic_auth_file().empty()) {
    auto auth = ReadBasicAuthFile(config.basic_auth_file(), "history");
    if (!auth.ok()) return auth.status();
    o.basic_auth = *auth;
  }
  return o;
}

absl::StatusOr<std::vector<SampleRow>> ParseMatrix(std::string_view body, uint64_t* skipped) {
  auto result = MatrixResult(body);
  if (!result.ok()) return result.status();
  std::vector<SampleRow> out;
  for (const auto& series : *result) {
    SeriesInfo info;
    if (!series.is_object() || !SeriesOf(series.value("metric", nlohmann::json()), &info) ||
        !series.contains("values") || !series["values"].is_array()) {
      ++*skipped;
      continue;
    }
    const CounterDef* def = FindCounter(info.scope, info.counter);
    const double scale = MetricScale(*def);
    for (const auto& point : series["values"]) {
      double ts = 0, v = 0;
      if (!ParsePoint(point, &ts, &v) || v < 0) {
        ++*skipped;
        continue;
      }
      SampleRow row;
      row.series = info;
      row.ts_us = std::llround(ts * 1e6);
      const double raw = std::round(v / scale);
      row.value = raw >= 1.8446744073709552e19 ? UINT64_MAX : static_cast<uint64_t>(raw);
      out.push_back(std::move(row));
    }
  }
  return out;
}

absl::StatusOr<std::map<std::pair<int64_t, std::string>, double>> ParseOpMatrix(std::string_view body,
                                                                                 uint64_t* skipped) {
  auto result = MatrixResult(body);
  if (!result.ok()) return result.status();
  std::map<std::pair<int64_t, std::string>, double> out;
  for (const auto& series : *result) {
    const std::string op = series.is_object() && series.contains("metric") && series["metric"].is_object()
                               ? Label(series["metric"], "op")
                               : std::string();
    if (op.empty() || op.size() > 64 || !series.contains("values") || !series["values"].is_array()) {
      ++*skipped;
      continue;
    }
    for (const auto& point : series["values"]) {
      double ts = 0, v = 0;
      if (!ParsePoint(point, &ts, &v)) {
        ++*skipped;
        continue;
      }
      out[{std::llround(ts * 1000), op}] = v;
    }
  }
  return out;
}

PromqlHistory::PromqlHistory(HistoryOptions options, prometheus::Registry& registry)
    : options_(std::move(options)),
      queries_(prometheus::BuildCounter()
                   .Name("rocefab_collector_history_queries_total")
                   .Help("PromQL history reads, by result")
                   .Register(registry)),
      ok_(queries_.Add({{"result", "ok"}})),
      failed_(queries_.Add({{"result", "failed"}})),
      samples_(prometheus::BuildCounter()
                   .Name("rocefab_collector_history_samples_total")
                   .Help("Samples read back from the history TSDB")
                   .Register(registry)
                   .Add({})),
      skipped_(prometheus::BuildCounter()
                   .Name("rocefab_collector_history_skipped_total")
                   .Help("Series and points of history responses that were not rocefab's or malformed")
                   .Register(registry)
                   .Add({})) {}

absl::StatusOr<std::vector<SampleRow>> PromqlHistory::Query(const std::string& selector, int64_t from_us,
                                                            int64_t to_us) {
  // Raw samples in (end - range, end]: end is just before to_us, and never
  // past the TSDB's present (to_us may be "everything").
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const int64_t end_us = std::min(to_us, now_us + 60'000'000) - 1;
  if (end_us < from_us) return std::vector<SampleRow>();
  const int64_t range_s = std::max<int64_t>(1, (end_us - from_us + 999'999) / 1'000'000);
  const std::string query = StrCat(selector, "[", range_s, "s]");
  char time[32];
  std::snprintf(time, sizeof(time), "%lld.%06lld", static_cast<long long>(end_us / 1'000'000),
                static_cast<long long>(end_us % 1'000'000));
  auto body = Post("/api/v1/query", StrCat("query=", UrlEncode(query), "&time=", time));
  if (!body.ok()) return body.status();
  uint64_t skipped = 0;
  auto rows = ParseMatrix(*body, &skipped);
  skipped_.Increment(static_cast<double>(skipped));
  if (!rows.ok()) {
    failed_.Increment();
    return absl::Status(rows.status().code(), StrCat(rows.status().message(), " (from ", options_.url, ")"));
  }
  ok_.Increment();
  std::erase_if(*rows, [&](const SampleRow& r) { return r.ts_us < from_us || r.ts_us >= to_us; });
  samples_.Increment(static_cast<double>(rows->size()));
  return rows;
}

absl::StatusOr<std::string> PromqlHistory::Post(const std::string& path, const std::string& form) {
  HttpPostOptions http;
  http.headers = {"Content-Type: application/x-www-form-urlencoded", "Accept: application/json"};
  http.timeout_ms = std::max<int64_t>(1, options_.timeout_us / 1000);
  http.basic_auth = options_.basic_auth;
  http.max_body_bytes = options_.max_response_bytes;
  HttpResult result = HttpPost(options_.url + path, form, http);
  if (!result.error.empty()) {
    failed_.Increment();
    return absl::UnavailableError(StrCat("history ", options_.url, ": ", result.error));
  }
  if (result.truncated) {
    failed_.Increment();
    return absl::ResourceExhaustedError(
        StrCat("history ", options_.url, ": the answer is larger than ", options_.max_response_bytes, " bytes"));
  }
  return std::move(result.body);
}

std::string PromqlHistory::MatchLabels() const {
  std::string extra;
  for (const auto& [name, value] : options_.match_labels) StrAppend(&extra, ",", name, "=", Quote(value));
  return extra;
}

absl::StatusOr<std::vector<v1::JobTimelinePoint>> PromqlHistory::ReadTimeline(const std::string& job, int64_t from_us,
                                                                               int64_t to_us, int64_t bucket_us) {
  std::vector<v1::JobTimelinePoint> out;
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  to_us = std::min(to_us, now_us + bucket_us);
  if (bucket_us < 1000 || to_us <= from_us) return out;
  // Buckets [b, b + B) are evaluated at b + B - 1 ms over a range of B:
  // samples in (b - 1 ms, b + B - 1 ms], which with millisecond timestamps
  // is exactly the bucket.
  const int64_t first = from_us - ((from_us % bucket_us) + bucket_us) % bucket_us;
  const int64_t last = (to_us - 1) - (((to_us - 1) % bucket_us) + bucket_us) % bucket_us;
  const int64_t bucket_ms = bucket_us / 1000;
  auto at = [](int64_t us) {
    char text[32];
    std::snprintf(text, sizeof(text), "%lld.%03lld", static_cast<long long>(us / 1'000'000),
                  static_cast<long long>((us % 1'000'000) / 1000));
    return std::string(text);
  };
  const std::string matchers = StrCat("{job_id=", Quote(job), MatchLabels(), "}");
  const std::string busbw = StrCat("rocefab_collective_busbw_gbs", matchers, "[", bucket_ms, "ms]");
  const std::string exec = StrCat("rocefab_collective_exec_time_seconds", matchers, "[", bucket_ms, "ms]");
  const std::string queries[] = {
      StrCat("sum by (op) (count_over_time(", busbw, "))"),
      StrCat("count by (op) (count by (op, rank) (count_over_time(", busbw, ")))"),
      StrCat("sum by (op) (sum_over_time(", busbw, ")) / sum by (op) (count_over_time(", busbw, "))"),
      StrCat("min by (op) (min_over_time(", busbw, "))"),
      StrCat("max by (op) (max_over_time(", exec, "))"),
  };
  std::map<std::pair<int64_t, std::string>, v1::JobTimelinePoint> points;
  for (size_t q = 0; q < std::size(queries); ++q) {
    auto body = Post("/api/v1/query_range",
                     StrCat("query=", UrlEncode(queries[q]), "&start=", at(first + bucket_us - 1000),
                            "&end=", at(last + bucket_us - 1000), "&step=", bucket_ms, "ms"));
    if (!body.ok()) return body.status();
    uint64_t skipped = 0;
    auto values = ParseOpMatrix(*body, &skipped);
    skipped_.Increment(static_cast<double>(skipped));
    if (!values.ok()) {
      failed_.Increment();
      return absl::Status(values.status().code(), StrCat(values.status().message(), " (from ", options_.url, ")"));
    }
    ok_.Increment();
    for (const auto& [key, value] : *values) {
      const int64_t start_us = key.first * 1000 + 1000 - bucket_us;
      v1::JobTimelinePoint& p = points[{start_us, key.second}];
      p.set_start_us(start_us);
      p.set_op(key.second);
      switch (q) {
        case 0: p.set_records(static_cast<uint64_t>(std::llround(value))); break;
        case 1: p.set_ranks(static_cast<uint32_t>(std::llround(value))); break;
        case 2: p.set_mean_busbw_gbs(value); break;
        case 3: p.set_min_busbw_gbs(value); break;
        default: p.set_max_exec_time_us(value * 1e6); break;
      }
    }
  }
  for (auto& [key, p] : points)
    if (p.records() > 0 && p.start_us() >= first && p.start_us() < to_us) out.push_back(std::move(p));
  return out;
}

absl::StatusOr<std::vector<SampleRow>> PromqlHistory::Read(const std::string& device, int64_t from_us,
                                                           int64_t to_us) {
  std::vector<SampleRow> out;
  if (to_us <= from_us) return out;
  const std::string extra = MatchLabels();
  // A device is a host (NIC series) or a switch (port and queue series).
  for (const std::string& selector :
       {StrCat("{__name__=~\"rocefab_nic_.+\",host=", Quote(device), extra, "}"),
        StrCat("{__name__=~\"rocefab_(port|queue)_.+\",switch=", Quote(device), extra, "}")}) {
    auto rows = Query(selector, from_us, to_us);
    if (!rows.ok()) return rows.status();
    out.insert(out.end(), std::make_move_iterator(rows->begin()), std::make_move_iterator(rows->end()));
  }
  std::stable_sort(out.begin(), out.end(), [](const SampleRow& a, const SampleRow& b) { return a.ts_us < b.ts_us; });
  return out;
}

}  // namespace rocefab::collector
