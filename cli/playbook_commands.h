#pragma once
// rocefab playbook run|runs: machine-run remediation playbooks, audited in
// the collector.

#include <ostream>
#include <string>

#include "cli/commands.h"
#include "cli/control_commands.h"

namespace rocefab::cli {

struct PlaybookOptions {
  std::string name, target, dir = "/usr/share/rocefab/playbooks/auto", topology = "/etc/rocefab/topology.yaml";
  bool dry_run = false;
  uint32_t limit = 20;
};

int RunPlaybookRun(const GlobalOptions& g, const ControlOptions& c, const PlaybookOptions& o, std::ostream& out,
                   std::ostream& err);
int RunPlaybookRuns(const GlobalOptions& g, const PlaybookOptions& o, std::ostream& out, std::ostream& err);

}  // namespace rocefab::cli
