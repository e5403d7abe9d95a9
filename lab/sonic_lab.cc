#include "lab/sonic_lab.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <cstdio>
#include <set>

#include "absl/strings/str_split.h"
#include "common/fs_root.h"
#include "common/strings.h"

namespace rocefab::lab {
namespace {

constexpr int kAppl = 0, kCounters = 1, kConfig = 2, kState = 3;
constexpr char kPoolOid[] = "oid:0x18000000000b66";

std::vector<std::string> Split(const std::string& text, char sep) { return absl::StrSplit(text, sep); }

// CONFIG_DB numbers; what is not one reads as 0.
uint64_t Num(const std::string& text) {
  uint64_t v = 0;
  return ParseDecimal(text, &v) ? v : 0;
}

const std::string* Field(const ConfigDb& db, const std::string& key, const std::string& field) {
  auto it = db.find(key);
  if (it == db.end()) return nullptr;
  auto f = it->second.find(field);
  return f == it->second.end() ? nullptr : &f->second;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The readings' oids, as syncd hands them out: stable per port.
std::string PortOid(size_t index) { return StrCat("oid:0x10000000", Hex(0x10000 + index)); }
std::string QueueOid(size_t index, uint32_t queue) { return StrCat("oid:0x15000000", Hex(0x100000 + index * 16 + queue)); }

uint64_t U(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return 0;
}
uint64_t Prio3(const nlohmann::json& port, const char* name) {
  auto it = port.find(name);
  if (it == port.end() || !it->is_object()) return 0;
  auto v = it->find("3");
  return v == it->end() ? 0 : U(*v);
}

}  // namespace

v1::SwitchConfig ConfigFromConfigDb(const std::string& switch_name, const ConfigDb& db) {
  v1::SwitchConfig config;
  config.set_switch_name(switch_name);
  config.set_scheme(v1::ROUTING_SCHEME_ECMP);
  std::map<std::vector<std::string>, uint32_t> groups;  // ifnames -> id
  std::vector<std::string> ports;
  for (const auto& [key, hash] : db) {
    if (key.rfind("PORT|", 0) == 0) ports.push_back(key.substr(5));
    if (key.rfind("INTERFACE|", 0) == 0) {
      auto parts = Split(key, '|');
      if (parts.size() != 3) continue;
      auto* item = config.add_items();
      item->set_key(StrCat("addr/", parts[1]));
      item->mutable_address()->set_port(parts[1]);
      item->mutable_address()->set_address(parts[2]);
    }
    if (key.rfind("STATIC_ROUTE|", 0) == 0) {
      auto parts = Split(key, '|');
      const std::string prefix = parts.back();
      auto ifname = hash.find("ifname");
      if (ifname == hash.end()) continue;
      std::vector<std::string> ifnames = Split(ifname->second, ',');
      auto* item = config.add_items();
      item->set_key(StrCat("route/", prefix));
      item->mutable_route()->set_prefix(prefix);
      if (ifnames.size() == 1) {
        item->mutable_route()->set_port(ifnames.front());
        continue;
      }
      auto [it, fresh] = groups.emplace(ifnames, static_cast<uint32_t>(groups.size() + 1));
      item->mutable_route()->set_nexthop_group(it->second);
    }
  }
  for (const auto& [ifnames, id] : groups) {
    auto* item = config.add_items();
    item->set_key(StrCat("nhg/", id));
    item->mutable_nexthop_group()->set_id(id);
    for (const auto& port : ifnames) item->mutable_nexthop_group()->add_nexthops()->set_port(port);
  }
  if (const std::string* hash = Field(db, "SWITCH_HASH|GLOBAL", "ecmp_hash@")) {
    auto* item = config.add_items();
    item->set_key("hash");
    static const std::map<std::string, std::string> kNames = {
        {"SRC_IP", "src_ip"},       {"DST_IP", "dst_ip"},     {"IP_PROTOCOL", "ip_proto"},
        {"L4_SRC_PORT", "src_port"}, {"L4_DST_PORT", "dst_port"}, {"RDMA_BTH_DEST_QP", "roce_dst_qp"}};
    for (const auto& field : Split(*hash, ',')) {
      auto name = kNames.find(field);
      if (name == kNames.end()) continue;
      item->mutable_hash()->add_fields(name->second);
      if (name->second == "roce_dst_qp") config.set_scheme(v1::ROUTING_SCHEME_EECMP);
    }
  }
  // QoS as the first port with a PORT_QOS_MAP has it.
  std::string port;
  for (const auto& p : ports)
    if (db.count(StrCat("PORT_QOS_MAP|", p))) {
      port = p;
      break;
    }
  if (port.empty()) return config;
  v1::QosPolicy qos;
  const std::string qos_key = StrCat("PORT_QOS_MAP|", port);
  if (const std::string* map = Field(db, qos_key, "dscp_to_tc_map"))
    if (auto it = db.find(StrCat("DSCP_TO_TC_MAP|", *map)); it != db.end())
      for (const auto& [dscp, tc] : it->second) {
        auto* m = qos.add_dscp_to_tc();
        m->set_dscp(static_cast<uint32_t>(Num(dscp)));
        m->set_tc(static_cast<uint32_t>(Num(tc)));
      }
  if (const std::string* pfc = Field(db, qos_key, "pfc_enable"))
    for (const auto& prio : Split(*pfc, ','))
      if (!prio.empty()) {
        qos.add_pfc_priorities(static_cast<uint32_t>(Num(prio)));
        qos.add_lossless_tcs(static_cast<uint32_t>(Num(prio)));
      }
  for (uint32_t tc = 0; tc < 8; ++tc) {
    const std::string queue_key = StrCat("QUEUE|", port, "|", tc);
    if (const std::string* profile = Field(db, queue_key, "wred_profile")) {
      const std::string wred = StrCat("WRED_PROFILE|", *profile);
      const std::string* ecn = Field(db, wred, "ecn");
      if (ecn == nullptr || *ecn == "ecn_none") continue;
      auto* e = qos.add_ecn();
      e->set_tc(tc);
      if (const std::string* v = Field(db, wred, "green_min_threshold")) e->set_min_bytes(Num(*v));
      if (const std::string* v = Field(db, wred, "green_max_threshold")) e->set_max_bytes(Num(*v));
      if (const std::string* v = Field(db, wred, "green_drop_probability")) e->set_probability(Num(*v) / 100.0);
    }
    if (const std::string* scheduler = Field(db, queue_key, "scheduler"))
      if (const std::string* type = Field(db, StrCat("SCHEDULER|", *scheduler), "type"); type && *type == "STRICT")
        qos.set_strict_priority_tc(tc);
  }
  const std::string wd = StrCat("PFC_WD|", port);
  if (const std::string* detect = Field(db, wd, "detection_time")) {
    qos.mutable_pfc_watchdog()->set_detect_ms(static_cast<uint32_t>(Num(*detect)));
    if (const std::string* v = Field(db, wd, "restoration_time"))
      qos.mutable_pfc_watchdog()->set_restore_ms(static_cast<uint32_t>(Num(*v)));
    if (const std::string* v = Field(db, wd, "action")) qos.mutable_pfc_watchdog()->set_action(*v);
  }
  auto* item = config.add_items();
  item->set_key("qos");
  *item->mutable_qos()->mutable_qos() = qos;
  return config;
}

absl::StatusOr<std::unique_ptr<SonicLab>> SonicLab::Start(const std::string& dir, const v1::Topology& topology,
                                                         uint64_t buffer_bytes) {
  auto lab = std::unique_ptr<SonicLab>(new SonicLab());
  lab->dir_ = dir;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::UnavailableError(StrCat("cannot create ", dir, ": ", error.message()));
  lab->address_.unix_path = dir + "/redis.sock";
  if (lab->address_.unix_path.size() >= 100)
    return absl::InvalidArgumentError(
        StrCat("the run directory's path is too long for a unix socket: ", lab->address_.unix_path));
  const char* server = access("/usr/bin/redis-server", X_OK) == 0 ? "/usr/bin/redis-server" : nullptr;
  if (server == nullptr)
    return absl::FailedPreconditionError("switch_backend: sonic needs redis-server (Debian package redis-server)");
  int next = 0;
  for (const auto& sw : topology.switches()) {
    lab->first_db_[sw.name()] = next;
    next += 4;
  }
  NotifySocket ready(dir + "/redis-notify.sock");
  auto process = Subprocess::Spawn({{server, "--port", "0", "--unixsocket", lab->address_.unix_path, "--save", "",
                                     "--appendonly", "no", "--supervised", "systemd", "--databases",
                                     std::to_string(std::max(next, 16)), "--dir", dir, "--logfile", dir + "/redis.log"},
                                    {{"NOTIFY_SOCKET", ready.path()}},
                                    dir + "/redis.out",
                                    dir + "/redis.out"});
  if (!process.ok()) return process.status();
  lab->redis_ = std::move(*process);
  if (!ready.WaitReady(std::chrono::seconds(20)))
    return absl::UnavailableError(StrCat("redis-server did not become ready (", dir, "/redis.log)"));

  // Each switch's database_config.json, and its CONFIG_DB as SONiC boots it.
  std::map<std::string, std::map<std::string, double>> ports;  // switch -> port -> Gb/s
  for (const auto& link : topology.links())
    for (const auto& end : {link.a(), link.b()}) {
      const size_t slash = end.find('/');
      if (slash != std::string::npos && lab->first_db_.count(end.substr(0, slash)))
        ports[end.substr(0, slash)][end.substr(slash + 1)] = link.speed_gbps();
    }
  for (const auto& [name, first] : lab->first_db_) {
    nlohmann::json config = {
        {"INSTANCES", {{"redis", {{"hostname", "127.0.0.1"}, {"port", 0}, {"unix_socket_path", lab->address_.unix_path}}}}},
        {"DATABASES",
         {{"APPL_DB", {{"id", first + kAppl}, {"separator", ":"}, {"instance", "redis"}}},
          {"COUNTERS_DB", {{"id", first + kCounters}, {"separator", ":"}, {"instance", "redis"}}},
          {"CONFIG_DB", {{"id", first + kConfig}, {"separator", "|"}, {"instance", "redis"}}},
          {"STATE_DB", {{"id", first + kState}, {"separator", "|"}, {"instance", "redis"}}}}},
        {"VERSION", "1.0"}};
    std::filesystem::create_directories(StrCat(dir, "/", name), error);
    if (error) return absl::UnavailableError(StrCat("cannot create ", dir, "/", name, ": ", error.message()));
    if (auto s = WriteFileAtomic(lab->DbConfigPath(name), config.dump(2)); !s.ok()) return s;
    std::vector<std::vector<std::string>> commands;
    for (const auto& [port, gbps] : ports[name])
      commands.push_back({"HSET", StrCat("PORT|", port), "admin_status", "up", "speed",
                          std::to_string(static_cast<uint64_t>(gbps * 1000)), "mtu", "9100"});
    commands.push_back({"HSET", "BUFFER_POOL|ingress_lossless_pool", "type", "ingress", "mode", "dynamic", "size",
                        std::to_string(buffer_bytes)});
    commands.push_back({"SET", "CONFIG_DB_INITIALIZED", "1"});
    auto done = lab->Db(name, kConfig).Pipeline(commands);
    if (!done.ok()) return done.status();
  }
  return lab;
}

SonicLab::~SonicLab() {
  if (redis_) {
    redis_->Signal(SIGTERM);
    redis_->Wait();
  }
}

std::string SonicLab::DbConfigPath(const std::string& switch_name) const {
  return StrCat(dir_, "/", switch_name, "/database_config.json");
}

RedisClient& SonicLab::Db(const std::string& switch_name, int offset) {
  auto& client = clients_[{switch_name, offset}];
  if (!client) client = std::make_unique<RedisClient>(address_, first_db_.at(switch_name) + offset);
  return *client;
}

absl::Status SonicLab::WriteSwitch(const std::string& switch_name, const nlohmann::json& reading) {
  if (!first_db_.count(switch_name)) return absl::NotFoundError(StrCat("no SONiC switch ", switch_name));
  std::vector<std::vector<std::string>> counters, appl, state;
  const nlohmann::json& ports = reading.at("ports");
  std::vector<std::string> port_map{"HSET", "COUNTERS_PORT_NAME_MAP"}, queue_map{"HSET", "COUNTERS_QUEUE_NAME_MAP"},
      type_map{"HSET", "COUNTERS_QUEUE_TYPE_MAP"}, index_map{"HSET", "COUNTERS_QUEUE_INDEX_MAP"};
  size_t index = 0;
  for (auto it = ports.begin(); it != ports.end(); ++it, ++index) {
    const std::string& port = it.key();
    const nlohmann::json& p = it.value();
    const std::string oid = PortOid(index), queue = QueueOid(index, 3);
    port_map.insert(port_map.end(), {port, oid});
    queue_map.insert(queue_map.end(), {StrCat(port, ":3"), queue});
    type_map.insert(type_map.end(), {queue, "SAI_QUEUE_TYPE_UNICAST"});
    index_map.insert(index_map.end(), {queue, "3"});
    auto v = [&](const char* name) { return std::to_string(p.contains(name) ? U(p.at(name)) : 0); };
    counters.push_back({"HSET", StrCat("COUNTERS:", oid), "SAI_PORT_STAT_IF_IN_OCTETS", v("rx_bytes"),
                        "SAI_PORT_STAT_IF_OUT_OCTETS", v("tx_bytes"), "SAI_PORT_STAT_IF_IN_UCAST_PKTS",
                        v("rx_packets"), "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS", "0", "SAI_PORT_STAT_IF_OUT_UCAST_PKTS",
                        v("tx_packets"), "SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS", "0",
                        "SAI_PORT_STAT_DOT3_STATS_FCS_ERRORS", v("rx_fcs_errors"),
                        "SAI_PORT_STAT_DOT3_STATS_SYMBOL_ERRORS", v("rx_symbol_errors"),
                        "SAI_PORT_STAT_PFC_3_RX_PKTS", std::to_string(Prio3(p, "pfc_rx_pause_frames")),
                        "SAI_PORT_STAT_PFC_3_TX_PKTS", std::to_string(Prio3(p, "pfc_tx_pause_frames")),
                        "SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION_US", std::to_string(Prio3(p, "pfc_rx_pause_us")),
                        "SAI_PORT_STAT_PFC_3_TX_PAUSE_DURATION_US", std::to_string(Prio3(p, "pfc_tx_pause_us"))});
    const nlohmann::json q = p.contains("queues") && p.at("queues").contains("3") ? p.at("queues").at("3")
                                                                               : nlohmann::json::object();
    auto qv = [&](const char* name) { return std::to_string(q.contains(name) ? U(q.at(name)) : 0); };
    const uint64_t storms = Prio3(p, "pfcwd_storms_detected"), restored = Prio3(p, "pfcwd_storms_restored");
    counters.push_back({"HSET", StrCat("COUNTERS:", queue), "SAI_QUEUE_STAT_BYTES", qv("queue_tx_bytes"),
                        "SAI_QUEUE_STAT_PACKETS", qv("queue_tx_packets"), "SAI_QUEUE_STAT_DROPPED_PACKETS",
                        qv("queue_drops"), "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS", qv("queue_ecn_marked_packets"),
                        "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES", qv("queue_depth_bytes"),
                        "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES", qv("queue_watermark_bytes"),
                        "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED", std::to_string(storms),
                        "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED", std::to_string(restored), "PFC_WD_STATUS",
                        storms > restored ? "stormed" : "operational"});
    const bool up = p.contains("link_up") && U(p.at("link_up")) == 1;
    const uint64_t flaps = p.contains("link_flaps") ? U(p.at("link_flaps")) : 0;
    // SONiC's flap_count counts both edges of every flap.
    const uint64_t changes = up ? 2 * flaps : (flaps > 0 ? 2 * flaps - 1 : 0);
    const std::string mbps = std::to_string((p.contains("rate_bytes_per_second") ? U(p.at("rate_bytes_per_second")) : 0) / 125'000);
    appl.push_back({"HSET", StrCat("PORT_TABLE:", port), "admin_status", "up", "oper_status", up ? "up" : "down",
                    "speed", mbps, "flap_count", std::to_string(changes)});
    state.push_back({"HSET", StrCat("PORT_TABLE|", port), "state", "ok", "speed", up ? mbps : "N/A"});
  }
  if (!maps_written_[switch_name]) {
    for (auto* map : {&port_map, &queue_map, &type_map, &index_map})
      if (map->size() > 2) counters.push_back(*map);
    counters.push_back({"HSET", "COUNTERS_BUFFER_POOL_NAME_MAP", "ingress_lossless_pool", kPoolOid});
  }
  if (auto pools = reading.find("buffer_pools"); pools != reading.end() && pools->contains("ingress_lossless_pool")) {
    const auto& pool = pools->at("ingress_lossless_pool");
    counters.push_back({"HSET", StrCat("COUNTERS:", kPoolOid), "SAI_BUFFER_POOL_STAT_WATERMARK_BYTES",
                        std::to_string(pool.contains("buffer_watermark_bytes") ? U(pool.at("buffer_watermark_bytes")) : 0),
                        "SAI_BUFFER_POOL_STAT_CURR_OCCUPANCY_BYTES",
                        std::to_string(pool.contains("buffer_used_bytes") ? U(pool.at("buffer_used_bytes")) : 0)});
  }
  // APPL_DB and STATE_DB first, so that a port's state is there when its
  // counters are.
  for (auto& [offset, commands] : {std::pair{kAppl, &appl}, std::pair{kState, &state}, std::pair{kCounters, &counters}}) {
    if (commands->empty()) continue;
    auto done = Db(switch_name, offset).Pipeline(*commands);
    if (!done.ok()) return done.status();
    for (const auto& reply : *done)
      if (reply.is_error()) return absl::InternalError(StrCat("redis: ", reply.str));
  }
  maps_written_[switch_name] = true;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<v1::SwitchConfig>> SonicLab::ReadConfigIfChanged(const std::string& switch_name) {
  if (!first_db_.count(switch_name)) return absl::NotFoundError(StrCat("no SONiC switch ", switch_name));
  RedisClient& db = Db(switch_name, kConfig);
  auto keys = db.Command({"KEYS", "*"});
  if (!keys.ok()) return keys.status();
  std::vector<std::string> names;
  for (const auto& key : keys->elements)
    if (key.str != "CONFIG_DB_INITIALIZED") names.push_back(key.str);
  std::sort(names.begin(), names.end());
  std::vector<std::vector<std::string>> reads;
  for (const auto& name : names) reads.push_back({"HGETALL", name});
  auto hashes = db.Pipeline(reads);
  if (!hashes.ok()) return hashes.status();
  ConfigDb contents;
  std::string digest;
  bool written = false;  // anything beyond what SONiC booted with
  for (const auto& name : names)
    if (name.rfind("PORT|", 0) != 0 && name.rfind("BUFFER_POOL|", 0) != 0) written = true;
  if (!written) return std::nullopt;
  for (size_t i = 0; i < names.size(); ++i) {
    contents[names[i]] = (*hashes)[i].AsHash();
    StrAppend(&digest, names[i], "\n");
    for (const auto& [field, value] : contents[names[i]]) StrAppend(&digest, " ", field, "=", value, "\n");
  }
  if (config_seen_[switch_name] == digest) return std::nullopt;
  config_seen_[switch_name] = digest;
  return ConfigFromConfigDb(switch_name, contents);
}

}  // namespace rocefab::lab
