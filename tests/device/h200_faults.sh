#!/bin/sh
# Faults through the whole loop on the GPU: one episode of cuda2cuda/gelu whose steps
# submit an illegal-address kernel, a hanging kernel, an oversized block, then the fast
# candidate, then the baseline; the executor must survive each and the later steps
# must be OK. Run on the H200 machine from the repository root, build carried:
#   device run: sh tests/device/h200_faults.sh   (carry: build)
set -u
OUT=${OUT:-/tmp/ka-out}
mkdir -p "$OUT"
W=$(mktemp -d)
mkdir -p "$W/tasks/cuda2cuda"
cp -r tasks/cuda2cuda/gelu "$W/tasks/cuda2cuda/"
sed -i 's/^timeout_s: .*/timeout_s: 15/' "$W/tasks/cuda2cuda/gelu/task.yaml"
F=$(pwd)/tests/candidates/cuda_gelu_faults
FAST=$(pwd)/tests/candidates/cuda_gelu
BASE=$(pwd)/tasks/cuda2cuda/gelu/baseline
AGENT="case \$KA_STEP in
0) cp $F/oob.cu gelu.cu; cp $BASE/launch.yaml . ;;
1) cp $F/hang.cu gelu.cu ;;
2) cp $BASE/gelu.cu gelu.cu; cp $F/badlaunch.yaml launch.yaml ;;
3) cp $FAST/gelu.cu gelu.cu; cp $FAST/launch.yaml launch.yaml ;;
4) cp $BASE/gelu.cu $BASE/launch.yaml . ;;
esac"
build/bin/envctl episode --task cuda2cuda/gelu --tasks "$W/tasks" --seed 3 --max-steps 5 \
  --workspace "$W/ws" --agent "command:$AGENT" 2>&1 | tee "$OUT/faults.txt"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)" | tee -a "$OUT/faults.txt"
nvidia-smi --query-gpu=memory.used --format=csv,noheader | sed 's/^/device memory used after: /' | tee -a "$OUT/faults.txt"
echo
echo "step  status"
grep '^step ' "$OUT/faults.txt" | sed 's/^step \([0-9]*\): status \([A-Z_]*\).*reward \([0-9.]*\).*/\1     \2 \3/'
