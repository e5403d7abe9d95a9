#!/usr/bin/env bash
# Builds the Debian package with cpack, installs it with dpkg into this
# machine, checks the installed paths, the units and every binary's --help,
# then removes it again.
#
# Usage: install_package.sh <build-dir>
# Exit codes: 0 pass, 1 fail, 77 skipped (not root, or no dpkg).
set -uo pipefail
build=$1
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: installing a package needs root"; exit 77; fi
if ! command -v dpkg >/dev/null || ! command -v cpack >/dev/null; then echo "SKIP: needs dpkg and cpack"; exit 77; fi
if dpkg-query -W -f='${Status}' rocefab 2>/dev/null | grep -q "install ok installed"; then
  echo "SKIP: a rocefab package is already installed on this machine; not touching it"; exit 77
fi
work=$(mktemp -d)
trap 'dpkg -r rocefab >/dev/null 2>&1; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

(cd "$build" && cpack -G DEB -B "$work" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$work"/rocefab_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "no .deb in $work"
echo "built $(basename "$deb") ($(du -h "$deb" | cut -f1))"
dpkg-deb --info "$deb" | grep -E "Package|Version|Depends|Architecture" || fail "dpkg-deb --info"
dpkg-deb --ctrl-tarfile "$deb" | tar -t | grep -q conffiles || fail "no conffiles in the control archive"
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }

for f in /usr/bin/rocefab /usr/bin/rocefab-hostd /usr/bin/rocefab-switchd /usr/bin/rocefab-collectord \
         /usr/bin/rocefab-controllerd /usr/bin/rocefab-lab \
         /lib/systemd/system/rocefab-hostd.service /lib/systemd/system/rocefab-switchd.service \
         /lib/systemd/system/rocefab-collectord.service /lib/systemd/system/rocefab-controllerd.service \
         /usr/lib/sysusers.d/rocefab.conf /usr/lib/tmpfiles.d/rocefab.conf \
         /etc/rocefab/collectord.yaml /etc/rocefab/hostd.yaml /etc/rocefab/controllerd.yaml /etc/rocefab/policy.yaml \
         /usr/share/rocefab/dashboards/fabric-overview.json /usr/share/rocefab/dashboards/provisioning/dashboards.yaml \
         /usr/share/rocefab/playbooks/pfc_storm.md /usr/share/rocefab/prometheus/rocefab-rules.yml \
         /usr/share/rocefab/slurm/prolog.sh; do
  [ -e "$f" ] || fail "missing $f"
done
echo "installed paths present"
grep -q '^/etc/rocefab/collectord.yaml$' /var/lib/dpkg/info/rocefab.conffiles || fail "collectord.yaml is not a conffile"
getent passwd rocefab >/dev/null || fail "the rocefab user was not created"
[ -d /var/log/nccl-inspector ] || fail "tmpfiles did not create /var/log/nccl-inspector"
for b in rocefab rocefab-hostd rocefab-switchd rocefab-collectord rocefab-controllerd rocefab-lab; do
  /usr/bin/$b --help >"$work/help.txt" 2>&1 || fail "$b --help exited $?"
  grep -q "Usage" "$work/help.txt" || fail "$b --help printed no usage"
done
echo "every binary's --help works"
# The installed daemons load the installed default configs.
for d in hostd collectord controllerd; do
  out=$(timeout 5 /usr/bin/rocefab-$d --config /etc/rocefab/$d.yaml --log-level nonsense 2>&1)
  echo "$out" | grep -qi "log" || fail "rocefab-$d did not parse /etc/rocefab/$d.yaml before the flags: $out"
done
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify /lib/systemd/system/rocefab-*.service >"$work/verify.txt" 2>&1
  if grep -q rocefab "$work/verify.txt"; then cat "$work/verify.txt"; fail "systemd-analyze verify on the installed units"; fi
  echo "installed units verify"
fi
dpkg -r rocefab >/dev/null || fail "dpkg -r"
[ ! -e /usr/bin/rocefab ] || fail "dpkg -r left /usr/bin/rocefab"
echo "PASS"
