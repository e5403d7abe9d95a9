// Real peers: a real Alertmanager (Debian prometheus-alertmanager) receives
// the collector's alerts for a lab fault; `amtool alert query` shows them,
// and they resolve once the fault is over.
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "common/process.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

constexpr char kAlertmanager[] = "/usr/bin/prometheus-alertmanager";
constexpr char kAmtool[] = "/usr/bin/amtool";

// The alerts Alertmanager holds now, as amtool prints them (JSON).
nlohmann::json AmtoolQuery(const std::string& url, std::string* text = nullptr) {
  std::string out, err;
  if (text != nullptr) testing::RunCommand({kAmtool, "--alertmanager.url=" + url, "alert", "query"}, text, &err);
  if (testing::RunCommand({kAmtool, "--alertmanager.url=" + url, "-o", "json", "alert", "query"}, &out, &err) != 0)
    return nlohmann::json::array();
  try {
    return nlohmann::json::parse(out);
  } catch (const std::exception&) {
    return nlohmann::json::array();
  }
}

bool HasStorm(const nlohmann::json& alerts) {
  for (const auto& a : alerts)
    if (a["labels"].value("alertname", "") == "RocefabPfcStorm" &&
        a["labels"].value("entity", "") == "z1-r02-h2/mlx5_1" && a["labels"].value("job", "") == "4714")
      return true;
  return false;
}

TEST(Peers, AlertmanagerReceivesTheStormAlertAndSeesItResolve) {
  if (!std::filesystem::exists(kAlertmanager) || !std::filesystem::exists(kAmtool))
    GTEST_SKIP() << "needs the prometheus-alertmanager package (make test installs it)";
  testing::TempDir dir;
  const int port = testing::FreeTcpPort();
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  std::ofstream(dir / "alertmanager.yml") << "route:\n  receiver: oncall\n  group_by: [job, entity]\n"
                                             "  group_wait: 1s\nreceivers:\n  - name: oncall\n";
  Subprocess am({{kAlertmanager, "--config.file=" + dir / "alertmanager.yml", "--storage.path=" + dir / "am",
                  "--web.listen-address=127.0.0.1:" + std::to_string(port), "--cluster.listen-address="},
                 {},
                 dir / "am.log",
                 dir / "am.log"});
  ASSERT_TRUE(testing::WaitFor([&] { return testing::HttpGet("127.0.0.1:" + std::to_string(port), "/-/ready").has_value(); },
                               std::chrono::seconds(20)))
      << testing::ReadFile(dir / "am.log");

  // pfc_storm.yaml at half its times: the storm runs from 10 s to 25 s of 35.
  Subprocess lab({{testing::BinDir() + "/rocefab-lab", "run", std::string(ROCEFAB_SOURCE_DIR) + "/lab/scenarios/pfc_storm.yaml",
                   "--run-dir", dir / "run", "--time-scale", "0.5", "--timeline-every", "5",
                   "--collector-arg=--alertmanager", "--collector-arg=" + url},
                  {},
                  dir / "lab.out",
                  dir / "lab.out"});
  std::string shown;
  EXPECT_TRUE(testing::WaitFor([&] { return HasStorm(AmtoolQuery(url)); }, std::chrono::seconds(45)))
      << testing::ReadFile(dir / "lab.out");
  AmtoolQuery(url, &shown);
  std::cout << "$ amtool --alertmanager.url=" << url << " alert query\n" << shown;
  EXPECT_NE(shown.find("RocefabPfcStorm"), std::string::npos) << shown;
  // The storm ends at 25 s: the collector resolves the alert and tells
  // Alertmanager, which stops listing it.
  EXPECT_TRUE(testing::WaitFor([&] { return !HasStorm(AmtoolQuery(url)); }, std::chrono::seconds(40)))
      << AmtoolQuery(url).dump(2);
  AmtoolQuery(url, &shown);
  std::cout << "after the storm:\n$ amtool --alertmanager.url=" << url << " alert query\n" << shown;
  EXPECT_EQ(lab.Wait(), 0) << testing::ReadFile(dir / "lab.out");
  // The collector's own record: fired, then resolved.
  std::string out, err;
  ASSERT_EQ(testing::RunCommand({"/usr/bin/sqlite3", dir / "run/collector.db",
                                 "SELECT status FROM alerts WHERE fingerprint = 'pfc_storm|z1-r02-h2/mlx5_1|4714'"},
                                &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "resolved\n");
}

}  // namespace
}  // namespace rocefab

namespace rocefab {
namespace {

constexpr char kPrometheus[] = "/usr/bin/prometheus";

std::string Escape(const std::string& text) {
  char* escaped = curl_easy_escape(nullptr, text.c_str(), static_cast<int>(text.size()));
  std::string out = escaped ? escaped : "";
  curl_free(escaped);
  return out;
}

// One instant query against the real Prometheus; the result vector.
nlohmann::json Query(const std::string& prom, const std::string& expr, std::string* error) {
  auto body = testing::HttpGet(prom, "/api/v1/query?query=" + Escape(expr));
  if (!body) {
    *error = "no answer";
    return nlohmann::json::array();
  }
  auto j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") {
    *error = *body;
    return nlohmann::json::array();
  }
  return j["data"]["result"];
}

// Every dashboard in dashboards/ is a sound Grafana JSON model, and every
// panel query, with its template variables set from the label values
// Prometheus has, parses and returns series from a real Prometheus scraping
// a running lab (a PFC storm on a controller-managed fabric).
TEST(Peers, EveryDashboardQueryReturnsSeriesFromARealPrometheusScrapingTheLab) {
  if (!std::filesystem::exists(kPrometheus)) GTEST_SKIP() << "needs the prometheus package (make test installs it)";
  testing::TempDir dir;
  const std::string source = ROCEFAB_SOURCE_DIR;
  Subprocess lab({{testing::BinDir() + "/rocefab-lab", "run", source + "/lab/scenarios/pfc_storm_controlled.yaml",
                   "--run-dir", dir / "run", "--timeline-every", "5"},
                  {},
                  dir / "lab.out",
                  dir / "lab.out"});
  ASSERT_TRUE(testing::WaitFor([&] { return std::filesystem::exists(dir / "run/endpoints.json"); },
                               std::chrono::seconds(60)))
      << testing::ReadFile(dir / "lab.out");
  std::string metrics_address;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto j = nlohmann::json::parse(testing::ReadFile(dir / "run/endpoints.json"), nullptr, false);
        if (j.is_discarded() || !j.contains("metrics")) return false;
        metrics_address = j["metrics"];
        return true;
      },
      std::chrono::seconds(10)));
  const int port = testing::FreeTcpPort();
  const std::string prom = "127.0.0.1:" + std::to_string(port);
  std::ofstream(dir / "prometheus.yml")
      << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
      << "rule_files:\n  - " << source << "/deploy/prometheus/rocefab-rules.yml\n"
      << "scrape_configs:\n  - job_name: rocefab-collector\n    scheme: https\n    tls_config:\n"
      << "      ca_file: " << dir / "run/pki/ca.pem" << "\n      cert_file: " << dir / "run/pki/prometheus.pem"
      << "\n      key_file: " << dir / "run/pki/prometheus.key" << "\n    static_configs:\n      - targets: ['"
      << metrics_address << "']\n        labels:\n          cluster: lab\n";
  Subprocess prometheus({{kPrometheus, "--config.file=" + dir / "prometheus.yml", "--storage.tsdb.path=" + dir / "tsdb",
                          "--web.listen-address=" + prom},
                         {},
                         dir / "prometheus.log",
                         dir / "prometheus.log"});
  std::string error;
  // The storm starts at 15 s; wait until Prometheus has scraped its anomaly
  // and a few more samples for rates.
  ASSERT_TRUE(testing::WaitFor([&] { return !Query(prom, "rocefab_anomaly{kind=\"pfc_storm\"}", &error).empty(); },
                               std::chrono::seconds(60)))
      << error << testing::ReadFile(dir / "prometheus.log") << testing::ReadFile(dir / "lab.out");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        // Every exported port and NIC series has the two samples a rate needs.
        for (const char* m : {"rocefab_port_rx_bytes_total", "rocefab_nic_rx_bytes_total"}) {
          auto all = Query(prom, std::string("count(") + m + ")", &error);
          auto rated = Query(prom, std::string("count(rate(") + m + "[10s]))", &error);
          if (all.empty() || rated.empty() || all[0]["value"][1] != rated[0]["value"][1]) return false;
        }
        return !Query(prom, "rate(rocefab_fabric_rx_bytes_total[10s]) > 0", &error).empty() &&
                   !Query(prom, "rocefab_job_busbw_gbs", &error).empty() &&
                   !Query(prom, "rocefab_controller_switch_generation", &error).empty(); },
      std::chrono::seconds(30)))
      << error;

  int dashboards = 0, queries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source + "/dashboards")) {
    if (entry.path().extension() != ".json") continue;
    ++dashboards;
    SCOPED_TRACE(entry.path().filename().string());
    auto d = nlohmann::json::parse(testing::ReadFile(entry.path()), nullptr, false);
    ASSERT_FALSE(d.is_discarded()) << "not JSON";
    EXPECT_TRUE(d["uid"].is_string() && !d["uid"].get<std::string>().empty());
    EXPECT_TRUE(d["title"].get<std::string>().starts_with("rocefab / "));
    EXPECT_GE(d["schemaVersion"].get<int>(), 36);
    // Template variables, each set to the first value Prometheus knows.
    std::map<std::string, std::string> values;
    for (const auto& v : d["templating"]["list"]) {
      const std::string def = v["query"]["query"];
      const size_t open = def.find('('), comma = def.rfind(','), close = def.rfind(')');
      ASSERT_TRUE(def.starts_with("label_values(") && comma != std::string::npos) << def;
      std::string selector = def.substr(open + 1, comma - open - 1);
      const std::string label = def.substr(comma + 2, close - comma - 2);
      for (const auto& [name, value] : values) {
        for (size_t at; (at = selector.find("$" + name)) != std::string::npos;)
          selector.replace(at, name.size() + 1, value);
      }
      auto body = testing::HttpGet(prom, "/api/v1/label/" + label + "/values?match[]=" + Escape(selector));
      ASSERT_TRUE(body.has_value());
      auto j = nlohmann::json::parse(*body);
      ASSERT_FALSE(j["data"].empty()) << v["name"] << ": no values for " << def;
      values[v["name"]] = j["data"][0];
    }
    std::set<int> ids;
    for (const auto& p : d["panels"]) {
      EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "duplicate panel id";
      EXPECT_EQ(p["datasource"]["uid"], "rocefab-prometheus");
      EXPECT_TRUE(p["gridPos"].contains("w") && p["gridPos"].contains("h"));
      ASSERT_FALSE(p["targets"].empty()) << p["title"];
      for (const auto& t : p["targets"]) {
        std::string expr = t["expr"];
        for (size_t at; (at = expr.find("$__rate_interval")) != std::string::npos;) expr.replace(at, 16, "10s");
        for (const auto& [name, value] : values)
          for (size_t at; (at = expr.find("$" + name)) != std::string::npos;) expr.replace(at, name.size() + 1, value);
        ++queries;
        error.clear();
        const auto result = Query(prom, expr, &error);
        EXPECT_TRUE(error.empty()) << p["title"] << ": " << expr << ": " << error;
        EXPECT_FALSE(result.empty()) << p["title"] << ": no series for " << expr;
      }
    }
  }
  std::cout << dashboards << " dashboards, " << queries << " panel queries checked\n";
  EXPECT_EQ(dashboards, 5);
  // Prometheus loaded the rules too.
  auto rules = testing::HttpGet(prom, "/api/v1/rules");
  ASSERT_TRUE(rules.has_value());
  EXPECT_NE(rules->find("RocefabJobSlow"), std::string::npos);
  EXPECT_EQ(lab.Wait(), 0) << testing::ReadFile(dir / "lab.out");
}

}  // namespace
}  // namespace rocefab

namespace rocefab {
namespace {

// A real Prometheus scrapes the collector's /metrics over HTTPS with a client
// certificate and basic auth, set by an exporter-toolkit web config as for
// node_exporter. A scrape without the client certificate is refused.
TEST(Peers, PrometheusScrapesTheCollectorOverHttpsWithAClientCertificateAndBasicAuth) {
  if (!std::filesystem::exists(kPrometheus)) GTEST_SKIP() << "needs the prometheus package (make test installs it)";
  testing::DevCa ca({"rocefab-collectord", "prometheus"});
  testing::TempDir dir;
  const std::string hash = testing::BcryptHash("s3cret");
  ASSERT_FALSE(hash.empty());
  testing::WriteFile(dir / "web.yaml", "tls_server_config:\n  cert_file: " + ca.cert("rocefab-collectord") +
                                           "\n  key_file: " + ca.key("rocefab-collectord") +
                                           "\n  client_ca_file: " + ca.ca() +
                                           "\n  client_auth_type: RequireAndVerifyClientCert\n"
                                           "basic_auth_users:\n  prometheus: '" + hash + "'\n");
  auto collector = testing::StartDaemon(
      testing::With({testing::BinDir() + "/rocefab-collectord", "--listen", "127.0.0.1:0", "--metrics-listen",
                     "127.0.0.1:0", "--db", dir / "collector.db", "--metrics-web-config", dir / "web.yaml"},
                    ca.Flags("rocefab-collectord")),
      dir / "collector.log");
  ASSERT_FALSE(collector.status.empty()) << testing::ReadFile(dir / "collector.log");
  const std::string metrics = testing::StatusField(collector.status, "metrics");
  const std::string tls = "    scheme: https\n    basic_auth:\n      username: prometheus\n      password: s3cret\n"
                          "    static_configs:\n      - targets: ['" + metrics + "']\n    tls_config:\n      ca_file: " +
                          ca.ca() + "\n";
  testing::WriteFile(dir / "prometheus.yml",
                     "global:\n  scrape_interval: 1s\nscrape_configs:\n"
                     "  - job_name: with-client-cert\n" + tls + "      cert_file: " + ca.cert("prometheus") +
                         "\n      key_file: " + ca.key("prometheus") + "\n"
                         "  - job_name: without-client-cert\n" + tls);
  const std::string prom = "127.0.0.1:" + std::to_string(testing::FreeTcpPort());
  Subprocess prometheus({{kPrometheus, "--config.file=" + dir / "prometheus.yml", "--storage.tsdb.path=" + dir / "tsdb",
                          "--web.listen-address=" + prom},
                         {},
                         dir / "prometheus.log",
                         dir / "prometheus.log"});
  std::string error;
  auto value = [&](const std::string& expr) -> std::string {
    auto result = Query(prom, expr, &error);
    return result.empty() ? "" : result[0]["value"][1].get<std::string>();
  };
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return value("up{job=\"with-client-cert\"}") == "1" && value("up{job=\"without-client-cert\"}") == "0" &&
               !value("rocefab_metrics_requests_total{job=\"with-client-cert\",code=\"403\"}").empty();
      },
      std::chrono::seconds(60)))
      << error << testing::ReadFile(dir / "prometheus.log");
  // What the collector serves reached Prometheus through TLS.
  EXPECT_FALSE(value("rocefab_metrics_requests_total{job=\"with-client-cert\",code=\"200\"}").empty());
  std::cout << "up{job=\"with-client-cert\"} " << value("up{job=\"with-client-cert\"}")
            << ", up{job=\"without-client-cert\"} " << value("up{job=\"without-client-cert\"}") << ", refused scrapes "
            << value("rocefab_metrics_requests_total{job=\"with-client-cert\",code=\"403\"}") << "\n";
}

}  // namespace
}  // namespace rocefab
