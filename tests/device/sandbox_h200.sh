#!/bin/sh
# The evaluation sandbox on the GPU machine (docs/sandbox.md), with the prebuilt binaries
# of build/ (nothing is built here):
#   1. build/bin/sandbox_test: the seccomp and Landlock layers on this machine's kernel.
#   2. One cuda2cuda/gelu episode whose steps submit: the baseline (the CUDA driver and
#      NVRTC must work under Landlock and both seccomp stages), an #include of
#      /etc/passwd, scratch buffers larger than the device (out of memory), an
#      illegal-address kernel, an endless kernel, then the baseline again; the executor
#      must survive each, and device memory must be back where it was.
# Run from the repository root with the build carried:
#   device run: OUT=$OUT sh tests/device/sandbox_h200.sh   (carry: build)
set -u
OUT=${OUT:-/tmp/ka-out}
mkdir -p "$OUT"
R=$(pwd)
W=$(mktemp -d)
mkdir -p "$W/tasks/cuda2cuda"
cp -r tasks/cuda2cuda/gelu "$W/tasks/cuda2cuda/"
sed -i 's/^timeout_s: .*/timeout_s: 20/' "$W/tasks/cuda2cuda/gelu/task.yaml"
F=$R/tests/candidates/faults/cuda
G=$R/tests/candidates/cuda_gelu_faults
BASE=$R/tasks/cuda2cuda/gelu/baseline

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kernel: $(uname -r)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
} | tee "$OUT/sandbox_h200.txt"

echo "== 1. sandbox_test (layers on this kernel)" | tee -a "$OUT/sandbox_h200.txt"
build/bin/sandbox_test >"$OUT/sandbox_test.txt" 2>&1
unit=$?
grep -v '^ok   - include check\|^ok   - log shows\|^ *->\|^#\|^lude' "$OUT/sandbox_test.txt" |
  tee -a "$OUT/sandbox_h200.txt"

mem() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1; }
MEM0=$(mem)
echo "== 2. faults through the loop (device memory used before: ${MEM0:-?} MiB)" |
  tee -a "$OUT/sandbox_h200.txt"
AGENT="case \$KA_STEP in
0) cp $BASE/gelu.cu $BASE/launch.yaml . ;;
1) cp $F/include_passwd.cu gelu.cu ;;
2) cp $BASE/gelu.cu gelu.cu; cp $F/oom.yaml launch.yaml ;;
3) cp $G/oob.cu gelu.cu; cp $BASE/launch.yaml . ;;
4) cp $G/hang.cu gelu.cu ;;
5) cp $BASE/gelu.cu $BASE/launch.yaml . ;;
esac"
build/bin/envctl episode --task cuda2cuda/gelu --tasks "$W/tasks" --seed 5 --max-steps 6 \
  --workspace "$W/ws" --agent "command:$AGENT" >"$OUT/sandbox_episode.txt" 2>&1
echo "episode exit code: $?" | tee -a "$OUT/sandbox_h200.txt"
MEM1=$(mem)
grep -c 'root:' "$OUT/sandbox_episode.txt" | sed 's/^/lines of \/etc\/passwd in the output (want 0): /' |
  tee -a "$OUT/sandbox_h200.txt"
grep -i 'forbidden system call\|sandbox:' "$OUT/sandbox_episode.txt" | head -5 |
  sed 's/^/sandbox message (want none): /' | tee -a "$OUT/sandbox_h200.txt"

echo
echo "step  submission          expected        got"
i=1
for pair in "baseline:OK" "include_passwd:COMPILE_ERROR" "oom_scratch:OOM" \
  "oob:RUNTIME_ERROR" "hang:TIMEOUT" "baseline:OK"; do
  name=${pair%%:*}
  want=${pair#*:}
  got=$(sed -n "s/^step $i: status \([A-Z_]*\).*/\1/p" "$OUT/sandbox_episode.txt" | head -1)
  mark=ok
  [ "$got" = "$want" ] || mark=MISMATCH
  printf '%-5s %-19s %-15s %-15s %s\n' "$i" "$name" "$want" "${got:-none}" "$mark"
  i=$((i + 1))
done | tee -a "$OUT/sandbox_h200.txt"
echo "sandbox_test exit: $unit; device memory used before/after: ${MEM0:-?} / ${MEM1:-?} MiB" |
  tee -a "$OUT/sandbox_h200.txt"
