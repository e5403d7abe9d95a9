#pragma once
// The lab's SONiC switches (scenario `switch_backend: sonic`): one real
// redis-server holds every switch's databases, four per switch, and each
// switch gets its own database_config.json naming its four, which its
// rocefab-switchd reads with --sonic-db-config as on a real switch. Each
// tick the model's readings go into COUNTERS_DB, APPL_DB and STATE_DB in
// SONiC's layout; what rocefab-switchd writes to CONFIG_DB is read back and
// turned into the config the model routes and queues by, as orchagent and
// bgpcfgd would apply it.

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/process.h"
#include "common/redis.h"
#include "rocefab/v1/control.pb.h"
#include "rocefab/v1/topology.pb.h"

namespace rocefab::lab {

using ConfigDb = std::map<std::string, std::map<std::string, std::string>>;  // key -> hash

// The config a switch whose CONFIG_DB holds `db` runs, in rocefab's terms:
// routes from STATIC_ROUTE (nexthop groups made from their ifname lists),
// addresses from INTERFACE, the hash from SWITCH_HASH (E-ECMP when it hashes
// RDMA_BTH_DEST_QP), and QoS from the first port's PORT_QOS_MAP and the maps,
// WRED profiles, schedulers and watchdog it names. The model runs one QoS
// per switch.
v1::SwitchConfig ConfigFromConfigDb(const std::string& switch_name, const ConfigDb& db);

class SonicLab final {
 public:
  // Starts redis-server on a unix socket in `dir` for the topology's switches.
  static absl::StatusOr<std::unique_ptr<SonicLab>> Start(const std::string& dir, const v1::Topology& topology,
                                                         uint64_t buffer_bytes);
  ~SonicLab();

  std::string DbConfigPath(const std::string& switch_name) const;
  // One switch's reading, in counters.json's shape (lab/outputs.cc), into its
  // databases.
  absl::Status WriteSwitch(const std::string& switch_name, const nlohmann::json& reading);
  // The switch's config from its CONFIG_DB; nullopt when CONFIG_DB has not
  // changed since the last call.
  absl::StatusOr<std::optional<v1::SwitchConfig>> ReadConfigIfChanged(const std::string& switch_name);

 private:
  SonicLab() = default;
  RedisClient& Db(const std::string& switch_name, int offset);

  std::string dir_;
  RedisAddress address_;
  std::unique_ptr<Subprocess> redis_;
  std::map<std::string, int> first_db_;  // switch -> its APPL_DB id; COUNTERS +1, CONFIG +2, STATE +3
  std::map<std::pair<std::string, int>, std::unique_ptr<RedisClient>> clients_;
  std::map<std::string, bool> maps_written_;
  std::map<std::string, std::string> config_seen_;
};

}  // namespace rocefab::lab
