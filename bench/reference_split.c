/* The reference of a step's correctness trial (gpuexec/daemon/refcache.h) computed whole
 * on one thread (the executor before reference.split) against in slices on every core
 * (ka_ref_reference_parts with parts = 0), side by side in one run, on the real cases of
 * the tasks named (default: the first-step costs of issue 15). Same inputs, same machine;
 * each timed 3 times, interleaved, the medians printed; one row per case, the ratio last.
 *   reference_split_bench TASKS_DIR [TASK_ID...]        (build/bin/reference_split_bench) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ka_common.h"
#include "refcache.h"
#include "task.h"

/* Milliseconds to compute a fresh entry of case c of t in `parts` slices (0: chosen). */
static double time_case(ka_task *t, int c, ka_reference_fn fn, int parts) {
  ka_refentry *e = NULL;
  char err[512];
  if (ka_ref_acquire(NULL, t, c, 11, &e, err, sizeof err) != KA_OK) {
    fprintf(stderr, "%s: %s\n", t->id, err);
    return -1;
  }
  double t0 = ka_now_s();
  int rc = ka_ref_reference_parts(e, fn, parts, NULL, 0);
  double ms = (ka_now_s() - t0) * 1e3;
  ka_ref_release(NULL, e);
  return rc == KA_OK ? ms : -1;
}

#define REPEATS 3

/* The median of 3 values. */
static double median3(const double *v) {
  double a = v[0], b = v[1], c = v[2];
  return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s TASKS_DIR [TASK_ID...]\n", argv[0]);
    return 2;
  }
  static const char *dflt[] = {"hip2hip/gelu", "hip2hip/softmax", "hip2hip/rmsnorm",
                               "hip2hip/layernorm"};
  const char **ids = argc > 2 ? (const char **)argv + 2 : dflt;
  int nids = argc > 2 ? argc - 2 : 4;
  ka_registry *reg = NULL;
  char err[1024];
  if (ka_registry_load(argv[1], 0, &reg, err, sizeof err) != KA_OK) {
    fprintf(stderr, "tasks: %s\n", err);
    return 2;
  }
  char cache[] = "/tmp/ka-refbench-XXXXXX";
  if (!mkdtemp(cache)) return 2;
  printf("%ld online CPUs\n", sysconf(_SC_NPROCESSORS_ONLN));
  printf("%-24s %-20s %10s %10s %9s\n", "task", "case", "whole_ms", "split_ms", "ratio");
  double sum_whole = 0, sum_split = 0;
  for (int i = 0; i < nids; i++) {
    ka_task *t = NULL;
    for (int k = 0; k < reg->ntasks; k++)
      if (!strcmp(reg->tasks[k]->id, ids[i])) t = reg->tasks[k];
    ka_reference_fn fn;
    if (!t || ka_reference_get(t, cache, &fn, err, sizeof err) != KA_OK) {
      fprintf(stderr, "%s: %s\n", ids[i], t ? err : "no such task");
      continue;
    }
    for (int c = 0; c < t->ncases; c++) {
      /* REPEATS of each, interleaved (whole, split, whole, ...); the medians */
      double w[REPEATS], sp[REPEATS];
      int bad = 0;
      for (int r = 0; r < REPEATS; r++) {
        w[r] = time_case(t, c, fn, 1);
        sp[r] = time_case(t, c, fn, 0);
        bad |= w[r] < 0 || sp[r] < 0;
      }
      if (bad) continue;
      double whole = median3(w), split = median3(sp);
      sum_whole += whole, sum_split += split;
      printf("%-24s %-20s %10.1f %10.1f %8.2fx\n", t->id, t->cases[c].name, whole, split,
             whole / split);
    }
  }
  printf("%-24s %-20s %10.1f %10.1f %8.2fx\n", "all", "", sum_whole, sum_split,
         sum_split > 0 ? sum_whole / sum_split : 0);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", cache);
  ka_registry_free(reg);
  return 0;
}
