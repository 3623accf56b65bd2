#!/bin/sh
# The torch2cuda baselines and faster candidates on the CPU (tests/cuda_emu): each kernel's
# own source compiled as C++ against a CUDA emulation header and run on small, odd sizes
# (97, 1003, 1024 columns; 70 x 90 x 100 matmuls) against a double reference at the
# task's tolerance. Controls: the adversarial lazy, unwritten and precision-cut kernels
# (tests/adversarial/torch) must fail it. Needs a C++20 compiler (build-essential).
# usage: torch_cuda_emu.sh SOURCE_DIR
set -u
SRC=$(cd "$1" && pwd)
WORK=$(mktemp -d /tmp/ka-cuda-emu-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
T=$SRC/tasks/torch2cuda
C=$SRC/tests/candidates/torch/torch2cuda
A=$SRC/tests/adversarial/torch
fail=0
# run NAME PASS|FAIL -D...: compiles and runs one kernel; PASS wants every worst <= 1
run() {
  name=$1 want=$2
  shift 2
  if ! ${CXX:-c++} -std=c++20 -O1 -pthread -w -I"$SRC/tests/cuda_emu" "$@" \
    "$SRC/tests/cuda_emu/check.cpp" -o "$WORK/a.out" >"$WORK/cc.log" 2>&1; then
    echo "FAIL - $name: does not compile"
    sed -n 1,5p "$WORK/cc.log"
    fail=1
    return
  fi
  out=$("$WORK/a.out" 2>&1)
  bad=$(echo "$out" | awk '{w = $NF; if (w == "inf" || w == "nan" || w + 0 > 1) n++} END {print n + 0}')
  lines=$(echo "$out" | tr '\n' ';')
  if { [ "$want" = PASS ] && [ "$bad" -eq 0 ] && [ -n "$out" ]; } ||
    { [ "$want" = FAIL ] && [ "$bad" -gt 0 ]; }; then
    echo "ok   - $name ($want): $lines"
  else
    echo "FAIL - $name (want $want): $lines"
    fail=1
  fi
}
row='-DGRID(r)=(unsigned)(r)'
warp='-DGRID(r)=(unsigned)(((r)+7)/8)'
run "softmax baseline" PASS -DT_SOFTMAX "-DKERNEL_FILE=\"$T/softmax/baseline/softmax.cu\"" -DKNAME=softmax_rows "$row"
run "softmax candidate" PASS -DT_SOFTMAX "-DKERNEL_FILE=\"$C/softmax/softmax.cu\"" -DKNAME=softmax_rows_warp "$warp"
run "sum_reduce baseline" PASS -DT_SUM "-DKERNEL_FILE=\"$T/sum_reduce/baseline/sum_reduce.cu\"" -DKNAME=sum_rows "$row"
run "sum_reduce candidate" PASS -DT_SUM "-DKERNEL_FILE=\"$C/sum_reduce/sum_reduce.cu\"" -DKNAME=sum_rows_warp "$warp"
run "softmax_scale_mask baseline" PASS -DT_SSM \
  "-DKERNEL_FILE=\"$T/softmax_scale_mask/baseline/softmax_scale_mask.cu\""
run "layernorm baseline" PASS -DT_LN "-DKERNEL_FILE=\"$T/layernorm/baseline/layernorm.cu\""
run "linear_gelu baseline" PASS -DT_LIN "-DKERNEL_FILE=\"$T/linear_gelu/baseline/linear_gelu.cu\"" \
  -DKNAME=linear_gelu -DGX=6 -DGY=5 -DBX=16 -DBY=16
run "linear_gelu candidate" PASS -DT_LIN "-DKERNEL_FILE=\"$C/linear_gelu/linear_gelu.cu\"" \
  -DKNAME=linear_gelu_64x64 -DGX=2 -DGY=2 -DBX=256 -DBY=1
run "control: lazy (every other row)" FAIL -DT_SOFTMAX "-DKERNEL_FILE=\"$A/lazy.cu\"" -DKNAME=softmax_rows "$row"
run "control: unwritten" FAIL -DT_SOFTMAX "-DKERNEL_FILE=\"$A/unwritten.cu\"" -DKNAME=softmax_rows "$row"
run "control: precision cut" FAIL -DT_SOFTMAX "-DKERNEL_FILE=\"$A/precision.cu\"" -DKNAME=softmax_rows "$row"
exit $fail
