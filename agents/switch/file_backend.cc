#include "agents/switch/file_backend.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "common/counters.h"
#include "common/fs_root.h"
#include "common/strings.h"

namespace rocefab::switchd {
namespace {

using Json = nlohmann::json;

// Non-negative integers only; anything else is counted as bad.
bool ToCounter(const Json& value, uint64_t* out) {
  if (value.is_number_unsigned()) {
    *out = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(value.get<int64_t>());
    return true;
  }
  return false;
}

bool ToIndex(const std::string& key, uint32_t* out) { return ParseDecimal(key, out) && *out < 64; }

// {"3": 7, ...} into `into`.
void ReadIndexed(const Json& object, std::map<uint32_t, uint64_t>* into, SwitchReading* reading) {
  if (!object.is_object()) {
    ++reading->bad_values;
    return;
  }
  for (const auto& [key, value] : object.items()) {
    uint32_t index = 0;
    uint64_t counter = 0;
    if (!ToIndex(key, &index) || !ToCounter(value, &counter)) {
      ++reading->bad_values;
      continue;
    }
    (*into)[index] = counter;
  }
}

void ReadPort(const Json& object, PortReading* port, SwitchReading* reading) {
  for (const auto& [key, value] : object.items()) {
    if (key == "queues") {
      if (!value.is_object()) {
        ++reading->bad_values;
        continue;
      }
      for (const auto& [queue_key, queue] : value.items()) {
        uint32_t queue_index = 0;
        if (!ToIndex(queue_key, &queue_index) || !queue.is_object()) {
          ++reading->bad_values;
          continue;
        }
        auto& counters = port->queues[queue_index];
        for (const auto& [name, v] : queue.items()) {
          uint64_t counter = 0;
          if (FindCounter(v1::SCOPE_QUEUE, name) == nullptr) ++reading->unknown_keys;
          else if (!ToCounter(v, &counter)) ++reading->bad_values;
          else counters[name] = counter;
        }
      }
      continue;
    }
    const CounterDef* def = FindCounter(v1::SCOPE_PORT, key);
    if (def == nullptr) {
      ++reading->unknown_keys;
      continue;
    }
    if (def->per_prio) {
      ReadIndexed(value, &port->per_prio[key], reading);
    } else if (def->per_queue) {
      ReadIndexed(value, &port->port_queue[key], reading);
    } else {
      uint64_t counter = 0;
      if (ToCounter(value, &counter)) port->counters[key] = counter;
      else ++reading->bad_values;
    }
  }
}

}  // namespace

absl::StatusOr<SwitchReading> ParseSwitchCountersJson(std::string_view text) {
  Json root = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError("counters file is not valid JSON");
  if (!root.is_object()) return absl::InvalidArgumentError("counters file is not a JSON object");
  SwitchReading reading;
  if (auto it = root.find("switch"); it != root.end() && it->is_string())
    reading.name = it->get<std::string>();
  if (auto it = root.find("os_version"); it != root.end()) {
    if (it->is_string() && !it->get_ref<const std::string&>().empty() && it->get_ref<const std::string&>().size() <= 128)
      reading.os_version = it->get<std::string>();
    else
      ++reading.bad_values;
  }
  if (auto it = root.find("timestamp_us"); it != root.end()) {
    uint64_t ts = 0;
    if (ToCounter(*it, &ts) && ts < (1ULL << 62)) reading.timestamp_us = static_cast<int64_t>(ts);
    else ++reading.bad_values;
  }
  auto ports = root.find("ports");
  if (ports == root.end() || !ports->is_object())
    return absl::InvalidArgumentError("counters file has no \"ports\" object");
  for (const auto& [name, port] : ports->items()) {
    if (name.empty() || name.size() > 64 || !port.is_object()) {
      ++reading.bad_values;
      continue;
    }
    ReadPort(port, &reading.ports[name], &reading);
  }
  if (auto pools = root.find("buffer_pools"); pools != root.end()) {
    if (!pools->is_object()) {
      ++reading.bad_values;
    } else {
      for (const auto& [pool, counters] : pools->items()) {
        if (pool.empty() || pool.size() > 64 || !counters.is_object()) {
          ++reading.bad_values;
          continue;
        }
        for (const auto& [name, value] : counters.items()) {
          uint64_t counter = 0;
          if (name.rfind("buffer_", 0) != 0 || FindCounter(v1::SCOPE_QUEUE, name) == nullptr)
            ++reading.unknown_keys;
          else if (!ToCounter(value, &counter)) ++reading.bad_values;
          else reading.buffer_pools[pool][name] = counter;
        }
      }
    }
  }
  return reading;
}

FileBackend::FileBackend(std::string state_dir, std::string switch_name)
    : path_(StrCat(state_dir, "/", switch_name, "/counters.json")),
      switch_name_(std::move(switch_name)) {}

absl::StatusOr<SwitchReading> FileBackend::ReadCounters() {
  auto text = ReadWholeFile(path_);
  if (!text.ok()) return text.status();
  auto reading = ParseSwitchCountersJson(*text);
  if (!reading.ok())
    return absl::InvalidArgumentError(StrCat(path_, ": ", reading.status().message()));
  if (!reading->name.empty() && reading->name != switch_name_)
    return absl::InvalidArgumentError(
        StrCat(path_, ": written for switch ", reading->name, ", not ", switch_name_));
  reading->name = switch_name_;
  return reading;
}

absl::StatusOr<SwitchReading> FileBackend::ReadPfcCounters() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    const std::tuple<uint64_t, int64_t, int64_t, int64_t> now{st.st_ino, st.st_size, st.st_mtim.tv_sec,
                                                              st.st_mtim.tv_nsec};
    if (now == last_fast_) {
      SwitchReading unchanged;
      unchanged.name = switch_name_;
      return unchanged;
    }
    last_fast_ = now;
  }
  return ReadCounters();
}

}  // namespace rocefab::switchd
