#!/usr/bin/env bash
# Runs the benchmarks with their real peers on this machine, in the same run.
# Usage: scripts/bench.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
if ! command -v prometheus-node-exporter >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus-node-exporter >/dev/null
  else
    echo "bench: install prometheus-node-exporter to run the peer comparison" >&2
  fi
fi
# GLPK's glpsol: the LP reference of the TE benchmark.
if ! command -v glpsol >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends glpk-utils >/dev/null
fi
export ROCEFAB_BENCH_NODE_EXPORTER=$(command -v prometheus-node-exporter || true)
export ROCEFAB_BENCH_PROMETHEUS=$(command -v prometheus || true)
"$build/bin/hostd_poll_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true "${@:2}"
"$build/bin/lab_tick_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
"$build/bin/diagnose_bench"
"$build/bin/metrics_bench"
# Ingest side by side: the running collector against a real Prometheus and a
# real VictoriaMetrics (both installed by make's dependencies), then the
# paced load test at a zone's agent count.
"$build/bin/ingest_bench" --agents 96 --seconds 60 --mtls
"$build/bin/ingest_bench" --agents 400 --counters 65 --rate 1 --seconds 120 --mtls
# TE at 24,576 GPUs: allocator and compile time, and the busiest link against
# GLPK's LP optimum for one zone's demands; then the whole cluster's matrix
# (all 8 zones; the LP of that takes minutes, so it is not solved here).
"$build/bin/te_bench" --zones 1
"$build/bin/te_bench" --zones 8 --lp=false
