#!/bin/sh
# One device call for the evaluation pipeline (issues 15 and 16), prebuilt binaries only:
#   1. build/bin/nvrtc_compile_test on the H200: the trusted kernels (device fill = the host
#      generator, fill checks, comparison with tolerance) and the backend's staging;
#   2. tests/device/integrity_h200.sh and tests/device/sandbox_h200.sh (the adversarial and
#      fault runs of tests/adversarial/manifest.yaml on the GPU);
#   3. bench/step_latency.sh with BUILDS (default new=build/bin old=build-old/bin);
#   4. (PARTS=... concurrent) tests/device/concurrent_h200.sh: faults beside honest
#      evaluations on the shared GPU;
#   5. (PARTS=... anchors) bench/anchors_gelu.py: pygpubench and a load_inline script
#      (carry .whl with the pygpubench wheel);
#   6. (PARTS=... refsplit) bench/reference_split.c: the correctness reference whole
#      against in slices on the host's cores (reference.split);
#   7. (PARTS=... triton) tests/device/triton_h200.sh: the triton2triton tasks on the GPU;
#   8. (PARTS=... trusted) build/bin/trusted_ops_bench: what each device op of the timed
#      phase costs;
#   9. (PARTS=... overhead) bench/step_overhead.sh on hip2hip/gelu, OVH_BUILDS side by
#      side (default "base=build-base/bin new=build/bin": carry the build before the
#      change as build-base/bin): a step's time outside the runner, judging, the cases
#      compared while the runner timed;
#  10. (PARTS=... grpo) bench/step_latency.sh's throughput only, GRPO-shaped: 64 episodes
#      of hip2hip/gelu in groups of SEED_GROUP (default 16) sharing a seed, at
#      --jobs-per-device 4 (the default) and 8, side by side;
#  11. (PARTS=... command) tests/device/command_h200.sh over SEED_TASKS (default
#      seed/triton2triton/vllm: carry the seed folder), BUDGET_S 300;
#  12. (PARTS=... torch) tests/device/torch_h200.sh (TORCH_STEPS, default all four);
#  13. (PARTS=... prefetch) bench/prefetch_first_step.sh on hip2hip/gelu, softmax and
#      rmsnorm, with and without the reference prefetch, side by side;
#  14. (PARTS=... churn) tests/device/churn_h200.sh: the baseline against itself on a quiet
#      device and with CUDA contexts made and destroyed beside it (bench/context_churn.c).
# Prints each part's table; its log in $OUT/PART.txt, its raw files in $OUT/PART.tgz (the
# device tool brings back 8 files at most).
#   device run: OUT=$OUT sh tests/device/wave_h200.sh   (carry: build/bin build-old/bin)
set -u
OUT=${OUT:-/tmp/ka-out}
mkdir -p "$OUT"
PARTS=${PARTS:-"nvrtc integrity sandbox bench"}
W=$(mktemp -d)
for p in $PARTS; do
  mkdir -p "$W/$p"
  case $p in
    nvrtc)
      echo "== nvrtc_compile_test (device)"
      build/bin/nvrtc_compile_test tasks >"$OUT/nvrtc.txt" 2>&1
      echo "rc $?"; grep -v "^ok " "$OUT/nvrtc.txt" | tail -15 ;;
    integrity)
      echo "== integrity_h200"
      OUT=$W/$p sh tests/device/integrity_h200.sh >"$OUT/integrity.txt" 2>&1
      echo "rc $?"; tail -16 "$OUT/integrity.txt" ;;
    concurrent)
      echo "== concurrent_h200"
      OUT=$W/$p sh tests/device/concurrent_h200.sh >"$OUT/concurrent.txt" 2>&1
      echo "rc $?"; tail -14 "$OUT/concurrent.txt" ;;
    sandbox)
      echo "== sandbox_h200"
      OUT=$W/$p sh tests/device/sandbox_h200.sh >"$OUT/sandbox.txt" 2>&1
      echo "rc $?"; tail -10 "$OUT/sandbox.txt" ;;
    anchors)
      echo "== anchors (pygpubench, load_inline)"
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl >"$OUT/anchors.txt" 2>&1
      PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 timeout 400 python3 bench/anchors_gelu.py \
        >>"$OUT/anchors.txt" 2>&1
      echo "rc $?"; grep "^anchor" "$OUT/anchors.txt"; tail -3 "$OUT/anchors.txt" ;;
    triton)
      echo "== triton_h200"
      OUT=$W/$p sh tests/device/triton_h200.sh >"$OUT/triton.txt" 2>&1
      echo "rc $?"; tail -14 "$OUT/triton.txt" ;;
    trusted)
      echo "== trusted_ops_bench (us per call)"
      build/bin/trusted_ops_bench >"$OUT/trusted.txt" 2>&1
      echo "rc $?"; cat "$OUT/trusted.txt" ;;
    refsplit)
      echo "== reference_split_bench (the host's cores: whole against in slices)"
      build/bin/reference_split_bench tasks >"$OUT/refsplit.txt" 2>&1
      echo "rc $?"; cat "$OUT/refsplit.txt" ;;
    overhead)
      echo "== step_overhead (hip2hip/gelu, cuda)"
      OUT=$W/$p BUILDS=${OVH_BUILDS:-"base=build-base/bin new=build/bin"} BACKENDS=cuda \
        TASK=hip2hip/gelu STEPS=${OVH_STEPS:-8} sh bench/step_overhead.sh >"$OUT/overhead.txt" 2>&1
      echo "rc $?"; sed -n '/^== step time outside/,$p' "$OUT/overhead.txt" ;;
    grpo)
      echo "== throughput, GRPO groups of ${SEED_GROUP:-16} (hip2hip/gelu, 64 in flight)"
      OUT=$W/$p BUILDS="j4=build/bin j8=build/bin" GXARGS_j8="--jobs-per-device 8" \
        LAT_j4=0 LAT_j8=0 INFLIGHT_j4=64 INFLIGHT_j8=64 THRU_STEPS=${THRU_STEPS:-2} \
        SEED_GROUP=${SEED_GROUP:-16} sh bench/step_latency.sh >"$OUT/grpo.txt" 2>&1
      echo "rc $?"; sed -n '/^== throughput/,/^== timing/p' "$OUT/grpo.txt" ;;
    command)
      echo "== command_h200 (${SEED_TASKS:-seed/triton2triton/vllm})"
      SEED_TASKS=${SEED_TASKS:-seed/triton2triton/vllm} BUDGET_S=${BUDGET_S:-300} OUT=$W/$p \
        sh tests/device/command_h200.sh >"$OUT/command.txt" 2>&1
      echo "rc $?"; tail -26 "$OUT/command.txt" ;;
    churn)
      echo "== churn_h200 (fidelity quiet against context churn beside it)"
      OUT=$W/$p sh tests/device/churn_h200.sh >"$OUT/churn.txt" 2>&1
      echo "rc $?"; tail -30 "$OUT/churn.txt" ;;
    torch)
      echo "== torch_h200"
      OUT=$W/$p sh tests/device/torch_h200.sh >"$OUT/torch.txt" 2>&1
      echo "rc $?"; tail -24 "$OUT/torch.txt" ;;
    prefetch)
      echo "== prefetch_first_step (cuda)"
      OUT=$W/$p BACKENDS=cuda TASKS="hip2hip/gelu hip2hip/softmax hip2hip/rmsnorm" REPEATS=5 \
        sh bench/prefetch_first_step.sh >"$OUT/prefetch.txt" 2>&1
      echo "rc $?"; tail -12 "$OUT/prefetch.txt" ;;
    bench)
      echo "== step_latency"
      OUT=$W/$p BUILDS=${BUILDS:-"new=build/bin old=build-old/bin"} sh bench/step_latency.sh \
        >"$OUT/bench.txt" 2>&1
      echo "rc $?"; sed -n '/^== step latency/,$p' "$OUT/bench.txt"
      sed -n '/^== phase lines/,/^== step latency/p' "$OUT/bench.txt" | grep -v "^== step" ;;
  esac
  tar czf "$OUT/$p.tgz" -C "$W" "$p" 2>/dev/null
done
