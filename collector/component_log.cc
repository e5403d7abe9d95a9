#include "collector/component_log.h"

namespace rocefab::collector {

size_t ComponentLog::Observe(const std::string& agent, const std::map<std::string, std::string>& components,
                             int64_t at_us) {
  std::lock_guard lock(mu_);
  // An older report (a batch replayed from the agent's spool) says nothing new.
  int64_t& last = last_us_[agent];
  if (at_us < last) return 0;
  last = at_us;
  auto [it, first] = current_.try_emplace(agent, components);
  if (first) return 0;
  std::map<std::string, std::string>& was = it->second;
  size_t made = 0;
  auto record = [&](const std::string& component, const std::string& from, const std::string& to) {
    v1::ComponentChange c;
    c.set_at_us(at_us);
    c.set_device(agent);
    c.set_component(component);
    c.set_from(from);
    c.set_to(to);
    changes_.push_back(std::move(c));
    if (changes_.size() > max_changes_) changes_.pop_front();
    ++made;
  };
  for (const auto& [component, version] : components) {
    const auto old = was.find(component);
    if (old == was.end()) record(component, "", version);
    else if (old->second != version) record(component, old->second, version);
  }
  for (const auto& [component, version] : was)
    if (!components.count(component)) record(component, version, "");
  was = components;
  return made;
}

std::vector<v1::ComponentChange> ComponentLog::Changes(int64_t from_us, int64_t to_us) const {
  std::lock_guard lock(mu_);
  std::vector<v1::ComponentChange> out;
  for (const auto& c : changes_)
    if (c.at_us() >= from_us && c.at_us() <= to_us) out.push_back(c);
  return out;
}

std::map<std::string, std::string> ComponentLog::Current(const std::string& agent) const {
  std::lock_guard lock(mu_);
  const auto it = current_.find(agent);
  return it == current_.end() ? std::map<std::string, std::string>() : it->second;
}

}  // namespace rocefab::collector
