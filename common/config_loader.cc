#include "common/config_loader.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "common/strings.h"
#include "absl/strings/str_join.h"
#include "common/duration.h"
#include "common/fs_root.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/duration.pb.h"

namespace rocefab {
namespace {

namespace pb = google::protobuf;

class Loader {
 public:
  explicit Loader(std::string_view source) : source_(source) {}

  absl::Status Error(const YAML::Node& node, std::string_view key, const std::string& what) const {
    // yaml-cpp lines are 0-based; editors count from 1.
    const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    return absl::InvalidArgumentError(
        StrCat(source_, ":", line, ": key '", key, "': ", what));
  }

  absl::Status LoadMessage(const YAML::Node& node, std::string_view path, pb::Message* message) {
    if (node.IsNull()) return absl::OkStatus();
    if (!node.IsMap()) return Error(node, path, "expected a mapping of keys to values");
    const pb::Descriptor* descriptor = message->GetDescriptor();
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = it->first.as<std::string>();
      const std::string full_key = path.empty() ? key : StrCat(path, ".", key);
      const pb::FieldDescriptor* field = descriptor->FindFieldByName(key);
      if (field == nullptr) {
        std::vector<std::string> known;
        for (int i = 0; i < descriptor->field_count(); ++i)
          known.push_back(descriptor->field(i)->name());
        return Error(it->first, full_key,
                     StrCat("unknown key (known keys: ", absl::StrJoin(known, ", "), ")"));
      }
      if (auto status = LoadField(it->second, full_key, field, message); !status.ok())
        return status;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status LoadField(const YAML::Node& value, const std::string& key,
                         const pb::FieldDescriptor* field, pb::Message* message) {
    const pb::Reflection* reflection = message->GetReflection();
    if (field->is_map()) {
      // A YAML mapping of scalars (e.g. extra_labels: {cluster: a}): each
      // pair becomes one map entry, loaded like a message {key, value}.
      if (!value.IsMap()) return Error(value, key, "expected a mapping of names to values");
      reflection->ClearField(message, field);
      for (auto it = value.begin(); it != value.end(); ++it) {
        const std::string name = it->first.as<std::string>();
        pb::Message* entry = reflection->AddMessage(message, field);
        const pb::Descriptor* type = entry->GetDescriptor();
        for (const auto& [part, node] : {std::pair{type->FindFieldByName("key"), it->first},
                                         std::pair{type->FindFieldByName("value"), it->second}}) {
          if (auto status = LoadScalarOrMessage(node, StrCat(key, ".", name), part, entry, false);
              !status.ok())
            return status;
        }
      }
      return absl::OkStatus();
    }
    if (field->is_repeated()) {
      if (!value.IsSequence()) return Error(value, key, "expected a list");
      reflection->ClearField(message, field);
      for (size_t i = 0; i < value.size(); ++i) {
        if (auto status = LoadScalarOrMessage(value[i], StrCat(key, "[", i, "]"), field,
                                              message, /*repeated=*/true);
            !status.ok())
          return status;
      }
      return absl::OkStatus();
    }
    return LoadScalarOrMessage(value, key, field, message, /*repeated=*/false);
  }

  absl::Status LoadScalarOrMessage(const YAML::Node& value, const std::string& key,
                                   const pb::FieldDescriptor* field, pb::Message* message,
                                   bool repeated) {
    const pb::Reflection* reflection = message->GetReflection();
    using FD = pb::FieldDescriptor;
    if (field->cpp_type() == FD::CPPTYPE_MESSAGE) {
      pb::Message* child = repeated ? reflection->AddMessage(message, field)
                                    : reflection->MutableMessage(message, field);
      if (field->message_type()->full_name() == "google.protobuf.Duration") {
        if (!value.IsScalar()) return Error(value, key, "expected a duration such as 1s or 500ms");
        auto us = ParseDurationUs(value.Scalar());
        if (!us.ok()) return Error(value, key, Message(us.status()));
        auto* duration = static_cast<pb::Duration*>(child);
        duration->set_seconds(*us / 1000000);
        duration->set_nanos(static_cast<int32_t>((*us % 1000000) * 1000));
        return absl::OkStatus();
      }
      return LoadMessage(value, key, child);
    }
    if (!value.IsScalar()) return Error(value, key, "expected a single value");
    const std::string& text = value.Scalar();
    switch (field->cpp_type()) {
      case FD::CPPTYPE_STRING:
        repeated ? reflection->AddString(message, field, text)
                 : reflection->SetString(message, field, text);
        return absl::OkStatus();
      case FD::CPPTYPE_BOOL: {
        const std::string lower = absl::AsciiStrToLower(text);
        bool b;
        if (lower == "true" || lower == "yes" || lower == "on") b = true;
        else if (lower == "false" || lower == "no" || lower == "off") b = false;
        else return Error(value, key, StrCat("expected true or false, got '", text, "'"));
        repeated ? reflection->AddBool(message, field, b) : reflection->SetBool(message, field, b);
        return absl::OkStatus();
      }
      case FD::CPPTYPE_INT32:
      case FD::CPPTYPE_INT64:
      case FD::CPPTYPE_UINT32:
      case FD::CPPTYPE_UINT64:
        return LoadInteger(value, key, field, message, repeated);
      case FD::CPPTYPE_DOUBLE:
      case FD::CPPTYPE_FLOAT: {
        char* end = nullptr;
        errno = 0;
        double d = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || errno != 0)
          return Error(value, key, StrCat("expected a number, got '", text, "'"));
        if (field->cpp_type() == FD::CPPTYPE_DOUBLE)
          repeated ? reflection->AddDouble(message, field, d)
                   : reflection->SetDouble(message, field, d);
        else
          repeated ? reflection->AddFloat(message, field, static_cast<float>(d))
                   : reflection->SetFloat(message, field, static_cast<float>(d));
        return absl::OkStatus();
      }
      case FD::CPPTYPE_ENUM: {
        const pb::EnumDescriptor* type = field->enum_type();
        const pb::EnumValueDescriptor* found = nullptr;
        std::vector<std::string> names;
        for (int i = 0; i < type->value_count(); ++i) {
          const pb::EnumValueDescriptor* v = type->value(i);
          names.push_back(absl::AsciiStrToLower(v->name()));
          const std::string lower_name = absl::AsciiStrToLower(v->name());
          const std::string lower_text = absl::AsciiStrToLower(text);
          if (lower_name == lower_text || std::string_view(lower_name).ends_with("_" + lower_text))
            found = v;
        }
        if (found == nullptr)
          return Error(value, key,
                       StrCat("unknown value '", text, "' (one of: ", absl::StrJoin(names, ", "), ")"));
        repeated ? reflection->AddEnum(message, field, found)
                 : reflection->SetEnum(message, field, found);
        return absl::OkStatus();
      }
      default:
        return Error(value, key, "unsupported field type");
    }
  }

  absl::Status LoadInteger(const YAML::Node& value, const std::string& key,
                           const pb::FieldDescriptor* field, pb::Message* message, bool repeated) {
    using FD = pb::FieldDescriptor;
    const std::string& text = value.Scalar();
    const pb::Reflection* reflection = message->GetReflection();
    const bool is_unsigned =
        field->cpp_type() == FD::CPPTYPE_UINT32 || field->cpp_type() == FD::CPPTYPE_UINT64;
    char* end = nullptr;
    errno = 0;
    if (is_unsigned) {
      if (text.empty() || text[0] == '-')
        return Error(value, key, StrCat("expected a non-negative integer, got '", text, "'"));
      unsigned long long n = std::strtoull(text.c_str(), &end, 10);
      if (*end != '\0' || errno != 0)
        return Error(value, key, StrCat("expected a non-negative integer, got '", text, "'"));
      if (field->cpp_type() == FD::CPPTYPE_UINT32) {
        if (n > std::numeric_limits<uint32_t>::max())
          return Error(value, key, StrCat("value ", text, " is out of range"));
        repeated ? reflection->AddUInt32(message, field, static_cast<uint32_t>(n))
                 : reflection->SetUInt32(message, field, static_cast<uint32_t>(n));
      } else {
        repeated ? reflection->AddUInt64(message, field, n)
                 : reflection->SetUInt64(message, field, n);
      }
      return absl::OkStatus();
    }
    long long n = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0)
      return Error(value, key, StrCat("expected an integer, got '", text, "'"));
    if (field->cpp_type() == FD::CPPTYPE_INT32) {
      if (n < std::numeric_limits<int32_t>::min() || n > std::numeric_limits<int32_t>::max())
        return Error(value, key, StrCat("value ", text, " is out of range"));
      repeated ? reflection->AddInt32(message, field, static_cast<int32_t>(n))
               : reflection->SetInt32(message, field, static_cast<int32_t>(n));
    } else {
      repeated ? reflection->AddInt64(message, field, n) : reflection->SetInt64(message, field, n);
    }
    return absl::OkStatus();
  }

  std::string source_;
};

}  // namespace

absl::Status LoadYamlConfig(std::string_view yaml_text, std::string_view source_name,
                            google::protobuf::Message* message) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        StrCat(source_name, ":", e.mark.line + 1, ": YAML syntax error: ", e.msg));
  }
  try {
    return Loader(source_name).LoadMessage(root, "", message);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        StrCat(source_name, ":", e.mark.line + 1, ": ", e.msg));
  }
}

absl::Status LoadYamlConfigFile(const std::string& path, google::protobuf::Message* message) {
  auto text = ReadWholeFile(path);
  if (!text.ok())
    return absl::NotFoundError(StrCat("config file ", path, ": ", text.status().message()));
  return LoadYamlConfig(*text, path, message);
}

}  // namespace rocefab
