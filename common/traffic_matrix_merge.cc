#include "common/traffic_matrix_merge.h"

#include <algorithm>
#include <map>
#include <set>

namespace rocefab {

v1::TrafficMatrixResponse MergeTrafficMatrices(const std::vector<v1::TrafficMatrixResponse>& parts) {
  v1::TrafficMatrixResponse merged;
  std::map<std::pair<std::string, std::string>, std::pair<std::string, double>> demands;
  std::map<std::pair<std::string, std::string>, double> racks;
  std::set<std::string> down;
  for (const v1::TrafficMatrixResponse& part : parts) {
    merged.set_now_us(std::max(merged.now_us(), part.now_us()));
    merged.set_window_seconds(part.window_seconds());
    for (const auto& d : part.demands()) {
      auto& m = demands[{d.ingress(), d.dst_prefix()}];
      m.first = d.src_prefix();
      m.second += d.bytes_per_s();
    }
    for (const auto& r : part.racks()) racks[{r.src_prefix(), r.dst_prefix()}] += r.bytes_per_s();
    merged.set_nics_from_nic_counters(merged.nics_from_nic_counters() + part.nics_from_nic_counters());
    merged.set_nics_from_port_counters(merged.nics_from_port_counters() + part.nics_from_port_counters());
    merged.set_nics_unattributed(merged.nics_unattributed() + part.nics_unattributed());
    merged.set_unattributed_bytes_per_s(merged.unattributed_bytes_per_s() + part.unattributed_bytes_per_s());
    down.insert(part.down_ports().begin(), part.down_ports().end());
    for (const auto& note : part.notes()) merged.add_notes(note);
    for (const auto& [job, pattern] : part.job_patterns()) (*merged.mutable_job_patterns())[job] = pattern;
  }
  for (const auto& [key, value] : demands) {
    auto* d = merged.add_demands();
    d->set_ingress(key.first);
    d->set_dst_prefix(key.second);
    d->set_src_prefix(value.first);
    d->set_bytes_per_s(value.second);
  }
  for (const auto& [key, bytes] : racks) {
    auto* r = merged.add_racks();
    r->set_src_prefix(key.first);
    r->set_dst_prefix(key.second);
    r->set_bytes_per_s(bytes);
  }
  for (const auto& port : down) merged.add_down_ports(port);
  return merged;
}

}  // namespace rocefab
