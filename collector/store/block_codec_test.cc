// The column codec: round trips across parts, wraps and resets, what it
// costs in bytes on counter-like data, and corrupt input refused.
#include "collector/store/block_codec.h"

#include <gtest/gtest.h>

#include <random>

namespace rocefab::collector::blocks {
namespace {

Layout TwoEntities() {
  Layout layout;
  layout.entity_sizes = {3, 2};
  layout.series = {10, 11, 12, 40, 41};
  layout.gauge = {0, 0, 1, 0, 1};
  return layout;
}

std::vector<Poll> Polls(const Layout& layout, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Poll> polls;
  std::vector<uint64_t> value(layout.series.size(), 1'000'000'000);
  for (int i = 0; i < n; ++i) {
    Poll p;
    p.commit = 100 + static_cast<uint64_t>(i) * (1 + rng() % 3);
    for (size_t e = 0; e < layout.entities(); ++e)
      p.ts_us.push_back(1'700'000'000'000'000 + i * 1'000'000 + static_cast<int64_t>(rng() % 2000));
    for (size_t s = 0; s < layout.series.size(); ++s) {
      const uint64_t before = value[s];
      value[s] = layout.gauge[s] ? rng() % 5000 : value[s] + 1'000'000 + rng() % 50'000;
      p.value.push_back(value[s]);
      p.delta.push_back(value[s] - before);
      p.flags.push_back(i == 0 ? 0 : kHasDelta);
    }
    polls.push_back(std::move(p));
  }
  return polls;
}

void ExpectSame(const std::vector<Poll>& a, const std::vector<Poll>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].commit, b[i].commit) << i;
    EXPECT_EQ(a[i].ts_us, b[i].ts_us) << i;
    EXPECT_EQ(a[i].value, b[i].value) << i;
    EXPECT_EQ(a[i].flags, b[i].flags) << i;
    for (size_t s = 0; s < a[i].value.size(); ++s) {
      if (a[i].flags[s] & kHasDelta) {
        EXPECT_EQ(a[i].delta[s], b[i].delta[s]) << i << "/" << s;
      }
    }
  }
}

TEST(BlockCodec, PartsContinueTheChainAndDecodeInOrder) {
  const Layout layout = TwoEntities();
  const auto polls = Polls(layout, 10, 1);
  ChainState write(layout);
  std::vector<std::string> parts;
  for (size_t begin = 0; begin < polls.size(); begin += 3) {
    std::string raw;
    const size_t n = std::min<size_t>(3, polls.size() - begin);
    EncodeColumns(layout, std::span(polls).subspan(begin, n), write, &raw);
    parts.push_back(Compress(raw, 1));
  }
  ChainState read(layout);
  std::vector<Poll> decoded;
  for (const std::string& part : parts) {
    auto raw = Decompress(part);
    ASSERT_TRUE(raw.ok()) << raw.status();
    ASSERT_TRUE(DecodeColumns(layout, *raw, read, &decoded).ok());
  }
  ExpectSame(polls, decoded);
}

TEST(BlockCodec, WrapsResetsAndOddDeltasRoundTrip) {
  Layout layout;
  layout.entity_sizes = {2};
  layout.series = {1, 2};
  layout.gauge = {0, 0};
  std::vector<Poll> polls;
  // A 32-bit counter wrapping (the agent's delta is wrap-safe, the value is
  // not monotonic), then a reset to a small value, then a 64-bit wrap.
  const std::vector<std::pair<uint64_t, uint64_t>> series0 = {
      {4294967000, 0}, {200, 496}, {50, 50}, {UINT64_MAX - 3, 7}, {5, 9}};
  for (size_t i = 0; i < series0.size(); ++i) {
    Poll p;
    p.commit = i + 1;
    p.ts_us = {static_cast<int64_t>(i) * 999'999};
    p.value = {series0[i].first, i * 7};
    p.delta = {series0[i].second, 7};
    p.flags = {static_cast<uint8_t>(i == 0 ? 0 : kHasDelta | (i == 2 ? kReset : 0)), kHasDelta};
    polls.push_back(p);
  }
  ChainState write(layout), read(layout);
  std::string raw;
  EncodeColumns(layout, polls, write, &raw);
  std::vector<Poll> decoded;
  ASSERT_TRUE(DecodeColumns(layout, raw, read, &decoded).ok());
  ExpectSame(polls, decoded);
}

TEST(BlockCodec, SamplesCostTheirNoiseNotTheirMagnitude) {
  const Layout layout = TwoEntities();
  const auto polls = Polls(layout, 64, 7);
  ChainState state(layout);
  std::string raw;
  EncodeColumns(layout, polls, state, &raw);
  const double samples = 64.0 * layout.series.size();
  // Values near 10^9 growing by 10^6 would take 5 varint bytes each; what
  // is left is the noise, packed: 16 bits a counter (steps within 50,000 of
  // each other), 13 bits a gauge (values below 5,000). On top: two
  // timestamps jittering by 2 ms per poll (about 0.8 B per sample here),
  // commit ids and column headers.
  const double noise_bytes = (3 * 16 + 2 * 13) / 8.0 / 5;
  const double per_sample = static_cast<double>(Compress(raw, 6).size()) / samples;
  EXPECT_LT(per_sample, noise_bytes + 1.5) << "noise alone is " << noise_bytes;
  std::vector<Poll> decoded;
  ChainState read(layout);
  ASSERT_TRUE(DecodeColumns(layout, raw, read, &decoded).ok());
  ExpectSame(polls, decoded);
  // Flat counters cost almost nothing once compressed.
  Layout flat;
  flat.entity_sizes = {100};
  for (int i = 0; i < 100; ++i) {
    flat.series.push_back(i + 1);
    flat.gauge.push_back(0);
  }
  std::vector<Poll> quiet;
  for (int i = 0; i < 64; ++i) {
    Poll p;
    p.commit = static_cast<uint64_t>(i) + 1;
    p.ts_us = {static_cast<int64_t>(i) * 1'000'000};
    p.value.assign(100, 12345);
    p.delta.assign(100, 0);
    p.flags.assign(100, kHasDelta);
    quiet.push_back(p);
  }
  ChainState quiet_state(flat);
  std::string quiet_raw;
  EncodeColumns(flat, quiet, quiet_state, &quiet_raw);
  EXPECT_LT(static_cast<double>(Compress(quiet_raw, 6).size()) / 6400.0, 0.05);
  // And they decode: a packed flat column is a few bytes for any number of
  // polls, so the part is far smaller than a byte per sample.
  ChainState quiet_read(flat);
  std::vector<Poll> quiet_decoded;
  ASSERT_TRUE(DecodeColumns(flat, quiet_raw, quiet_read, &quiet_decoded).ok());
  ExpectSame(quiet, quiet_decoded);
}

// Packed columns whose steps span every width, up to a wrapping counter's
// full 64 bits, round trip; so do columns of one poll, which stay varints.
TEST(BlockCodec, PackedColumnsOfEveryWidthRoundTrip) {
  Layout layout;
  layout.entity_sizes = {65};
  for (int i = 0; i < 65; ++i) {
    layout.series.push_back(i + 1);
    layout.gauge.push_back(i % 2);
  }
  std::mt19937_64 rng(11);
  std::vector<Poll> polls;
  std::vector<uint64_t> value(65, 0);
  for (int i = 0; i < 64; ++i) {
    Poll p;
    p.commit = static_cast<uint64_t>(i) + 1;
    p.ts_us = {static_cast<int64_t>(i) * 1'000'000};
    for (int s = 0; s < 65; ++s) {
      const uint64_t mask = s == 64 ? ~0ULL : (1ULL << s) - 1;
      const uint64_t before = value[static_cast<size_t>(s)];
      value[static_cast<size_t>(s)] += 1000 + (rng() & mask);
      p.value.push_back(value[static_cast<size_t>(s)]);
      p.delta.push_back(value[static_cast<size_t>(s)] - before);
      p.flags.push_back(kHasDelta);
    }
    polls.push_back(std::move(p));
  }
  for (size_t chunk : {size_t{64}, size_t{1}, size_t{7}}) {
    ChainState write(layout), read(layout);
    std::vector<Poll> decoded;
    for (size_t begin = 0; begin < polls.size(); begin += chunk) {
      const size_t n = std::min(chunk, polls.size() - begin);
      std::string raw;
      EncodeColumns(layout, std::span(polls).subspan(begin, n), write, &raw);
      ASSERT_TRUE(DecodeColumns(layout, raw, read, &decoded).ok()) << chunk << " " << begin;
    }
    ExpectSame(polls, decoded);
  }
}

TEST(BlockCodec, LayoutRoundTripsAndHashesByContent) {
  const Layout layout = TwoEntities();
  auto decoded = Layout::Decode(layout.Encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, layout);
  Layout other = layout;
  other.series[4] = 42;
  EXPECT_NE(other.Hash(), layout.Hash());
}

TEST(BlockCodec, CorruptInputIsAnErrorNeverACrash) {
  const Layout layout = TwoEntities();
  const auto polls = Polls(layout, 5, 3);
  ChainState write(layout);
  std::string raw;
  EncodeColumns(layout, polls, write, &raw);
  // Every truncation fails cleanly.
  for (size_t n = 0; n < raw.size(); ++n) {
    ChainState read(layout);
    std::vector<Poll> out;
    EXPECT_FALSE(DecodeColumns(layout, std::string_view(raw).substr(0, n), read, &out).ok()) << n;
  }
  // A huge poll count is refused before anything is allocated for it.
  std::string huge;
  PutVarint(1 << 20, &huge);
  ChainState read(layout);
  std::vector<Poll> out;
  EXPECT_FALSE(DecodeColumns(layout, huge, read, &out).ok());
  EXPECT_FALSE(Layout::Decode("\x07garbage").ok());
  // A packed column claiming more than 64 bits a step.
  Layout one;
  one.entity_sizes = {1};
  one.series = {1};
  one.gauge = {0};
  std::string bad;
  PutVarint(1, &bad);  // one poll
  PutVarint(1, &bad);  // commit
  PutVarint(0, &bad);  // timestamp
  bad += "\x05";       // uniform flags, packed
  bad += '\0';         // flags
  PutVarint(0, &bad);  // smallest step
  bad += static_cast<char>(65);
  bad += std::string(16, '\xff');
  ChainState one_state(one);
  EXPECT_FALSE(DecodeColumns(one, bad, one_state, &out).ok());
  EXPECT_FALSE(Decompress("not zstd at all").ok());
  EXPECT_FALSE(Decompress("").ok());
}

}  // namespace
}  // namespace rocefab::collector::blocks
