#!/usr/bin/env bash
# The rocefab demo: a collector and two host agents over bundled fixture
# hosts (mlx5-shaped sysfs trees and ethtool statistics). The script then
# makes one NIC receive traffic and start sending PFC pause frames, and shows
# what an operator sees with `rocefab agents` and `rocefab counters`.
#
# Usage: scripts/demo.sh BUILD_DIR [--keep]
#   --keep   leave the daemons running and print their endpoints
set -eu

build=${1:-build}
keep=0
for arg in "${@:2}"; do
  case $arg in
    --keep) keep=1 ;;
    *) echo "demo: unknown argument $arg (use --keep)" >&2; exit 2 ;;
  esac
done
bin=$(cd "$build/bin" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
run=$src/demo-run
rm -rf "$run"
mkdir -p "$run"
pids=()
cleanup() {
  if [ "$keep" -eq 0 ]; then
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  fi
}
trap cleanup EXIT

hosts=(z1-r01-h1 z1-r01-h2)
for h in "${hosts[@]}"; do cp -r "$src/tests/fixtures/hosts/$h" "$run/$h"; done

echo "== starting rocefab-collectord"
"$bin/rocefab-collectord" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --db "$run/collector.db" 2> "$run/collector.log" &
pids+=($!)
for _ in $(seq 1 100); do
  grep -q "listening grpc=" "$run/collector.log" 2>/dev/null && break
  sleep 0.1
done
grpc=$(grep -o 'grpc=[^ ]*' "$run/collector.log" | head -1 | cut -d= -f2)
metrics=$(grep -o 'metrics=[^ ]*' "$run/collector.log" | head -1 | cut -d= -f2)
if [ -z "$grpc" ]; then
  echo "demo: the collector did not start:" >&2
  cat "$run/collector.log" >&2
  exit 1
fi
echo "   gRPC $grpc, /metrics http://$metrics/metrics, database $run/collector.db"

for h in "${hosts[@]}"; do
  echo "== starting rocefab-hostd for $h (fixture sysfs tree, 1s interval)"
  "$bin/rocefab-hostd" --collector "$grpc" --interval 1s --host-name "$h" --no-netlink \
    --sysfs-root "$run/$h/sys" --proc-root "$run/$h/proc" --ethtool-dir "$run/$h/ethtool" \
    > "$run/$h.out" 2> "$run/$h.log" &
  pids+=($!)
done

rocefab() { "$bin/rocefab" --collector "$grpc" "$@"; }

echo
echo "== one snapshot straight from a host: rocefab-hostd --once -o table (first lines)"
"$bin/rocefab-hostd" --once -o table --no-netlink --host-name z1-r01-h1 \
  --sysfs-root "$run/z1-r01-h1/sys" --ethtool-dir "$run/z1-r01-h1/ethtool" | head -12

# Traffic and a PFC storm on z1-r01-h1/mlx5_0 (netdev eth2): 25 GB/s in,
# and pause frames on priority 3, advancing the files the agent reads.
port=$run/z1-r01-h1/sys/class/infiniband/mlx5_0/ports/1
eth=$run/z1-r01-h1/ethtool/eth2/statistics
rx_words=$(cat "$port/counters/port_rcv_data")
pauses=17
echo
echo "== for 6 s: z1-r01-h1/mlx5_0 receives 25 GB/s and starts sending PFC pause frames on prio 3"
for step in 1 2 3 4 5 6; do
  rx_words=$((rx_words + 6250000000))
  pauses=$((pauses + 20000 * step))
  echo "$rx_words" > "$port/counters/port_rcv_data.tmp" && mv "$port/counters/port_rcv_data.tmp" "$port/counters/port_rcv_data"
  sed "s/^\( *tx_prio3_pause:\).*/\1 $pauses/" "$eth" > "$eth.tmp" && mv "$eth.tmp" "$eth"
  sleep 1
done

echo
echo "== rocefab agents"
rocefab agents
echo
echo "== rocefab counters --host z1-r01-h1 --device mlx5_0 --counter rx_bytes --since 10s"
rocefab counters --host z1-r01-h1 --device mlx5_0 --counter rx_bytes --since 10s
echo
echo "== rocefab counters --counter pfc_tx_pause_frames --since 10s   (the storm stands out)"
rocefab counters --counter pfc_tx_pause_frames --since 10s | awk 'NR==1 || $4=="3"'
echo
echo "== rocefab counters --host z1-r01-h1 --device mlx5_0 (first rows)"
rocefab counters --host z1-r01-h1 --device mlx5_0 --since 10s | head -14
echo
echo "== /metrics (a few of the series Prometheus scrapes)"
if command -v curl >/dev/null 2>&1; then
  curl -s "http://$metrics/metrics" | grep -E '^rocefab_(nic_pfc_tx_pause_frames_total.*prio="3"|collector_batches_total|collector_connected_agents)' | head -8
fi

if [ "$keep" -eq 1 ]; then
  echo
  echo "== left running (--keep). Stop with: kill ${pids[*]}"
  echo "   export ROCEFAB_COLLECTOR=$grpc; $bin/rocefab agents"
  echo "   metrics: http://$metrics/metrics   database: $run/collector.db"
  trap - EXIT
else
  echo
  echo "== stopping the daemons"
fi
