#!/usr/bin/env bash
# Issues a throwaway CA and one certificate per identity, for the lab, the
# tests and a first look at rocefab (docs/security.md). Not for production:
# the CA key sits beside the certificates, unencrypted.
#
# Usage: rocefab-dev-ca DIR IDENTITY...
#   DIR/ca.pem, DIR/ca.key             the CA (made once, reused after)
#   DIR/IDENTITY.pem, DIR/IDENTITY.key one per identity (kept if present)
#
# Each certificate has subject CN=IDENTITY (what rocefab authorizes) and the
# subject alternative names DNS:IDENTITY, DNS:localhost and IP:127.0.0.1, so
# it serves as a server certificate on the lab's loopback addresses too.
# Keys are ECDSA P-256; certificates last 30 days.
#
# Example: rocefab-dev-ca /tmp/pki rocefab-collectord rocefab-controllerd alice
set -eu

if [ $# -lt 2 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -ge 2 ] && exit 0 || exit 2
fi
dir=$1
shift
command -v openssl >/dev/null || { echo "rocefab-dev-ca: openssl is not installed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
umask 077
if [ ! -s "$dir/ca.pem" ] || [ ! -s "$dir/ca.key" ]; then
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj "/CN=rocefab dev CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
fi
for name in "$@"; do
  case $name in
    ''|*/*|*' '*) echo "rocefab-dev-ca: '$name' is not a usable identity (no spaces or slashes)" >&2; exit 2 ;;
  esac
  [ -s "$dir/$name.pem" ] && [ -s "$dir/$name.key" ] && continue
  ext=$(mktemp)
  printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=DNS:$name,DNS:localhost,IP:127.0.0.1" >"$ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 30 -extfile "$ext" -out "$dir/$name.pem" 2>/dev/null
  rm -f "$ext" "$dir/$name.csr"
done
# Readable by the daemons' own user when run as root for a system install.
chmod 0644 "$dir"/*.pem
