#pragma once
// rocefab config plan|apply|status|history, drain and undrain: the
// controller's side of the CLI. Exit codes as in commands.h; a refused drain
// or a rolled-back apply exits 1.

#include <ostream>
#include <string>

#include "cli/commands.h"

namespace rocefab::cli {

struct ControlOptions {
  std::string controller = "127.0.0.1:9412";
  // apply
  uint32_t canary = 1, wave_size = 8, gate_seconds = 30;
  bool dry_run = false;
  std::string why;
  // drain
  std::string kind, name, reason;
  bool force = false;
  uint32_t limit = 50;
};

int RunConfigPlan(const GlobalOptions& g, const ControlOptions& o, std::ostream& out, std::ostream& err);
int RunConfigApply(const GlobalOptions& g, const ControlOptions& o, std::ostream& out, std::ostream& err);
int RunConfigStatus(const GlobalOptions& g, const ControlOptions& o, std::ostream& out, std::ostream& err);
int RunConfigHistory(const GlobalOptions& g, const ControlOptions& o, std::ostream& out, std::ostream& err);
int RunConfigAbort(const GlobalOptions& g, const ControlOptions& o, std::ostream& out, std::ostream& err);
int RunDrain(const GlobalOptions& g, const ControlOptions& o, bool undrain, std::ostream& out,
             std::ostream& err);

// rocefab check roce: every NIC's RoCE settings (from the collectors)
// against the QoS its switch port reports applied (from the controller).
// Exit 1 when any mismatch is found.
struct RoceCheckOptions {
  std::string topology;  // topology YAML: which switch port each NIC faces
  std::string host;      // only this host's NICs
};
int RunCheckRoce(const GlobalOptions& g, const ControlOptions& o, const RoceCheckOptions& r, std::ostream& out,
                 std::ostream& err);

}  // namespace rocefab::cli
