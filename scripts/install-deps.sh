#!/usr/bin/env bash
# Installs the Debian packages rocefab builds and tests with.
# Idempotent: it asks dpkg what is already there, runs `apt-get update` at most
# once, and installs only what is missing. Safe to run on every `make`.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libgrpc++-dev libssl-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  prometheus-cpp-dev
  # The /metrics server (HTTP and HTTPS through GnuTLS).
  libmicrohttpd-dev libgnutls28-dev
  libsqlite3-dev sqlite3
  libnl-3-dev libnl-route-3-dev libnl-genl-3-dev
  libboost-dev
  libcli11-dev
  nlohmann-json3-dev
  libyaml-cpp-dev
  libsystemd-dev systemd
  # SONiC switches keep their state in Redis: the client, and a real server for the tests.
  libhiredis-dev redis-server
  libgtest-dev libgmock-dev
  libbenchmark-dev
  iproute2 procps openssl curl
  libcurl4-openssl-dev
  # Block compression for the embedded store and remote-write (snappy is the spec's).
  libzstd-dev libsnappy-dev
  # Real peers for the tests: Prometheus (and promtool) and Alertmanager (and amtool).
  prometheus prometheus-alertmanager
  # A distributed-TSDB peer for remote-write and PromQL read-back.
  victoria-metrics
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo $0) to install them" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
