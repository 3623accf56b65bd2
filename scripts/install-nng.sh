#!/bin/sh
# Installs an nng without the aborted-handshake fault (nng issue #1518: a peer that
# goes away during the SP header exchange stopped the listener, docs/protocol.md).
# Debian 12 ships nng 1.5.2, which has it, and no newer nng source package can be had
# from its registries here; so this rebuilds Debian 12's own source package (nng
# 1.5.2-2, TLS with mbedtls as Debian builds it) with our patch,
# deps/nng/aborted-handshake.patch, and installs the resulting libnng1 and libnng-dev
# as version 1.5.2-2+ka2. Nothing else changes: same headers, same libnng.a path.
#
# Idempotent: exits at once when the patched packages (or an nng >= 1.6.0, which has
# the upstream fix) are installed (0.04 s). Measured on the 2-core Debian 12 machine:
# 37 s wall for the first install (5 s of it debhelper and its tools), 30 s of CPU for
# the build (static and shared, nng's tests off); 116 s wall with the machine's load
# average at 9.6. Writes /etc/apt/sources.list.d/kernelarena-nng-src.sources
# (a deb-src line for bookworm) and builds in a temporary folder it removes.
# usage: scripts/install-nng.sh     (root or sudo; called by scripts/install-deps.sh)
#        KA_NNG_REBUILD=1 scripts/install-nng.sh   (rebuild even when installed)
set -eu
cd "$(dirname "$0")/.."
PATCH=$PWD/deps/nng/aborted-handshake.patch
SRC_VERSION=1.5.2-2
KA_VERSION=1.5.2-2+ka2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

installed() { # installed PACKAGE: its installed version, or nothing
  dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null |
    awk '$1 == "install" && $3 == "installed" {print $4}'
}

# ---- already done? (KA_NNG_REBUILD=1 rebuilds and reinstalls all the same)
dev=$(installed libnng-dev)
if [ "${KA_NNG_REBUILD:-0}" = 1 ]; then
  :
elif [ "$dev" = "$KA_VERSION" ] && [ "$(installed libnng1)" = "$KA_VERSION" ]; then
  echo "install-nng: libnng-dev $KA_VERSION (aborted-handshake fix) present"
  exit 0
fi
if [ -n "$dev" ] && dpkg --compare-versions "$dev" ge 1.6.0; then
  echo "install-nng: libnng-dev $dev present (1.6.0 and later have the fix)"
  exit 0
fi
# A distribution whose own nng has the fix (Ubuntu 24.04, Debian 13): just install it.
cand=$(apt-cache policy libnng-dev 2>/dev/null | awk '/Candidate:/ {print $2}')
if [ -n "$cand" ] && [ "$cand" != "(none)" ] && dpkg --compare-versions "$cand" ge 1.6.0; then
  echo "install-nng: installing libnng-dev $cand (has the fix)"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libnng-dev
  exit 0
fi

# ---- the source package: Debian 12's nng, from a deb-src line of our own
LIST=/etc/apt/sources.list.d/kernelarena-nng-src.sources
if [ ! -f "$LIST" ]; then
  $SUDO tee "$LIST" >/dev/null <<'EOF'
# kernelarena (scripts/install-nng.sh): Debian 12's nng source package, rebuilt with
# deps/nng/aborted-handshake.patch
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi
echo "install-nng: building nng $KA_VERSION (Debian's $SRC_VERSION + deps/nng/aborted-handshake.patch)"
$SUDO apt-get update -qq
# What debian/rules uses: debhelper, cmake and mbedtls (TLS). The other Build-Depends
# of nng 1.5.2-2 (dh-python, scons, protobuf-compiler, python3-protobuf) are not used
# by its rules, so they are not installed and dpkg-buildpackage runs with -d.
tools=""
for p in debhelper cmake libmbedtls-dev dpkg-dev fakeroot; do
  [ -n "$(installed "$p")" ] || tools="$tools $p"
done
if [ -n "$tools" ]; then
  # shellcheck disable=SC2086 # a list of package names, split on purpose
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $tools \
    >"${TMPDIR:-/tmp}/ka-install-nng-apt.log" 2>&1 || {
    cat "${TMPDIR:-/tmp}/ka-install-nng-apt.log" >&2
    exit 1
  }
fi

WORK=$(mktemp -d /tmp/ka-nng-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
cd "$WORK"
apt-get source -qq "nng=$SRC_VERSION" >/dev/null 2>&1 || {
  echo "install-nng: apt-get source nng=$SRC_VERSION failed" >&2
  apt-get source "nng=$SRC_VERSION" >&2
  exit 1
}
cd "nng-${SRC_VERSION%-*}"

# ---- our patch, last in Debian's series (dpkg-buildpackage applies it; the rest were
# applied by apt-get source); nng's own tests not built (nocheck); our version number
cp "$PATCH" debian/patches/kernelarena-aborted-handshake.patch
echo kernelarena-aborted-handshake.patch >>debian/patches/series
sed -i 's/-DNNG_ENABLE_TLS=ON/-DNNG_ENABLE_TLS=ON -DNNG_TESTS=OFF/' debian/rules
{
  echo "nng ($KA_VERSION) bookworm; urgency=medium"
  echo
  echo "  * kernelarena: an aborted SP handshake no longer stops the listener"
  echo "    (deps/nng/aborted-handshake.patch; nng issue #1518)."
  echo
  echo " -- kernelarena <kernelarena@localhost>  $(date -R)"
  echo
  cat debian/changelog
} >debian/changelog.new
mv debian/changelog.new debian/changelog

DEB_BUILD_OPTIONS="nocheck nodoc parallel=$(nproc)" \
  dpkg-buildpackage -B -d -uc -us -rfakeroot >"$WORK/build.log" 2>&1 || {
  tail -40 "$WORK/build.log" >&2
  echo "install-nng: dpkg-buildpackage failed" >&2
  exit 1
}
cd "$WORK"
arch=$(dpkg --print-architecture)
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --allow-downgrades --reinstall \
  "./libnng1_${KA_VERSION}_$arch.deb" "./libnng-dev_${KA_VERSION}_$arch.deb" \
  >"$WORK/install.log" 2>&1 || {
  cat "$WORK/install.log" >&2
  exit 1
}
echo "install-nng: installed libnng1 and libnng-dev $KA_VERSION"
