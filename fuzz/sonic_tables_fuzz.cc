// The sonic backend's readers of outside input: SONiC's database_config.json
// (an input starting with '{') and the hashes of COUNTERS_DB, APPL_DB,
// STATE_DB and CONFIG_DB, given as lines "<db>\t<key>\t<field>\t<value>"
// (db: C counters, A appl, S state, G config: a BUFFER_POOL's or a
// PORT_QOS_MAP|<port>'s fields), mapped to the vocabulary.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agents/switch/sonic_backend.h"

using rocefab::switchd::SonicTables;

namespace {

void Put(SonicTables* t, char db, const std::string& key, const std::string& field, const std::string& value) {
  if (db == 'C') {
    if (key == "COUNTERS_PORT_NAME_MAP") t->port_name_map[field] = value;
    else if (key == "COUNTERS_QUEUE_NAME_MAP") t->queue_name_map[field] = value;
    else if (key == "COUNTERS_QUEUE_TYPE_MAP") t->queue_type_map[field] = value;
    else if (key == "COUNTERS_QUEUE_INDEX_MAP") t->queue_index_map[field] = value;
    else if (key == "COUNTERS_BUFFER_POOL_NAME_MAP") t->pool_name_map[field] = value;
    else t->counters[key][field] = value;
  } else if (db == 'A') {
    t->appl_ports[key][field] = value;
  } else if (db == 'S') {
    t->state_ports[key][field] = value;
  } else if (db == 'G') {
    // CONFIG_DB: "PORT_QOS_MAP|<port>" is a port's QoS map, anything else a pool.
    if (key.rfind("PORT_QOS_MAP|", 0) == 0) t->port_qos[key.substr(13)][field] = value;
    else t->pool_config[key][field] = value;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 18)) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (!text.empty() && text.front() == '{') {
    auto layout = rocefab::switchd::ParseSonicDbConfig(text);
    if (layout.ok() && layout->address.unix_path.empty() && layout->address.host.empty()) __builtin_trap();
    return 0;
  }
  SonicTables tables;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    std::string_view parts[4];
    size_t from = 0;
    int n = 0;
    for (; n < 4; ++n) {
      const size_t tab = n < 3 ? line.find('\t', from) : std::string_view::npos;
      parts[n] = line.substr(from, tab == std::string_view::npos ? std::string_view::npos : tab - from);
      if (tab == std::string_view::npos) break;
      from = tab + 1;
    }
    if (n < 3 || parts[0].size() != 1) continue;
    Put(&tables, parts[0][0], std::string(parts[1]), std::string(parts[2]), std::string(parts[3]));
  }
  const auto reading = rocefab::switchd::MapSonicTables("fuzz-sw", tables);
  for (const auto& [name, port] : reading.ports) {
    if (name.empty() || name.size() > 64) __builtin_trap();
    for (const auto& [counter, by_prio] : port.per_prio)
      for (const auto& [prio, value] : by_prio)
        if (prio >= 8) __builtin_trap();
    for (const auto& [queue, _] : port.queues)
      if (queue >= 64) __builtin_trap();
  }
  return 0;
}
