#!/usr/bin/env bash
# Checks the shipped systemd units with `systemd-analyze verify`.
#
# Usage: verify_units.sh <source-dir> <build-bin-dir>
#
# Each deploy/systemd/*.service is copied to a temp dir with its
# ExecStart=/usr/bin/rocefab-X rewritten to <build-bin-dir>/rocefab-X, because
# verify fails when the command is not an executable file. A unit fails when
# verify exits non-zero or prints any line that names the unit: verify exits 0
# on unknown keys and unparsable values and only warns, and those are exactly
# the mistakes this test is for.
#
# Exit codes: 0 all units clean, 1 a unit failed, 2 usage error, 77 skipped
# (no systemd-analyze; ctest reports SKIP with SKIP_RETURN_CODE 77).
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 <source-dir> <build-bin-dir>" >&2
  exit 2
fi
source_dir=$1
bin_dir=$2

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "SKIP: systemd-analyze not found (Debian package: systemd); cannot verify units"
  exit 77
fi

unit_dir=$source_dir/deploy/systemd
if [ ! -d "$unit_dir" ]; then
  echo "error: no unit directory $unit_dir" >&2
  exit 2
fi
if [ ! -d "$bin_dir" ]; then
  echo "error: build bin dir $bin_dir does not exist" >&2
  exit 2
fi
# systemd wants an absolute ExecStart path.
bin_dir=$(cd "$bin_dir" && pwd -P)

work=$(mktemp -d "${TMPDIR:-/tmp}/rocefab-verify-units.XXXXXX")
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
shopt -s nullglob
units=("$unit_dir"/*.service)
if [ ${#units[@]} -eq 0 ]; then
  echo "error: no *.service files in $unit_dir" >&2
  exit 1
fi

for src in "${units[@]}"; do
  unit=$(basename "$src")
  copy=$work/$unit
  # Rewrite the command of every Exec*= line that runs /usr/bin/rocefab-X.
  # The new path is quoted (spaces) and its % doubled (specifiers); systemd
  # refuses executable paths with a quote or backslash whatever the escaping.
  # Comments are copied unchanged.
  problems=()
  binaries=()
  re='^(Exec[A-Za-z]*=[-@:+!|]*)/usr/bin/(rocefab-[A-Za-z0-9_.-]+)(.*)$'
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ "$line" =~ $re ]]; then
      binary=$bin_dir/${BASH_REMATCH[2]}
      escaped=${binary//%/%%}
      printf '%s"%s"%s\n' "${BASH_REMATCH[1]}" "$escaped" "${BASH_REMATCH[3]}"
      binaries+=("$binary")
    else
      printf '%s\n' "$line"
    fi
  done <"$src" >"$copy"

  if [ ${#binaries[@]} -eq 0 ]; then
    # Without the rewrite verify would check whatever is installed in
    # /usr/bin, not the build under test.
    problems+=("no ExecStart=/usr/bin/rocefab-* line to point at the build")
  fi
  for binary in "${binaries[@]}"; do
    if [ ! -x "$binary" ]; then
      problems+=("$binary is not built (verify needs the ExecStart binary to exist)")
    fi
  done

  output=$(systemd-analyze verify "$copy" 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then
    problems+=("systemd-analyze verify exited $rc")
  fi
  mentions=$(grep -F -- "$unit" <<<"$output" || true)
  if [ -n "$mentions" ]; then
    problems+=("systemd-analyze verify reported:")
    while IFS= read -r line; do
      problems+=("  $line")
    done <<<"$mentions"
  elif [ -n "$output" ]; then
    # Warnings about other units (a dependency, the host's own setup) are
    # shown but do not fail this unit.
    echo "note: $unit: verify printed lines about other units:"
    while IFS= read -r line; do
      echo "  $line"
    done <<<"$output"
  fi

  if [ ${#problems[@]} -eq 0 ]; then
    echo "PASS $unit"
    passed=$((passed + 1))
  else
    echo "FAIL $unit"
    printf '  %s\n' "${problems[@]}"
    failed=$((failed + 1))
  fi
done

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
