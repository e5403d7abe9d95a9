#include "common/batch_builder.h"

#include <gtest/gtest.h>

namespace rocefab {
namespace {

const CounterDef& Def(std::string_view name) { return *FindCounter(v1::SCOPE_NIC, name); }

TEST(BatchBuilder, DeltasFromTheSecondBatchOn) {
  BatchBuilder builder;
  builder.SetHostBootId("boot-a");
  v1::TelemetryBatch first = builder.NewBatch(1000);
  EXPECT_EQ(first.host_boot_id(), "boot-a");
  auto* e1 = builder.AddEntity(&first, v1::SCOPE_NIC, "h/mlx5_0", 1, "eth2", 1000);
  builder.AddValue(e1, Def("rx_bytes"), std::nullopt, std::nullopt, 4000);
  builder.AddValue(e1, Def("pfc_rx_pause_frames"), 3, std::nullopt, 10);
  builder.AddValue(e1, Def("link_up"), std::nullopt, std::nullopt, 1);
  ASSERT_EQ(e1->samples_size(), 3);
  EXPECT_FALSE(e1->samples(0).has_delta());
  EXPECT_EQ(e1->samples(1).prio(), 3u);

  v1::TelemetryBatch second = builder.NewBatch(2000);
  auto* e2 = builder.AddEntity(&second, v1::SCOPE_NIC, "h/mlx5_0", 1, "eth2", 2000);
  builder.AddValue(e2, Def("rx_bytes"), std::nullopt, std::nullopt, 10000);
  builder.AddValue(e2, Def("pfc_rx_pause_frames"), 3, std::nullopt, 15);
  builder.AddValue(e2, Def("pfc_rx_pause_frames"), 4, std::nullopt, 2);  // new series
  builder.AddValue(e2, Def("link_up"), std::nullopt, std::nullopt, 0);
  EXPECT_EQ(e2->samples(0).delta(), 6000u);
  EXPECT_EQ(e2->samples(1).delta(), 5u);
  EXPECT_FALSE(e2->samples(2).has_delta());
  // Gauges never carry a delta.
  EXPECT_FALSE(e2->samples(3).has_delta());
  EXPECT_EQ(e2->samples(3).kind(), v1::VALUE_KIND_GAUGE);
  EXPECT_EQ(builder.series_count(), 3u);
}

// Arena batches keep the series of the batches before them, entity by
// entity, and own their arena: a batch outlives the builder that made it.
TEST(BatchBuilder, ArenaBatchesCarryTheSameDeltasPerEntity) {
  std::shared_ptr<v1::TelemetryBatch> second;
  {
    BatchBuilder builder;
    builder.SetHostBootId("boot-a");
    auto first = builder.NewArenaBatch(1000);
    ASSERT_NE(first->GetArena(), nullptr);
    EXPECT_EQ(first->host_boot_id(), "boot-a");
    for (const char* nic : {"h/mlx5_0", "h/mlx5_1"}) {
      auto* e = builder.AddEntity(first.get(), v1::SCOPE_NIC, nic, 1, "", 1000);
      builder.AddValue(e, Def("rx_bytes"), std::nullopt, std::nullopt, 100);
      builder.AddValue(e, Def("pfc_rx_pause_frames"), 3, std::nullopt, 10);
    }
    second = builder.NewArenaBatch(2000);
    auto* e0 = builder.AddEntity(second.get(), v1::SCOPE_NIC, "h/mlx5_0", 1, "", 2000);
    auto* e1 = builder.AddEntity(second.get(), v1::SCOPE_NIC, "h/mlx5_1", 1, "", 2000);
    // Values added to an entity other than the last one added still find
    // that entity's series.
    builder.AddValue(e0, Def("rx_bytes"), std::nullopt, std::nullopt, 150);
    builder.AddValue(e1, Def("rx_bytes"), std::nullopt, std::nullopt, 400);
    builder.AddValue(e0, Def("pfc_rx_pause_frames"), 3, std::nullopt, 17);
    builder.AddValue(e0, Def("pfc_rx_pause_frames"), 2, std::nullopt, 1);
    EXPECT_EQ(builder.series_count(), 5u);
  }
  ASSERT_EQ(second->entities_size(), 2);
  const auto& e0 = second->entities(0);
  const auto& e1 = second->entities(1);
  EXPECT_EQ(e0.samples(0).delta(), 50u);
  EXPECT_EQ(e0.samples(1).delta(), 7u);
  EXPECT_FALSE(e0.samples(2).has_delta());  // priority 2 is a series of its own
  EXPECT_EQ(e1.samples(0).delta(), 300u);
  EXPECT_EQ(e0.samples(0).counter(), "rx_bytes");
}

TEST(BatchBuilder, WrappedQCounterIsADeltaNotAReset) {
  BatchBuilder builder;
  v1::TelemetryBatch b1 = builder.NewBatch(1);
  builder.AddValue(builder.AddEntity(&b1, v1::SCOPE_NIC, "h/mlx5_0", 1, "", 1),
                   Def("out_of_sequence"), std::nullopt, std::nullopt, 4294967290ULL);
  v1::TelemetryBatch b2 = builder.NewBatch(2);
  auto* e = builder.AddEntity(&b2, v1::SCOPE_NIC, "h/mlx5_0", 1, "", 2);
  builder.AddValue(e, Def("out_of_sequence"), std::nullopt, std::nullopt, 5);
  EXPECT_EQ(e->samples(0).delta(), 11u);
  EXPECT_FALSE(e->samples(0).reset());
}

TEST(BatchBuilder, RebootMarksReset) {
  BatchBuilder builder;
  builder.SetHostBootId("boot-a");
  v1::TelemetryBatch b1 = builder.NewBatch(1);
  builder.AddValue(builder.AddEntity(&b1, v1::SCOPE_NIC, "h/mlx5_0", 1, "", 1), Def("rx_bytes"),
                   std::nullopt, std::nullopt, 1'000'000);
  builder.SetHostBootId("boot-b");
  v1::TelemetryBatch b2 = builder.NewBatch(2);
  EXPECT_EQ(b2.host_boot_id(), "boot-b");
  auto* e = builder.AddEntity(&b2, v1::SCOPE_NIC, "h/mlx5_0", 1, "", 2);
  builder.AddValue(e, Def("rx_bytes"), std::nullopt, std::nullopt, 2'000'000);
  EXPECT_TRUE(e->samples(0).reset());
  EXPECT_EQ(e->samples(0).delta(), 2'000'000u);
}

}  // namespace
TEST(BatchBuilder, ComponentsGoOnTheFirstBatchAndAfterAChangeOnly) {
  BatchBuilder b;
  b.SetComponents({{"os", "lab-1.0"}, {"kernel", "6.1"}});
  v1::TelemetryBatch first = b.NewBatch(1);
  b.AttachComponents(&first);
  EXPECT_EQ(first.components().size(), 2u);
  EXPECT_EQ(first.components().at("os"), "lab-1.0");
  v1::TelemetryBatch second = b.NewBatch(2);
  b.SetComponents({{"os", "lab-1.0"}, {"kernel", "6.1"}});
  b.AttachComponents(&second);
  EXPECT_TRUE(second.components().empty()) << "unchanged";
  b.SetComponents({{"os", "lab-2.3"}, {"kernel", "6.1"}});
  v1::TelemetryBatch third = b.NewBatch(3);
  b.AttachComponents(&third);
  ASSERT_EQ(third.components().size(), 2u) << "the whole set after a change";
  EXPECT_EQ(third.components().at("os"), "lab-2.3");
  v1::TelemetryBatch again = b.NewBatch(4);
  b.AttachComponents(&again, /*again=*/true);
  EXPECT_EQ(again.components().size(), 2u) << "resent when asked, for a collector that restarted";
}

}  // namespace rocefab
