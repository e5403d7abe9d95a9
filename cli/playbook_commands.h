#pragma once
// rocefab playbook run|runs: machine-run remediation playbooks, audited in
// the collector.

#include <ostream>
#include <string>

#include "cli/commands.h"
#include "cli/control_commands.h"
#include "rocefab/v1/playbook.pb.h"

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

// A recorded run's RESULT as `playbook runs` shows it. A run still
// "running" that the collector has not heard from for 3 minutes (it is
// reported every 30 s while it waits, and a drain waits at most 2 minutes)
// was most likely left by a process that died: it says so, and that what
// it changed stays.
std::string RunResultText(const v1::PlaybookRun& run, int64_t now_us);

int RunPlaybookRun(const GlobalOptions& g, const ControlOptions& c, const PlaybookOptions& o, std::ostream& out,
                   std::ostream& err);
// The machine-run playbooks in --dir, and the markdown playbook each finding
// kind points to.
int RunPlaybookList(const PlaybookOptions& o, std::ostream& out, std::ostream& err);
int RunPlaybookRuns(const GlobalOptions& g, const PlaybookOptions& o, std::ostream& out, std::ostream& err);

}  // namespace rocefab::cli
