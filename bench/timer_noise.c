/* How much noise the cuda backend's timer adds to a timed call (issue 15): the runner's
 * timed call as runner_case.c makes it (flush_cache, timer_start, the plan's launches,
 * timer_stop, synchronize), repeated, for a short memory-bound kernel (GELU over 16M
 * fp32, ~58 us on an H200), a plan of 8 short launches (GELU over 1M, ~3 us each) and
 * 16 empty launches with the host sleeping 50 us between them (what the host's time to
 * queue a launch does to the interval, made large); the GELU rows again with L2 evicted by
 * reading a buffer of the flush's size instead of flush_cache's memset (which leaves L2
 * full of dirty lines the timed kernel writes back). Prints one table; asserts nothing (a
 * benchmark, not a test).
 *
 * Columns: median and minimum device time per call (us); spread, the 10th to 90th
 * percentile over the median (%); pair sd, the standard deviation of the log ratio of
 * consecutive calls (%: what the runner's stopping rule sees when a kernel is timed
 * against itself); reps, the pairs that rule needs for a standard error of 0.1%
 * ((pair sd / 0.1%)^2, runner_case.c RN_RSE_TARGET); quantum, the smallest nonzero
 * difference between two calls' times (ns: the timer's resolution where it shows).
 *   device run: build/bin/timer_noise_bench                       (carry: build/bin)
 *   side by side with an older backend:
 *     for b in build-old/bin build/bin; do KA_BACKEND_PATH=$b build/bin/timer_noise_bench; done */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "ka_common.h"
#include "task.h"

const ka_backend_ops *ka_backend_host(void) {
  return NULL;
} /* not built in here */

#define CALLS 400

static const char *src_text =
    "extern \"C\" __global__ void gelu(const float *x, float *y, long long n) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) { float v = x[i];\n"
    "    y[i] = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))); }\n"
    "}\n"
    "extern \"C\" __global__ void empty(void) {}\n"
    "extern \"C\" __global__ void flushread(const uint4 *p, long long n, unsigned *sink) {\n"
    "  unsigned a = 0;\n"
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "       i += (long long)gridDim.x * blockDim.x) { uint4 v = p[i]; a ^= v.x ^ v.y ^ v.z ^ v.w; "
    "}\n"
    "  if (a == 0x9e3779b9u) *sink = a;\n"
    "}\n";

typedef struct shape {
  const char *name;
  int64_t n;        /* elements per launch (0: the empty kernel) */
  int launches;     /* launches per call */
  long host_gap_us; /* host sleep between launches */
  int read_flush;   /* 1: evict L2 by reading a buffer (no dirty lines left), not flush_cache */
} shape;

/* The buffer a read flush reads: the backend's flush size (twice L2), and a sink word. */
static ka_devptr flush_buf, flush_sink;
static size_t flush_len;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void sleep_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

/* One timed call of shape sh: its device time in *ms. */
static int timed_call(const ka_backend_ops *be, ka_backend_ctx *ctx, ka_module *m, const shape *sh,
                      ka_devptr x, ka_devptr y, double *ms) {
  ka_arg args[3] = {{.kind = KA_ARG_PTR, .v.ptr = x},
                    {.kind = KA_ARG_PTR, .v.ptr = y},
                    {.kind = KA_ARG_I64, .v.i64 = sh->n}};
  ka_launch l = {.kernel = sh->n ? "gelu" : "empty",
                 .grid = {sh->n ? (unsigned)((sh->n + 255) / 256) : 1, 1, 1},
                 .block = {sh->n ? 256 : 32, 1, 1},
                 .args = sh->n ? args : NULL,
                 .nargs = sh->n ? 3 : 0};
  int rc;
  if (sh->read_flush) {
    ka_arg fa[3] = {{.kind = KA_ARG_PTR, .v.ptr = flush_buf},
                    {.kind = KA_ARG_I64, .v.i64 = (int64_t)(flush_len / 16)},
                    {.kind = KA_ARG_PTR, .v.ptr = flush_sink}};
    ka_launch fl = {.kernel = "flushread",
                    .grid = {132 * 8, 1, 1},
                    .block = {256, 1, 1},
                    .args = fa,
                    .nargs = 3};
    rc = be->launch(ctx, m, &fl);
    if (rc == KA_OK) rc = be->synchronize(ctx);
  } else {
    rc = be->flush_cache(ctx);
  }
  if (rc == KA_OK) rc = be->timer_start(ctx);
  for (int i = 0; i < sh->launches && rc == KA_OK; i++) {
    if (i && sh->host_gap_us) sleep_us(sh->host_gap_us);
    rc = be->launch(ctx, m, &l);
  }
  if (rc == KA_OK)
    rc = be->timer_stop(ctx, ms);
  else
    be->synchronize(ctx);
  if (rc == KA_OK) rc = be->synchronize(ctx);
  return rc;
}

/* Times CALLS calls of sh (after 5 untimed) and prints its row. */
static int run_shape(const ka_backend_ops *be, ka_backend_ctx *ctx, ka_module *m, const shape *sh,
                     ka_devptr x, ka_devptr y) {
  static double t[CALLS], sorted[CALLS];
  double ms;
  for (int i = 0; i < 5; i++)
    if (timed_call(be, ctx, m, sh, x, y, &ms) != KA_OK) return -1;
  for (int i = 0; i < CALLS; i++) {
    if (timed_call(be, ctx, m, sh, x, y, &ms) != KA_OK) return -1;
    t[i] = ms * 1e3;
  }
  double sum = 0, sq = 0;
  int pairs = CALLS / 2;
  for (int i = 0; i < pairs; i++) {
    double l = log(t[2 * i] / t[2 * i + 1]);
    sum += l, sq += l * l;
  }
  double mean = sum / pairs, sd = sqrt(fmax(0, (sq - pairs * mean * mean) / (pairs - 1)));
  memcpy(sorted, t, sizeof t);
  qsort(sorted, CALLS, sizeof(double), cmp_double);
  double quantum = INFINITY;
  for (int i = 1; i < CALLS; i++)
    if (sorted[i] > sorted[i - 1]) quantum = fmin(quantum, sorted[i] - sorted[i - 1]);
  double med = sorted[CALLS / 2];
  double spread = (sorted[CALLS * 9 / 10] - sorted[CALLS / 10]) / med * 100;
  double reps = (sd / 1e-3) * (sd / 1e-3);
  printf("%-38s %9.2f %9.2f %8.2f %8.3f %8.0f %9.1f\n", sh->name, med, sorted[0], spread, sd * 100,
         reps, isinf(quantum) ? 0 : quantum * 1e3);
  return 0;
}

int main(void) {
  char err[512];
  const ka_backend_ops *be = ka_backend_load("cuda", err, sizeof err);
  if (!be) {
    fprintf(stderr, "timer_noise_bench: %s\n", err);
    return 1;
  }
  ka_backend_ctx *ctx = NULL;
  if (be->open(0, &ctx, err, sizeof err) != KA_OK) {
    fprintf(stderr, "timer_noise_bench: no device: %s\n", err);
    return 1;
  }
  ka_source src = {.name = "gelu.cu", .text = src_text, .len = strlen(src_text)};
  const char *kernels[] = {"gelu", "empty", "flushread"};
  ka_compile_req req = {.language = "cuda",
                        .sources = &src,
                        .nsources = 1,
                        .kernels = kernels,
                        .nkernels = 3,
                        .workdir = "/tmp",
                        .timeout_s = 60};
  ka_module *m = NULL;
  char *log = NULL;
  if (be->compile(ctx, &req, &m, &log, err, sizeof err) != KA_OK) {
    fprintf(stderr, "timer_noise_bench: compile: %s\n%s\n", err, log ? log : "");
    return 1;
  }
  free(log);
  int64_t nmax = (int64_t)1 << 24;
  ka_devptr x, y;
  if (be->mem_alloc(ctx, (size_t)nmax * 4, &x) || be->mem_alloc(ctx, (size_t)nmax * 4, &y) ||
      be->memset8(ctx, x, 0x3c, (size_t)nmax * 4) || !be->flush_bytes ||
      be->flush_bytes(ctx, &flush_len) || be->mem_alloc(ctx, flush_len, &flush_buf) ||
      be->mem_alloc(ctx, 64, &flush_sink) || be->memset8(ctx, flush_buf, 1, flush_len)) {
    fprintf(stderr, "timer_noise_bench: out of device memory\n");
    return 1;
  }
  static const shape shapes[] = {
      {"gelu 16M fp32, 1 launch", (int64_t)1 << 24, 1, 0, 0},
      {"gelu 16M fp32, read flush", (int64_t)1 << 24, 1, 0, 1},
      {"gelu 1M fp32, 8 launches", (int64_t)1 << 20, 8, 0, 0},
      {"gelu 1M fp32, 8 launches, read flush", (int64_t)1 << 20, 8, 0, 1},
      {"empty, 16 launches, host 50us apart", 0, 16, 50, 0},
  };
  const char *where = getenv("KA_BACKEND_PATH");
  printf("backend: %s (%d calls per row)\n", where && where[0] ? where : "(next to the binary)",
         CALLS);
  printf("%-38s %9s %9s %8s %8s %8s %9s\n", "timed call", "median_us", "min_us", "spread%",
         "pair_sd%", "reps", "quantum_ns");
  int rc = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    if (run_shape(be, ctx, m, &shapes[i], x, y)) {
      fprintf(stderr, "timer_noise_bench: %s: %s\n", shapes[i].name, be->last_error(ctx));
      rc = 1;
    }
  be->mem_free(ctx, x), be->mem_free(ctx, y);
  be->mem_free(ctx, flush_buf), be->mem_free(ctx, flush_sink);
  be->module_free(ctx, m);
  be->close(ctx);
  return rc;
}
