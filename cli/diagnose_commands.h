#pragma once
// rocefab job diagnose and rocefab fabric health: what the collector's
// detectors found, per job (ranked findings, verdict, playbook) and
// fabric-wide (active anomalies and the jobs they touch).

#include <ostream>
#include <string>

#include "cli/commands.h"
#include "rocefab/v1/diagnosis.pb.h"

namespace rocefab::cli {

struct DiagnoseOptions {
  std::string id;
  std::string window = "10m";
  std::string at;  // end of the window: RFC 3339, -10m or Unix seconds; empty: now
  bool onset_only = false;
  int limit = 10;
};

struct HealthOptions {
  std::string since;  // also anomalies that ended within this long
  bool all = false;   // also list symptoms (pause victims, ...)
};

// Renders a diagnosis for people.
void PrintDiagnosis(const v1::DiagnoseJobResponse& d, int64_t now_us, int limit, std::ostream& out);

struct AlertOptions {
  bool all = false;
  std::string kind, entity, job, duration = "2h", comment;
  uint64_t id = 0;
  bool allow_unknown = false;
};
int RunAlertList(const GlobalOptions& g, const AlertOptions& o, std::ostream& out, std::ostream& err);
int RunAlertSilence(const GlobalOptions& g, const AlertOptions& o, std::ostream& out, std::ostream& err);
int RunAlertUnsilence(const GlobalOptions& g, const AlertOptions& o, std::ostream& out, std::ostream& err);

int RunJobDiagnose(const GlobalOptions& g, const DiagnoseOptions& o, std::ostream& out, std::ostream& err);
int RunFabricHealth(const GlobalOptions& g, const HealthOptions& o, std::ostream& out, std::ostream& err);

struct TrafficOptions {
  uint32_t window_s = 30;
  int top = 20;  // rack pairs to list
};
// The TE traffic matrix, rack to rack, busiest first.
int RunFabricTraffic(const GlobalOptions& g, const TrafficOptions& o, std::ostream& out, std::ostream& err);

}  // namespace rocefab::cli
