#include "common/counter_values.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace rocefab {
namespace {

TEST(ByCounter, BehavesAsTheMapItReplaces) {
  ByCounter<uint64_t> values(v1::SCOPE_NIC);
  EXPECT_TRUE(values.empty());
  EXPECT_EQ(values.count("rx_bytes"), 0u);
  EXPECT_THROW(values.at("rx_bytes"), std::out_of_range);

  values["tx_bytes"] = 7;
  values[*FindCounter(v1::SCOPE_NIC, "rx_bytes")] = 5;
  values["tx_bytes"] += 1;
  EXPECT_EQ(values.size(), 2u);
  EXPECT_EQ(values.at("tx_bytes"), 8u);
  EXPECT_EQ(values.at("rx_bytes"), 5u);
  EXPECT_EQ(values.count("rx_packets"), 0u);
  // A name of another scope, or of none, is not a value here.
  EXPECT_EQ(values.count("buffer_used_bytes"), 0u);
  EXPECT_EQ(values.count("no_such_counter"), 0u);
  EXPECT_THROW(values["no_such_counter"], std::invalid_argument);
  EXPECT_THROW(values[*FindCounter(v1::SCOPE_PORT, "rx_bytes")], std::invalid_argument);
}

TEST(ByCounter, IteratesInVocabularyOrderAndErases) {
  ByCounter<uint64_t> values(v1::SCOPE_NIC);
  values["tx_bytes"] = 2;
  values["rx_bytes"] = 1;
  values["pfc_rx_pause_frames"] = 3;
  std::vector<std::pair<std::string, uint64_t>> seen;
  for (const auto& [name, value] : values) seen.emplace_back(std::string(name), value);
  // The vocabulary lists rx_bytes before tx_bytes, and both before the PFC counters.
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, uint64_t>>{
                      {"rx_bytes", 1}, {"tx_bytes", 2}, {"pfc_rx_pause_frames", 3}}));
  std::vector<std::string> defs;
  values.ForEach([&](const CounterDef& def, uint64_t) { defs.emplace_back(def.name); });
  EXPECT_EQ(defs, (std::vector<std::string>{"rx_bytes", "tx_bytes", "pfc_rx_pause_frames"}));

  values.EraseIf([](std::string_view name) { return name != "tx_bytes"; });
  EXPECT_EQ(values.size(), 1u);
  EXPECT_EQ(values.count("rx_bytes"), 0u);
  EXPECT_EQ(values.at("tx_bytes"), 2u);
  size_t n = 0;
  for (const auto& entry : values) n += entry.second;
  EXPECT_EQ(n, 2u);
}

TEST(IndexedValues, KeepsIndicesInOrder) {
  IndexedValues prios;
  prios[5] = 50;
  prios[1] = 10;
  prios[3] = 30;
  prios[1] += 1;
  EXPECT_EQ(prios.size(), 3u);
  EXPECT_EQ(prios.at(1), 11u);
  EXPECT_EQ(prios.count(4), 0u);
  EXPECT_THROW(prios.at(4), std::out_of_range);
  std::vector<uint32_t> order;
  for (const auto& [prio, value] : prios) order.push_back(prio);
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 3, 5}));
  // More than the eight kept inline.
  for (uint32_t i = 0; i < 20; ++i) prios[i] = i;
  EXPECT_EQ(prios.size(), 20u);
  EXPECT_EQ(prios.at(19), 19u);
}

}  // namespace
}  // namespace rocefab
