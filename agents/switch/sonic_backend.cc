#include "agents/switch/sonic_backend.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/counters.h"
#include "common/fs_root.h"
#include "common/log.h"
#include "common/strings.h"

namespace rocefab::switchd {
namespace {

constexpr char kSonicBackendLog[] = "sonic";
using Hash = SonicTables::Hash;

bool ParseU64(std::string_view text, uint64_t* out) { return ParseDecimal(text, out); }
bool ParseIndex(std::string_view text, uint32_t* out) { return ParseDecimal(text, out) && *out < 64; }

// The value at `key`, or null: a field of a hash, or a hash of a table.
template <typename M>
const typename M::mapped_type* Find(const M& map, const typename M::key_type& key) {
  auto it = map.find(key);
  return it == map.end() ? nullptr : &it->second;
}

// Fields SONiC writes that rocefab knowingly leaves: every SAI statistic or
// attribute, the PFC watchdog's working state, the Broadcom estimates.
bool KnownSonicField(const std::string& field) {
  for (const char* prefix : {"SAI_", "PFC_WD_", "EST_PORT_STAT_", "BIG_RED_SWITCH", "PFC_STAT_HISTORY"})
    if (field.rfind(prefix, 0) == 0) return true;
  return false;
}

// "SAI_PORT_STAT_PFC_3_RX_PKTS" -> prio 3, rest "RX_PKTS".
bool SplitPfcField(const std::string& field, const char* prefix, uint32_t* prio, std::string_view* rest) {
  const size_t n = std::string_view(prefix).size();
  if (field.size() < n + 3 || field.compare(0, n, prefix) != 0) return false;
  const size_t underscore = field.find('_', n);
  if (underscore == std::string::npos || !ParseIndex(std::string_view(field).substr(n, underscore - n), prio) ||
      *prio >= 8)
    return false;
  *rest = std::string_view(field).substr(underscore + 1);
  return true;
}

struct PortMapper {
  SwitchReading* reading;

  bool Value(const Hash& hash, const std::string& field, uint64_t* out) {
    const std::string* text = Find(hash, field);
    if (text == nullptr) return false;
    if (ParseU64(*text, out)) return true;
    ++reading->bad_values;
    return false;
  }

  void Port(const std::string& name, const Hash& counters, const Hash* appl, const Hash* state) {
    PortReading& port = reading->ports[name];
    uint64_t v = 0;
    const std::pair<const char*, const char*> direct[] = {
        {"SAI_PORT_STAT_IF_IN_OCTETS", "rx_bytes"},
        {"SAI_PORT_STAT_IF_OUT_OCTETS", "tx_bytes"},
        {"SAI_PORT_STAT_DOT3_STATS_FCS_ERRORS", "rx_fcs_errors"},
        {"SAI_PORT_STAT_DOT3_STATS_SYMBOL_ERRORS", "rx_symbol_errors"},
    };
    for (const auto& [field, counter] : direct)
      if (Value(counters, field, &v)) port.counters[counter] = v;
    // Packets as portstat counts RX_OK and TX_OK: unicast plus non-unicast.
    for (const auto& [dir, counter] : {std::pair{"IN", "rx_packets"}, std::pair{"OUT", "tx_packets"}}) {
      uint64_t ucast = 0, nucast = 0;
      const bool has_u = Value(counters, StrCat("SAI_PORT_STAT_IF_", dir, "_UCAST_PKTS"), &ucast);
      const bool has_n = Value(counters, StrCat("SAI_PORT_STAT_IF_", dir, "_NON_UCAST_PKTS"), &nucast);
      if (has_u || has_n) port.counters[counter] = ucast + nucast;
    }
    // Speed: STATE_DB's operational speed, else APPL_DB's configured one (Mbps).
    uint64_t speed_mbps = 0;
    const std::string* oper = appl != nullptr ? Find(*appl, "oper_status") : nullptr;
    const bool up = oper != nullptr && *oper == "up";
    if (state != nullptr && up) (void)Value(*state, "speed", &speed_mbps);
    if (speed_mbps == 0 && appl != nullptr) (void)Value(*appl, "speed", &speed_mbps);
    if (speed_mbps > 0) port.counters["rate_bytes_per_second"] = speed_mbps * 125'000;
    if (appl != nullptr) {
      if (oper != nullptr) port.counters["link_up"] = up ? 1 : 0;
      // flap_count counts every oper change, up and down; the carrier losses
      // are half of them, rounded up while the port is down. This holds
      // whether or not the first up was counted.
      uint64_t changes = 0;
      if (Value(*appl, "flap_count", &changes)) port.counters["link_flaps"] = (changes + (up ? 0 : 1)) / 2;
    }
    // PFC, per priority. Pause durations: microseconds where the SAI gives
    // them, else quanta (512 bit times each) at the port's speed, else
    // SONiC's Broadcom estimate.
    std::map<uint32_t, uint64_t> rx_quanta, rx_estimate;
    for (const auto& [field, text] : counters) {
      uint32_t prio = 0;
      std::string_view rest;
      if (SplitPfcField(field, "SAI_PORT_STAT_PFC_", &prio, &rest)) {
        const char* counter = rest == "RX_PKTS"                 ? "pfc_rx_pause_frames"
                              : rest == "TX_PKTS"               ? "pfc_tx_pause_frames"
                              : rest == "RX_PAUSE_DURATION_US" ? "pfc_rx_pause_us"
                              : rest == "TX_PAUSE_DURATION_US" ? "pfc_tx_pause_us"
                                                                : nullptr;
        if (counter == nullptr && rest != "RX_PAUSE_DURATION") continue;
        if (!ParseU64(text, &v)) {
          ++reading->bad_values;
          continue;
        }
        if (counter != nullptr) port.per_prio[counter][prio] = v;
        else rx_quanta[prio] = v;
      } else if (SplitPfcField(field, "EST_PORT_STAT_PFC_", &prio, &rest) && rest == "RX_PAUSE_DURATION_US") {
        if (ParseU64(text, &v)) rx_estimate[prio] = v;
        else ++reading->bad_values;
      } else if (!KnownSonicField(field)) {
        ++reading->unknown_keys;
      }
    }
    auto& rx_us = port.per_prio["pfc_rx_pause_us"];
    for (const auto& [prio, quanta] : rx_quanta)
      if (!rx_us.count(prio) && speed_mbps > 0) rx_us[prio] = quanta * 512 / speed_mbps;
    for (const auto& [prio, us] : rx_estimate)
      if (!rx_us.count(prio)) rx_us[prio] = us;
    if (rx_us.empty()) port.per_prio.erase("pfc_rx_pause_us");
  }

  void Queue(PortReading* port, uint32_t queue, const Hash& counters) {
    static const std::pair<const char*, const char*> kQueue[] = {
        {"SAI_QUEUE_STAT_BYTES", "queue_tx_bytes"},
        {"SAI_QUEUE_STAT_PACKETS", "queue_tx_packets"},
        {"SAI_QUEUE_STAT_DROPPED_PACKETS", "queue_drops"},
        {"SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS", "queue_ecn_marked_packets"},
        {"SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES", "queue_depth_bytes"},
        {"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES", "queue_watermark_bytes"},
    };
    uint64_t v = 0;
    auto& values = port->queues[queue];
    for (const auto& [field, counter] : kQueue)
      if (Value(counters, field, &v)) values[counter] = v;
    if (Value(counters, "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED", &v)) port->port_queue["pfcwd_storms_detected"][queue] = v;
    if (Value(counters, "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED", &v)) port->port_queue["pfcwd_storms_restored"][queue] = v;
    for (const auto& [field, _] : counters)
      if (!KnownSonicField(field)) ++reading->unknown_keys;
    if (values.empty()) port->queues.erase(queue);
  }

  void Pool(const std::string& name, const Hash* counters, const Hash* config) {
    auto& values = reading->buffer_pools[name];
    uint64_t v = 0;
    if (counters != nullptr) {
      if (Value(*counters, "SAI_BUFFER_POOL_STAT_WATERMARK_BYTES", &v)) values["buffer_watermark_bytes"] = v;
      if (Value(*counters, "SAI_BUFFER_POOL_STAT_CURR_OCCUPANCY_BYTES", &v)) values["buffer_used_bytes"] = v;
      for (const auto& [field, _] : *counters)
        if (!KnownSonicField(field)) ++reading->unknown_keys;
    }
    if (config != nullptr && Value(*config, "size", &v)) values["buffer_size_bytes"] = v;
    if (values.empty()) reading->buffer_pools.erase(name);
  }
};

}  // namespace

absl::StatusOr<SonicDbLayout> ParseSonicDbConfig(std::string_view json_text) {
  using Json = nlohmann::json;
  Json root = Json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object())
    return absl::InvalidArgumentError("database_config.json is not a JSON object");
  auto dbs = root.find("DATABASES");
  auto instances = root.find("INSTANCES");
  if (dbs == root.end() || !dbs->is_object() || instances == root.end() || !instances->is_object())
    return absl::InvalidArgumentError("database_config.json has no DATABASES and INSTANCES objects");
  SonicDbLayout layout;
  std::string instance;
  for (const auto& [name, target] : {std::pair<const char*, int*>{"APPL_DB", &layout.appl_db},
                                     {"COUNTERS_DB", &layout.counters_db},
                                     {"CONFIG_DB", &layout.config_db},
                                     {"STATE_DB", &layout.state_db}}) {
    auto db = dbs->find(name);
    if (db == dbs->end() || !db->is_object()) return absl::InvalidArgumentError(StrCat("database_config.json: no ", name));
    auto id = db->find("id");
    if (id == db->end() || !id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() > 1000)
      return absl::InvalidArgumentError(StrCat("database_config.json: ", name, " has no valid id"));
    *target = id->get<int>();
    auto inst = db->find("instance");
    if (inst == db->end() || !inst->is_string())
      return absl::InvalidArgumentError(StrCat("database_config.json: ", name, " has no instance"));
    if (!instance.empty() && instance != inst->get<std::string>())
      return absl::InvalidArgumentError(StrCat("database_config.json: ", name, " is on instance ",
                                               inst->get<std::string>(), ", not ", instance,
                                               "; one Redis instance is supported"));
    instance = inst->get<std::string>();
  }
  auto inst = instances->find(instance);
  if (inst == instances->end() || !inst->is_object())
    return absl::InvalidArgumentError(StrCat("database_config.json: no instance ", instance));
  if (auto path = inst->find("unix_socket_path"); path != inst->end() && path->is_string() && !path->get<std::string>().empty()) {
    layout.address.unix_path = path->get<std::string>();
  } else {
    auto host = inst->find("hostname");
    auto port = inst->find("port");
    if (host == inst->end() || !host->is_string() || port == inst->end() || !port->is_number_integer())
      return absl::InvalidArgumentError(StrCat("database_config.json: instance ", instance, " has no socket or host and port"));
    layout.address.host = host->get<std::string>();
    layout.address.port = port->get<int>();
  }
  return layout;
}

absl::StatusOr<SonicDbLayout> ResolveSonicDbLayout(const std::string& db_config_path,
                                                   const std::string& redis_address) {
  SonicDbLayout layout;
  layout.address.unix_path = "/var/run/redis/redis.sock";
  if (!db_config_path.empty()) {
    auto text = ReadWholeFile(db_config_path);
    if (text.ok()) {
      auto parsed = ParseSonicDbConfig(*text);
      if (!parsed.ok()) return absl::InvalidArgumentError(StrCat(db_config_path, ": ", parsed.status().message()));
      layout = *parsed;
    } else if (!absl::IsNotFound(text.status())) {
      return text.status();
    }
  }
  if (!redis_address.empty()) {
    auto address = ParseRedisAddress(redis_address);
    if (!address.ok()) return address.status();
    layout.address = *address;
  }
  return layout;
}

std::string SonicImageVersion(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text.ok()) return "";
  try {
    YAML::Node root = YAML::Load(*text);
    if (root.IsMap() && root["build_version"] && root["build_version"].IsScalar())
      return root["build_version"].as<std::string>();
  } catch (const YAML::Exception&) {
  }
  return "";
}

SwitchReading MapSonicTables(const std::string& switch_name, const SonicTables& t) {
  SwitchReading reading;
  reading.name = switch_name;
  PortMapper mapper{&reading};
  if (t.port_name_map.empty()) reading.degraded.push_back("COUNTERS_PORT_NAME_MAP is missing (flex counter group PORT)");
  for (const auto& [port, oid] : t.port_name_map) {
    if (port.empty() || port.size() > 64) {
      ++reading.bad_values;
      continue;
    }
    const Hash* counters = Find(t.counters, oid);
    const Hash* appl = Find(t.appl_ports, port);
    if (counters == nullptr) reading.degraded.push_back(StrCat("COUNTERS:", oid, " of ", port, " is missing"));
    if (appl == nullptr) reading.degraded.push_back(StrCat("APPL_DB PORT_TABLE:", port, " is missing"));
    mapper.Port(port, counters != nullptr ? *counters : Hash{}, appl, Find(t.state_ports, port));
    // PFC per priority as CONFIG_DB has it: pfc_enable lists the lossless
    // priorities ("3,4"); the others are off. A port without the field
    // reports nothing.
    if (const Hash* qos = Find(t.port_qos, port))
      if (const std::string* list = Find(*qos, "pfc_enable")) {
        uint8_t mask = 0;
        bool bad = false;
        for (absl::string_view item : absl::StrSplit(*list, ',', absl::SkipWhitespace())) {
          uint32_t prio = 0;
          if (ParseIndex(Trim(std::string_view(item.data(), item.size())), &prio) && prio < 8) mask |= 1u << prio;
          else bad = true;
        }
        if (bad) ++reading.bad_values;
        else reading.ports[port].per_prio["pfc_enabled"] = PfcEnabledByPriority(mask);
      }
  }
  if (t.queue_name_map.empty())
    reading.degraded.push_back("COUNTERS_QUEUE_NAME_MAP is missing (flex counter group QUEUE)");
  for (const auto& [name, oid] : t.queue_name_map) {
    // "<port>:<n>"; n is the position in the port's queue list, the type and
    // index maps say which unicast queue it is.
    const size_t colon = name.rfind(':');
    uint32_t position = 0, index = 0;
    if (colon == std::string::npos || !ParseIndex(std::string_view(name).substr(colon + 1), &position)) {
      ++reading.bad_values;
      continue;
    }
    auto port = reading.ports.find(name.substr(0, colon));
    if (port == reading.ports.end()) continue;  // a port outside the port map (counted there)
    if (const std::string* type = Find(t.queue_type_map, oid);
        type != nullptr && *type != "SAI_QUEUE_TYPE_UNICAST" && *type != "SAI_QUEUE_TYPE_ALL")
      continue;
    index = position;
    if (const std::string* text = Find(t.queue_index_map, oid); text != nullptr && !ParseIndex(*text, &index)) {
      ++reading.bad_values;
      continue;
    }
    if (const Hash* counters = Find(t.counters, oid)) mapper.Queue(&port->second, index, *counters);
  }
  if (t.pool_name_map.empty())
    reading.degraded.push_back("COUNTERS_BUFFER_POOL_NAME_MAP is missing (flex counter group BUFFER_POOL_WATERMARK)");
  for (const auto& [pool, oid] : t.pool_name_map) {
    if (pool.empty() || pool.size() > 64) {
      ++reading.bad_values;
      continue;
    }
    mapper.Pool(pool, Find(t.counters, oid), Find(t.pool_config, pool));
  }
  return reading;
}

SonicBackend::SonicBackend(SonicDbLayout layout, std::string switch_name)
    : switch_name_(std::move(switch_name)),
      counters_(layout.address, layout.counters_db),
      appl_(layout.address, layout.appl_db),
      state_(layout.address, layout.state_db),
      config_(layout.address, layout.config_db) {}

absl::StatusOr<SonicTables> SonicBackend::Fetch() {
  SonicTables t;
  auto maps = counters_.Pipeline({{"HGETALL", "COUNTERS_PORT_NAME_MAP"},
                                  {"HGETALL", "COUNTERS_QUEUE_NAME_MAP"},
                                  {"HGETALL", "COUNTERS_QUEUE_TYPE_MAP"},
                                  {"HGETALL", "COUNTERS_QUEUE_INDEX_MAP"},
                                  {"HGETALL", "COUNTERS_BUFFER_POOL_NAME_MAP"}});
  if (!maps.ok()) return maps.status();
  for (const auto& reply : *maps)
    if (reply.is_error()) return absl::FailedPreconditionError(StrCat("COUNTERS_DB: ", reply.str));
  t.port_name_map = (*maps)[0].AsHash();
  t.queue_name_map = (*maps)[1].AsHash();
  t.queue_type_map = (*maps)[2].AsHash();
  t.queue_index_map = (*maps)[3].AsHash();
  t.pool_name_map = (*maps)[4].AsHash();
  if (t.port_name_map.empty())
    return absl::FailedPreconditionError(
        StrCat("COUNTERS_DB (", counters_.Describe(), ") has no COUNTERS_PORT_NAME_MAP: syncd has not "
               "started, or the PORT flex counter group is disabled"));

  // Every counter hash in one round trip per database.
  std::vector<std::string> oids;
  for (const auto* map : {&t.port_name_map, &t.queue_name_map, &t.pool_name_map})
    for (const auto& [_, oid] : *map) oids.push_back(oid);
  std::vector<std::vector<std::string>> commands;
  for (const auto& oid : oids) commands.push_back({"HGETALL", StrCat("COUNTERS:", oid)});
  auto counters = counters_.Pipeline(commands);
  if (!counters.ok()) return counters.status();
  for (size_t i = 0; i < oids.size(); ++i) {
    const RedisReply& reply = (*counters)[i];
    if (reply.type == RedisReply::Type::kArray && !reply.elements.empty()) t.counters[oids[i]] = reply.AsHash();
  }
  std::vector<std::vector<std::string>> appl_cmds, state_cmds, config_cmds;
  for (const auto& [port, _] : t.port_name_map) {
    appl_cmds.push_back({"HGETALL", StrCat("PORT_TABLE:", port)});
    state_cmds.push_back({"HGETALL", StrCat("PORT_TABLE|", port)});
  }
  for (const auto& [pool, _] : t.pool_name_map) config_cmds.push_back({"HGETALL", StrCat("BUFFER_POOL|", pool)});
  for (const auto& [port, _] : t.port_name_map) config_cmds.push_back({"HGETALL", StrCat("PORT_QOS_MAP|", port)});
  auto appl = appl_.Pipeline(appl_cmds);
  if (!appl.ok()) return appl.status();
  auto state = state_.Pipeline(state_cmds);
  if (!state.ok()) return state.status();
  auto config = config_.Pipeline(config_cmds);
  if (!config.ok()) return config.status();
  size_t i = 0;
  for (const auto& [port, _] : t.port_name_map) {
    if (auto hash = (*appl)[i].AsHash(); !hash.empty()) t.appl_ports[port] = std::move(hash);
    if (auto hash = (*state)[i].AsHash(); !hash.empty()) t.state_ports[port] = std::move(hash);
    ++i;
  }
  i = 0;
  for (const auto& [pool, _] : t.pool_name_map)
    if (auto hash = (*config)[i++].AsHash(); !hash.empty()) t.pool_config[pool] = std::move(hash);
  for (const auto& [port, _] : t.port_name_map)
    if (auto hash = (*config)[i++].AsHash(); !hash.empty()) t.port_qos[port] = std::move(hash);
  return t;
}

absl::StatusOr<SwitchReading> SonicBackend::ReadCounters() {
  auto tables = Fetch();
  if (!tables.ok()) return tables.status();
  ports_ = SonicTables();
  ports_.port_name_map = tables->port_name_map;
  ports_.appl_ports = tables->appl_ports;
  ports_.state_ports = tables->state_ports;
  return MapSonicTables(switch_name_, *tables);
}

absl::StatusOr<SwitchReading> SonicBackend::ReadPfcCounters() {
  if (ports_.port_name_map.empty()) return ReadCounters();
  std::vector<std::vector<std::string>> commands;
  for (const auto& [_, oid] : ports_.port_name_map) commands.push_back({"HGETALL", StrCat("COUNTERS:", oid)});
  auto replies = counters_.Pipeline(commands);
  if (!replies.ok()) return replies.status();
  // The last full read's tables with this read's port hashes alone.
  ports_.counters.clear();
  size_t i = 0;
  for (const auto& [_, oid] : ports_.port_name_map) {
    const RedisReply& reply = (*replies)[i++];
    if (reply.type == RedisReply::Type::kArray && !reply.elements.empty()) ports_.counters[oid] = reply.AsHash();
  }
  return MapSonicTables(switch_name_, ports_);
}

// ---- config ----

namespace {

constexpr char kMapName[] = "ROCEFAB";
constexpr char kLosslessProfile[] = "ROCEFAB_LOSSLESS";

// CONFIG_DB's lists: "3,4", "Ethernet0,Ethernet4".
std::string Join(const std::vector<std::string>& parts) { return absl::StrJoin(parts, ","); }

absl::Status CheckTc(uint32_t tc, const char* what) {
  if (tc >= 8) return absl::InvalidArgumentError(StrCat(what, " ", tc, " is not a traffic class 0-7"));
  return absl::OkStatus();
}

// BUFFER_PG's key names a PG or a range of them: "3", "3-4".
std::vector<std::string> PgRanges(const std::set<uint32_t>& pgs) {
  std::vector<std::string> ranges;
  for (auto it = pgs.begin(); it != pgs.end();) {
    uint32_t first = *it, last = *it;
    for (++it; it != pgs.end() && *it == last + 1; ++it) last = *it;
    ranges.push_back(first == last ? std::to_string(first) : StrCat(first, "-", last));
  }
  return ranges;
}

// The PGs a BUFFER_PG key's range covers, or none if it is not a range.
std::set<uint32_t> PgsOf(std::string_view range) {
  std::set<uint32_t> pgs;
  auto number = [](std::string_view text, uint32_t* out) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
    return ec == std::errc() && end == text.data() + text.size() && !text.empty();
  };
  const size_t dash = range.find('-');
  uint32_t first = 0, last = 0;
  if (!number(range.substr(0, dash), &first)) return pgs;
  last = first;
  if (dash != std::string_view::npos && !number(range.substr(dash + 1), &last)) return pgs;
  for (uint32_t pg = first; pg <= last && pg < 8; ++pg) pgs.insert(pg);
  return pgs;
}

// A fixed XOFF threshold for the lossless PGs (docs/deploy-switch-agent.md,
// "The lossless PGs' XOFF threshold"): one BUFFER_PROFILE in static
// threshold mode, bound to those PGs of every port.
absl::Status PgProfileEntries(const v1::BufferProfile& b, const std::vector<std::string>& ports,
                              std::vector<ConfigDbEntry>* out) {
  if (b.pg_xon_bytes() == 0 || b.pg_headroom_bytes() == 0)
    return absl::InvalidArgumentError(
        "xoff_bytes on SONiC is a BUFFER_PROFILE bound to the lossless PGs, and that profile needs the PG's "
        "XON and headroom: set pg_xon_bytes and pg_headroom_bytes too, or leave xoff_bytes out to keep "
        "SONiC's own lossless profiles");
  std::set<uint32_t> pgs;
  for (uint32_t pg : b.lossless_pgs()) {
    if (auto status = CheckTc(pg, "lossless PG"); !status.ok()) return status;
    pgs.insert(pg);
  }
  if (pgs.empty()) return absl::InvalidArgumentError("xoff_bytes with no lossless PG to bind it to");
  // With a shared headroom pool (the pool's xoff) a PG reserves only its XON
  // part and draws its headroom from the shared pool; without one it
  // reserves both (SONiC's rule for lossless profiles).
  const uint64_t size = b.headroom_bytes() != 0 ? b.pg_xon_bytes() : b.pg_xon_bytes() + b.pg_headroom_bytes();
  out->push_back({StrCat("BUFFER_PROFILE|", kLosslessProfile),
                  {{"pool", "ingress_lossless_pool"},
                   {"size", std::to_string(size)},
                   {"xon", std::to_string(b.pg_xon_bytes())},
                   {"xoff", std::to_string(b.pg_headroom_bytes())},
                   {"static_th", std::to_string(b.xoff_bytes())}}});
  for (const auto& port : ports)
    for (const auto& range : PgRanges(pgs))
      out->push_back({StrCat("BUFFER_PG|", port, "|", range), {{"profile", kLosslessProfile}}});
  return absl::OkStatus();
}

absl::StatusOr<std::string> SonicHashField(const std::string& field) {
  static const std::map<std::string, std::string> kFields = {
      {"src_ip", "SRC_IP"},       {"dst_ip", "DST_IP"},           {"ip_proto", "IP_PROTOCOL"},
      {"src_port", "L4_SRC_PORT"}, {"dst_port", "L4_DST_PORT"},   {"roce_dst_qp", "RDMA_BTH_DEST_QP"}};
  auto it = kFields.find(field);
  if (it == kFields.end()) return absl::InvalidArgumentError(StrCat("hash field '", field, "' has no SONiC equivalent"));
  return it->second;
}

void QosEntries(const v1::QosPolicy& q, const std::vector<std::string>& ports, std::vector<ConfigDbEntry>* out,
                absl::Status* error) {
  auto per_port = [&](const std::string& table, const std::string& suffix,
                      const std::map<std::string, std::string>& fields) {
    for (const auto& port : ports) out->push_back({StrCat(table, "|", port, suffix), fields});
  };
  if (!q.dscp_to_tc().empty()) {
    ConfigDbEntry map{StrCat("DSCP_TO_TC_MAP|", kMapName), {}};
    for (const auto& m : q.dscp_to_tc()) {
      if (m.dscp() >= 64) *error = absl::InvalidArgumentError(StrCat("DSCP ", m.dscp(), " is not 0-63"));
      if (auto status = CheckTc(m.tc(), "DSCP map target"); !status.ok()) *error = status;
      map.fields[std::to_string(m.dscp())] = std::to_string(m.tc());
    }
    out->push_back(std::move(map));
    ConfigDbEntry queues{StrCat("TC_TO_QUEUE_MAP|", kMapName), {}};
    for (int tc = 0; tc < 8; ++tc) queues.fields[std::to_string(tc)] = std::to_string(tc);
    out->push_back(std::move(queues));
    per_port("PORT_QOS_MAP", "", {{"dscp_to_tc_map", kMapName}, {"tc_to_queue_map", kMapName}});
  }
  if (!q.pfc_priorities().empty() || !q.lossless_tcs().empty()) {
    std::set<uint32_t> lossless(q.lossless_tcs().begin(), q.lossless_tcs().end());
    std::set<uint32_t> pfc(q.pfc_priorities().begin(), q.pfc_priorities().end());
    if (pfc.empty()) pfc = lossless;
    if (lossless.empty()) lossless = pfc;
    std::vector<std::string> enabled;
    for (uint32_t p : pfc) {
      if (auto status = CheckTc(p, "PFC priority"); !status.ok()) *error = status;
      enabled.push_back(std::to_string(p));
    }
    ConfigDbEntry pg{StrCat("TC_TO_PRIORITY_GROUP_MAP|", kMapName), {}};
    ConfigDbEntry pfc_queue{StrCat("MAP_PFC_PRIORITY_TO_QUEUE|", kMapName), {}};
    for (uint32_t tc = 0; tc < 8; ++tc) {
      pg.fields[std::to_string(tc)] = std::to_string(lossless.count(tc) ? tc : 0);
      pfc_queue.fields[std::to_string(tc)] = std::to_string(tc);
    }
    out->push_back(std::move(pg));
    out->push_back(std::move(pfc_queue));
    // pfcwd_sw_enable too: the watchdog watches only the priorities it lists.
    per_port("PORT_QOS_MAP", "",
             {{"tc_to_pg_map", kMapName}, {"pfc_to_queue_map", kMapName}, {"pfc_enable", Join(enabled)},
              {"pfcwd_sw_enable", Join(enabled)}});
  }
  if (q.strict_priority_tc() != 0) {
    if (auto status = CheckTc(q.strict_priority_tc(), "strict-priority TC"); !status.ok()) *error = status;
    out->push_back({"SCHEDULER|ROCEFAB_STRICT", {{"type", "STRICT"}}});
    per_port("QUEUE", StrCat("|", q.strict_priority_tc()), {{"scheduler", "ROCEFAB_STRICT"}});
  }
  for (const auto& ecn : q.ecn()) {
    if (auto status = CheckTc(ecn.tc(), "ECN TC"); !status.ok()) *error = status;
    if (ecn.min_bytes() > ecn.max_bytes() || ecn.probability() < 0 || ecn.probability() > 1)
      *error = absl::InvalidArgumentError(StrCat("ECN on TC ", ecn.tc(), ": need min <= max and a probability in 0..1"));
    const std::string profile = StrCat("ROCEFAB_TC", ecn.tc());
    ConfigDbEntry wred{StrCat("WRED_PROFILE|", profile), {{"ecn", "ecn_all"}}};
    const std::string percent = std::to_string(static_cast<int>(std::lround(ecn.probability() * 100)));
    for (const char* color : {"green", "yellow", "red"}) {
      wred.fields[StrCat("wred_", color, "_enable")] = "true";
      wred.fields[StrCat(color, "_min_threshold")] = std::to_string(ecn.min_bytes());
      wred.fields[StrCat(color, "_max_threshold")] = std::to_string(ecn.max_bytes());
      wred.fields[StrCat(color, "_drop_probability")] = percent;
    }
    out->push_back(std::move(wred));
    per_port("QUEUE", StrCat("|", ecn.tc()), {{"wred_profile", profile}});
  }
  const auto& wd = q.pfc_watchdog();
  if (wd.detect_ms() != 0 || !wd.action().empty()) {
    const uint32_t restore = wd.restore_ms() != 0 ? wd.restore_ms() : 2 * wd.detect_ms();
    const std::string action = wd.action().empty() ? "drop" : wd.action();
    if (wd.detect_ms() < 100 || wd.detect_ms() > 5000)
      *error = absl::InvalidArgumentError(StrCat("PFC watchdog detection ", wd.detect_ms(), " ms: SONiC takes 100-5000"));
    if (restore < 100 || restore > 60000)
      *error = absl::InvalidArgumentError(StrCat("PFC watchdog restoration ", restore, " ms: SONiC takes 100-60000"));
    if (action != "drop" && action != "forward" && action != "alert")
      *error = absl::InvalidArgumentError(StrCat("PFC watchdog action '", action, "' is not drop, forward or alert"));
    per_port("PFC_WD", "",
             {{"action", action},
              {"detection_time", std::to_string(wd.detect_ms())},
              {"restoration_time", std::to_string(restore)}});
  }
}

}  // namespace

absl::StatusOr<std::vector<ConfigDbEntry>> SonicConfigBackend::EntriesFor(
    const v1::ConfigItem& item, const std::vector<std::string>& ports,
    const std::map<uint32_t, v1::NexthopGroupItem>& groups) {
  std::vector<ConfigDbEntry> out;
  switch (item.item_case()) {
    case v1::ConfigItem::kAddress: {
      const auto& a = item.address();
      if (a.address().find('/') == std::string::npos)
        return absl::InvalidArgumentError(StrCat("address '", a.address(), "' has no prefix length"));
      // SONiC's empty-hash convention: one NULL field.
      out.push_back({StrCat("INTERFACE|", a.port()), {{"NULL", "NULL"}}});
      out.push_back({StrCat("INTERFACE|", a.port(), "|", a.address()), {{"NULL", "NULL"}}});
      return out;
    }
    case v1::ConfigItem::kNexthopGroup:
      if (item.nexthop_group().nexthops().empty())
        return absl::InvalidArgumentError("a nexthop group needs at least one nexthop");
      return out;  // no CONFIG_DB object of its own: its routes carry the nexthops
    case v1::ConfigItem::kRoute: {
      const auto& r = item.route();
      if (r.table() != 0)
        return absl::UnimplementedError(
            "routes in a pinned-path table need policy-based routing (SONiC PBR ACLs), which the sonic "
            "backend does not write");
      if (r.prefix().empty()) return absl::InvalidArgumentError("a route needs a prefix");
      ConfigDbEntry e{StrCat("STATIC_ROUTE|default|", r.prefix()), {{"advertise", "false"}}};
      if (r.nexthop_group() != 0) {
        auto group = groups.find(r.nexthop_group());
        if (group == groups.end())
          return absl::FailedPreconditionError(StrCat("route ", r.prefix(), " uses nexthop group ",
                                                      r.nexthop_group(), ", which is not installed"));
        std::vector<std::string> gateways, ifnames;
        for (const auto& hop : group->second.nexthops()) {
          gateways.push_back(hop.gateway().empty() ? "0.0.0.0" : hop.gateway());
          ifnames.push_back(hop.port());
        }
        e.fields["nexthop"] = Join(gateways);
        e.fields["ifname"] = Join(ifnames);
      } else if (!r.port().empty()) {
        e.fields["nexthop"] = "0.0.0.0";
        e.fields["ifname"] = r.port();
      } else {
        return absl::InvalidArgumentError(StrCat("route ", r.prefix(), " has neither a nexthop group nor a port"));
      }
      out.push_back(std::move(e));
      return out;
    }
    case v1::ConfigItem::kRule:
      return absl::UnimplementedError(
          "policy routing rules (pinned paths) need SONiC PBR ACL tables, which the sonic backend does not write");
    case v1::ConfigItem::kHash: {
      std::vector<std::string> fields;
      for (const auto& field : item.hash().fields()) {
        auto name = SonicHashField(field);
        if (!name.ok()) return name.status();
        fields.push_back(*name);
      }
      // A list field of CONFIG_DB: the name ends in '@', the values joined by ','.
      out.push_back({"SWITCH_HASH|GLOBAL", {{"ecmp_hash@", Join(fields)}}});
      return out;
    }
    case v1::ConfigItem::kQos: {
      absl::Status error;
      QosEntries(item.qos().qos(), ports, &out, &error);
      if (!error.ok()) return error;
      if (item.qos().has_buffer()) {
        const auto& b = item.qos().buffer();
        ConfigDbEntry pool{"BUFFER_POOL|ingress_lossless_pool", {}};
        if (b.pool_bytes() != 0) pool.fields["size"] = std::to_string(b.pool_bytes());
        if (b.headroom_bytes() != 0) pool.fields["xoff"] = std::to_string(b.headroom_bytes());
        if (!pool.fields.empty()) out.push_back(std::move(pool));
        if (b.xoff_bytes() != 0)
          if (auto status = PgProfileEntries(b, ports, &out); !status.ok()) return status;
      }
      return out;
    }
    default:
      return absl::UnimplementedError("unknown item kind");
  }
}

SonicConfigBackend::SonicConfigBackend(SonicDbLayout layout, std::string switch_name)
    : switch_name_(std::move(switch_name)), config_(layout.address, layout.config_db) {}

absl::Status SonicConfigBackend::Ready() {
  if (ready_) return absl::OkStatus();
  auto reply = config_.Command({"GET", "CONFIG_DB_INITIALIZED"});
  if (!reply.ok()) return reply.status();
  if (reply->str != "1")
    return absl::UnavailableError(StrCat("CONFIG_DB (", config_.Describe(),
                                         ") is not initialized yet: CONFIG_DB_INITIALIZED is not 1"));
  ready_ = true;
  return absl::OkStatus();
}

absl::StatusOr<const std::vector<std::string>*> SonicConfigBackend::Ports() {
  if (ports_) return &*ports_;
  auto keys = ScanKeys("PORT|*");
  if (!keys.ok()) return keys.status();
  std::set<std::string> ports;
  for (const auto& key : *keys) ports.insert(key.substr(5));
  if (ports.empty()) return absl::FailedPreconditionError("CONFIG_DB has no PORT table");
  ports_.emplace(ports.begin(), ports.end());  // sorted
  return &*ports_;
}

absl::Status SonicConfigBackend::CheckPort(const std::string& port) {
  auto ports = Ports();
  if (!ports.ok()) return ports.status();
  if (!std::binary_search((*ports)->begin(), (*ports)->end(), port))
    return absl::FailedPreconditionError(StrCat("no port ", port, " in CONFIG_DB PORT on ", switch_name_));
  return absl::OkStatus();
}

absl::Status SonicConfigBackend::CheckPgOverlap(const std::vector<ConfigDbEntry>& entries,
                                                const std::string& item_key) {
  std::map<std::string, std::set<uint32_t>> ours;  // port -> PGs this item binds
  std::set<std::string> our_keys;
  for (const auto& e : entries) {
    if (e.key.rfind("BUFFER_PG|", 0) != 0) continue;
    const std::vector<std::string> parts = absl::StrSplit(e.key, '|');
    if (parts.size() != 3) continue;
    const auto pgs = PgsOf(parts[2]);
    ours[parts[1]].insert(pgs.begin(), pgs.end());
    our_keys.insert(e.key);
  }
  if (ours.empty()) return absl::OkStatus();
  // The item's own earlier keys go, stale, in the same transaction.
  std::set<std::string> replaced;
  if (auto it = owned_.find(item_key); it != owned_.end())
    for (const auto& [key, _] : it->second) replaced.insert(key);
  auto keys = ScanKeys("BUFFER_PG|*");
  if (!keys.ok()) return keys.status();
  for (const auto& key : *keys) {
    if (our_keys.count(key) || replaced.count(key)) continue;
    const std::vector<std::string> parts = absl::StrSplit(key, '|');
    if (parts.size() != 3) continue;
    auto port = ours.find(parts[1]);
    if (port == ours.end()) continue;
    for (uint32_t pg : PgsOf(parts[2]))
      if (port->second.count(pg))
        return absl::FailedPreconditionError(
            StrCat(key, " already binds PG ", pg, ", which rocefab's lossless profile binds under another key; "
                   "make the policy's lossless_tcs the same PGs (", parts[2], "), or remove that entry"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> SonicConfigBackend::ScanKeys(const std::string& pattern) {
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    auto reply = config_.Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!reply.ok()) return reply.status();
    if (reply->type != RedisReply::Type::kArray || reply->elements.size() != 2)
      return absl::InternalError("CONFIG_DB: SCAN gave an unexpected reply");
    cursor = reply->elements[0].str;
    for (const auto& key : reply->elements[1].elements) keys.push_back(key.str);
  } while (cursor != "0");
  return keys;
}

absl::Status SonicConfigBackend::Verify(const std::vector<ConfigDbEntry>& entries) {
  std::vector<std::vector<std::string>> reads;
  for (const auto& e : entries) reads.push_back({"HGETALL", e.key});
  auto replies = config_.Pipeline(reads);
  if (!replies.ok()) return replies.status();
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto now = (*replies)[i].AsHash();
    for (const auto& [field, value] : entries[i].fields) {
      auto it = now.find(field);
      if (it == now.end() || it->second != value)
        return absl::InternalError(StrCat("CONFIG_DB read-back: ", entries[i].key, " ", field, " is '",
                                          it == now.end() ? "(absent)" : it->second, "', not '", value, "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status SonicConfigBackend::Write(const std::vector<ConfigDbEntry>& entries, const Owned& stale) {
  std::vector<std::vector<std::string>> commands;
  // One multi-field HSET per object, so that orchagent, which re-reads the
  // whole hash on each keyspace event, never sees it half written.
  for (const auto& e : entries) {
    if (e.fields.empty()) continue;
    std::vector<std::string> hset{"HSET", e.key};
    for (const auto& [field, value] : e.fields) {
      hset.push_back(field);
      hset.push_back(value);
    }
    commands.push_back(std::move(hset));
  }
  for (const auto& [key, field] : stale) commands.push_back({"HDEL", key, field});
  if (commands.empty()) return absl::OkStatus();
  if (auto done = config_.Transaction(commands); !done.ok()) return done.status();
  return Verify(entries);
}

absl::Status SonicConfigBackend::Install(const v1::ConfigItem& item) {
  if (auto status = Ready(); !status.ok()) return status;
  std::vector<std::string> ports;
  switch (item.item_case()) {
    case v1::ConfigItem::kAddress:
      if (auto status = CheckPort(item.address().port()); !status.ok()) return status;
      break;
    case v1::ConfigItem::kRoute:
      if (!item.route().port().empty())
        if (auto status = CheckPort(item.route().port()); !status.ok()) return status;
      break;
    case v1::ConfigItem::kNexthopGroup:
      for (const auto& hop : item.nexthop_group().nexthops())
        if (auto status = CheckPort(hop.port()); !status.ok()) return status;
      break;
    case v1::ConfigItem::kQos: {
      auto all = Ports();
      if (!all.ok()) return all.status();
      ports = **all;
      break;
    }
    default:
      break;
  }
  if (item.has_nexthop_group()) {
    // A changed group rewrites the routes that use it.
    auto entries = EntriesFor(item, ports, groups_);
    if (!entries.ok()) return entries.status();
    auto groups = groups_;
    groups[item.nexthop_group().id()] = item.nexthop_group();
    std::vector<ConfigDbEntry> rewrites;
    for (const auto& [key, route] : routes_) {
      if (route.route().nexthop_group() != item.nexthop_group().id()) continue;
      auto more = EntriesFor(route, ports, groups);
      if (!more.ok()) return more.status();
      rewrites.insert(rewrites.end(), more->begin(), more->end());
    }
    if (auto status = Write(rewrites, {}); !status.ok()) return status;
    groups_ = std::move(groups);
    return absl::OkStatus();
  }
  auto entries = EntriesFor(item, ports, groups_);
  if (!entries.ok()) return entries.status();
  if (auto status = CheckPgOverlap(*entries, item.key()); !status.ok()) return status;
  Owned now;
  for (const auto& e : *entries)
    for (const auto& [field, _] : e.fields) now.emplace(e.key, field);
  Owned stale;
  if (auto it = owned_.find(item.key()); it != owned_.end())
    for (const auto& kf : it->second)
      if (!now.count(kf)) stale.insert(kf);
  if (auto status = Write(*entries, stale); !status.ok()) return status;
  owned_[item.key()] = std::move(now);
  if (item.has_route() && item.route().nexthop_group() != 0) routes_[item.key()] = item;
  else routes_.erase(item.key());
  return absl::OkStatus();
}

absl::Status SonicConfigBackend::Remove(const v1::ConfigItem& item) {
  if (auto status = Ready(); !status.ok()) return status;
  if (item.has_nexthop_group()) {
    for (const auto& [key, route] : routes_)
      if (route.route().nexthop_group() == item.nexthop_group().id())
        return absl::FailedPreconditionError(StrCat("nexthop group ", item.nexthop_group().id(),
                                                    " is still used by ", key));
    groups_.erase(item.nexthop_group().id());
    return absl::OkStatus();
  }
  Owned owned;
  if (auto it = owned_.find(item.key()); it != owned_.end()) {
    owned = it->second;
  } else {
    // Not written by this process (a restart): remove what the item maps to.
    std::vector<std::string> ports;
    if (item.has_qos()) {
      auto all = Ports();
      if (!all.ok()) return all.status();
      ports = **all;
    }
    auto entries = EntriesFor(item, ports, groups_);
    if (absl::IsUnimplemented(entries.status())) return entries.status();
    if (entries.ok())
      for (const auto& e : *entries)
        for (const auto& [field, _] : e.fields) owned.emplace(e.key, field);
  }
  std::vector<std::vector<std::string>> commands;
  for (const auto& [key, field] : owned) commands.push_back({"HDEL", key, field});
  if (!commands.empty())
    if (auto done = config_.Transaction(commands); !done.ok()) return done.status();
  owned_.erase(item.key());
  routes_.erase(item.key());
  return absl::OkStatus();
}

absl::Status SonicConfigBackend::Commit(const v1::SwitchConfig& applied) {
  LOG_DEBUG(kSonicBackendLog, "generation ", applied.generation(), " in force on ", switch_name_);
  ports_.reset();  // the next apply reads the PORT table afresh
  return absl::OkStatus();
}

}  // namespace rocefab::switchd
