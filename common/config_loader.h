#pragma once
// Loads YAML configuration into protobuf config messages (proto/rocefab/v1/
// config.proto), so every daemon's config is typed and documented in one
// schema. Keys are the proto field names. google.protobuf.Duration fields take
// strings such as "1s". Enums take their value names, case-insensitive, with
// or without the enum's prefix.
//
// Errors name the file, line and key: "hostd.yaml:7: key 'intervall': unknown
// key (known keys: collector, interval, ...)". Start-up only; not hot paths.

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace rocefab {

// Parses `yaml_text` (named `source_name` in errors) into `message`,
// replacing fields present in the text and leaving the others untouched, so
// callers can set defaults first. An empty document leaves `message` as it is.
absl::Status LoadYamlConfig(std::string_view yaml_text, std::string_view source_name,
                            google::protobuf::Message* message);

// Reads `path` and calls LoadYamlConfig.
absl::Status LoadYamlConfigFile(const std::string& path, google::protobuf::Message* message);

}  // namespace rocefab
