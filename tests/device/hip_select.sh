#!/bin/sh
# Issue 7 on the NVIDIA GPU machine (no ROCm there): with the host, cuda and hip backend
# modules all in build/bin, the hip module must load and report no device without
# failing discovery, and hip2hip/gelu must be routed to the cuda worker and run.
#   device run: sh tests/device/hip_select.sh   (carry: build)
# Needs build/bin/hip_select_test, built on the CPU machine with the ROCm headers
# installed (scripts/install-deps.sh). Writes $OUT/hip_select.txt; prints a table last.
set -u
OUT=${OUT:-/tmp/ka-out}
mkdir -p "$OUT"
BIN=build/bin
if [ ! -x "$BIN/hip_select_test" ] || [ ! -f "$BIN/ka_backend_hip.so" ]; then
  echo "build/bin lacks hip_select_test or ka_backend_hip.so: build with the ROCm headers"
  exit 1
fi
"$BIN/hip_select_test" "$BIN" tasks >"$OUT/hip_select.txt" 2>&1
rc=$?
cat "$OUT/hip_select.txt"
echo
echo "| check | result |"
echo "| --- | --- |"
for c in "load hip" "discover cuda" "discover hip" "episode host/gelu" \
  "gpuexec --backends auto" "episode hip2hip/gelu"; do
  line=$(grep -F " $c:" "$OUT/hip_select.txt" | head -1)
  st=$(echo "$line" | cut -c1-4 | tr -d ' ')
  echo "| $c | ${st:-missing}: $(echo "$line" | cut -d: -f2- | cut -c1-90) |"
done
echo "| hip_select_test exit | $rc |"
exit $rc
