#!/bin/sh
# Evaluation time of two builds side by side on the H200: OLD (default build-old/bin, e.g.
# the commit before a change) and NEW (default build/bin), alternating OLD NEW OLD NEW ...
# on the same tasks in one run, so that drift of the machine hits both alike. Each run is
# one baseline step of `envctl episode` (embedded server; compile, correctness trial,
# 3 warm-up and 20 timed calls of baseline and candidate per case), timed with the host
# clock around the whole command. Prebuilt binaries only.
#   device run: OUT=$OUT sh tests/device/perf_ab_h200.sh      (carry: build, build-old)
#   ROUNDS (default 2): runs per build and task; TASKS: the tasks; OLD, NEW: bin folders
#   (an OLD folder may mix this build's envctl, envserver and gpuexec with an older
#   ka-runner and backends, so that VERBOSE=--verbose shows both runners' phase times).
# Prints a table last: task, OLD and NEW median seconds, NEW / OLD.
set -u
OUT=${OUT:-/tmp/ka-out}
OLD=${OLD:-build-old/bin}
NEW=${NEW:-build/bin}
ROUNDS=${ROUNDS:-2}
# VERBOSE=--verbose: each step's runtime log too (with an envctl that prints it), whose
# "phases" lines say where each case's time goes; they are collected in perf_ab_phases.txt
VERBOSE=${VERBOSE:-}
TASKS=${TASKS:-"hip2hip/argmax cuda2cuda/gelu hip2hip/softmax cuda2cuda/matmul_bf16"}
mkdir -p "$OUT"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  echo "old: $OLD  new: $NEW  rounds: $ROUNDS"
} | tee "$OUT/perf_ab.txt"
: >"$OUT/perf_ab_rows"
for task in $TASKS; do
  r=0
  while [ "$r" -lt "$ROUNDS" ]; do
    for which in old new; do
      bin=$OLD
      [ "$which" = new ] && bin=$NEW
      f=$OUT/perf_ab_$(echo "$task" | tr / _)_${which}_$r.txt
      t0=$(date +%s.%N)
      "$bin/envctl" episode --task "$task" --seed $((r + 1)) $VERBOSE >"$f" 2>&1
      t1=$(date +%s.%N)
      st=$(sed -n 's/^step 1: status \([A-Z_]*\),.*/\1/p' "$f" | head -1)
      echo "$task $which ${st:-?} $(echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}')" \
        >>"$OUT/perf_ab_rows"
    done
    r=$((r + 1))
  done
done
cat "$OUT/perf_ab_rows"
for f in "$OUT"/perf_ab_*_*_[0-9]*.txt; do
  grep -h "phases" "$f" | sed "s|^ *|$(basename "$f" .txt): |"
done >"$OUT/perf_ab_phases.txt" 2>/dev/null
[ -s "$OUT/perf_ab_phases.txt" ] && cut -c1-240 "$OUT/perf_ab_phases.txt"
echo
echo "task                   old_s   new_s   new/old  statuses"
for task in $TASKS; do
  awk -v t="$task" '
    function med(a, n,   i, j, x) {
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    $1 == t { if ($2 == "old") o[++no] = $4; else n[++nn] = $4; st = st " " $3 }
    END { mo = med(o, no); mn = med(n, nn)
          printf "%-22s %-7.2f %-7.2f %-8.2f %s\n", t, mo, mn, (mo > 0 ? mn / mo : 0), st }' \
    "$OUT/perf_ab_rows"
done
