#!/usr/bin/env bash
# The routing study's table and plots for docs/routing-study.md:
#   scripts/routing-study.sh [OUT_DIR] [rocefab-lab study flags...]
# Runs `rocefab-lab study -o csv` (the Llama 3 fabric unless --small is
# given), keeps the CSV, and draws two PNGs with gnuplot (Debian's
# gnuplot-nox, installed if missing): bus bandwidth as a share of the idle
# fabric's, and the max-to-mean load of the rack uplinks, per case and scheme.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$src/docs/img}
shift || true
lab=${ROCEFAB_LAB:-$src/build/bin/rocefab-lab}
[ -x "$lab" ] || { echo "routing-study: $lab is missing: run 'make build' first" >&2; exit 1; }
if ! command -v gnuplot >/dev/null; then
  echo "routing-study: installing gnuplot-nox"
  apt-get install -y --no-install-recommends gnuplot-nox >/dev/null
fi
mkdir -p "$out"
csv=$out/routing-study.csv
"$lab" study -o csv "$@" >"$csv"
# One row per case, one column per scheme (in the study's order).
table() {  # $1: the CSV column to tabulate
  awk -F, -v col="$1" '
    NR == 1 { next }
    {
      key = $1 " " $2 " " $3 "f"
      if (!(key in seen)) { seen[key] = 1; order[++n] = key }
      v = $col
      if (col == 10) v = ($11 > 0) ? 100 * $10 / $11 : 0
      row[key] = row[key] " " v
    }
    END { for (i = 1; i <= n; ++i) { k = order[i]; gsub(" ", "_", k); print k row[order[i]] } }' "$csv"
}
table 10 >"$out/busbw.dat"
table 7 >"$out/imbalance.dat"
plot() {  # $1: data, $2: png, $3: y label
  gnuplot <<GNUPLOT
set terminal png size 1400,600 noenhanced
set output "$2"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right top
set ylabel "$3"
set xtics rotate by -35 font ",9"
set grid ytics
plot "$1" using 2:xtic(1) title "ecmp", '' using 3 title "path pinning", '' using 4 title "e-ecmp 1 qp", \
     '' using 5 title "e-ecmp 4 qps", '' using 6 title "e-ecmp 16 qps", '' using 7 title "te (e-ecmp 4)"
GNUPLOT
}
plot "$out/busbw.dat" "$out/routing-study-busbw.png" "bus bandwidth, % of the idle fabric's"
plot "$out/imbalance.dat" "$out/routing-study-imbalance.png" "max / mean load, used rack uplinks and CTSW downlinks"
rm -f "$out/busbw.dat" "$out/imbalance.dat"
echo "routing-study: $csv, $out/routing-study-busbw.png, $out/routing-study-imbalance.png"
