// Fuzzes the collector's sample-block decoder (collector/store/block_codec.h)
// on whatever bytes a damaged or foreign database file could hold: a layout,
// then a part, then a zstd frame. Decoding must fail cleanly or yield polls
// that encode back to the same bytes.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "collector/store/block_codec.h"

using namespace rocefab::collector::blocks;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // First byte: where the layout ends.
  if (in.empty()) return 0;
  const size_t split = std::min<size_t>(static_cast<uint8_t>(in[0]), in.size() - 1);
  auto layout = Layout::Decode(in.substr(1, split));
  (void)Decompress(in);
  if (!layout.ok()) return 0;
  if (layout->series.size() > 4096) return 0;
  ChainState state(*layout);
  std::vector<Poll> polls;
  const std::string_view part = in.substr(1 + split);
  if (!DecodeColumns(*layout, part, state, &polls).ok()) return 0;
  // What decodes re-encodes to a part that decodes to the same polls.
  ChainState write(*layout), again(*layout);
  std::string bytes;
  EncodeColumns(*layout, polls, write, &bytes);
  std::vector<Poll> round;
  if (!DecodeColumns(*layout, bytes, again, &round).ok() || round.size() != polls.size())
    __builtin_trap();
  for (size_t i = 0; i < polls.size(); ++i)
    if (round[i].value != polls[i].value || round[i].ts_us != polls[i].ts_us ||
        round[i].flags != polls[i].flags || round[i].commit != polls[i].commit)
      __builtin_trap();
  return 0;
}
