#pragma once
// The config half of a switch backend: where desired routes, nexthop groups,
// rules, hash fields and QoS are made real. One item at a time, so the
// applier can roll back exactly what it applied.
//
// Implementations: `file` (the lab: the applied config is written where the
// lab's model reads it), `linux` (netlink), and a fake in tests.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "rocefab/v1/control.pb.h"

namespace rocefab::switchd {

class ConfigBackend {
 public:
  virtual ~ConfigBackend() = default;
  virtual std::string name() const = 0;
  // Installs or replaces one item. Unimplemented: the device cannot do it
  // (reported as `unsupported`, not a failure). Other errors fail the apply.
  virtual absl::Status Install(const v1::ConfigItem& item) = 0;
  // Removes one item previously installed.
  virtual absl::Status Remove(const v1::ConfigItem& item) = 0;
  // Called after a whole apply (or rollback) with the config now in force.
  virtual absl::Status Commit(const v1::SwitchConfig& applied) = 0;
};

}  // namespace rocefab::switchd
