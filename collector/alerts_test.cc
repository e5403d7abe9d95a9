// Alert lifecycle, silences, notification bodies and the persistent outbox.
// Delivery to a real Alertmanager is in tests/integration/peers_test.cc.
#include "collector/alerts.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/mocks/fake_clock.h"
#include "tests/support/test_support.h"

namespace rocefab::collector {
namespace {

v1::Anomaly Storm(uint64_t id) {
  v1::Anomaly a;
  a.set_id(id);
  a.set_kind("pfc_storm");
  a.set_entity("z1-r03-h1/mlx5_3");
  a.set_severity(v1::SEVERITY_CRITICAL);
  a.set_start_us(1'800'000'000'000'000);
  a.set_summary("storm");
  auto* ev = a.add_evidence();
  ev->set_entity(a.entity());
  ev->set_counter("pfc_tx_pause_us");
  ev->set_total(8e6);
  return a;
}

FabricContext WithJob() {
  FabricContext c;
  v1::Job job;
  job.set_id("4711");
  auto* r = job.add_ranks();
  r->set_host("z1-r03-h1");
  r->set_nic("mlx5_3");
  c.running_jobs = {job};
  return c;
}

class AlerterTest : public ::testing::Test {
 protected:
  std::unique_ptr<Alerter> Open(std::vector<std::string> am = {}) {
    AlertOptions o;
    o.alertmanager_urls = std::move(am);
    o.webhook_urls = {};
    o.playbook_base_url = "https://runbooks.example.net/";
    auto a = Alerter::Open(dir_ / "collector.db", o, metrics_, clock_);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? std::move(*a) : nullptr;
  }
  testing::TempDir dir_;
  prometheus::Registry registry_;
  CollectorMetrics metrics_{registry_};
  testing::FakeClock clock_{1'800'000'001'000'000};
};

TEST_F(AlerterTest, FiresPerJobResolvesAndKeepsLabelsAndAnnotations) {
  auto alerter = Open();
  alerter->Evaluate({Storm(7)}, WithJob(), {}, clock_.NowUs());
  auto list = alerter->List(false);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->alerts_size(), 1);
  const v1::Alert& a = list->alerts(0);
  EXPECT_EQ(a.status(), "firing");
  EXPECT_EQ(a.labels().at("alertname"), "RocefabPfcStorm");
  EXPECT_EQ(a.labels().at("severity"), "critical");
  EXPECT_EQ(a.labels().at("job"), "4711") << "a footprint without topology still holds the job's NICs";
  EXPECT_EQ(a.annotations().at("runbook_url"), "https://runbooks.example.net/playbooks/pfc_storm.md");
  EXPECT_NE(a.annotations().at("evidence").find("pfc_tx_pause_us"), std::string::npos);
  // Consequences do not alert on their own.
  v1::Anomaly victim = Storm(8);
  victim.set_kind("pfc_pause");
  victim.set_caused_by(7);
  alerter->Evaluate({Storm(7), victim}, WithJob(), {}, clock_.NowUs());
  EXPECT_EQ(alerter->List(false)->alerts_size(), 1);
  // The anomaly closes: resolved, with an end.
  alerter->Evaluate({}, WithJob(), {}, clock_.NowUs() + 5'000'000);
  EXPECT_EQ(alerter->List(false)->alerts_size(), 0);
  auto all = alerter->List(true);
  ASSERT_EQ(all->alerts_size(), 1);
  EXPECT_EQ(all->alerts(0).status(), "resolved");
  EXPECT_EQ(all->alerts(0).ends_at_us(), clock_.NowUs() + 5'000'000);
}

TEST_F(AlerterTest, SilencesMuteMatchingAlertsOnly) {
  auto alerter = Open();
  v1::Silence s;
  s.set_entity("z1-r03-h1/mlx5_3");
  s.set_comment("optic being replaced");
  EXPECT_FALSE(alerter->AddSilence(s).ok()) << "no end";
  s.set_ends_at_us(clock_.NowUs() + 3600'000'000);
  auto added = alerter->AddSilence(s);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_FALSE(alerter->AddSilence(v1::Silence()).ok()) << "a silence must match something";
  alerter->Evaluate({Storm(7)}, WithJob(), {}, clock_.NowUs());
  EXPECT_EQ(alerter->List(false)->alerts(0).silenced_by(), added->silence().id());
  ASSERT_TRUE(alerter->RemoveSilence(added->silence().id()).ok());
  EXPECT_FALSE(alerter->RemoveSilence(added->silence().id()).ok()) << "already ended";
  alerter->Evaluate({Storm(7)}, WithJob(), {}, clock_.NowUs());
  EXPECT_EQ(alerter->List(false)->alerts(0).silenced_by(), 0u);
}

TEST_F(AlerterTest, UndeliverableNotificationsWaitInTheOutboxAcrossRestarts) {
  // Nothing listens on this port.
  const std::string am = "http://127.0.0.1:" + std::to_string(testing::FreeTcpPort());
  {
    auto alerter = Open({am});
    alerter->Evaluate({Storm(7)}, WithJob(), {}, clock_.NowUs());
    EXPECT_EQ(alerter->DeliverDue(), 0u);
    EXPECT_EQ(alerter->List(false)->outbox_pending(), 1u);
    EXPECT_EQ(metrics_.notifications_retried.Value(), 1);
    // Backoff: not due again right away.
    EXPECT_EQ(alerter->DeliverDue(), 0u);
    EXPECT_EQ(metrics_.notifications_retried.Value(), 1);
  }
  auto reopened = Open({am});
  EXPECT_EQ(reopened->List(false)->outbox_pending(), 1u) << "the outbox survives a restart";
  EXPECT_EQ(reopened->List(false)->alerts_size(), 1) << "and so does the firing alert";
}

TEST(AlertBodies, AlertmanagerAndWebhookFormats) {
  v1::Alert a;
  a.set_fingerprint("pfc_storm|z1-r03-h1/mlx5_3|4711");
  (*a.mutable_labels())["alertname"] = "RocefabPfcStorm";
  (*a.mutable_labels())["job"] = "4711";
  (*a.mutable_labels())["entity"] = "z1-r03-h1/mlx5_3";
  (*a.mutable_annotations())["summary"] = "storm";
  a.set_status("firing");
  a.set_starts_at_us(1'800'000'000'123'000);
  auto am = nlohmann::json::parse(AlertmanagerBody({a}, 60'000'000, 1'800'000'001'000'000));
  ASSERT_EQ(am.size(), 1u);
  EXPECT_EQ(am[0]["labels"]["alertname"], "RocefabPfcStorm");
  EXPECT_EQ(am[0]["startsAt"], "2027-01-15T08:00:00.123Z");
  EXPECT_EQ(am[0]["endsAt"], "2027-01-15T08:04:01.000Z") << "four resend periods ahead";
  auto hook = nlohmann::json::parse(WebhookBody(a, "rocefab"));
  EXPECT_EQ(hook["version"], "4");
  EXPECT_EQ(hook["status"], "firing");
  EXPECT_EQ(hook["groupLabels"]["job"], "4711");
  EXPECT_EQ(hook["alerts"][0]["endsAt"], "0001-01-01T00:00:00Z");
  EXPECT_EQ(hook["alerts"][0]["fingerprint"], a.fingerprint());
  for (const char* key : {"groupKey", "truncatedAlerts", "receiver", "commonLabels", "commonAnnotations", "externalURL"})
    EXPECT_TRUE(hook.contains(key)) << key;
  a.set_status("resolved");
  a.set_ends_at_us(1'800'000'010'000'000);
  EXPECT_EQ(nlohmann::json::parse(AlertmanagerBody({a}, 60'000'000, 1'800'000'011'000'000))[0]["endsAt"],
            "2027-01-15T08:00:10.000Z");
}

}  // namespace
}  // namespace rocefab::collector
