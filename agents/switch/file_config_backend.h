#pragma once
// The `file` backend's config half: the lab's switches. Items are checked
// against the switch's real ports (those its counters file lists) and, on
// commit, the config in force is written to <state-dir>/<switch>/applied.json
// (protobuf JSON of SwitchConfig), which the lab's model reads to route.

#include <set>
#include <string>

#include "agents/switch/config_backend.h"

namespace rocefab::switchd {

class FileConfigBackend final : public ConfigBackend {
 public:
  FileConfigBackend(std::string state_dir, std::string switch_name);
  std::string name() const override { return "file"; }
  absl::Status Install(const v1::ConfigItem& item) override;
  absl::Status Remove(const v1::ConfigItem& item) override;
  absl::Status Commit(const v1::SwitchConfig& applied) override;

 private:
  absl::Status CheckPort(const std::string& port);
  std::string dir_;
  std::string switch_name_;
  std::set<std::string> ports_;  // learnt from counters.json
};

}  // namespace rocefab::switchd
