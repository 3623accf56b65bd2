#!/bin/sh
# Installs the Debian packages kernelarena builds and tests with.
# Static archives (.a) of nng, mbedtls, protobuf-c, libyaml, sqlite3 and libffi come
# with the -dev packages; the build links them statically so binaries run unchanged
# on machines that lack these libraries (e.g. the GPU machine).
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS="build-essential cmake pkg-config libnng-dev libmbedtls-dev libprotobuf-c-dev \
protobuf-c-compiler libyaml-dev libsqlite3-dev libffi-dev libjansson-dev sqlite3 python3"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "install-deps: installing:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
else
  echo "install-deps: all packages present"
fi
