#pragma once
// Path-aware correlation and job diagnosis (docs/diagnosis.md).
//
// A job's footprint is every fabric element its traffic can cross: its NIC
// ports, the RTSW ports facing them, every usable uplink of those RTSWs and
// the CTSW ports at their far end, and, when the job spans AI Zones, the
// CTSW-ATSW links. Drained links carry nothing and are left out. Anomalies
// on the footprint (or of the job itself) become the job's findings, ranked
// by how likely each is to be the cause.

#include <set>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/topology.h"
#include "rocefab/v1/diagnosis.pb.h"
#include "rocefab/v1/query.pb.h"

namespace rocefab::collector {

struct Footprint {
  bool topology_known = false;
  std::unordered_set<std::string> ports;    // "dev/port", both ends of every link
  std::unordered_set<std::string> devices;  // switches
  std::unordered_set<std::string> hosts;
  std::unordered_set<std::string> nic_links;  // its NICs and the switch ports facing them
};

Footprint JobFootprint(const Topology* topology, const v1::Job& job, const std::set<std::string>& drained);

// Whether anomaly `a` concerns the job with footprint `fp`.
bool Touches(const Footprint& fp, const v1::Anomaly& a, const std::string& job_id);

// "playbooks/<kind>.md".
std::string PlaybookFor(const std::string& kind);

// Whether an operator's change concerns the job with footprint `fp`: a
// drain of one of its ports or switches (or of a port of one of its
// switches, such as a drained uplink, which the footprint leaves out), or a
// rollout (every switch).
bool Touches(const Footprint& fp, const v1::OperatorChange& change);

// Kinds that describe how a job suffers rather than what is wrong.
bool IsJobSymptomKind(const std::string& kind);

struct DiagnoseInput {
  v1::Job job;
  std::vector<v1::Anomaly> anomalies;  // every anomaly active in the window
  Footprint footprint;
  std::vector<v1::JobTimelinePoint> timeline;  // the window, buckets of bucket_us
  // The job's timeline before the window, and its own regression and stall
  // anomalies there: where its baseline comes from.
  std::vector<v1::JobTimelinePoint> history;
  std::vector<v1::Anomaly> history_symptoms;
  int64_t bucket_us = 1'000'000;
  int64_t last_record_us = 0;  // the job's newest collective record, 0: none
  // The operators' changes (controller audit) from the history's start to
  // the window's end, and older drains still in effect.
  std::vector<v1::OperatorChange> changes;
  // Versions the job's hosts and switches reported changing (ComponentLog),
  // from 30 minutes before the history's start to the window's end.
  std::vector<v1::ComponentChange> component_changes;
  int64_t window_start_us = 0, window_end_us = 0;
  bool onset_only = false;
};

v1::DiagnoseJobResponse Diagnose(const DiagnoseInput& input);

}  // namespace rocefab::collector
