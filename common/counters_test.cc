#include "common/counters.h"

#include <gtest/gtest.h>

#include <set>

namespace rocefab {
namespace {

TEST(Counters, NamesAreUniquePerScope) {
  for (v1::Scope scope : {v1::SCOPE_NIC, v1::SCOPE_PORT, v1::SCOPE_QUEUE, v1::SCOPE_COLL}) {
    std::set<std::string_view> names;
    for (const CounterDef& def : CountersOfScope(scope))
      EXPECT_TRUE(names.insert(def.name).second) << def.name << " twice in " << ScopeName(scope);
    EXPECT_FALSE(names.empty());
  }
}

TEST(Counters, ScopesAreContiguousInTheTable) {
  size_t total = 0;
  for (v1::Scope scope : {v1::SCOPE_NIC, v1::SCOPE_PORT, v1::SCOPE_QUEUE, v1::SCOPE_COLL})
    total += CountersOfScope(scope).size();
  EXPECT_EQ(total, AllCounters().size());
}

TEST(Counters, MetricNamesFollowTheVocabularyRules) {
  EXPECT_EQ(MetricName(*FindCounter(v1::SCOPE_NIC, "rx_bytes")), "rocefab_nic_rx_bytes_total");
  EXPECT_EQ(MetricName(*FindCounter(v1::SCOPE_NIC, "pfc_rx_pause_us")),
            "rocefab_nic_pfc_rx_pause_seconds_total");
  EXPECT_DOUBLE_EQ(MetricScale(*FindCounter(v1::SCOPE_NIC, "pfc_rx_pause_us")), 1e-6);
  EXPECT_EQ(MetricName(*FindCounter(v1::SCOPE_NIC, "link_up")), "rocefab_nic_link_up");
  EXPECT_EQ(MetricName(*FindCounter(v1::SCOPE_QUEUE, "queue_drops")), "rocefab_queue_drops_total");
  EXPECT_EQ(MetricName(*FindCounter(v1::SCOPE_COLL, "coll_exec_time_us")),
            "rocefab_coll_exec_time_seconds");
  EXPECT_EQ(MetricName(*FindCounter(v1::SCOPE_PORT, "link_flaps")),
            "rocefab_port_link_flaps_total");
}

TEST(Counters, KernelSourcesMatchMlx5) {
  const CounterDef* ooo = FindCounter(v1::SCOPE_NIC, "out_of_sequence");
  ASSERT_NE(ooo, nullptr);
  EXPECT_EQ(ooo->source, CounterSource::kSysfsHwCounters);
  EXPECT_EQ(ooo->width, CounterWidth::k32);
  const CounterDef* rx = FindCounter(v1::SCOPE_NIC, "rx_bytes");
  EXPECT_EQ(rx->source_name, "port_rcv_data");
  EXPECT_EQ(rx->multiplier, 4u);
  EXPECT_EQ(FindCounter(v1::SCOPE_NIC, "no_such_counter"), nullptr);
  EXPECT_EQ(FindCounter(v1::SCOPE_PORT, "out_of_sequence"), nullptr);
}

TEST(Counters, ParseScopeRoundTrips) {
  for (v1::Scope scope : {v1::SCOPE_NIC, v1::SCOPE_PORT, v1::SCOPE_QUEUE, v1::SCOPE_COLL}) {
    v1::Scope parsed;
    ASSERT_TRUE(ParseScope(ScopeName(scope), &parsed));
    EXPECT_EQ(parsed, scope);
  }
  v1::Scope parsed;
  EXPECT_FALSE(ParseScope("nics", &parsed));
}

}  // namespace
}  // namespace rocefab
