/* reference.split (common/task.h): for every task of the suite that declares one, the
 * reference computed in slices on several threads equals, bit for bit, the reference
 * computed whole, on the same inputs (the smallest case, its split param cut to at most
 * 67 rows so that the whole suite runs in seconds). And task.yaml files whose split
 * cannot be right are refused at load with the reason.
 *   reference_split_test TASKS_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ka_check.h"
#include "ka_common.h"
#include "refcache.h"
#include "task.h"

/* The case of t with the fewest elements in all; its split param cut to at most max_rows. */
static int small_case(ka_task *t, int64_t max_rows) {
  int best = -1;
  int64_t best_elems = 0;
  for (int c = 0; c < t->ncases + t->nheld; c++) {
    int64_t total = 0, n;
    char err[256];
    for (int k = 0; k < t->ntensors; k++)
      if (ka_task_tensor_elems(t, k, &t->cases[c], &n, err, sizeof err) == KA_OK) total += n;
    if (best < 0 || total < best_elems) best = c, best_elems = total;
  }
  if (best >= 0 && t->cases[best].values[t->ref_split] > max_rows)
    t->cases[best].values[t->ref_split] = max_rows;
  return best;
}

/* 1 if the references of entries a and b are bitwise equal in every output. */
static int same_reference(const ka_task *t, const ka_refentry *a, const ka_refentry *b) {
  for (int k = 0; k < t->ntensors; k++) {
    if (t->tensors[k].role != KA_ROLE_OUTPUT) continue;
    if (memcmp(a->ref[k], b->ref[k], sizeof(double) * (size_t)a->elems[k])) return 0;
    if (a->ref_max[k] != b->ref_max[k]) return 0;
  }
  return 1;
}

static void check_task(ka_task *t, const char *cache) {
  int c = small_case(t, 67);
  ka_reference_fn fn;
  char err[4096];
  if (ka_reference_get(t, cache, &fn, err, sizeof err) != KA_OK) {
    check(0, t->id, "reference does not build: %s", err);
    return;
  }
  ka_refentry *whole = NULL, *cut = NULL;
  int rc = ka_ref_acquire(NULL, t, c, 7, &whole, err, sizeof err);
  if (rc == KA_OK) rc = ka_ref_acquire(NULL, t, c, 7, &cut, err, sizeof err);
  int64_t rows = t->cases[c].values[t->ref_split];
  /* 5 uneven parts (or one per row when fewer), the first on this thread */
  int parts = rows < 5 ? (int)rows : 5;
  if (rc == KA_OK) rc = ka_ref_reference_parts(whole, fn, 1, NULL, 0);
  if (rc == KA_OK) rc = ka_ref_reference_parts(cut, fn, parts, NULL, 0);
  if (rc != KA_OK)
    check(0, t->id, "entries: %s", err);
  else
    check(same_reference(t, whole, cut), t->id, "case %s, %s = %lld in %d parts: %s",
          t->cases[c].name, t->params[t->ref_split].name, (long long)rows, parts,
          same_reference(t, whole, cut) ? "bitwise equal to the whole" : "DIFFERS from the whole");
  ka_ref_release(NULL, whole);
  ka_ref_release(NULL, cut);
}

/* Removes folder dir and what it holds. */
static void remove_dir(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

/* Task folder tasks/NAME copied into dir (a mkdtemp template, the caller removes it) with
 * the sed expression applied to its task.yaml, loaded into *out (NULL on error, the
 * reason in err). */
static int load_edited(const char *tasks, const char *name, const char *sed, char *dir,
                       ka_task **out, char *err, size_t errlen) {
  *out = NULL;
  if (!mkdtemp(dir)) return KA_ESYS;
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cp -r %s/%s/. %s && sed -i -e '%s' %s/task.yaml", tasks, name, dir,
           sed, dir);
  int rc = system(cmd) == 0 ? KA_OK : KA_ESYS;
  if (rc == KA_OK) rc = ka_task_load(dir, out, err, errlen);
  return rc;
}

static void check_bad_splits(const char *tasks, const char *cache) {
  char err[1024] = "";
  ka_task *t = NULL;
  char d1[] = "/tmp/ka-split-XXXXXX", d2[] = "/tmp/ka-split-XXXXXX", d3[] = "/tmp/ka-split-XXXXXX";
  int rc = load_edited(tasks, "host/gelu",
                       "s/^reference: .*/reference: {symbol: gelu_ref, split: nope}/", d1, &t, err,
                       sizeof err);
  check(rc == KA_EPARSE && !t && strstr(err, "must name a param"), "split of an unknown param",
        "refused at load: %s", err);
  ka_task_free(t);
  rc = load_edited(tasks, "host/gelu",
                   "s/name: y, dtype: f32, shape: \\[n\\]/name: y, dtype: f32, shape: [2, n]/", d2,
                   &t, err, sizeof err);
  check(rc == KA_EPARSE && !t && strstr(err, "tensor y names the split param"),
        "split param in a later dimension", "refused at load: %s", err);
  ka_task_free(t);
  /* attention's keys and values span all of S: a split of S loads (every tensor leads
   * with S) but slices give other values, and the check above must see it */
  rc = load_edited(tasks, "hip2hip/attention",
                   "s/^reference: .*/reference: {symbol: attention_ref, split: S}/", d3, &t, err,
                   sizeof err);
  check(rc == KA_OK && t && t->ref_split >= 0, "a wrong split that loads", "%s",
        rc ? err : "loaded");
  if (t) {
    int c = small_case(t, 67);
    ka_reference_fn fn;
    ka_refentry *whole = NULL, *cut = NULL;
    rc = ka_reference_get(t, cache, &fn, err, sizeof err);
    if (rc == KA_OK) rc = ka_ref_acquire(NULL, t, c, 7, &whole, err, sizeof err);
    if (rc == KA_OK) rc = ka_ref_acquire(NULL, t, c, 7, &cut, err, sizeof err);
    if (rc == KA_OK) rc = ka_ref_reference_parts(whole, fn, 1, NULL, 0);
    if (rc == KA_OK) rc = ka_ref_reference_parts(cut, fn, 3, NULL, 0);
    check(rc == KA_OK && !same_reference(t, whole, cut), "the wrong split is caught", "%s",
          rc ? err : "slices differ from the whole");
    ka_ref_release(NULL, whole);
    ka_ref_release(NULL, cut);
    ka_task_free(t);
  }
  remove_dir(d1), remove_dir(d2), remove_dir(d3);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TASKS_DIR\n", argv[0]);
    return 2;
  }
  char cache[] = "/tmp/ka-split-cache-XXXXXX";
  if (!mkdtemp(cache)) return 2;
  ka_registry *reg = NULL;
  char err[1024];
  if (ka_registry_load(argv[1], 0, &reg, err, sizeof err) != KA_OK) {
    fprintf(stderr, "tasks: %s\n", err);
    return 2;
  }
  int nsplit = 0;
  for (int i = 0; i < reg->ntasks; i++)
    if (reg->tasks[i]->ref_split >= 0) nsplit++, check_task(reg->tasks[i], cache);
  check(nsplit >= 20, "tasks with a split", "%d of %d", nsplit, reg->ntasks);
  check_bad_splits(argv[1], cache);
  ka_registry_free(reg);
  remove_dir(cache);
  printf("%d passed, %d failed\n", ka_check_pass, ka_check_fail);
  return ka_check_fail ? 1 : 0;
}
