#pragma once
// Applies desired configs to a switch transactionally. A new config is
// diffed item by item against the applied one; changes go to the backend in
// dependency order (nexthop groups before the routes that use them; removals
// in reverse). If any item fails, every change made so far is undone in
// reverse order and the previous config stays in force; the response says
// exactly what had been applied and why it was rolled back. Items the device
// cannot do are `unsupported`, never silently ignored.
//
// The config in force is persisted (atomically) after every successful
// apply; at start the applier reconciles the backend to it. Thread-safe: one
// apply at a time.

#include <map>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "agents/switch/config_backend.h"
#include "rocefab/v1/control.pb.h"

namespace rocefab::switchd {

class ConfigApplier final {
 public:
  // `state_file` keeps the applied config across restarts ("" = none).
  ConfigApplier(std::string switch_name, ConfigBackend& backend, std::string state_file);

  // Loads the persisted config and re-installs every item (idempotent).
  absl::Status Reconcile();
  v1::ApplyConfigResponse Apply(const v1::SwitchConfig& desired);
  v1::SwitchState State() const;

 private:
  absl::Status Persist() const;
  v1::SwitchState StateLocked() const;

  std::string switch_name_;
  ConfigBackend& backend_;
  std::string state_file_;
  mutable std::mutex mu_;
  v1::SwitchConfig applied_;
  std::map<std::string, v1::ItemStatus> status_;  // by item key
};

// Installation order of an item kind: addresses, groups, routes, rules, hash, QoS.
int ItemOrder(const v1::ConfigItem& item);

}  // namespace rocefab::switchd
