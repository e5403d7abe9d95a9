// Real peers: a real Alertmanager (Debian prometheus-alertmanager) receives
// the collector's alerts for a lab fault; `amtool alert query` shows them,
// and they resolve once the fault is over.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>

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
