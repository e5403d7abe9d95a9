#!/usr/bin/env bash
# The rocefab demo: an emulated AI Zone (8 racks x 2 hosts x 8 NICs, 8 RTSW,
# 4 CTSW) running training job 4711 (AllReduce on 8 hosts), with the real
# collector, 16 host agents and 12 switch agents. At 20 s one NIC of the job
# starts a PFC storm. The timeline shows the job's bus bandwidth, the fault,
# and what the collector sees; at the end the operator's CLI shows the
# fabric's anomalies, the alerts they raised, the job's busbw, where the
# pauses come from, and
# `rocefab job diagnose 4711` naming the culprit with its evidence and
# playbook. The fabric runs under rocefab-controllerd (ECMP), so the
# operator's next steps work as docs/operations.md shows them: a drain's
# preview (capacity per rack, the jobs it touches), the machine-run
# playbooks and one's dry run, the config status. Last, the detectors are
# scored against the injected truth.
#
# Usage: scripts/demo.sh BUILD_DIR [--keep]
#   --keep   keep everything running after the scenario and print the endpoints
set -eu

build=${1:-build}
shift || true
extra=()
for arg in "$@"; do
  case $arg in
    --keep) extra+=(--keep) ;;
    *) echo "demo: unknown argument $arg (use --keep)" >&2; exit 2 ;;
  esac
done
bin=$(cd "$build/bin" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)

# The demo's run directory is the demo's own: start fresh every time.
rm -rf "$src/demo-run"
echo "== rocefab demo: lab/scenarios/demo.yaml (about 70 s)"
"$bin/rocefab-lab" run "$src/lab/scenarios/demo.yaml" --run-dir "$src/demo-run" \
  --timeline-every 5 \
  --show "fabric health" \
  --show "alert list" \
  --show "job show 4711 --since 60s --bucket 10s" \
  --show "pfc --nonzero --prio 3" \
  --show "job diagnose 4711 --window 2m" \
  --show "drain link z1-rtsw03/Ethernet64 --reason uplink-check --dry-run" \
  --show "playbook list" \
  --show "playbook run drain_flapping_link --target z1-rtsw03/Ethernet64 --dry-run --topology $src/demo-run/topology.yaml" \
  --show "config status" \
  "${extra[@]}"
echo
echo "== how the collector did against the injected fault (demo-run/truth.json)"
"$bin/rocefab-lab" score --run-dir "$src/demo-run"
