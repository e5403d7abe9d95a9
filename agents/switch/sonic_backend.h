#pragma once
// The `sonic` backend: a switch running SONiC, through its Redis databases
// (layout and sources: docs/sonic-redis.md).
//
// Counters come from COUNTERS_DB (the name maps, then COUNTERS:<oid> of each
// port, unicast queue and buffer pool, in one pipelined round trip), link
// state and speed from APPL_DB and STATE_DB PORT_TABLE, pool sizes from
// CONFIG_DB BUFFER_POOL. Config goes to CONFIG_DB only, one MULTI/EXEC per
// item, read back and compared before the item counts as applied.
//
// The counters half and the config half are separate objects with their own
// connections: the poll thread reads, gRPC threads apply.

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agents/switch/config_backend.h"
#include "agents/switch/switch_backend.h"
#include "common/redis.h"

namespace rocefab::switchd {

// Where SONiC's databases are: the Redis address and the ids of the four
// databases rocefab uses. The defaults are SONiC's (APPL_DB 0, COUNTERS_DB 2,
// CONFIG_DB 4, STATE_DB 6 on the `redis` instance).
struct SonicDbLayout {
  RedisAddress address;
  int appl_db = 0;
  int counters_db = 2;
  int config_db = 4;
  int state_db = 6;
};

// SONiC's own database_config.json (INSTANCES, DATABASES): the ids, and the
// instance's unix socket (or host and port) when `address` is empty.
absl::StatusOr<SonicDbLayout> ParseSonicDbConfig(std::string_view json_text);
// The layout from `db_config_path` if that file exists (else SONiC's default
// ids and socket), with `redis_address` in place of its address if given.
absl::StatusOr<SonicDbLayout> ResolveSonicDbLayout(const std::string& db_config_path,
                                                   const std::string& redis_address);

// The image's build_version from SONiC's /etc/sonic/sonic_version.yml
// (SONiC keeps no image version in Redis); "" when unreadable.
std::string SonicImageVersion(const std::string& path);

// What one poll read, before mapping: the hashes by name.
struct SonicTables {
  using Hash = std::map<std::string, std::string>;
  Hash port_name_map;   // COUNTERS_PORT_NAME_MAP
  Hash queue_name_map;  // COUNTERS_QUEUE_NAME_MAP
  Hash queue_type_map;  // COUNTERS_QUEUE_TYPE_MAP
  Hash queue_index_map; // COUNTERS_QUEUE_INDEX_MAP
  Hash pool_name_map;   // COUNTERS_BUFFER_POOL_NAME_MAP
  std::map<std::string, Hash> counters;     // oid -> COUNTERS:<oid>
  std::map<std::string, Hash> appl_ports;   // port -> APPL_DB PORT_TABLE:<port>
  std::map<std::string, Hash> state_ports;  // port -> STATE_DB PORT_TABLE|<port>
  std::map<std::string, Hash> pool_config;  // pool -> CONFIG_DB BUFFER_POOL|<pool>
  std::map<std::string, Hash> port_qos;     // port -> CONFIG_DB PORT_QOS_MAP|<port>
};

// Maps the tables to the vocabulary (docs/counters.md, "SONiC"). Fields
// SONiC defines but rocefab does not use are ignored; any other field is
// counted in unknown_keys, a value that is not a decimal uint64 in
// bad_values, and a missing map or hash is named in `degraded`.
SwitchReading MapSonicTables(const std::string& switch_name, const SonicTables& tables);

class SonicBackend final : public SwitchBackend {
 public:
  SonicBackend(SonicDbLayout layout, std::string switch_name);
  absl::StatusOr<SwitchReading> ReadCounters() override;
  // The fast path: only the ports' COUNTERS:<oid> hashes, in one round
  // trip, with the port map and speeds of the last full read (no queue,
  // pool, APPL_DB or STATE_DB reads). Before any full read, a full read.
  absl::StatusOr<SwitchReading> ReadPfcCounters() override;

 private:
  absl::StatusOr<SonicTables> Fetch();
  std::string switch_name_;
  RedisClient counters_, appl_, state_, config_;
  SonicTables ports_;  // the last full read's port map and PORT_TABLEs; the fast path adds port hashes
};

// One CONFIG_DB hash's fields that an item sets.
struct ConfigDbEntry {
  std::string key;  // "PORT_QOS_MAP|Ethernet0"
  std::map<std::string, std::string> fields;
};

class SonicConfigBackend final : public ConfigBackend {
 public:
  SonicConfigBackend(SonicDbLayout layout, std::string switch_name);
  std::string name() const override { return "sonic"; }
  absl::Status Install(const v1::ConfigItem& item) override;
  absl::Status Remove(const v1::ConfigItem& item) override;
  absl::Status Commit(const v1::SwitchConfig& applied) override;

  // The CONFIG_DB entries `item` maps to, given the switch's ports (for
  // QoS, which SONiC binds per port) and the nexthop groups installed so far
  // (a route names a group; STATIC_ROUTE holds the nexthops themselves).
  static absl::StatusOr<std::vector<ConfigDbEntry>> EntriesFor(
      const v1::ConfigItem& item, const std::vector<std::string>& ports,
      const std::map<uint32_t, v1::NexthopGroupItem>& groups);

 private:
  using Owned = std::set<std::pair<std::string, std::string>>;  // (key, field)
  absl::Status Ready();
  // The CONFIG_DB PORT table's names, sorted: read once per apply (Commit
  // ends one), for the QoS fan-out and every port check.
  absl::StatusOr<const std::vector<std::string>*> Ports();
  absl::Status CheckPort(const std::string& port);
  // A BUFFER_PG key of another range that binds one of the PGs `entries`
  // bind on the same port would give a PG two profiles: refused. The keys
  // item `item_key` wrote before (deleted as it is rewritten) do not count.
  absl::Status CheckPgOverlap(const std::vector<ConfigDbEntry>& entries, const std::string& item_key);
  // Every CONFIG_DB key matching `pattern`, by SCAN (never KEYS, which
  // would block SONiC's other clients on a large database).
  absl::StatusOr<std::vector<std::string>> ScanKeys(const std::string& pattern);
  // Writes `entries` (and deletes the fields of `stale`) in one transaction,
  // then reads them back.
  absl::Status Write(const std::vector<ConfigDbEntry>& entries, const Owned& stale);
  absl::Status Verify(const std::vector<ConfigDbEntry>& entries);

  std::string switch_name_;
  RedisClient config_;
  bool ready_ = false;
  std::optional<std::vector<std::string>> ports_;
  std::map<std::string, Owned> owned_;                // item key -> what it wrote
  std::map<uint32_t, v1::NexthopGroupItem> groups_;   // installed groups
  std::map<std::string, v1::ConfigItem> routes_;      // installed routes via groups, by item key
};

}  // namespace rocefab::switchd
