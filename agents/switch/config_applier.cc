#include "agents/switch/config_applier.h"

#include <algorithm>

#include "common/fs_root.h"
#include "common/log.h"
#include "common/strings.h"

namespace rocefab::switchd {
namespace {

constexpr char kConfigApplierLog[] = "config";

std::string Encoded(const v1::ConfigItem& item) {
  std::string out;
  item.SerializeToString(&out);
  return out;
}

// The status a backend's answer gives an item.
v1::ItemStatus StatusOf(const std::string& key, const absl::Status& result) {
  v1::ItemStatus status;
  status.set_key(key);
  if (result.ok()) {
    status.set_state(v1::ITEM_STATE_APPLIED);
  } else {
    status.set_state(absl::IsUnimplemented(result) ? v1::ITEM_STATE_UNSUPPORTED : v1::ITEM_STATE_FAILED);
    status.set_reason(Message(result));
  }
  return status;
}

}  // namespace

int ItemOrder(const v1::ConfigItem& item) {
  switch (item.item_case()) {
    case v1::ConfigItem::kAddress: return 0;
    case v1::ConfigItem::kNexthopGroup: return 1;
    case v1::ConfigItem::kRoute: return 2;
    case v1::ConfigItem::kRule: return 3;
    case v1::ConfigItem::kHash: return 4;
    case v1::ConfigItem::kQos: return 5;
    default: return 6;
  }
}

ConfigApplier::ConfigApplier(std::string switch_name, ConfigBackend& backend,
                             std::string state_file)
    : switch_name_(std::move(switch_name)), backend_(backend), state_file_(std::move(state_file)) {
  applied_.set_switch_name(switch_name_);
}

absl::Status ConfigApplier::Persist() const {
  if (state_file_.empty()) return absl::OkStatus();
  std::string bytes;
  applied_.SerializeToString(&bytes);
  return WriteFileAtomic(state_file_, bytes);
}

absl::Status ConfigApplier::Reconcile() {
  std::lock_guard lock(mu_);
  if (state_file_.empty()) return absl::OkStatus();
  auto bytes = ReadWholeFile(state_file_);
  if (!bytes.ok()) {
    if (absl::IsNotFound(bytes.status())) return absl::OkStatus();  // first start
    return bytes.status();
  }
  v1::SwitchConfig persisted;
  if (!persisted.ParseFromString(*bytes) || persisted.switch_name() != switch_name_)
    return absl::DataLossError(StrCat(state_file_, ": not an applied config of ", switch_name_,
                                      "; move it away to start from an empty config"));
  std::vector<const v1::ConfigItem*> items;
  for (const auto& item : persisted.items()) items.push_back(&item);
  std::stable_sort(items.begin(), items.end(),
                   [](auto* a, auto* b) { return ItemOrder(*a) < ItemOrder(*b); });
  for (const v1::ConfigItem* item : items) status_[item->key()] = StatusOf(item->key(), backend_.Install(*item));
  applied_ = persisted;
  if (auto status = backend_.Commit(applied_); !status.ok()) return status;
  LOG_INFO(kConfigApplierLog, "reconciled to generation ", applied_.generation(), " (", items.size(), " items)");
  return absl::OkStatus();
}

v1::ApplyConfigResponse ConfigApplier::Apply(const v1::SwitchConfig& desired) {
  std::lock_guard lock(mu_);
  v1::ApplyConfigResponse response;
  if (desired.switch_name() != switch_name_) {
    response.set_error(StrCat("config is for ", desired.switch_name(), ", this is ", switch_name_));
    *response.mutable_state() = StateLocked();
    return response;
  }
  if (desired.generation() < applied_.generation()) {
    response.set_error(StrCat("generation ", desired.generation(), " is older than the applied ",
                              applied_.generation()));
    *response.mutable_state() = StateLocked();
    return response;
  }
  std::map<std::string, const v1::ConfigItem*> old_items, new_items;
  for (const auto& item : applied_.items()) old_items[item.key()] = &item;
  for (const auto& item : desired.items()) {
    if (!new_items.emplace(item.key(), &item).second) {
      response.set_error(StrCat("item key ", item.key(), " appears twice"));
      *response.mutable_state() = StateLocked();
      return response;
    }
  }
  // The delta: installs (new or changed) in dependency order, then removals
  // in reverse dependency order.
  std::vector<const v1::ConfigItem*> installs, removals;
  for (const auto& [key, item] : new_items) {
    auto it = old_items.find(key);
    if (it == old_items.end() || Encoded(*it->second) != Encoded(*item)) installs.push_back(item);
  }
  for (const auto& [key, item] : old_items)
    if (!new_items.count(key)) removals.push_back(item);
  std::stable_sort(installs.begin(), installs.end(),
                   [](auto* a, auto* b) { return ItemOrder(*a) < ItemOrder(*b); });
  std::stable_sort(removals.begin(), removals.end(),
                   [](auto* a, auto* b) { return ItemOrder(*a) > ItemOrder(*b); });

  struct Done {
    const v1::ConfigItem* item;
    bool was_install;
  };
  std::vector<Done> done;
  std::map<std::string, v1::ItemStatus> statuses = status_;
  absl::Status failure;
  std::string failed_key;
  for (const v1::ConfigItem* item : installs) {
    const absl::Status status = backend_.Install(*item);
    if (!status.ok() && !absl::IsUnimplemented(status)) {
      failure = status;
      failed_key = item->key();
      break;
    }
    statuses[item->key()] = StatusOf(item->key(), status);
    if (status.ok()) done.push_back({item, true});
  }
  if (failure.ok()) {
    for (const v1::ConfigItem* item : removals) {
      absl::Status status = backend_.Remove(*item);
      if (!status.ok() && !absl::IsUnimplemented(status) && !absl::IsNotFound(status)) {
        failure = status;
        failed_key = item->key();
        break;
      }
      statuses.erase(item->key());
      done.push_back({item, false});
    }
  }
  if (!failure.ok()) {
    // Undo in reverse: restore what was replaced, remove what was added,
    // re-install what was removed.
    std::vector<std::string> applied_keys;
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      const std::string& key = it->item->key();
      applied_keys.push_back(key);
      absl::Status undo;
      if (!it->was_install) {
        undo = backend_.Install(*it->item);
      } else if (auto old = old_items.find(key); old != old_items.end()) {
        undo = backend_.Install(*old->second);
        // The old item was never on the device (unsupported there): going
        // back means the new one must go.
        if (absl::IsUnimplemented(undo)) undo = backend_.Remove(*it->item);
      } else {
        undo = backend_.Remove(*it->item);
      }
      if (absl::IsUnimplemented(undo)) undo = absl::OkStatus();  // as it was: not on the device
      if (!undo.ok())
        LOG_ERROR(kConfigApplierLog, "rollback of ", key, " failed: ", undo.message(), "; reconcile will retry");
    }
    std::reverse(applied_keys.begin(), applied_keys.end());
    std::string applied_list;
    for (const auto& key : applied_keys) StrAppend(&applied_list, applied_list.empty() ? "" : ", ", key);
    response.set_error(StrCat("item ", failed_key, " failed: ", failure.message(), "; rolled back ",
                              applied_keys.size(), " applied change(s)",
                              applied_keys.empty() ? "" : StrCat(" [", applied_list, "]"),
                              "; generation ", applied_.generation(), " stays in force"));
    response.set_rolled_back(true);
    status_[failed_key] = StatusOf(failed_key, failure);
    (void)backend_.Commit(applied_);
    LOG_WARN(kConfigApplierLog, response.error());
    *response.mutable_state() = StateLocked();
    return response;
  }
  applied_ = desired;
  // Only items in force keep a status: an item that failed in an earlier
  // attempt and is no longer desired must not haunt later rollouts.
  for (auto it = statuses.begin(); it != statuses.end();) {
    if (!new_items.count(it->first)) it = statuses.erase(it);
    else ++it;
  }
  status_ = std::move(statuses);
  if (auto status = backend_.Commit(applied_); !status.ok()) {
    response.set_error(StrCat("applied, but the backend could not commit: ", status.message()));
  } else if (auto persisted = Persist(); !persisted.ok()) {
    response.set_error(StrCat("applied, but not persisted: ", persisted.message()));
  } else {
    response.set_ok(true);
  }
  LOG_INFO(kConfigApplierLog, "generation ", applied_.generation(), " applied: ", installs.size(), " installed, ",
           removals.size(), " removed");
  *response.mutable_state() = StateLocked();
  return response;
}

v1::SwitchState ConfigApplier::State() const {
  std::lock_guard lock(mu_);
  return StateLocked();
}

v1::SwitchState ConfigApplier::StateLocked() const {
  v1::SwitchState state;
  state.set_switch_name(switch_name_);
  state.set_applied_generation(applied_.generation());
  state.set_applied_hash(applied_.content_hash());
  state.set_backend(backend_.name());
  for (const auto& [key, status] : status_) *state.add_items() = status;
  *state.mutable_applied() = applied_;
  return state;
}

}  // namespace rocefab::switchd
