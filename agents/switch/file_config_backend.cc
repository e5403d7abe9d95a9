#include "agents/switch/file_config_backend.h"

#include <google/protobuf/util/json_util.h>

#include "agents/switch/file_backend.h"
#include "common/fs_root.h"
#include "common/strings.h"

namespace rocefab::switchd {

FileConfigBackend::FileConfigBackend(std::string state_dir, std::string switch_name)
    : dir_(StrCat(state_dir, "/", switch_name)), switch_name_(std::move(switch_name)) {}

absl::Status FileConfigBackend::CheckPort(const std::string& port) {
  if (ports_.empty()) {
    auto reading = FileBackend(dir_.substr(0, dir_.rfind('/')), switch_name_).ReadCounters();
    if (!reading.ok()) return absl::UnavailableError(StrCat("cannot learn the ports: ", reading.status().message()));
    for (const auto& [name, _] : reading->ports) ports_.insert(name);
  }
  if (!ports_.count(port)) return absl::FailedPreconditionError(StrCat("no port ", port, " on ", switch_name_));
  return absl::OkStatus();
}

absl::Status FileConfigBackend::Install(const v1::ConfigItem& item) {
  switch (item.item_case()) {
    case v1::ConfigItem::kNexthopGroup:
      if (item.nexthop_group().nexthops().empty())
        return absl::InvalidArgumentError("a nexthop group needs at least one nexthop");
      for (const auto& hop : item.nexthop_group().nexthops())
        if (auto status = CheckPort(hop.port()); !status.ok()) return status;
      return absl::OkStatus();
    case v1::ConfigItem::kRoute:
      if (!item.route().port().empty()) return CheckPort(item.route().port());
      return absl::OkStatus();
    case v1::ConfigItem::kAddress:
      return CheckPort(item.address().port());
    case v1::ConfigItem::kRule:
    case v1::ConfigItem::kHash:
    case v1::ConfigItem::kQos:
      return absl::OkStatus();
    default:
      return absl::UnimplementedError("unknown item kind");
  }
}

absl::Status FileConfigBackend::Remove(const v1::ConfigItem&) { return absl::OkStatus(); }

absl::Status FileConfigBackend::Commit(const v1::SwitchConfig& applied) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  if (auto status = google::protobuf::util::MessageToJsonString(applied, &json, options); !status.ok())
    return absl::InternalError(StrCat("cannot encode applied config: ", status.ToString()));
  return WriteFileAtomic(StrCat(dir_, "/applied.json"), json);
}

}  // namespace rocefab::switchd
