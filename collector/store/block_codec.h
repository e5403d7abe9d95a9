#pragma once
// The column codec of the collector's compact sample store
// (docs/architecture.md, "Collector store").
//
// An agent reports the same series in the same order on every poll, so its
// samples are stored as a *run*: one layout (which series, grouped by
// entity), then a column per series. Within a column:
//  - timestamps (one column per entity): the first entity's as
//    delta-of-delta, the others' as the change of their offset from the
//    first's; counter values as delta-of-delta, gauges as delta, commit ids
//    as delta; each a zigzag varint;
//  - each column starts with a header byte: when every sample has the same
//    flags (has delta, reset) they are written once, and when every delta
//    the agent sent equals the value difference (no wrap, no reset) no delta
//    column follows; otherwise a flags byte per sample, and each delta as its
//    difference from the value difference.
// A run is written as parts (one per group commit, continuing the previous
// part's ChainState so that its first values are small too), then sealed:
// its parts are re-encoded as one part and compressed harder.
//
// Pure functions and plain data; any thread.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rocefab::collector::blocks {

constexpr uint8_t kHasDelta = 1;
constexpr uint8_t kReset = 2;

// Which series a run holds, in the order an agent sends them.
struct Layout {
  std::vector<uint32_t> entity_sizes;  // samples per entity, in order
  std::vector<int64_t> series;         // series ids, grouped by entity
  std::vector<uint8_t> gauge;          // 1 where the series is a gauge

  std::string Encode() const;
  static absl::StatusOr<Layout> Decode(std::string_view bytes);
  uint64_t Hash() const;
  bool operator==(const Layout&) const = default;
  size_t entities() const { return entity_sizes.size(); }
};

// One poll of an agent: what one TelemetryBatch holds, in layout order.
struct Poll {
  uint64_t commit = 0;           // the group commit that stored it
  std::vector<int64_t> ts_us;    // per entity
  std::vector<uint64_t> value;   // per series
  std::vector<uint64_t> delta;   // per series; meaningful where kHasDelta
  std::vector<uint8_t> flags;    // per series
};

// The last values a run's coding continues from. A run starts from zeros.
struct ChainState {
  uint64_t commit = 0;
  std::vector<int64_t> ts, ts_step;
  std::vector<uint64_t> value, value_step;
  explicit ChainState(const Layout& layout = {});
};

// Appends the column coding of `polls` (each matching `layout`) to `out`,
// continuing and then advancing `state`.
void EncodeColumns(const Layout& layout, std::span<const Poll> polls, ChainState& state,
                   std::string* out);
// Decodes what EncodeColumns wrote from the same `state`, appending to `out`.
absl::Status DecodeColumns(const Layout& layout, std::string_view bytes, ChainState& state,
                           std::vector<Poll>* out);

// zstd, through libzstd.
std::string Compress(std::string_view raw, int level);
absl::StatusOr<std::string> Decompress(std::string_view compressed);

// Zigzag varints, exposed for tests.
void PutVarint(uint64_t v, std::string* out);
bool GetVarint(std::string_view& in, uint64_t* v);

}  // namespace rocefab::collector::blocks
