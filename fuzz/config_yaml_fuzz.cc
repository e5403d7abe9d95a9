// Fuzzes the YAML config loader (common/config_loader.h) with the config
// messages of rocefab-hostd and rocefab-collectord. Errors are expected; a
// crash, a hang, a leak or an escaping exception is a bug.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/config_loader.h"
#include "common/strings.h"
#include "google/protobuf/util/message_differencer.h"
#include "rocefab/v1/config.pb.h"

namespace {

// Real configs are a few KiB. yaml-cpp builds the whole document in memory
// and recurses per nesting level, so unbounded input could exhaust memory or
// stack (std::bad_alloc is not a YAML::Exception and would escape).
constexpr size_t kMaxInput = 64 * 1024;
constexpr std::string_view kSource = "fuzz.yaml";

template <typename Config>
void Check(std::string_view text) {
  Config config;
  const absl::Status status = rocefab::LoadYamlConfig(text, kSource, &config);
  if (!status.ok()) {
    // Errors are InvalidArgument and start with "<file>:<line>:".
    if (status.code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    const std::string message = rocefab::Message(status);
    if (message.size() <= kSource.size() + 1 || message.compare(0, kSource.size(), kSource) != 0 ||
        message[kSource.size()] != ':')
      __builtin_trap();
    return;
  }
  // Loading replaces the fields present, so loading the same text again over
  // the result changes nothing. (Compared field by field: two equal maps
  // need not serialize in the same order.)
  Config again = config;
  if (!rocefab::LoadYamlConfig(text, kSource, &again).ok()) __builtin_trap();
  if (!google::protobuf::util::MessageDifferencer::Equals(again, config)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInput) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Check<rocefab::v1::HostdConfig>(text);
  Check<rocefab::v1::CollectordConfig>(text);
  return 0;
}
