#include "collector/store/block_codec.h"

#include <zstd.h>

#include <algorithm>

#include "common/strings.h"

namespace rocefab::collector::blocks {
namespace {

constexpr uint64_t kLayoutVersion = 1;
// A decoded part never claims more than this many polls or series: a
// corrupted header must not make the decoder allocate without bound.
constexpr uint64_t kMaxPolls = 1 << 20;
constexpr uint64_t kMaxSeries = 1 << 22;
constexpr uint8_t kColumnUniformFlags = 1;
constexpr uint8_t kColumnPlainDeltas = 2;
// The column's value steps are packed: the smallest step, then every step's
// excess over it in a fixed number of bits (frame of reference). Counters
// that grow by a noisy amount each poll cost their noise's bits and no more.
// The first step is a varint as usual (it continues the previous part, or
// starts a run from zero) and only the others are packed.
constexpr uint8_t kColumnPacked = 4;
// Every sample but the first has the same flags: two flags bytes follow, the
// first sample's and the others'. (A run's first poll has no deltas.)
constexpr uint8_t kColumnUniformTail = 8;

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

int BitWidth(uint64_t v) { return v == 0 ? 0 : 64 - __builtin_clzll(v); }

void PackBits(std::span<const uint64_t> values, int width, std::string* out) {
  if (width == 0) return;
  unsigned __int128 acc = 0;
  int bits = 0;
  for (uint64_t v : values) {
    acc |= static_cast<unsigned __int128>(v) << bits;
    bits += width;
    for (; bits >= 8; bits -= 8, acc >>= 8) out->push_back(static_cast<char>(acc & 0xff));
  }
  if (bits > 0) out->push_back(static_cast<char>(acc & 0xff));
}

bool UnpackBits(std::string_view& in, size_t n, int width, std::vector<uint64_t>* values) {
  values->assign(n, 0);
  if (width == 0) return true;
  const size_t bytes = (n * static_cast<size_t>(width) + 7) / 8;
  if (bytes > in.size()) return false;
  const uint64_t mask = width == 64 ? ~0ULL : (1ULL << width) - 1;
  unsigned __int128 acc = 0;
  int bits = 0;
  size_t pos = 0;
  for (size_t i = 0; i < n; ++i) {
    for (; bits < width; bits += 8) acc |= static_cast<unsigned __int128>(static_cast<uint8_t>(in[pos++])) << bits;
    (*values)[i] = static_cast<uint64_t>(acc) & mask;
    acc >>= width;
    bits -= width;
  }
  in.remove_prefix(bytes);
  return true;
}

uint64_t Zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t Unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

absl::Status Corrupt(std::string_view what) {
  return absl::DataLossError(StrCat("sample block: ", what));
}

}  // namespace

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool GetVarint(std::string_view& in, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

std::string Layout::Encode() const {
  std::string out;
  PutVarint(kLayoutVersion, &out);
  PutVarint(entity_sizes.size(), &out);
  for (uint32_t n : entity_sizes) PutVarint(n, &out);
  PutVarint(series.size(), &out);
  int64_t prev = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    PutVarint(Zigzag(series[i] - prev), &out);
    prev = series[i];
    out.push_back(static_cast<char>(gauge[i]));
  }
  return out;
}

absl::StatusOr<Layout> Layout::Decode(std::string_view in) {
  Layout layout;
  uint64_t version = 0, entities = 0, n = 0;
  if (!GetVarint(in, &version) || version != kLayoutVersion) return Corrupt("unknown layout version");
  if (!GetVarint(in, &entities) || entities > kMaxSeries) return Corrupt("bad entity count");
  uint64_t total = 0;
  for (uint64_t i = 0; i < entities; ++i) {
    if (!GetVarint(in, &n) || n > kMaxSeries) return Corrupt("bad entity size");
    layout.entity_sizes.push_back(static_cast<uint32_t>(n));
    total += n;
  }
  if (!GetVarint(in, &n) || n != total) return Corrupt("series count does not match the entities");
  int64_t prev = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t step = 0;
    if (!GetVarint(in, &step) || in.empty()) return Corrupt("truncated layout");
    prev += Unzigzag(step);
    layout.series.push_back(prev);
    layout.gauge.push_back(static_cast<uint8_t>(in.front()) ? 1 : 0);
    in.remove_prefix(1);
  }
  if (!in.empty()) return Corrupt("trailing bytes after the layout");
  return layout;
}

uint64_t Layout::Hash() const {
  // FNV-1a over the ids and entity boundaries; equality is checked in full.
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ULL;
    }
  };
  for (uint32_t n : entity_sizes) mix(n);
  for (int64_t id : series) mix(static_cast<uint64_t>(id));
  return h;
}

ChainState::ChainState(const Layout& layout)
    : ts(layout.entities(), 0),
      ts_step(layout.entities(), 0),
      value(layout.series.size(), 0),
      value_step(layout.series.size(), 0) {}

void EncodeColumns(const Layout& layout, std::span<const Poll> polls, ChainState& state,
                   std::string* out) {
  const size_t n_series = layout.series.size();
  PutVarint(polls.size(), out);
  for (const Poll& p : polls) {
    PutVarint(p.commit - state.commit, out);
    state.commit = p.commit;
  }
  // The first entity's timestamps as delta-of-delta; every other entity's
  // as the change of its offset from the first's in the same poll: an agent
  // reads its entities one after the other, so offsets barely move.
  for (size_t e = 0; e < layout.entities(); ++e) {
    for (const Poll& p : polls) {
      if (e == 0) {
        const int64_t step = p.ts_us[0] - state.ts[0];
        PutVarint(Zigzag(step - state.ts_step[0]), out);
        state.ts_step[0] = step;
      } else {
        const int64_t offset = p.ts_us[e] - p.ts_us[0];
        PutVarint(Zigzag(offset - state.ts_step[e]), out);
        state.ts_step[e] = offset;
      }
      state.ts[e] = p.ts_us[e];
    }
  }
  std::vector<uint64_t> steps, excess;
  for (size_t s = 0; s < n_series; ++s) {
    const bool gauge = layout.gauge[s] != 0;
    // A column header: whether every sample has the same flags (then one
    // flags byte follows) and whether every delta equals the value step
    // (then no delta column follows), which is what a healthy counter does.
    bool uniform = true, uniform_tail = polls.size() > 2, plain_deltas = true;
    uint64_t prev_value = state.value[s];
    for (const Poll& p : polls) {
      uniform = uniform && p.flags[s] == polls.front().flags[s];
      uniform_tail = uniform_tail && (&p == &polls.front() || p.flags[s] == polls.back().flags[s]);
      if (p.flags[s] & kHasDelta) plain_deltas = plain_deltas && p.delta[s] == p.value[s] - prev_value;
      prev_value = p.value[s];
    }
    // Steps as a varint of their change (counters: delta-of-delta; gauges:
    // delta), or packed: whichever is shorter before compression.
    // Unsigned arithmetic wraps, so a counter that wrapped still codes.
    steps.clear();
    prev_value = state.value[s];
    for (const Poll& p : polls) {
      steps.push_back(p.value[s] - prev_value);
      prev_value = p.value[s];
    }
    auto varint_step = [&](uint64_t step, uint64_t prev_step) {
      return gauge ? Zigzag(static_cast<int64_t>(step)) : Zigzag(static_cast<int64_t>(step - prev_step));
    };
    size_t varint_bytes = 0;
    uint64_t prev_step = state.value_step[s];
    int64_t low = steps.size() > 1 ? static_cast<int64_t>(steps[1]) : 0, high = low;
    for (size_t i = 0; i < steps.size(); ++i) {
      varint_bytes += VarintSize(varint_step(steps[i], prev_step));
      prev_step = steps[i];
      if (i == 0) continue;
      low = std::min(low, static_cast<int64_t>(steps[i]));
      high = std::max(high, static_cast<int64_t>(steps[i]));
    }
    const int width = BitWidth(static_cast<uint64_t>(high) - static_cast<uint64_t>(low));
    const bool packed =
        steps.size() > 1 && VarintSize(varint_step(steps[0], state.value_step[s])) + VarintSize(Zigzag(low)) + 1 +
                                    ((steps.size() - 1) * static_cast<size_t>(width) + 7) / 8 <
                                varint_bytes;
    if (uniform) uniform_tail = false;
    const uint8_t header = (uniform ? kColumnUniformFlags : 0) | (uniform_tail ? kColumnUniformTail : 0) |
                           (plain_deltas ? kColumnPlainDeltas : 0) | (packed ? kColumnPacked : 0);
    out->push_back(static_cast<char>(header));
    if (uniform && !polls.empty()) out->push_back(static_cast<char>(polls.front().flags[s]));
    if (uniform_tail) {
      out->push_back(static_cast<char>(polls.front().flags[s]));
      out->push_back(static_cast<char>(polls.back().flags[s]));
    }
    if (packed) {
      PutVarint(Zigzag(low), out);
      out->push_back(static_cast<char>(width));
      excess.clear();
      for (size_t i = 1; i < steps.size(); ++i) excess.push_back(steps[i] - static_cast<uint64_t>(low));
      PackBits(excess, width, out);
    }
    for (size_t i = 0; i < polls.size(); ++i) {
      const Poll& p = polls[i];
      const uint64_t step = steps[i];
      if (!packed || i == 0) {
        if (gauge) PutVarint(Zigzag(static_cast<int64_t>(step)), out);
        else PutVarint(Zigzag(static_cast<int64_t>(step - state.value_step[s])), out);
      }
      if (!uniform && !uniform_tail) out->push_back(static_cast<char>(p.flags[s]));
      if (!plain_deltas && (p.flags[s] & kHasDelta))
        PutVarint(Zigzag(static_cast<int64_t>(p.delta[s] - step)), out);
      state.value_step[s] = step;
      state.value[s] = p.value[s];
    }
  }
}

absl::Status DecodeColumns(const Layout& layout, std::string_view in, ChainState& state,
                           std::vector<Poll>* out) {
  const size_t n_series = layout.series.size();
  if (state.ts.size() != layout.entities() || state.value.size() != n_series)
    return absl::InternalError("sample block: chain state does not fit the layout");
  uint64_t n = 0;
  if (!GetVarint(in, &n) || n > kMaxPolls) return Corrupt("bad poll count");
  // Each poll takes at least a commit byte and a timestamp byte per entity
  // (a packed value column may take no byte a poll): reject a count the
  // bytes cannot hold before allocating.
  if (n * (layout.entities() + 1) > in.size()) return Corrupt("poll count larger than the part");
  const size_t first = out->size();
  out->resize(first + n);
  for (size_t i = first; i < out->size(); ++i) {
    Poll& p = (*out)[i];
    uint64_t step = 0;
    if (!GetVarint(in, &step)) return Corrupt("truncated commit column");
    state.commit += step;
    p.commit = state.commit;
    p.ts_us.resize(layout.entities());
    p.value.resize(n_series);
    p.delta.assign(n_series, 0);
    p.flags.resize(n_series);
  }
  for (size_t e = 0; e < layout.entities(); ++e) {
    for (size_t i = first; i < out->size(); ++i) {
      uint64_t coded = 0;
      if (!GetVarint(in, &coded)) return Corrupt("truncated timestamp column");
      state.ts_step[e] += Unzigzag(coded);
      state.ts[e] = e == 0 ? state.ts[0] + state.ts_step[0] : (*out)[i].ts_us[0] + state.ts_step[e];
      (*out)[i].ts_us[e] = state.ts[e];
    }
  }
  std::vector<uint64_t> excess;
  for (size_t s = 0; s < n_series; ++s) {
    const bool gauge = layout.gauge[s] != 0;
    if (in.empty()) return Corrupt("truncated column header");
    const uint8_t header = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    if (header & ~(kColumnUniformFlags | kColumnPlainDeltas | kColumnPacked | kColumnUniformTail))
      return Corrupt("bad column header");
    const bool uniform = header & kColumnUniformFlags, plain_deltas = header & kColumnPlainDeltas,
               packed = header & kColumnPacked, uniform_tail = header & kColumnUniformTail;
    if (uniform && uniform_tail) return Corrupt("bad column header");
    if (packed && n < 2) return Corrupt("packed column of fewer than two polls");
    uint8_t flags = 0;
    if (uniform && n > 0) {
      if (in.empty()) return Corrupt("truncated column flags");
      flags = static_cast<uint8_t>(in.front());
      in.remove_prefix(1);
    }
    uint8_t first_flags = 0, tail_flags = 0;
    if (uniform_tail) {
      if (in.size() < 2) return Corrupt("truncated column flags");
      first_flags = static_cast<uint8_t>(in[0]);
      tail_flags = static_cast<uint8_t>(in[1]);
      in.remove_prefix(2);
    }
    uint64_t low = 0;
    if (packed) {
      if (!GetVarint(in, &low) || in.empty()) return Corrupt("truncated packed column");
      const int width = static_cast<uint8_t>(in.front());
      in.remove_prefix(1);
      if (width > 64) return Corrupt("bad packed width");
      if (!UnpackBits(in, static_cast<size_t>(n - 1), width, &excess)) return Corrupt("truncated packed column");
      low = static_cast<uint64_t>(Unzigzag(low));
    }
    for (size_t i = first; i < out->size(); ++i) {
      Poll& p = (*out)[i];
      uint64_t coded = 0, step = 0;
      if (packed && i > first) {
        step = low + excess[i - first - 1];
      } else {
        if (!GetVarint(in, &coded)) return Corrupt("truncated value column");
        step = gauge ? static_cast<uint64_t>(Unzigzag(coded))
                     : state.value_step[s] + static_cast<uint64_t>(Unzigzag(coded));
      }
      state.value_step[s] = step;
      state.value[s] += step;
      p.value[s] = state.value[s];
      if (uniform_tail) {
        flags = i == first ? first_flags : tail_flags;
      } else if (!uniform) {
        if (in.empty()) return Corrupt("truncated flags column");
        flags = static_cast<uint8_t>(in.front());
        in.remove_prefix(1);
      }
      p.flags[s] = flags;
      if (flags & kHasDelta) {
        if (plain_deltas) {
          p.delta[s] = step;
        } else {
          if (!GetVarint(in, &coded)) return Corrupt("truncated delta column");
          p.delta[s] = step + static_cast<uint64_t>(Unzigzag(coded));
        }
      }
    }
  }
  if (!in.empty()) return Corrupt("trailing bytes after the columns");
  return absl::OkStatus();
}

std::string Compress(std::string_view raw, int level) {
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), level);
  out.resize(ZSTD_isError(n) ? 0 : n);
  return out;
}

absl::StatusOr<std::string> Decompress(std::string_view compressed) {
  const unsigned long long size = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > (1ULL << 30))
    return Corrupt("not a zstd frame of known size");
  std::string out(size, '\0');
  const size_t n = ZSTD_decompress(out.data(), out.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(n) || n != size) return Corrupt(StrCat("zstd: ", ZSTD_getErrorName(n)));
  return out;
}

}  // namespace rocefab::collector::blocks
