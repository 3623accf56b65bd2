/* What each device operation of the runner's timed phase costs (issue 15): wall time per
 * call, on the host's clock, of the cuda backend's ops as runner_case.c calls them, each
 * followed by what the runner does next (a synchronize where it waits), over 16M and 64M
 * float elements. Prints one table; asserts nothing (a benchmark, not a test).
 *   device run: build/bin/trusted_ops_bench          (carry: build/bin)
 * KA_BACKEND_PATH may name the folder of ka_backend_cuda.so (default: next to it), so one
 * binary times an older backend beside the new one:
 *   for b in build-old/bin build/bin; do KA_BACKEND_PATH=$b build/bin/trusted_ops_bench; done */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ka_common.h"
#include "task.h"

const ka_backend_ops *ka_backend_host(void) {
  return NULL;
} /* not built in here */

#define REPS 50

typedef struct bench {
  const ka_backend_ops *be;
  ka_backend_ctx *ctx;
  ka_devptr a, b, c;
  int64_t n;
} bench;

/* Runs op REPS times (after 3 untimed) and returns the mean wall time in microseconds. */
static double timeit(bench *bk, int (*op)(bench *)) {
  for (int i = 0; i < 3; i++) op(bk);
  double t0 = ka_now_s();
  for (int i = 0; i < REPS; i++)
    if (op(bk) != KA_OK) return -1;
  return (ka_now_s() - t0) / REPS * 1e6;
}

static int op_sync(bench *bk) {
  return bk->be->synchronize(bk->ctx);
}
static int op_fill_normal(bench *bk) {
  ka_fill f = {.dtype = KA_DT_F32, .dist = KA_DIST_NORMAL, .a = 0, .b = 1, .key = 7};
  int rc = bk->be->fill_device(bk->ctx, bk->a, &f, bk->n, 0, NULL);
  return rc ? rc : bk->be->synchronize(bk->ctx);
}
static int op_fill_fast(bench *bk) {
  ka_fill f = {.dtype = KA_DT_F32, .dist = KA_FILL_FAST_NORMAL, .a = 0, .b = 1, .key = 7};
  int rc = bk->be->fill_device(bk->ctx, bk->a, &f, bk->n, 0, NULL);
  return rc ? rc : bk->be->synchronize(bk->ctx);
}
static int op_fill_poison(bench *bk) {
  ka_fill f = {.dtype = KA_DT_F32, .dist = KA_FILL_POISON, .key = 9};
  int rc = bk->be->fill_device(bk->ctx, bk->b, &f, bk->n, 0, NULL);
  return rc ? rc : bk->be->synchronize(bk->ctx);
}
static int op_fill_check(bench *bk) {
  ka_fill f = {.dtype = KA_DT_F32, .dist = KA_DIST_NORMAL, .a = 0, .b = 1, .key = 7};
  int differs = 0;
  return bk->be->fill_device(bk->ctx, bk->a, &f, bk->n, 1, &differs);
}
static int op_fill_check_fast(bench *bk) {
  ka_fill f = {.dtype = KA_DT_F32, .dist = KA_FILL_FAST_NORMAL, .a = 0, .b = 1, .key = 7};
  int differs = 0;
  int rc = bk->be->fill_device(bk->ctx, bk->a, &f, bk->n, 1, &differs);
  return rc ? rc : differs ? KA_EINTERNAL : KA_OK; /* a's fast draw, checked unchanged */
}
static int op_checksum(bench *bk) {
  uint64_t sum;
  return bk->be->checksum_device(bk->ctx, bk->a, 0, (size_t)bk->n * 4, 11, &sum);
}
static int op_copy(bench *bk) {
  int rc = bk->be->copy_device(bk->ctx, bk->c, 0, bk->a, 0, (size_t)bk->n * 4);
  return rc ? rc : bk->be->synchronize(bk->ctx);
}
static int op_close(bench *bk) {
  int64_t bad, first;
  ka_fill poison = {.dtype = KA_DT_F32, .dist = KA_FILL_POISON, .key = 9};
  return bk->be->close_device(bk->ctx, bk->a, bk->c, KA_DT_F32, bk->n, 1e-5, 1e-5, &poison, &bad,
                              &first);
}
static int op_flush(bench *bk) {
  return bk->be->flush_cache(bk->ctx);
}
static int op_timer(bench *bk) {
  double ms;
  int rc = bk->be->timer_start(bk->ctx);
  if (rc == KA_OK) rc = bk->be->timer_stop(bk->ctx, &ms);
  return rc ? rc : bk->be->synchronize(bk->ctx);
}

int main(void) {
  char err[512];
  const ka_backend_ops *be = ka_backend_load("cuda", err, sizeof err);
  if (!be) {
    fprintf(stderr, "trusted_ops_bench: %s\n", err);
    return 1;
  }
  bench bk = {.be = be};
  if (be->open(0, &bk.ctx, err, sizeof err) != KA_OK) {
    fprintf(stderr, "trusted_ops_bench: no device: %s\n", err);
    return 1;
  }
  /* in this order: a holds the fast draw when it is checked, c a copy of a when the two
   * are closed (every element equal, as a passing verification's); traffic: the bytes
   * each op moves through device memory, in units of the tensor's bytes */
  static const struct {
    const char *name;
    int (*op)(bench *);
    int traffic;
  } ops[] = {
      {"synchronize (idle)", op_sync, 0},           {"fill normal + sync", op_fill_normal, 1},
      {"fill check normal", op_fill_check, 1},      {"fill poison + sync", op_fill_poison, 1},
      {"fill fast normal + sync", op_fill_fast, 1}, {"fill check fast", op_fill_check_fast, 1},
      {"checksum (read back)", op_checksum, 1},     {"copy_device + sync", op_copy, 2},
      {"close (absmax + close)", op_close, 3},      {"flush_cache", op_flush, 0},
      {"timer start/stop + sync", op_timer, 0}};
  enum { NOPS = sizeof ops / sizeof ops[0] };
  int64_t sizes[] = {(int64_t)1 << 24, (int64_t)1 << 26};
  const char *where = getenv("KA_BACKEND_PATH");
  printf("backend: %s\n", where && where[0] ? where : "(next to the binary)");
  printf("%-26s %10s %8s %10s %8s   (us per call and GB/s, %d calls, 16M and 64M fp32)\n", "op",
         "16M us", "GB/s", "64M us", "GB/s", REPS);
  double t[NOPS][2];
  for (int s = 0; s < 2; s++) {
    bk.n = sizes[s];
    size_t bytes = (size_t)bk.n * 4;
    if (be->mem_alloc(bk.ctx, bytes, &bk.a) || be->mem_alloc(bk.ctx, bytes, &bk.b) ||
        be->mem_alloc(bk.ctx, bytes, &bk.c)) {
      fprintf(stderr, "trusted_ops_bench: out of device memory\n");
      return 1;
    }
    op_fill_normal(&bk);
    op_copy(&bk);
    for (size_t i = 0; i < NOPS; i++) t[i][s] = timeit(&bk, ops[i].op);
    be->mem_free(bk.ctx, bk.a), be->mem_free(bk.ctx, bk.b), be->mem_free(bk.ctx, bk.c);
  }
  for (size_t i = 0; i < NOPS; i++) {
    double gb[2];
    for (int s = 0; s < 2; s++)
      gb[s] = t[i][s] > 0 ? (double)ops[i].traffic * (double)sizes[s] * 4 / (t[i][s] * 1e3) : 0;
    printf("%-26s %10.1f %8.0f %10.1f %8.0f\n", ops[i].name, t[i][0], gb[0], t[i][1], gb[1]);
  }
  be->close(bk.ctx);
  return 0;
}
