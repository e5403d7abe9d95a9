#pragma once
// A switch config backend in memory for the fuzz targets: keeps items by
// key, fails items whose key ends in '!', and answers QoS items as a device
// without DCB does (unsupported).
#include <map>
#include <string>

#include "agents/switch/config_backend.h"

namespace rocefab::fuzz {

class MemoryBackend final : public switchd::ConfigBackend {
 public:
  std::string name() const override { return "memory"; }
  absl::Status Install(const v1::ConfigItem& item) override {
    if (!item.key().empty() && item.key().back() == '!') return absl::InternalError("refused");
    if (item.has_qos()) return absl::UnimplementedError("no DCB");
    state[item.key()] = item.SerializeAsString();
    return absl::OkStatus();
  }
  absl::Status Remove(const v1::ConfigItem& item) override {
    state.erase(item.key());
    return absl::OkStatus();
  }
  absl::Status Commit(const v1::SwitchConfig&) override { return absl::OkStatus(); }
  std::map<std::string, std::string> state;
};

}  // namespace rocefab::fuzz
