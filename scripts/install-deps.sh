#!/bin/sh
# Installs the Debian packages kernelarena builds and tests with.
# Static archives (.a) of nng, mbedtls, protobuf-c, libyaml, sqlite3 and libffi come
# with the -dev packages (nng's from scripts/install-nng.sh, run last: Debian 12's nng
# rebuilt with the aborted-handshake fix); the build links them statically so binaries
# run unchanged on machines that lack these libraries (e.g. the GPU machine).
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS="build-essential cmake pkg-config libmbedtls-dev libprotobuf-c-dev \
protobuf-c-compiler libyaml-dev libsqlite3-dev libffi-dev libjansson-dev libseccomp-dev sqlite3 python3 python3-venv"
# libelf (static, with zlib): the import allow-list of host modules (gpuexec/sandbox/sandbox.c)
PKGS="$PKGS libelf-dev"
# GSL (statistics of envctl compare, linked statically); chromium renders the report
# of envctl report in its test (tests/report_render.sh)
PKGS="$PKGS libgsl-dev chromium"
# clang (libFuzzer) for the fuzz targets in fuzz/ (scripts/test.sh builds them in build-fuzz);
# clang-format for the format lane (tests/format_check.sh)
PKGS="$PKGS clang libclang-rt-14-dev clang-format"
# OpenMP for clang's builds (ka_exec links OpenMP: refcache.c sizes the references' teams;
# gcc's libgomp comes with build-essential)
PKGS="$PKGS libomp-dev"
# ROCm 5.2 (Debian 12) for the hip backend module (docs/backend-hip.md): the HIP and
# rocm-smi headers it builds against, and the HIP runtime, hiprtc (in libamdhip64-5),
# its built-in headers, comgr and the device libraries for the compile-only test.
# About 42 MB; measured here: 6 s to download, 18 s to install.
PKGS="$PKGS libamdhip64-dev libhiprtc-builtins5 libamd-comgr2 rocm-device-libs librocm-smi-dev"
# the executor-pool tests (tests/tls_test.sh, tests/netns_test.sh): certificates made
# with openssl, network namespaces with iproute2; the linters of deploy/
# (tests/deploy_lint.sh): shellcheck and yamllint (Debian's 1.29; with its
# python3-yaml and python3-pathspec about 1 MB; measured here: 13 s to install)
PKGS="$PKGS openssl iproute2 shellcheck yamllint"
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
# nng: Debian 12's 1.5.2 rebuilt with the aborted-handshake fix (libnng-dev 1.5.2-2+ka2);
# instant when installed, about 40 s on a fresh machine (measured in install-nng.sh)
"$(dirname "$0")/install-nng.sh"
