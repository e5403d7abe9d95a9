#include "common/daemon_setup.h"

#include <iostream>

#include "common/config_loader.h"
#include "common/duration.h"
#include "common/log.h"
#include "common/strings.h"

namespace rocefab {

absl::Status ApplyLogLevel(const std::string& level) {
  log::Level parsed;
  if (!log::ParseLevel(level, &parsed))
    return absl::InvalidArgumentError(
        StrCat("--log-level: unknown level '", level, "' (debug, info, warning or error)"));
  log::SetMinLevel(parsed);
  return absl::OkStatus();
}

absl::Status LoadConfigIfGiven(const std::string& path, google::protobuf::Message* config) {
  if (path.empty()) return absl::OkStatus();
  return LoadYamlConfigFile(path, config);
}

int64_t DurationToUs(const google::protobuf::Duration& duration) {
  return duration.seconds() * 1'000'000 + duration.nanos() / 1000;
}

absl::StatusOr<int64_t> ResolveDurationUs(std::string_view flag_name, bool flag_given,
                                          const std::string& flag_text, bool config_has,
                                          const google::protobuf::Duration& config_value) {
  if (config_has && !flag_given) return DurationToUs(config_value);
  auto parsed = ParseDurationUs(flag_text);
  if (!parsed.ok())
    return absl::InvalidArgumentError(StrCat(flag_name, ": ", parsed.status().message()));
  return *parsed;
}

int ParseFlags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return -1;
}

int UsageError(std::string_view program, const absl::Status& status) {
  std::cerr << program << ": " << status.message() << "\n";
  return 2;
}

}  // namespace rocefab
