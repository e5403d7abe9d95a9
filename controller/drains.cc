// Drains and undrains (controller.h): recorded at once, pushed at once to
// the switches whose config they change, whether or not a rollout runs.
#include "common/strings.h"
#include "controller/compiler.h"
#include "controller/controller.h"

namespace rocefab::controller {

absl::StatusOr<v1::DrainResponse> Controller::Drain(const v1::DrainRequest& request, const std::string& who) {
  v1::DrainResponse response;
  if (request.reason().empty() && !request.undrain()) {
    response.set_error("a drain needs --reason");
    return response;
  }
  // The ports to (un)drain: one link's port, or every fabric port of a switch.
  std::vector<std::string> ports;
  if (request.kind() == "link") {
    if (topology_->LinkOfPort(request.name()) < 0) {
      response.set_error(StrCat("no cabled port ", request.name(), " (give device/port)"));
      return response;
    }
    ports.push_back(request.name());
  } else if (request.kind() == "switch") {
    if (topology_->FindSwitch(request.name()) == nullptr) {
      response.set_error(StrCat("no switch ", request.name()));
      return response;
    }
    // Its fabric ports only: hosts keep their single link.
    for (const auto& port : topology_->PortsOf(request.name())) {
      const std::string full = StrCat(request.name(), "/", port);
      const std::string& peer = topology_->PeerOf(topology_->LinkOfPort(full), full);
      if (topology_->FindHost(peer.substr(0, peer.find('/'))) == nullptr) ports.push_back(full);
    }
  } else {
    response.set_error("kind must be link or switch");
    return response;
  }
  std::vector<std::string> changed;
  uint64_t generation = 0;
  {
    std::lock_guard lock(mu_);
    if (frozen_) {
      response.set_error(
          "refused: the last rollout was rolled back and no earlier policy ever completed, so there is no "
          "policy to compute the drain from; fix the policy, restart rocefab-controllerd with it and apply");
      return response;
    }
    auto drained = store_.Drained();
    if (!drained.ok()) return drained.status();
    std::set<std::string> next = *drained;
    for (const auto& port : ports) {
      if (request.undrain()) next.erase(port);
      else next.insert(port);
    }
    if (!request.undrain()) {
      // Capacity safety: no rack below the policy's share of its uplinks.
      for (const auto& [rtsw, share] : RemainingUplinkShare(*topology_, next)) {
        if (share + 1e-9 < target_.min_uplink_capacity() && !request.force()) {
          response.set_error(StrCat("refused: ", rtsw, " would keep ", static_cast<int>(share * 100),
                                    "% of its uplink capacity, below the policy's ",
                                    static_cast<int>(target_.min_uplink_capacity() * 100),
                                    "% (use --force to drain anyway)"));
          return response;
        }
      }
    }
    std::map<std::string, std::string> before;
    for (const auto& [name, config] : desired_) before[name] = ConfigForLocked(name).content_hash();
    if (request.dry_run()) {
      // What the drain would push: the same comparison on a compile that is
      // not kept.
      const v1::Policy& base = fallback_.empty() ? target_ : *running_;
      auto compiled = Compile(*topology_, base, next, generation_ + 1);
      if (!compiled.ok()) return compiled.status();
      for (const auto& [name, config] : *compiled)
        if (before[name] != config.content_hash()) response.add_pushed(name);
      for (const auto& port : next) response.add_drained(port);
      response.set_ok(true);
      response.set_generation(generation_);
      return response;
    }
    for (const auto& port : ports)
      if (auto s = store_.SetDrained(port, !request.undrain(), request.reason(), who, clock_.NowUs()); !s.ok())
        return s;
    auto recompiled = RecompileLocked(who, StrCat(request.undrain() ? "undrain " : "drain ", request.name(), ": ",
                                                  request.reason()));
    if (!recompiled.ok()) return recompiled.status();
    generation = *recompiled;
    for (const auto& [name, config] : desired_)
      if (before[name] != ConfigForLocked(name).content_hash()) changed.push_back(name);
    for (const auto& port : next) response.add_drained(port);
  }
  Audit(who, request.undrain() ? "undrain" : (request.force() ? "drain-forced" : "drain"), request.name(),
        request.reason(), StrCat(ports.size(), " port(s), ", changed.size(), " switch(es) pushed"), generation);
  // A drain takes effect at once on every switch whose config it changes:
  // the link's two ends, and the rack switches that must stop sending a
  // rack's traffic through a spine that lost its links to that rack.
  const auto failures = PushNewest(changed);
  for (const auto& name : changed) response.add_pushed(name);
  for (const auto& [name, why] : failures) {
    response.set_error(StrCat("drain recorded, but ", name, " did not apply it: ", why));
    break;
  }
  response.set_ok(response.error().empty());
  response.set_generation(generation);
  return response;
}

}  // namespace rocefab::controller
