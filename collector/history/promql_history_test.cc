// The PromQL answer parser: rocefab's series map back to the vocabulary,
// units go back (seconds to microseconds), and anything else is skipped and
// counted, never a crash. The live path against a real VictoriaMetrics is in
// tests/integration/remote_write_test.cc.
#include "collector/history/promql_history.h"

#include <gtest/gtest.h>

namespace rocefab::collector {
namespace {

TEST(PromqlHistory, ParsesAMatrixBackIntoTheVocabulary) {
  const char* body = R"json({"status":"success","data":{"resultType":"matrix","result":[
    {"metric":{"__name__":"rocefab_nic_rx_bytes_total","host":"z1-r01-h1","device":"mlx5_0","port":"1"},
     "values":[[1700000000.5,"4096"],[1700000001.5,"8192"]]},
    {"metric":{"__name__":"rocefab_nic_pfc_rx_pause_seconds_total","host":"z1-r01-h1","device":"mlx5_0",
               "port":"1","prio":"3","cluster":"a"},
     "values":[[1700000001,"2.5"]]},
    {"metric":{"__name__":"rocefab_queue_drops_total","switch":"z1-rtsw01","port":"Ethernet0","queue":"3"},
     "values":[[1700000001,"7"]]}
  ]}})json";
  uint64_t skipped = 0;
  auto rows = ParseMatrix(body, &skipped);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(skipped, 0u);
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ((*rows)[0].series.entity, "z1-r01-h1/mlx5_0");
  EXPECT_EQ((*rows)[0].series.counter, "rx_bytes");
  EXPECT_EQ((*rows)[0].series.port, 1u);
  EXPECT_EQ((*rows)[0].ts_us, 1'700'000'000'500'000);
  EXPECT_EQ((*rows)[1].value, 8192u);
  EXPECT_EQ((*rows)[2].series.counter, "pfc_rx_pause_us");
  EXPECT_EQ((*rows)[2].series.prio, 3);
  EXPECT_EQ((*rows)[2].value, 2'500'000u) << "seconds back to microseconds";
  EXPECT_EQ((*rows)[3].series.scope, v1::SCOPE_QUEUE);
  EXPECT_EQ((*rows)[3].series.entity, "z1-rtsw01/Ethernet0");
  EXPECT_EQ((*rows)[3].series.queue, 3);
}

TEST(PromqlHistory, SkipsAndCountsWhatIsNotOurs) {
  const char* body = R"json({"status":"success","data":{"resultType":"matrix","result":[
    {"metric":{"__name__":"node_cpu_seconds_total","cpu":"0"},"values":[[1,"1"]]},
    {"metric":{"__name__":"rocefab_nic_rx_bytes_total","host":"h"},"values":[[1,"1"]]},
    {"metric":{"__name__":"rocefab_nic_pfc_rx_pause_seconds_total","host":"h","device":"d","port":"1"},
     "values":[[1,"1"]]},
    {"metric":{"__name__":"rocefab_nic_rx_bytes_total","host":"h","device":"d","port":"x"},"values":[[1,"1"]]},
    {"metric":{"__name__":"rocefab_nic_rx_bytes_total","host":"h","device":"d","port":"1"},
     "values":[[1,"NaN"],[1,"-5"],["1","2"],[1],[2,"3"],[1e300,"4"]]},
    17, {"metric":[]}
  ]}})json";
  uint64_t skipped = 0;
  auto rows = ParseMatrix(body, &skipped);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u) << "only the one well-formed point";
  EXPECT_EQ((*rows)[0].value, 3u);
  // 4 foreign or malformed series, 5 bad points, 2 non-series entries.
  EXPECT_EQ(skipped, 11u);
}

TEST(PromqlHistory, AFailedOrForeignAnswerIsAClearError) {
  uint64_t skipped = 0;
  EXPECT_EQ(ParseMatrix("<html>502</html>", &skipped).status().code(), absl::StatusCode::kDataLoss);
  auto failed = ParseMatrix(R"({"status":"error","errorType":"bad_data","error":"parse error at char 3"})", &skipped);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(failed.status().message()).find("parse error at char 3"), std::string::npos);
  EXPECT_FALSE(ParseMatrix(R"({"status":"success","data":{"resultType":"vector","result":[]}})", &skipped).ok());
  EXPECT_FALSE(ParseMatrix(R"({"status":"success"})", &skipped).ok());
  EXPECT_FALSE(ParseMatrix("", &skipped).ok());
  // Found by the promql_matrix fuzzer: fields of the wrong JSON type threw
  // (and ended the collector) instead of being a clear error.
  EXPECT_FALSE(ParseMatrix(R"({"status":{"resultType":"matrix"}})", &skipped).ok());
  EXPECT_FALSE(ParseMatrix(R"({"status":"error","error":42})", &skipped).ok());
  EXPECT_FALSE(ParseMatrix(R"({"status":"success","data":{"resultType":7,"result":[]}})", &skipped).ok());
}

TEST(PromqlHistory, ParsesAnAggregationByOp) {
  const char* body = R"json({"status":"success","data":{"resultType":"matrix","result":[
    {"metric":{"op":"AllReduce"},"values":[[1700000009.999,"8"],[1700000019.999,"7"]]},
    {"metric":{"op":"AllGather"},"values":[[1700000009.999,"2.5"]]},
    {"metric":{},"values":[[1,"1"]]},
    {"metric":{"op":"AllReduce"},"values":[[1,"x"]]}
  ]}})json";
  uint64_t skipped = 0;
  auto values = ParseOpMatrix(body, &skipped);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(values->size(), 3u);
  EXPECT_EQ(skipped, 2u);
  EXPECT_DOUBLE_EQ(values->at({1'700'000'009'999, "AllReduce"}), 8);
  EXPECT_DOUBLE_EQ(values->at({1'700'000'009'999, "AllGather"}), 2.5);
  EXPECT_FALSE(ParseOpMatrix("[]", &skipped).ok());
}

TEST(PromqlHistory, ConfigIsCheckedAtStart) {
  v1::HistoryConfig config;
  config.set_url("victoria:8428");
  EXPECT_FALSE(ResolveHistory(config).ok()) << "no scheme";
  config.set_url("http://victoria:8428/");
  (*config.mutable_match_labels())["cluster"] = "a";
  auto o = ResolveHistory(config);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->url, "http://victoria:8428");
  ASSERT_EQ(o->match_labels.size(), 1u);
  config.set_basic_auth_file("/nonexistent/auth");
  EXPECT_FALSE(ResolveHistory(config).ok());
}

}  // namespace
}  // namespace rocefab::collector
