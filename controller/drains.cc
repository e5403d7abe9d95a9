// Drains and undrains (controller.h): recorded at once, pushed at once to
// the switches whose config they change, whether or not a rollout runs.
#include <set>

#include "common/nearest.h"
#include "common/strings.h"
#include "common/topology.h"
#include "controller/compiler.h"
#include "controller/controller.h"

namespace rocefab::controller {
namespace {

// The jobs whose traffic can cross `ports`: a host port carries its NIC's
// ranks; a rack switch's uplink, the rack's jobs that leave the rack; a
// spine's link to the aggregation tier, the jobs that span AI Zones.
std::vector<std::string> JobsCrossing(const Topology& topology, const std::vector<v1::Job>& jobs,
                                      const std::vector<std::string>& ports) {
  std::vector<std::string> out;
  for (const v1::Job& job : jobs) {
    std::set<std::string> nics, rtsws, zones;
    for (const auto& r : job.ranks()) {
      const std::string nic = StrCat(r.host(), "/", r.nic());
      nics.insert(nic);
      const int link = topology.LinkOfPort(nic);
      if (link >= 0) rtsws.insert(EntityDevice(topology.PeerOf(link, nic)));
      if (const v1::TopoHost* host = topology.FindHost(r.host())) zones.insert(host->zone());
    }
    bool crosses = false;
    for (const std::string& port : ports) {
      const int link = topology.LinkOfPort(port);
      if (link < 0) continue;
      const std::string& peer = topology.PeerOf(link, port);
      const std::string a = EntityDevice(port), b = EntityDevice(peer);
      if (topology.FindHost(a) || topology.FindHost(b)) {
        crosses |= nics.count(port) > 0 || nics.count(peer) > 0;
      } else if (rtsws.count(a) || rtsws.count(b)) {
        crosses |= rtsws.size() > 1;
      } else {
        const v1::TopoSwitch* sw = topology.FindSwitch(a);
        crosses |= zones.size() > 1 && sw != nullptr && zones.count(sw->zone()) > 0;
      }
    }
    if (crosses) out.push_back(job.id());
  }
  return out;
}

}  // namespace

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
      // A name the topology does not know is a usage error, with what it
      // does know nearby.
      if (absl::Status known = topology_->CheckEntity(request.name()); !known.ok()) return known;
      return absl::InvalidArgumentError(StrCat("no cabled port ", request.name(), " (give device/port)"));
    }
    ports.push_back(request.name());
  } else if (request.kind() == "switch") {
    if (topology_->FindSwitch(request.name()) == nullptr) {
      std::vector<std::string> switches;
      for (const auto& sw : topology_->proto().switches()) switches.push_back(sw.name());
      return absl::InvalidArgumentError(
          StrCat("no switch ", request.name(), " in the topology", NearestHint(request.name(), switches)));
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
  // A port facing a host is its NIC's only link: draining it cuts the NIC
  // off, and every job with a rank there stalls.
  std::vector<std::string> host_ports;
  for (const auto& port : ports) {
    const std::string& peer = topology_->PeerOf(topology_->LinkOfPort(port), port);
    if (topology_->FindHost(EntityDevice(port)) || topology_->FindHost(EntityDevice(peer)))
      host_ports.push_back(port);
  }
  for (const auto& port : host_ports) response.add_host_ports(port);
  // The jobs it touches, from the collectors' registry (asked before any
  // lock is taken: a slow collector must not hold up a drain).
  if (!request.undrain()) {
    if (gate_ == nullptr) {
      response.set_jobs_note("no collector configured: the jobs it touches are unknown");
    } else if (auto jobs = gate_->RunningJobs(); !jobs.ok()) {
      response.set_jobs_note(StrCat("the jobs it touches are unknown: ", jobs.status().message()));
    } else {
      for (const auto& id : JobsCrossing(*topology_, *jobs, ports)) response.add_jobs(id);
    }
  }
  if (!host_ports.empty() && !request.undrain() && !request.force()) {
    std::string jobs;
    for (const auto& id : response.jobs()) StrAppend(&jobs, jobs.empty() ? "" : ", ", id);
    const std::string& port = host_ports[0];
    const std::string& peer = topology_->PeerOf(topology_->LinkOfPort(port), port);
    const std::string nic = topology_->FindHost(EntityDevice(port)) ? port : peer;
    response.set_error(StrCat(
        "refused: ", port, " faces ", nic == port ? peer : nic, ", the only link of NIC ", nic,
        "; draining it cuts that NIC off the fabric and stalls ",
        !jobs.empty() ? StrCat("job(s) ", jobs)
        : response.jobs_note().empty() ? std::string("no running job now (any job placed there later)")
                                       : StrCat("the jobs on it (", response.jobs_note(), ")"),
        ". Drain the job's host instead (Slurm), or use --force"));
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
      // The racks the drain changes are reported, refused or not.
      const auto now = RemainingUplinkShare(*topology_, *drained);
      const auto after = RemainingUplinkShare(*topology_, next);
      for (const auto& [rtsw, share] : after) {
        auto it = now.find(rtsw);
        if (it == now.end() || it->second - share < 1e-9) continue;
        v1::RackCapacity* rack = response.add_capacity();
        rack->set_rtsw(rtsw);
        rack->set_remaining_share(share);
        rack->set_minimum_share(target_.min_uplink_capacity());
      }
      for (const auto& [rtsw, share] : after) {
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
    ++(request.undrain() ? activity_.undrains : activity_.drains);
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
