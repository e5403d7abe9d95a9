#!/usr/bin/env bash
# `make fuzz`: builds every fuzz target (fuzz/*_fuzz.cc) with clang, libFuzzer
# and ASan+UBSan in their own build directory, and runs a campaign: each
# target from a copy of its seed corpus (fuzz/corpus/<name>) for RUNS
# executions, PARALLEL targets at a time. It prints, and writes to
# <build>/fuzz-report.md, one row per target: executions, edges covered,
# corpus size and crashes. Crash inputs stay in <build>/artifacts/<name>/.
#
#   RUNS=10000000 PARALLEL=2 FUZZ_BUILD=build-fuzz TARGETS="sysfs_value hostlist"
#   MAX_TIME=600: stop each target after this many seconds even short of RUNS
#   MERGE=1: as each target ends, merge the inputs that found new coverage
#            back into fuzz/corpus/<name> (minimized with -merge=1), to commit.
#   SKIP_BUILD=1: run the targets already built in <build>, without building.
#
# Not part of `make test`: the normal build replays the committed corpora
# as ctest fuzz_replay_<name> without clang.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD:-$src/build-fuzz}
runs=${RUNS:-10000000}
parallel=${PARALLEL:-$(nproc)}
max_len=${MAX_LEN:-4096}
max_time=${MAX_TIME:-0}

need=()
command -v clang++ >/dev/null || need+=(clang)
dpkg -s libclang-common-14-dev >/dev/null 2>&1 || [ -n "$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] || need+=(libfuzzer-14-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "fuzz: installing ${need[*]}"
  apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi
bash "$src/scripts/install-deps.sh"

flags="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -g -O1"
generator=()
[ -f "$build/CMakeCache.txt" ] || generator=(-G Ninja)
cmake -S "$src" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_C_FLAGS=$flags" \
  -DROCEFAB_FUZZ=ON -DROCEFAB_BUILD_BENCH=OFF >/dev/null
targets=${TARGETS:-$(cd "$src/fuzz" && ls *_fuzz.cc | sed 's/_fuzz\.cc$//' | tr '\n' ' ')}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  echo "fuzz: building ${targets} into $build (log: $build/fuzz-build.log)"
  cmake --build "$build" -j "$(nproc)" --target $(for t in $targets; do printf '%s_fuzz ' "$t"; done) \
    >"$build/fuzz-build.log" 2>&1 || { tail -30 "$build/fuzz-build.log"; exit 1; }
fi

run_one() {
  local name=$1 corpus=$build/corpus/$1 artifacts=$build/artifacts/$1 log=$build/logs/$1.log
  rm -rf "$corpus" && mkdir -p "$corpus" "$artifacts" "$build/logs"
  cp -r "$src/fuzz/corpus/$name/." "$corpus/" 2>/dev/null || true
  local start=$SECONDS
  "$build/fuzz/${name}_fuzz" -runs="$runs" -max_len="$max_len" -max_total_time="$max_time" -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || true
  echo "$name $((SECONDS - start))" >"$build/logs/$name.time"
  [ "${MERGE:-0}" = 1 ] && merge_one "$name"
  return 0
}

# Adds to fuzz/corpus/<name> the campaign's inputs that reach coverage the
# committed corpus does not (libFuzzer's -merge=1 into a copy of it keeps
# the committed inputs and adds only those).
merge_one() {
  local name=$1 merged f base added=0
  merged=$(mktemp -d)
  cp -r "$src/fuzz/corpus/$name/." "$merged/" 2>/dev/null || true
  "$build/fuzz/${name}_fuzz" -merge=1 -max_len="$max_len" "$merged" "$build/corpus/$name" \
    >"$build/logs/$name.merge.log" 2>&1
  for f in "$merged"/*; do
    base=$(basename "$f")
    [ -e "$src/fuzz/corpus/$name/$base" ] && continue
    cp "$f" "$src/fuzz/corpus/$name/cov-$base" && added=$((added + 1))
  done
  rm -rf "$merged"
  echo "fuzz: $name: $added input(s) with new coverage added to fuzz/corpus/$name"
}
export -f run_one merge_one
export build src runs max_len max_time MERGE
printf '%s\n' $targets | xargs -P "$parallel" -I{} bash -c 'run_one {}'

report=$build/fuzz-report.md
{
  echo "| target | executions | exec/s | edges (cov) | features | corpus | crashes | seconds |"
  echo "|---|---|---|---|---|---|---|---|"
  for name in $targets; do
    log=$build/logs/$name.log
    done_line=$(grep -a -E '^#[0-9]+.*DONE' "$log" | tail -1 || true)
    execs=$(grep -a -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
    speed=$(grep -a -E '^stat::average_exec_per_sec' "$log" | awk '{print $2}' || true)
    cov=$(echo "$done_line" | sed -nE 's/.*cov: ([0-9]+).*/\1/p')
    ft=$(echo "$done_line" | sed -nE 's/.*ft: ([0-9]+).*/\1/p')
    corp=$(echo "$done_line" | sed -nE 's/.*corp: ([0-9]+).*/\1/p')
    crashes=$(find "$build/artifacts/$name" -type f ! -name 'slow-unit-*' 2>/dev/null | wc -l)
    secs=$(awk '{print $2}' "$build/logs/$name.time" 2>/dev/null || echo "?")
    echo "| $name | ${execs:-?} | ${speed:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $crashes | $secs |"
  done
} >"$report"
cat "$report"

# A slow unit is an input that took over a second, which on a loaded machine
# is often only starvation; libFuzzer keeps it, but it is not a failure.
if [ "$(find "$build/artifacts" -type f ! -name 'slow-unit-*' | wc -l)" -gt 0 ]; then
  echo "fuzz: crashes found; reproducers are in $build/artifacts/" >&2
  exit 1
fi
