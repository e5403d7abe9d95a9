#pragma once
// rocefab playbook run|runs: machine-run remediation playbooks, audited in
// the collector.

#include <ostream>
#include <string>

#include "cli/commands.h"
#include "cli/control_commands.h"

namespace rocefab::cli {

// The absolute path of a file rocefab ships ("playbooks/pfc_storm.md"):
// found beside this binary's source tree or install prefix (build/bin/..,
// /usr/bin/../share/rocefab), else under /usr/share/rocefab; `relative`
// itself when it is nowhere.
std::string ShippedPath(const std::string& relative);

struct PlaybookOptions {
  std::string name, target, dir = ShippedPath("playbooks/auto"), topology = "/etc/rocefab/topology.yaml";
  bool dry_run = false;
  uint32_t limit = 20;
};

int RunPlaybookRun(const GlobalOptions& g, const ControlOptions& c, const PlaybookOptions& o, std::ostream& out,
                   std::ostream& err);
// The machine-run playbooks in --dir, and the markdown playbook each finding
// kind points to.
int RunPlaybookList(const PlaybookOptions& o, std::ostream& out, std::ostream& err);
int RunPlaybookRuns(const GlobalOptions& g, const PlaybookOptions& o, std::ostream& out, std::ostream& err);

}  // namespace rocefab::cli
