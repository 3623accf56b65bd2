/* ka-runner: one evaluation in its own process.
 *
 * Started by a gpuexec worker for every job (runner.h describes the channel). It
 * compiles the task's baseline and the candidate, runs the candidate once per case
 * on inputs the worker generated (outputs poisoned first) and hands the outputs back
 * through shared memory, then times baseline and candidate interleaved: warm-up
 * calls, then for each repetition one call of each, alternating which goes first. Every
 * call gets fresh inputs (the worker's, rotated by a secret offset) and fresh poison,
 * staged with the scratch reset and the cache flush outside the timed interval
 * (device events; host: CLOCK_MONOTONIC around the call of the module's process); the
 * inputs are checked unchanged after every call (staging and check on the device from
 * pristine device copies where the backend has copy_device and compare_device, else on
 * the host), and the candidate's outputs of a
 * secret-seeded quarter of the timed calls (and the last) are compared with the
 * baseline's on the same inputs. The medians are reported, after the integrity checks:
 * host wall clock against device timer, physics floor, work outside the calls
 * (docs/integrity.md); a failed check makes the case FLAGGED.
 *
 * The runner never sees reference outputs: correctness is judged by the worker, which
 * compares the outputs written here with the reference it computed itself. Submitted
 * code never runs in this process: host modules run in their own processes
 * (backend_host.c), GPU kernels on the device; a fault in them (crash, illegal
 * address, hang) ends only that process or this one, never the worker. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "backend.h"
#include "data.h"
#include "ka_common.h"
#include "kernelarena.pb-c.h"
#include "runner.h"
#include "sandbox.h"
#include "task.h"

#define RN_ERRLEN 2048

typedef struct rn_state {
  const ka_backend_ops *be;
  ka_backend_ctx *ctx;
  ka_device_info dev;
  const ka_task *task;
  ka_sb log; /* runtime log */
} rn_state;

typedef struct rn_impl {
  const char *label; /* "baseline" or "candidate" */
  ka_plan *plan;
  ka_module *mod;
} rn_impl;

typedef struct rn_case_bufs {
  ka_devptr tensors[KA_MAX_TENSORS];
  size_t bytes[KA_MAX_TENSORS];
  int64_t elems[KA_MAX_TENSORS];
  ka_devptr scratch[2][KA_MAX_SCRATCH]; /* per impl */
  size_t scratch_bytes[2][KA_MAX_SCRATCH];
  /* device path only (rn_case): per tensor, the device copy every call is staged from:
   * inputs the pristine worker's inputs, outputs the poison pool; 0 for empty tensors */
  ka_devptr src[KA_MAX_TENSORS];
  /* outputs of every timed candidate call, kept so that the verified calls can be drawn
   * after all calls ran (rn_case): tensor i of call r at byte r * kept_stride[i] of
   * kept[i] (device path, with its keyed checksum in kept_sum[i][r]) or of kept_host[i]
   * (host path); 0 / NULL when not kept */
  ka_devptr kept[KA_MAX_TENSORS];
  unsigned char *kept_host[KA_MAX_TENSORS];
  uint64_t *kept_sum[KA_MAX_TENSORS];
  size_t kept_stride[KA_MAX_TENSORS];
} rn_case_bufs;

static int rn_read_all(int fd, size_t max, uint8_t **out, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  if (!buf) return KA_ENOMEM;
  for (;;) {
    if (n == cap) {
      if (cap >= max) {
        free(buf);
        return KA_ETOOBIG;
      }
      cap *= 2;
      uint8_t *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        return KA_ENOMEM;
      }
      buf = nb;
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      free(buf);
      return KA_EIO;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  *out = buf;
  *len = n;
  return KA_OK;
}

static int rn_write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return KA_EIO;
    p += w;
    n -= (size_t)w;
  }
  return KA_OK;
}

static void rn_fill_device(Kernelarena__V1__Device *d, const ka_device_info *i) {
  d->backend = strdup(i->backend);
  d->index = i->index;
  d->name = strdup(i->name);
  d->arch = strdup(i->arch);
  d->multiprocessors = i->multiprocessors;
  d->warp_size = i->warp_size;
  d->memory_bytes = i->memory_bytes;
  d->l2_bytes = i->l2_bytes;
  d->shared_bytes_per_block = i->shared_bytes_per_block;
  d->max_threads_per_block = i->max_threads_per_block;
  d->mem_bandwidth_gbps = i->mem_bandwidth_gbps;
  d->clock_mhz = i->clock_mhz;
  d->driver = strdup(i->driver);
}

static const char *rn_be_err(rn_state *s) {
  return s->be->last_error ? s->be->last_error(s->ctx) : "";
}

/* Device facts usable in launch-plan expressions. */
static void rn_device_vars(const ka_device_info *d, ka_vars *v) {
  ka_vars_set(v, "sm_count", d->multiprocessors);
  ka_vars_set(v, "warp_size", d->warp_size);
  ka_vars_set(v, "max_threads", d->max_threads_per_block);
  ka_vars_set(v, "l2_bytes", d->l2_bytes);
  ka_vars_set(v, "shared_per_block", d->shared_bytes_per_block);
}

/* Reads the files of one implementation into compile sources. For the baseline the
 * files come from the trusted task directory; for the candidate from the job. */
static int rn_sources(const ka_task *t, const Kernelarena__V1__RunnerJob *job, int baseline,
                      ka_source *src, char **owned, int *nsrc, const char **plan_text,
                      size_t *plan_len, char *err, size_t errlen) {
  int n = 0;
  *plan_text = NULL;
  /* the task's source file goes first */
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < t->neditable; i++) {
      const char *name = t->editable[i];
      int is_src = !strcmp(name, t->source);
      int is_plan = t->launch_plan && !strcmp(name, t->launch_plan);
      if ((pass == 0) != is_src) continue;
      const char *text = NULL;
      size_t len = 0;
      if (baseline) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/baseline/%s", t->dir, name);
        char *buf;
        if (ka_read_file(p, 16 << 20, &buf, &len))
          return ka_seterr(err, errlen, KA_EIO, "cannot read %s", p);
        owned[i] = buf;
        text = buf;
      } else {
        for (size_t f = 0; f < job->n_candidate; f++)
          if (!strcmp(job->candidate[f]->path, name)) {
            text = (const char *)job->candidate[f]->content.data;
            len = job->candidate[f]->content.len;
          }
        if (!text) return ka_seterr(err, errlen, KA_EINVAL, "candidate lacks %s", name);
        /* NUL-terminated copy: compilers and YAML want C strings */
        char *copy = malloc(len + 1);
        if (!copy) return KA_ENOMEM;
        memcpy(copy, text, len);
        copy[len] = 0;
        owned[i] = copy;
        text = copy;
      }
      if (is_plan) {
        *plan_text = text;
        *plan_len = len;
      } else {
        src[n].name = name;
        src[n].text = text;
        src[n].len = len;
        n++;
      }
    }
  }
  *nsrc = n;
  return KA_OK;
}

/* Compiles one implementation. Returns KA_OK, KA_ECOMPILE (log filled) or another
 * error for infrastructure faults. */
static int rn_build(rn_state *s, const Kernelarena__V1__RunnerJob *job, int baseline, rn_impl *impl,
                    char **log, char *err, size_t errlen) {
  const ka_task *t = s->task;
  ka_source src[KA_MAX_EDITABLE];
  char *owned[KA_MAX_EDITABLE] = {0};
  int nsrc = 0;
  const char *plan_text;
  size_t plan_len = 0;
  int rc = rn_sources(t, job, baseline, src, owned, &nsrc, &plan_text, &plan_len, err, errlen);
  if (rc == KA_OK) {
    if (t->launch_plan) {
      rc = ka_plan_parse(t, plan_text, plan_len, &impl->plan, err, errlen);
      if (rc) {
        ka_sb sb = {0};
        ka_sb_printf(&sb, "%s: %s\n", t->launch_plan, err);
        *log = ka_sb_take(&sb);
        rc = KA_ECOMPILE;
      }
    } else {
      rc = ka_plan_from_entry(t, &impl->plan, err, errlen);
    }
  }
  if (rc == KA_OK) {
    char wd[PATH_MAX];
    snprintf(wd, sizeof wd, "%s/%s", job->workdir, impl->label);
    ka_mkdirs(wd);
    ka_compile_req req = {.language = t->language,
                          .sources = src,
                          .nsources = nsrc,
                          .kernels = (const char *const *)impl->plan->kernels,
                          .nkernels = impl->plan->nkernels,
                          .arch = NULL,
                          .workdir = wd,
                          .timeout_s = 60};
    rc = s->be->compile(s->ctx, &req, &impl->mod, log, err, errlen);
  }
  for (int i = 0; i < KA_MAX_EDITABLE; i++) free(owned[i]);
  return rc;
}

/* Resolves a plan's launches for one case into concrete launches. */
static int rn_resolve(rn_state *s, const ka_case *c, const rn_case_bufs *b, int which,
                      const ka_plan *p, ka_launch *out, ka_arg args[][KA_MAX_ARGS], char *err,
                      size_t errlen) {
  const ka_task *t = s->task;
  ka_vars v = {0};
  ka_task_case_vars(t, c, &v);
  rn_device_vars(&s->dev, &v);
  for (int i = 0; i < p->nlaunches; i++) {
    const ka_plan_launch *pl = &p->launches[i];
    ka_launch *l = &out[i];
    memset(l, 0, sizeof *l);
    l->kernel = pl->kernel;
    int64_t x, threads = 1;
    for (int d = 0; d < 3; d++) {
      int rc = ka_expr_eval(pl->grid[d], &v, &x, err, errlen);
      if (rc) return rc;
      if (x < 1 || x > 0x7fffffff)
        return ka_seterr(err, errlen, KA_ERANGE, "launch %d (%s): grid[%d] = %lld is out of range",
                         i, pl->kernel, d, (long long)x);
      l->grid[d] = (unsigned)x;
      rc = ka_expr_eval(pl->block[d], &v, &x, err, errlen);
      if (rc) return rc;
      if (x < 1 || x > 1024)
        return ka_seterr(err, errlen, KA_ERANGE, "launch %d (%s): block[%d] = %lld is out of range",
                         i, pl->kernel, d, (long long)x);
      l->block[d] = (unsigned)x;
      threads *= x;
    }
    if (s->dev.max_threads_per_block > 1 && threads > s->dev.max_threads_per_block)
      return ka_seterr(err, errlen, KA_ERANGE, "launch %d (%s): %lld threads per block exceed %d",
                       i, pl->kernel, (long long)threads, s->dev.max_threads_per_block);
    int rc = ka_expr_eval(pl->shared_bytes, &v, &x, err, errlen);
    if (rc) return rc;
    if (x < 0 || (s->dev.shared_bytes_per_block > 0 && x > s->dev.shared_bytes_per_block))
      return ka_seterr(err, errlen, KA_ERANGE, "launch %d (%s): shared_bytes %lld out of range", i,
                       pl->kernel, (long long)x);
    l->shared_bytes = (unsigned)x;
    for (int a = 0; a < pl->nargs; a++) {
      const char *name = pl->args[a];
      int ti = ka_task_tensor(t, name), pi = ka_task_param(t, name);
      if (ti >= 0) {
        args[i][a].kind = KA_ARG_PTR;
        args[i][a].v.ptr = b->tensors[ti];
      } else if (pi >= 0) {
        if (t->params[pi].is_i32) {
          args[i][a].kind = KA_ARG_I32;
          args[i][a].v.i32 = (int32_t)c->values[pi];
        } else {
          args[i][a].kind = KA_ARG_I64;
          args[i][a].v.i64 = c->values[pi];
        }
      } else {
        for (int k = 0; k < p->nscratch; k++)
          if (!strcmp(p->scratch[k].name, name)) {
            args[i][a].kind = KA_ARG_PTR;
            args[i][a].v.ptr = b->scratch[which][k];
          }
      }
    }
    l->args = args[i];
    l->nargs = pl->nargs;
  }
  return KA_OK;
}

static int rn_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void rn_free_bufs(rn_state *s, rn_case_bufs *b) {
  for (int i = 0; i < KA_MAX_TENSORS; i++) {
    if (b->tensors[i]) s->be->mem_free(s->ctx, b->tensors[i]);
    if (b->src[i]) s->be->mem_free(s->ctx, b->src[i]);
    if (b->kept[i]) s->be->mem_free(s->ctx, b->kept[i]);
    free(b->kept_host[i]);
    free(b->kept_sum[i]);
  }
  for (int w = 0; w < 2; w++)
    for (int k = 0; k < KA_MAX_SCRATCH; k++)
      if (b->scratch[w][k]) s->be->mem_free(s->ctx, b->scratch[w][k]);
  memset(b, 0, sizeof *b);
}

/* Integrity thresholds (docs/integrity.md).
 * Physics floor: a median time below task bytes / (RN_FLOOR_MARGIN x peak bandwidth) is a
 * measurement fault. The margin covers writes that a cache absorbs before the kernel ends
 * and a peak bandwidth that is a little low; the floor only has to catch the impossible.
 * Wall clock: the median host wall time of the timed calls (from before the timer starts
 * to after a device-wide synchronize) may exceed the median device time by
 * RN_WALL_FACTOR x plus RN_WALL_SLACK_MS (launch latency, waking the host); more means
 * work the timer did not see. A device time above the wall time means a forged timer.
 * Untimed work (host modules): CPU time of the module processes while no call of theirs
 * was in flight may be at most RN_IDLE_FRACTION of the candidate's total timed time plus
 * RN_IDLE_SLACK_MS (honest module processes use well under 1 ms there). */
#define RN_FLOOR_MARGIN 2.0
#define RN_WALL_FACTOR 1.5
#define RN_WALL_SLACK_MS 0.2
#define RN_IDLE_FRACTION 0.25
#define RN_IDLE_SLACK_MS 10.0
/* Verification of timed calls (docs/integrity.md, property 5): the outputs of every timed
 * candidate call are kept (a copy after the call, outside the timer) when they take at
 * most RN_KEEP_MAX_BYTES in all on the device path, RN_KEEP_MAX_HOST_BYTES of host memory
 * on the host path; the verified calls are then drawn after the last call. Above it (or
 * when there is no room) the draw is made before the calls from the secret seed and the
 * verified calls are compared as they run. */
#define RN_KEEP_MAX_BYTES ((size_t)8 << 30)
/* Fresh inputs (docs/integrity.md, property 3): a case whose inputs have at most this
 * many elements in all, or a task that sets fresh_inputs, gets newly drawn inputs for
 * every warm-up and timed call (ka_fill_input from a secret seed per call, on the host
 * path); larger inputs get the worker's inputs rotated by a secret offset, which costs
 * no drawing. A rotation leaves every element's value in the tensor: a submission can
 * cache an elementwise result and find the rotation, or an op that ignores order (a
 * histogram) can return a cached result, so the cheap rotation is kept only where
 * drawing every call would cost more than the evaluation itself. */
#define RN_FRESH_MAX_ELEMS ((int64_t)1 << 22)
#define RN_KEEP_MAX_HOST_BYTES ((size_t)2 << 30) /* the same, kept in host memory */

/* Elements of got that differ from want (both tensor i's dtype, n elements) beyond `slack`
 * times the task's tolerance, taking want's largest magnitude as the scale (as
 * ka_compare_outputs does with the reference). NaN matches NaN, except an element of got
 * that still holds the poison written before the call: element k of that poison is
 * pool[(k + off) % n] (pool may be NULL; 0 <= off < n, in elements). A finite element equal
 * to its poison is judged by value like any other: integer poison is a random value, which
 * a correct int8 output equals at 1 element in 256 (hip2hip/quant_int8 on the H200, 2026-11-29),
 * and an unwritten element passes only where its fresh poison happens to be within tolerance. */
static int64_t rn_count_differences(const ka_task *t, int i, const void *want, const void *got,
                                    const void *pool, int64_t off, int64_t n, double slack) {
  ka_dtype dt = t->tensors[i].dtype;
  size_t es = ka_dtype_size(dt);
  double scale = 0;
  for (int64_t k = 0; k < n; k++) {
    double v = fabs(ka_load_double(dt, want, k));
    if (isfinite(v) && v > scale) scale = v;
  }
  if (scale == 0) scale = 1;
  double atol, rtol;
  ka_task_tolerance(t, i, &atol, &rtol);
  int64_t bad = 0;
  for (int64_t k = 0, pk = off; k < n; k++, pk = pk + 1 < n ? pk + 1 : 0) {
    double a = ka_load_double(dt, want, k), g = ka_load_double(dt, got, k);
    if (isnan(a) && isnan(g)) {
      if (pool && !memcmp((const char *)got + k * es, (const char *)pool + pk * es, es)) bad++;
      continue;
    }
    if (!(fabs(g - a) <= slack * (atol * scale + rtol * fabs(a)))) bad++;
  }
  return bad;
}

/* Maps an error of the backend during a candidate run to a status. */
static int rn_status_of(int rc) {
  if (rc == KA_EOOM) return KERNELARENA__V1__STATUS__OOM;
  return rc == KA_EDEVICE || rc == KA_ELAUNCH || rc == KA_ERANGE
             ? KERNELARENA__V1__STATUS__RUNTIME_ERROR
             : KERNELARENA__V1__STATUS__INFRA_ERROR;
}

/* Writes src rotated left by off elements (of es bytes) into dst: dst[k] = src[(k+off) % n].
 * A rotation keeps every element of a sample drawn independently per element, so it is
 * an equally valid input (or poison) that differs from call to call at the cost of a copy. */
static void rn_rotate(void *dst, const void *src, int64_t n, int64_t off, size_t es) {
  if (n <= 0) return;
  off %= n;
  memcpy(dst, (const char *)src + (size_t)off * es, (size_t)(n - off) * es);
  memcpy((char *)dst + (size_t)(n - off) * es, src, (size_t)off * es);
}

static double rn_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), rn_cmp_double);
  return n & 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Host buffers of one case (index = tensor). */
typedef struct rn_host {
  void *stage[KA_MAX_TENSORS];  /* what the next call gets: rotated inputs or poison */
  void *back[KA_MAX_TENSORS];   /* inputs read back after a call */
  void *pool[KA_MAX_TENSORS];   /* outputs: the poison pattern that is rotated per call */
  void *out[2][KA_MAX_TENSORS]; /* outputs of the timed call of baseline / candidate */
} rn_host;

static void rn_host_free(rn_host *h) {
  for (int i = 0; i < KA_MAX_TENSORS; i++) {
    free(h->stage[i]), free(h->back[i]), free(h->pool[i]);
    free(h->out[0][i]), free(h->out[1][i]);
  }
  memset(h, 0, sizeof *h);
}

/* Byte offset of a rotation by off elements of tensor i (0 <= off < elems). */
static size_t rn_rot_bytes(const ka_task *t, int i, int64_t off) {
  return (size_t)off * ka_dtype_size(t->tensors[i].dtype);
}

/* Everything one call gets before it runs, outside any timed interval: its scratch
 * buffers zeroed, then each tensor staged.
 * Host path (dev 0): stage[i] (rotated inputs and poison, prepared on the host) is copied
 * to the device. Device path (dev 1): tensor i becomes b->src[i] (pristine input or
 * poison pool, on the device) rotated left by offs[i] elements, as two device-to-device
 * copies, src[off..n) -> t[0..n-off) and src[0..off) -> t[n-off..n); for the correctness
 * trial (trial 1) the outputs get the host poison stage[i] instead. */
static int rn_prepare_call(rn_state *s, rn_impl *im, int which, rn_case_bufs *b, void *const *stage,
                           int dev, const int64_t *offs, int trial) {
  const ka_task *t = s->task;
  int rc = KA_OK;
  for (int k = 0; k < im->plan->nscratch && rc == KA_OK; k++)
    rc = s->be->memset8(s->ctx, b->scratch[which][k], 0, b->scratch_bytes[which][k]);
  for (int i = 0; i < t->ntensors && rc == KA_OK; i++) {
    if (!dev || (trial && t->tensors[i].role == KA_ROLE_OUTPUT)) {
      rc = s->be->copy_to_device(s->ctx, b->tensors[i], stage[i], b->bytes[i]);
    } else if (b->bytes[i]) {
      size_t o = rn_rot_bytes(t, i, offs[i]), n = b->bytes[i];
      rc = s->be->copy_device(s->ctx, b->tensors[i], 0, b->src[i], o, n - o);
      if (rc == KA_OK) rc = s->be->copy_device(s->ctx, b->tensors[i], n - o, b->src[i], 0, o);
    }
  }
  return rc;
}

/* After a call: checks that every input still holds what was staged. Host path: reads
 * the inputs back into h->back and compares them with stage. Device path: compares them
 * on the device with the pristine copy b->src[i] at the same rotation offs[i] (two
 * compare_device calls). Returns KA_OK with *changed = index of the first changed input
 * tensor, or -1; another code for a backend fault. */
static int rn_check_inputs(rn_state *s, rn_case_bufs *b, void *const *stage, rn_host *h, int dev,
                           const int64_t *offs, int *changed) {
  const ka_task *t = s->task;
  *changed = -1;
  for (int i = 0; i < t->ntensors; i++) {
    if (t->tensors[i].role != KA_ROLE_INPUT || !b->bytes[i]) continue;
    int same = 1, rc;
    if (dev) {
      size_t o = rn_rot_bytes(t, i, offs[i]), n = b->bytes[i];
      rc = s->be->compare_device(s->ctx, b->tensors[i], 0, b->src[i], o, n - o, &same);
      if (rc == KA_OK && same)
        rc = s->be->compare_device(s->ctx, b->tensors[i], n - o, b->src[i], 0, o, &same);
    } else {
      rc = s->be->copy_to_host(s->ctx, h->back[i], b->tensors[i], b->bytes[i]);
      if (rc == KA_OK) same = !memcmp(h->back[i], stage[i], b->bytes[i]);
    }
    if (rc) return rc;
    if (!same) {
      *changed = i;
      return KA_OK;
    }
  }
  return KA_OK;
}

/* Compares the candidate's outputs of timed call `call` (1-based, h->out[1]) with the
 * baseline's on the same inputs (h->out[0]); offs are that call's rotations (the poison
 * of output i was h->pool[i] rotated by offs[i]). Both are within the task's tolerance of
 * the reference, so they may differ by twice it. KA_OK, or KA_EINVAL with *status
 * INCORRECT and the first differing output named in err. */
static int rn_verify_call(const ka_task *t, const rn_case_bufs *b, const rn_host *h,
                          const int64_t *offs, const char *cname, int call, int *status, char *err,
                          size_t errlen) {
  for (int i = 0; i < t->ntensors; i++) {
    if (t->tensors[i].role != KA_ROLE_OUTPUT) continue;
    int64_t bad = rn_count_differences(t, i, h->out[0][i], h->out[1][i], h->pool[i], offs[i],
                                       b->elems[i], 2.0);
    if (bad) {
      *status = KERNELARENA__V1__STATUS__INCORRECT;
      return ka_seterr(err, errlen, KA_EINVAL,
                       "case %s: the outputs of timed call %d differ from the baseline's on the "
                       "same inputs in %lld of %lld elements of %s (work skipped, cached or "
                       "changed in timed calls)",
                       cname, call, (long long)bad, (long long)b->elems[i], t->tensors[i].name);
    }
  }
  return KA_OK;
}

/* Rotation offsets (in elements) of every tensor for call number `call` of a case (0 is
 * the first warm-up call): secret per call, drawn from rot_seed, 0 for empty tensors. */
static void rn_offsets(const ka_task *t, const rn_case_bufs *b, uint64_t rot_seed, int call,
                       int64_t *offs) {
  for (int i = 0; i < t->ntensors; i++)
    offs[i] = b->elems[i] > 0
                  ? (int64_t)(ka_mix64(rot_seed, (uint64_t)(call * KA_MAX_TENSORS + i)) %
                              (uint64_t)b->elems[i])
                  : 0;
}

/* Peak dense 16-bit tensor (matrix) rate of a device in TFLOP/s (1e12 floating-point
 * operations per second; an FMA counts 2): multiprocessors x clock x dense BF16/FP16
 * operations per clock per SM or CU, the fastest unit of the device for any type at least
 * 16 bits wide. Per clock and SM/CU, derived from the vendors' figures:
 *   sm_80  2048: A100 whitepaper (NVIDIA, 2020), 312 TFLOPS = 108 SMs x 1410 MHz x 2048
 *   sm_90  4096: H100 whitepaper (NVIDIA, 2022), 989.4 TFLOPS = 132 SMs x 1830 MHz x 4096
 *   sm_100 8192: B200 datasheet (NVIDIA, 2024), 2.25 PFLOPS dense over 148 SMs at ~1.9 GHz
 *   gfx90a 1024: MI250X datasheet (AMD), 383 TFLOPS = 220 CUs x 1700 MHz x 1024
 *   gfx942 2048: MI300X datasheet (AMD), 1307 TFLOPS = 304 CUs x 2100 MHz x 2048
 * clock_mhz is the device's maximum clock, at or above the clock the figures above
 * assume, which lowers the floor further. 0 (no flops floor) for an arch not listed (a
 * newer one may be faster than any figure here), on the host backend, and when the
 * device reports no clock. */
static double rn_peak_tflops(const ka_device_info *d) {
  static const struct {
    const char *arch;
    double per_clock;
  } k[] = {{"sm_80", 2048}, {"sm_90", 4096}, {"sm_100", 8192}, {"gfx90a", 1024}, {"gfx942", 2048}};
  if (d->multiprocessors <= 0 || d->clock_mhz <= 0) return 0;
  double per = 0;
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    size_t n = strlen(k[i].arch);
    /* "sm_90" and "sm_90a"; "gfx90a" and "gfx90a:sramecc+:xnack-" */
    if (!strncmp(d->arch, k[i].arch, n) && (!d->arch[n] || d->arch[n] == 'a' || d->arch[n] == ':'))
      per = k[i].per_clock;
  }
  return (double)d->multiprocessors * d->clock_mhz * 1e6 * per / 1e12;
}

/* Host path: fills h->stage with what call number `call` (0 is the first warm-up call)
 * gets: each input newly drawn from the task's init distribution with a seed of the call
 * (fresh; tcase = the case's index in t->cases) or the worker's input maps[i] rotated by
 * offs[i]; each output's poison pool rotated by offs[i]. */
static void rn_stage_host(const ka_task *t, const rn_case_bufs *b, rn_host *h, void *const *maps,
                          const int64_t *offs, int fresh, uint64_t fresh_seed, int tcase,
                          int call) {
  for (int i = 0; i < t->ntensors; i++) {
    int in = t->tensors[i].role == KA_ROLE_INPUT;
    if (in && fresh)
      ka_fill_input(&t->tensors[i], h->stage[i], b->elems[i], ka_mix64(fresh_seed, (uint64_t)call),
                    tcase, i);
    else
      rn_rotate(h->stage[i], in ? maps[i] : h->pool[i], b->elems[i], offs[i],
                ka_dtype_size(t->tensors[i].dtype));
  }
}

/* Physics floor of a case in ms: the larger of task bytes over RN_FLOOR_MARGIN x the
 * device's peak bandwidth and task flops over RN_FLOOR_MARGIN x its peak tensor rate
 * (rn_peak_tflops); either is 0 when the task or the device gives no figure. *what is set
 * to "bytes" or "flops", the bound that gave the floor (untouched when the floor is 0). */
static double rn_floor_ms(rn_state *s, const ka_case *c, const char **what) {
  const ka_task *t = s->task;
  ka_vars v = {0};
  ka_task_case_vars(t, c, &v);
  rn_device_vars(&s->dev, &v);
  char e[256];
  double floor = 0;
  int64_t bytes = 0, flops = 0;
  if (t->bytes_expr && *t->bytes_expr && s->dev.mem_bandwidth_gbps > 0 &&
      !ka_expr_eval(t->bytes_expr, &v, &bytes, e, sizeof e) && bytes > 0) {
    floor = (double)bytes / (RN_FLOOR_MARGIN * s->dev.mem_bandwidth_gbps * 1e9) * 1e3;
    *what = "bytes";
  }
  double peak = rn_peak_tflops(&s->dev);
  if (t->flops_expr && *t->flops_expr && peak > 0 &&
      !ka_expr_eval(t->flops_expr, &v, &flops, e, sizeof e) && flops > 0) {
    double f = (double)flops / (RN_FLOOR_MARGIN * peak * 1e12) * 1e3;
    if (f > floor) floor = f, *what = "flops";
  }
  return floor;
}

/* Runs one case: the candidate's correctness trial on the worker's inputs, then
 * baseline and candidate interleaved in timed calls, each on fresh inputs and fresh
 * poison, each followed by a check that the inputs are unchanged; a secret-seeded
 * quarter of the timed calls (and the last) have the candidate's outputs compared with
 * the baseline's on the same inputs. Then the integrity checks on the timings. Returns
 * KA_OK or an error with *status set and the reason in err. */
static int rn_case(rn_state *s, const Kernelarena__V1__RunnerJob *job, int ci, rn_impl *impl,
                   Kernelarena__V1__CaseResult *cr, int *status, char *err, size_t errlen) {
  const ka_task *t = s->task;
  const Kernelarena__V1__RunnerCase *jc = job->cases[ci];
  ka_case c = {.name = jc->name, .held_out = jc->held_out};
  if ((int)jc->n_params != t->nparams || (int)jc->n_input_fds != t->ntensors ||
      (int)jc->n_output_fds != t->ntensors) {
    *status = KERNELARENA__V1__STATUS__INFRA_ERROR;
    return ka_seterr(err, errlen, KA_EINVAL, "malformed runner case %s", jc->name);
  }
  for (int p = 0; p < t->nparams; p++) c.values[p] = jc->params[p];
  rn_case_bufs b;
  memset(&b, 0, sizeof b);
  rn_host h;
  memset(&h, 0, sizeof h);
  int rc = KA_OK;
  void *maps[KA_MAX_TENSORS] = {0};
  *status = KERNELARENA__V1__STATUS__INFRA_ERROR;
  /* secret streams: rotations of inputs and poison, and which timed calls are verified */
  uint64_t rot_seed = ka_mix64(job->poison_seed, 0x726f746174650000ULL + (uint64_t)ci);
  uint64_t ver_seed = ka_mix64(job->poison_seed, 0x7665726966790000ULL + (uint64_t)ci);
  /* device path: the backend can copy and compare on the device, so every call is staged
   * and checked there (rn_prepare_call, rn_check_inputs); host path otherwise */
  int dev = s->be->copy_device && s->be->compare_device;
  /* fresh inputs every call (RN_FRESH_MAX_ELEMS): drawn on the host, so the host path */
  int tcase = -1;
  for (int k = 0; k < t->ncases + t->nheld && tcase < 0; k++)
    if (!strcmp(t->cases[k].name, c.name)) tcase = k;
  int64_t in_elems = 0;
  for (int i = 0; i < t->ntensors; i++) {
    int64_t e = 0;
    char e2[64];
    if (t->tensors[i].role == KA_ROLE_INPUT &&
        ka_task_tensor_elems(t, i, &c, &e, e2, sizeof e2) == KA_OK)
      in_elems += e;
  }
  int fresh = tcase >= 0 && (t->fresh_inputs || in_elems <= RN_FRESH_MAX_ELEMS);
  uint64_t fresh_seed = ka_mix64(job->poison_seed, 0x6672657368000000ULL + (uint64_t)ci);
  if (fresh) dev = 0;
  int64_t offs[KA_MAX_TENSORS] = {0}; /* rotation of each tensor in this repetition */
  double ph_upload = 0, ph_stage = 0, ph_flush = 0, ph_calls = 0, ph_checks = 0, tp;
  double ph0 = ka_now_s();

  for (int i = 0; i < t->ntensors && rc == KA_OK; i++) {
    rc = ka_task_tensor_elems(t, i, &c, &b.elems[i], err, errlen);
    if (rc) break;
    b.bytes[i] = (size_t)b.elems[i] * ka_dtype_size(t->tensors[i].dtype);
    size_t len = b.bytes[i] ? b.bytes[i] : 1;
    int in = t->tensors[i].role == KA_ROLE_INPUT;
    int fd = in ? jc->input_fds[i] : jc->output_fds[i];
    maps[i] = mmap(NULL, len, in ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (maps[i] == MAP_FAILED) {
      maps[i] = NULL;
      rc = ka_seterr(err, errlen, KA_ESYS, "mmap of tensor %s: %s", t->tensors[i].name,
                     strerror(errno));
      break;
    }
    /* device path: inputs are staged from their device copy, never from h.stage */
    if (!(dev && in)) h.stage[i] = malloc(len);
    if (in) {
      h.back[i] = malloc(len);
    } else {
      h.pool[i] = malloc(len);
      h.out[0][i] = malloc(len);
      h.out[1][i] = malloc(len);
    }
    if ((!(dev && in) && !h.stage[i]) ||
        (in ? !h.back[i] : !h.pool[i] || !h.out[0][i] || !h.out[1][i])) {
      rc =
          ka_seterr(err, errlen, KA_ENOMEM, "out of host memory for tensor %s", t->tensors[i].name);
      break;
    }
    /* an empty tensor still gets a valid address (the cuda backend refuses 0 bytes) */
    rc = s->be->mem_alloc(s->ctx, len, &b.tensors[i]);
    if (rc) { /* the task's own tensors: never the submission's fault */
      *status = KERNELARENA__V1__STATUS__INFRA_ERROR;
      ka_seterr(err, errlen, rc, "allocating %s (%zu bytes): %s", t->tensors[i].name, b.bytes[i],
                rn_be_err(s));
      break;
    }
    if (in) {
      if (!dev) memcpy(h.stage[i], maps[i], b.bytes[i]);
    } else {
      /* poison: differs per trial and per tensor, never a fixed sentinel */
      ka_fill_poison(t->tensors[i].dtype, h.stage[i], b.elems[i],
                     ka_mix64(job->poison_seed, (uint64_t)(ci * KA_MAX_TENSORS + i)));
      ka_fill_poison(
          t->tensors[i].dtype, h.pool[i], b.elems[i],
          ka_mix64(job->poison_seed, 0x74696d6564ULL + (uint64_t)(ci * KA_MAX_TENSORS + i)));
    }
  }

  /* device path: upload each input (pristine, as the worker drew it) and each output's
   * poison pool once; a device too full for these copies falls back to the host path */
  for (int i = 0; i < t->ntensors && rc == KA_OK && dev; i++) {
    if (!b.bytes[i]) continue;
    int in = t->tensors[i].role == KA_ROLE_INPUT;
    int arc = s->be->mem_alloc(s->ctx, b.bytes[i], &b.src[i]);
    if (arc == KA_EOOM) {
      ka_sb_printf(&s->log,
                   "[kernelarena] case %s: no device memory for the pristine copies (%s): "
                   "staging on the host\n",
                   c.name, rn_be_err(s));
      for (int k = 0; k < t->ntensors; k++) {
        if (b.src[k]) s->be->mem_free(s->ctx, b.src[k]);
        b.src[k] = 0;
        if (t->tensors[k].role == KA_ROLE_INPUT && !h.stage[k]) {
          h.stage[k] = malloc(b.bytes[k] ? b.bytes[k] : 1);
          if (!h.stage[k]) {
            rc = ka_seterr(err, errlen, KA_ENOMEM, "out of host memory for tensor %s",
                           t->tensors[k].name);
            break;
          }
          memcpy(h.stage[k], maps[k], b.bytes[k]);
        }
      }
      dev = 0;
      break;
    }
    if (arc == KA_OK)
      arc = s->be->copy_to_device(s->ctx, b.src[i], in ? maps[i] : h.pool[i], b.bytes[i]);
    if (arc) {
      rc = ka_seterr(err, errlen, arc, "case %s: uploading the device copy of %s: %s", c.name,
                     t->tensors[i].name, rn_be_err(s));
      break;
    }
  }
  if (rc == KA_OK && dev) rc = s->be->synchronize(s->ctx);
  /* the backend builds its trusted compare kernel at the first compare: do that here, on
   * the first non-empty device copy against itself, so that a failure is reported before
   * anything runs and the build's time is not counted as checks */
  for (int i = 0; i < t->ntensors && rc == KA_OK && dev; i++) {
    if (!b.src[i]) continue;
    int same = 0;
    rc = s->be->compare_device(s->ctx, b.src[i], 0, b.src[i], 0, 1, &same);
    if (rc == KA_OK && !same) rc = KA_EINTERNAL;
    if (rc)
      ka_seterr(err, errlen, rc, "case %s: the backend's device compare does not work: %s", c.name,
                rn_be_err(s));
    break;
  }
  ph_upload = ka_now_s() - ph0;

  ka_launch ls[2][KA_MAX_LAUNCHES];
  static ka_arg args[2][KA_MAX_LAUNCHES][KA_MAX_ARGS];
  for (int w = 0; w < 2 && rc == KA_OK; w++) {
    ka_vars v = {0};
    ka_task_case_vars(t, &c, &v);
    rn_device_vars(&s->dev, &v);
    for (int k = 0; k < impl[w].plan->nscratch && rc == KA_OK; k++) {
      int64_t cnt;
      rc = ka_expr_eval(impl[w].plan->scratch[k].count, &v, &cnt, err, errlen);
      if (rc == KA_OK && (cnt < 0 || cnt > ((int64_t)1 << 34)))
        rc = ka_seterr(err, errlen, KA_ERANGE, "scratch %s: count %lld out of range",
                       impl[w].plan->scratch[k].name, (long long)cnt);
      if (rc) {
        *status = w ? KERNELARENA__V1__STATUS__RUNTIME_ERROR : KERNELARENA__V1__STATUS__INFRA_ERROR;
        break;
      }
      b.scratch_bytes[w][k] = (size_t)cnt * ka_dtype_size(impl[w].plan->scratch[k].dtype);
      rc = s->be->mem_alloc(s->ctx, b.scratch_bytes[w][k], &b.scratch[w][k]);
      if (rc) *status = w ? rn_status_of(rc) : KERNELARENA__V1__STATUS__INFRA_ERROR;
    }
    if (rc == KA_OK) {
      rc = rn_resolve(s, &c, &b, w, impl[w].plan, ls[w], args[w], err, errlen);
      if (rc) {
        *status = w ? KERNELARENA__V1__STATUS__RUNTIME_ERROR : KERNELARENA__V1__STATUS__INFRA_ERROR;
        char tmp[RN_ERRLEN];
        snprintf(tmp, sizeof tmp, "%s launch plan: %s", impl[w].label, err);
        snprintf(err, errlen, "%s", tmp);
      }
    }
  }

  double busy0 = 0, idle0 = 0;
  if (rc == KA_OK && s->be->untimed_work) s->be->untimed_work(s->ctx, &busy0, &idle0);

  /* correctness trial of the candidate (impl[1]) on the worker's inputs */
  int changed = -1;
  if (rc == KA_OK) {
    rc = rn_prepare_call(s, &impl[1], 1, &b, h.stage, dev, offs, 1);
    if (rc == KA_OK) {
      for (int i = 0; i < impl[1].plan->nlaunches && rc == KA_OK; i++)
        rc = s->be->launch(s->ctx, impl[1].mod, &ls[1][i]);
      if (rc == KA_OK) rc = s->be->synchronize(s->ctx);
      if (rc) {
        *status = rn_status_of(rc);
        ka_seterr(err, errlen, rc, "case %s: candidate run failed: %s", c.name, rn_be_err(s));
      }
    } else {
      ka_seterr(err, errlen, rc, "case %s: copying inputs: %s", c.name, rn_be_err(s));
    }
  }
  if (rc == KA_OK) {
    rc = rn_check_inputs(s, &b, h.stage, &h, dev, offs, &changed);
    if (rc == KA_OK && changed >= 0) {
      *status = KERNELARENA__V1__STATUS__INCORRECT;
      rc = ka_seterr(err, errlen, KA_EINVAL,
                     "case %s: the candidate changed its input %s (inputs must be left as they "
                     "are)",
                     c.name, t->tensors[changed].name);
    } else if (rc) {
      *status = rn_status_of(rc);
      ka_seterr(err, errlen, rc, "case %s: checking the inputs after the candidate's run: %s",
                c.name, rn_be_err(s));
    }
  }
  for (int i = 0; i < t->ntensors && rc == KA_OK; i++)
    if (t->tensors[i].role == KA_ROLE_OUTPUT) {
      rc = s->be->copy_to_host(s->ctx, maps[i], b.tensors[i], b.bytes[i]);
      if (rc) {
        *status = rn_status_of(rc);
        ka_seterr(err, errlen, rc, "copy of output %s: %s", t->tensors[i].name, rn_be_err(s));
      }
    }

  if (rc == KA_OK) cr->trial_outputs = 1;

  /* timing: baseline (0) and candidate (1) interleaved, order alternating; every call
   * on freshly rotated inputs and poison, staged before the cache flush and the timer */
  int reps = job->reps > 0 ? job->reps : 20, warm = job->warmup >= 0 ? job->warmup : 3;
  double *ms[2] = {calloc((size_t)reps, sizeof(double)), calloc((size_t)reps, sizeof(double))};
  double *wall[2] = {calloc((size_t)reps, sizeof(double)), calloc((size_t)reps, sizeof(double))};
  if (rc == KA_OK && (!ms[0] || !ms[1] || !wall[0] || !wall[1])) rc = KA_ENOMEM;
  int verified = 0;
  /* keep the outputs of every timed candidate call when they fit (RN_KEEP_MAX_BYTES).
   * On the device when it stages there and can checksum there: device memory is where
   * the submitted kernels run, and a later call could rewrite an earlier call's kept
   * output, so each is checksummed (keyed by the secret) right after its copy and the
   * sum is checked again before it is judged. Else in host memory, out of their reach. */
  int kept = 0, kept_dev = dev && s->be->checksum_device;
  uint64_t sum_seed = ka_mix64(job->poison_seed, 0x6b657074000000ULL + (uint64_t)ci);
  if (rc == KA_OK) {
    size_t all = 0;
    for (int i = 0; i < t->ntensors; i++)
      if (t->tensors[i].role == KA_ROLE_OUTPUT) all += (b.bytes[i] + 15) & ~(size_t)15;
    kept = all > 0 && all <= (kept_dev ? RN_KEEP_MAX_BYTES : RN_KEEP_MAX_HOST_BYTES) / (size_t)reps;
    for (int i = 0; i < t->ntensors && kept; i++) {
      if (t->tensors[i].role != KA_ROLE_OUTPUT || !b.bytes[i]) continue;
      b.kept_stride[i] = (b.bytes[i] + 15) & ~(size_t)15; /* 16-byte aligned slots */
      size_t n = (size_t)reps * b.kept_stride[i];
      if (kept_dev ? s->be->mem_alloc(s->ctx, n, &b.kept[i]) != KA_OK ||
                         !(b.kept_sum[i] = calloc((size_t)reps, sizeof(uint64_t)))
                   : !(b.kept_host[i] = malloc(n)))
        kept = 0;
    }
    if (!kept) {
      for (int i = 0; i < t->ntensors; i++) {
        if (b.kept[i]) s->be->mem_free(s->ctx, b.kept[i]);
        free(b.kept_host[i]);
        free(b.kept_sum[i]);
        b.kept[i] = 0, b.kept_host[i] = NULL, b.kept_sum[i] = NULL;
      }
      if (all > 0)
        ka_sb_printf(&s->log,
                     "[kernelarena] case %s: the outputs of %d timed calls (%zu bytes each) are "
                     "not kept: the verified calls are drawn before the calls\n",
                     c.name, reps, all);
    }
  }
  for (int r = -warm; r < reps && rc == KA_OK; r++) {
    tp = ka_now_s();
    rn_offsets(t, &b, rot_seed, r + warm, offs);
    if (!dev) rn_stage_host(t, &b, &h, maps, offs, fresh, fresh_seed, tcase, r + warm);
    ph_stage += ka_now_s() - tp;
    /* kept outputs: every timed call alike, the draw comes after the last one */
    int verify = !kept && r >= 0 && ((ka_mix64(ver_seed, (uint64_t)r) & 3) == 0 || r == reps - 1);
    for (int k = 0; k < 2 && rc == KA_OK; k++) {
      int w = (r & 1) ? 1 - k : k;
      int fail_status =
          w ? KERNELARENA__V1__STATUS__RUNTIME_ERROR : KERNELARENA__V1__STATUS__INFRA_ERROR;
      tp = ka_now_s();
      rc = rn_prepare_call(s, &impl[w], w, &b, h.stage, dev, offs, 0);
      /* device path: wait for the staging copies, so that the phase times below say where
       * the time goes (flush_cache would wait for them anyway) */
      if (rc == KA_OK && dev) rc = s->be->synchronize(s->ctx);
      ph_stage += ka_now_s() - tp;
      tp = ka_now_s();
      if (rc == KA_OK) rc = s->be->flush_cache(s->ctx);
      ph_flush += ka_now_s() - tp;
      if (rc) {
        *status = KERNELARENA__V1__STATUS__INFRA_ERROR;
        ka_seterr(err, errlen, rc, "case %s: preparing a call: %s", c.name, rn_be_err(s));
        break;
      }
      double w0 = ka_now_s(), dms = 0;
      if (r >= 0) rc = s->be->timer_start(s->ctx);
      for (int i = 0; i < impl[w].plan->nlaunches && rc == KA_OK; i++)
        rc = s->be->launch(s->ctx, impl[w].mod, &ls[w][i]);
      if (rc == KA_OK && r >= 0) rc = s->be->timer_stop(s->ctx, &dms);
      if (rc == KA_OK) rc = s->be->synchronize(s->ctx);
      double w1 = ka_now_s();
      ph_calls += w1 - w0;
      if (rc) {
        *status = w ? rn_status_of(rc) : fail_status;
        ka_seterr(err, errlen, rc, "case %s: %s %s call failed: %s", c.name,
                  r < 0 ? "warm-up" : "timed", impl[w].label, rn_be_err(s));
        break;
      }
      if (r >= 0) {
        ms[w][r] = dms;
        wall[w][r] = (w1 - w0) * 1e3;
      }
      tp = ka_now_s();
      rc = rn_check_inputs(s, &b, h.stage, &h, dev, offs, &changed);
      if (rc == KA_OK && changed >= 0) {
        *status = KERNELARENA__V1__STATUS__INCORRECT;
        rc =
            ka_seterr(err, errlen, KA_EINVAL,
                      "case %s: input %s changed during a %s call of the %s (inputs must be "
                      "left as they are)",
                      c.name, t->tensors[changed].name, r < 0 ? "warm-up" : "timed", impl[w].label);
        break;
      }
      for (int i = 0; i < t->ntensors && verify && rc == KA_OK; i++)
        if (t->tensors[i].role == KA_ROLE_OUTPUT)
          rc = s->be->copy_to_host(s->ctx, h.out[w][i], b.tensors[i], b.bytes[i]);
      for (int i = 0; i < t->ntensors && kept && w == 1 && r >= 0 && rc == KA_OK; i++) {
        if (t->tensors[i].role != KA_ROLE_OUTPUT || !b.bytes[i]) continue;
        size_t at = (size_t)r * b.kept_stride[i];
        if (b.kept[i]) {
          rc = s->be->copy_device(s->ctx, b.kept[i], at, b.tensors[i], 0, b.bytes[i]);
          if (rc == KA_OK)
            rc = s->be->checksum_device(s->ctx, b.kept[i], at, b.bytes[i],
                                        ka_mix64(sum_seed, (uint64_t)(r * KA_MAX_TENSORS + i)),
                                        &b.kept_sum[i][r]);
        } else {
          rc = s->be->copy_to_host(s->ctx, b.kept_host[i] + at, b.tensors[i], b.bytes[i]);
        }
      }
      ph_checks += ka_now_s() - tp;
      if (rc) {
        *status = w ? rn_status_of(rc) : KERNELARENA__V1__STATUS__INFRA_ERROR;
        ka_seterr(err, errlen, rc, "case %s: checking a %s call of the %s: %s", c.name,
                  r < 0 ? "warm-up" : "timed", impl[w].label, rn_be_err(s));
      }
    }
    /* the candidate's outputs against the baseline's on the same inputs; both are within
     * the task's tolerance of the reference, so they may differ by twice that */
    tp = ka_now_s();
    if (verify && rc == KA_OK)
      rc = rn_verify_call(t, &b, &h, offs, c.name, r + 1, status, err, errlen);
    ph_checks += ka_now_s() - tp;
    if (verify && rc == KA_OK) verified++;
  }
  /* device path: the device copies every call was staged from must still be what was
   * uploaded; a kernel that wrote into them (outside its own buffers) could otherwise
   * have made later calls, of both baseline and candidate, see other inputs or poison */
  tp = ka_now_s();
  for (int i = 0; i < t->ntensors && dev && rc == KA_OK; i++) {
    if (!b.bytes[i]) continue;
    int in = t->tensors[i].role == KA_ROLE_INPUT;
    void *back = in ? h.back[i] : h.out[0][i];
    rc = s->be->copy_to_host(s->ctx, back, b.src[i], b.bytes[i]);
    if (rc) {
      *status = rn_status_of(rc);
      ka_seterr(err, errlen, rc, "case %s: reading back the device copy of %s: %s", c.name,
                t->tensors[i].name, rn_be_err(s));
    } else if (memcmp(back, in ? maps[i] : h.pool[i], b.bytes[i])) {
      *status = KERNELARENA__V1__STATUS__INCORRECT;
      rc = ka_seterr(err, errlen, KA_EINVAL,
                     "case %s: the runner's pristine device copy of %s %s changed during the "
                     "timed calls (a kernel wrote outside its own buffers)",
                     c.name, in ? "input" : "the poison of output", t->tensors[i].name);
    }
  }
  /* kept outputs: draw the verified calls now, after every call ran, from the secret seed
   * and the measured times; rerun the baseline on each drawn call's inputs (untimed) and
   * compare the candidate's kept output of that call with it */
  uint64_t draw = ver_seed;
  for (int q = 0; q < reps && kept && rc == KA_OK; q++) {
    uint64_t bits;
    memcpy(&bits, &ms[1][q], sizeof bits);
    draw = ka_mix64(draw, bits);
  }
  for (int r = 0; r < reps && kept && rc == KA_OK; r++) {
    if (!((ka_mix64(draw, (uint64_t)r) & 3) == 0 || r == reps - 1)) continue;
    rn_offsets(t, &b, rot_seed, r + warm, offs);
    if (!dev) rn_stage_host(t, &b, &h, maps, offs, fresh, fresh_seed, tcase, r + warm);
    rc = rn_prepare_call(s, &impl[0], 0, &b, h.stage, dev, offs, 0);
    for (int i = 0; i < impl[0].plan->nlaunches && rc == KA_OK; i++)
      rc = s->be->launch(s->ctx, impl[0].mod, &ls[0][i]);
    if (rc == KA_OK) rc = s->be->synchronize(s->ctx);
    int tampered = -1;
    for (int i = 0; i < t->ntensors && rc == KA_OK && tampered < 0; i++) {
      if (t->tensors[i].role != KA_ROLE_OUTPUT || !b.bytes[i]) continue;
      size_t at = (size_t)r * b.kept_stride[i];
      rc = s->be->copy_to_host(s->ctx, h.out[0][i], b.tensors[i], b.bytes[i]);
      if (rc == KA_OK && b.kept[i]) {
        uint64_t sum = 0;
        rc = s->be->checksum_device(s->ctx, b.kept[i], at, b.bytes[i],
                                    ka_mix64(sum_seed, (uint64_t)(r * KA_MAX_TENSORS + i)), &sum);
        if (rc == KA_OK && sum != b.kept_sum[i][r]) tampered = i;
        if (rc == KA_OK)
          rc = s->be->copy_device(s->ctx, b.tensors[i], 0, b.kept[i], at, b.bytes[i]);
        if (rc == KA_OK) rc = s->be->copy_to_host(s->ctx, h.out[1][i], b.tensors[i], b.bytes[i]);
      } else if (rc == KA_OK) {
        memcpy(h.out[1][i], b.kept_host[i] + at, b.bytes[i]);
      }
    }
    if (rc == KA_OK && tampered >= 0) {
      *status = KERNELARENA__V1__STATUS__INCORRECT;
      rc = ka_seterr(err, errlen, KA_EINVAL,
                     "case %s: the runner's kept copy of output %s of timed call %d changed "
                     "after the call (a kernel wrote outside its own buffers)",
                     c.name, t->tensors[tampered].name, r + 1);
      break;
    }
    if (rc) {
      *status = KERNELARENA__V1__STATUS__INFRA_ERROR;
      ka_seterr(err, errlen, rc, "case %s: verifying timed call %d: %s", c.name, r + 1,
                rn_be_err(s));
      break;
    }
    rc = rn_verify_call(t, &b, &h, offs, c.name, r + 1, status, err, errlen);
    if (rc == KA_OK) verified++;
  }
  ph_checks += ka_now_s() - tp;
  if (rc == KA_OK) {
    double timed_total = 0;
    for (int r = 0; r < reps; r++) timed_total += ms[1][r];
    cr->baseline_ms = rn_median(ms[0], reps);
    cr->candidate_ms = rn_median(ms[1], reps);
    double bwall = rn_median(wall[0], reps);
    cr->candidate_wall_ms = rn_median(wall[1], reps);
    cr->speedup = cr->candidate_ms > 0 ? cr->baseline_ms / cr->candidate_ms : 0;
    cr->timed_calls = reps;
    cr->verified_calls = verified;
    cr->verified_after_calls = kept;
    const char *bound = "bytes";
    cr->floor_ms = rn_floor_ms(s, &c, &bound);
    *status = KERNELARENA__V1__STATUS__OK;
    char flag[512] = "";
    double busy1 = 0, idle1 = 0;
    if (s->be->untimed_work) s->be->untimed_work(s->ctx, &busy1, &idle1);
    double busy = busy1 - busy0, idle = idle1 - idle0;
    ka_sb_printf(&s->log,
                 "[kernelarena] case %s: baseline %.4f ms (wall %.4f), candidate %.4f ms (wall "
                 "%.4f), floor %.4g ms, %d of %d timed calls verified (drawn %s the calls), "
                 "module CPU %.1f ms while idle %.1f ms\n",
                 c.name, cr->baseline_ms, bwall, cr->candidate_ms, cr->candidate_wall_ms,
                 cr->floor_ms, verified, reps, kept ? "after" : "before", busy, idle);
    ka_sb_printf(
        &s->log,
        "[kernelarena] case %s phases (%s staging, %s inputs, %d calls): setup and upload %.1f "
        "ms, staging "
        "%.1f ms, cache flush %.1f ms, calls %.1f ms, checks %.1f ms, case %.1f ms\n",
        c.name, dev ? "device" : "host", fresh ? "fresh" : "rotated", 2 * (warm + reps),
        ph_upload * 1e3, ph_stage * 1e3, ph_flush * 1e3, ph_calls * 1e3, ph_checks * 1e3,
        (ka_now_s() - ph0) * 1e3);
    if (busy > RN_IDLE_FRACTION * timed_total + RN_IDLE_SLACK_MS)
      snprintf(flag, sizeof flag,
               "the submitted code used %.1f ms of CPU time while none of its calls was running "
               "(%.1f ms): work outside the timed calls",
               busy, idle);
    else if (cr->candidate_wall_ms > RN_WALL_FACTOR * cr->candidate_ms + RN_WALL_SLACK_MS)
      snprintf(flag, sizeof flag,
               "the device timer measured %.4f ms per call but the host wall clock %.4f ms: work "
               "outside the timed stream",
               cr->candidate_ms, cr->candidate_wall_ms);
    else if (cr->candidate_ms > RN_WALL_FACTOR * cr->candidate_wall_ms + RN_WALL_SLACK_MS ||
             cr->baseline_ms > RN_WALL_FACTOR * bwall + RN_WALL_SLACK_MS)
      snprintf(flag, sizeof flag,
               "the device timer measured more than the host wall clock (%.4f ms > %.4f ms): "
               "the timer is not trustworthy",
               cr->candidate_ms, cr->candidate_wall_ms);
    else if (!(cr->candidate_ms > cr->floor_ms) || !(cr->baseline_ms > cr->floor_ms))
      snprintf(flag, sizeof flag,
               "%s median time %.4f ms is below the physics floor %.4f ms (task %s over %.0fx "
               "the peak %s of %.0f %s): a measurement fault",
               cr->candidate_ms > cr->floor_ms ? "the baseline's" : "the candidate's",
               cr->candidate_ms > cr->floor_ms ? cr->baseline_ms : cr->candidate_ms, cr->floor_ms,
               bound, RN_FLOOR_MARGIN, strcmp(bound, "flops") ? "bandwidth" : "tensor rate",
               strcmp(bound, "flops") ? s->dev.mem_bandwidth_gbps : rn_peak_tflops(&s->dev),
               strcmp(bound, "flops") ? "GB/s" : "TFLOP/s");
    if (flag[0]) {
      *status = KERNELARENA__V1__STATUS__FLAGGED;
      cr->flag = strdup(flag);
      cr->speedup = 0;
      rc = ka_seterr(err, errlen, KA_ERANGE, "case %s: %s", c.name, flag);
    }
  }
  for (int w = 0; w < 2; w++) free(ms[w]), free(wall[w]);
  rn_host_free(&h);
  for (int i = 0; i < t->ntensors; i++)
    if (maps[i]) munmap(maps[i], b.bytes[i] ? b.bytes[i] : 1);
  rn_free_bufs(s, &b);
  return rc;
}

static int rn_discover(const char *backend) {
  char err[RN_ERRLEN] = "";
  Kernelarena__V1__DescribeResponse out = KERNELARENA__V1__DESCRIBE_RESPONSE__INIT;
  const ka_backend_ops *be = ka_backend_load(backend, err, sizeof err);
  int n = 0;
  if (!be || be->device_count(&n, err, sizeof err) || n == 0) {
    fprintf(stderr, "%s\n", err[0] ? err : "no devices");
    n = 0;
  }
  Kernelarena__V1__Device **devs = calloc((size_t)n + 1, sizeof *devs);
  int got = 0;
  for (int i = 0; i < n; i++) {
    ka_backend_ctx *ctx;
    if (be->open(i, &ctx, err, sizeof err)) {
      fprintf(stderr, "device %d: %s\n", i, err);
      continue;
    }
    ka_device_info info;
    if (be->device_info(ctx, &info) == KA_OK) {
      info.index = i;
      devs[got] = malloc(sizeof **devs);
      kernelarena__v1__device__init(devs[got]);
      rn_fill_device(devs[got], &info);
      got++;
    }
    be->close(ctx);
  }
  out.devices = devs;
  out.n_devices = (size_t)got;
  size_t len = kernelarena__v1__describe_response__get_packed_size(&out);
  uint8_t *buf = malloc(len + 1);
  kernelarena__v1__describe_response__pack(&out, buf);
  int rc = rn_write_all(1, buf, len);
  free(buf);
  for (int i = 0; i < got; i++) kernelarena__v1__device__free_unpacked(devs[i], NULL);
  free(devs);
  return rc == KA_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  /* sandbox.h: the supervisor gpuexec starts around a runner; a module process locks
   * itself (seccomp) before it loads submitted code */
  if (argc == 3 && !strcmp(argv[1], KA_SANDBOX_SUPERVISE_ARG)) return ka_sandbox_supervise(argv[2]);
  if (argc >= 3 && !strcmp(argv[1], KA_RUNNER_HOST_MODULE_ARG)) {
    ka_sandbox_lock_inherited();
    return ka_host_module_main(argc, argv);
  }
  if (argc == 3 && !strcmp(argv[1], "--discover")) return rn_discover(argv[2]);
  if (argc != 1) {
    fprintf(stderr,
            "usage: ka-runner            (job on stdin, result on fd %d; started by gpuexec)\n"
            "       ka-runner --discover BACKEND\n",
            KA_RUNNER_RESULT_FD);
    return 2;
  }
  /* Not dumpable: no other process of this user can open /proc/<pid>/mem, fd/3 or
   * ptrace this one, so code of the submission (in module processes) cannot reach the
   * result channel or the timer. */
  prctl(PR_SET_DUMPABLE, 0);
  uint8_t *jbuf;
  size_t jlen;
  if (rn_read_all(0, KA_RUNNER_MAX_JOB_BYTES, &jbuf, &jlen)) {
    fprintf(stderr, "ka-runner: cannot read the job\n");
    return 2;
  }
  Kernelarena__V1__RunnerJob *job = kernelarena__v1__runner_job__unpack(NULL, jlen, jbuf);
  free(jbuf);
  if (!job) {
    fprintf(stderr, "ka-runner: malformed job\n");
    return 2;
  }
  Kernelarena__V1__RunnerResult res = KERNELARENA__V1__RUNNER_RESULT__INIT;
  Kernelarena__V1__Device dev = KERNELARENA__V1__DEVICE__INIT;
  Kernelarena__V1__Telemetry tel = KERNELARENA__V1__TELEMETRY__INIT;
  res.status = KERNELARENA__V1__STATUS__INFRA_ERROR;
  char err[RN_ERRLEN] = "";
  rn_state s = {0};
  ka_task *task = NULL;
  rn_impl impl[2] = {{.label = "baseline"}, {.label = "candidate"}};
  char *blog = NULL, *clog = NULL;
  Kernelarena__V1__CaseResult **crs = calloc(job->n_cases + 1, sizeof *crs);
  int rc = ka_task_load(job->task_dir, &task, err, sizeof err);
  s.task = task;
  if (rc == KA_OK) {
    s.be = ka_backend_load(job->backend, err, sizeof err);
    if (!s.be) rc = KA_EUNAVAIL;
  }
  if (rc == KA_OK) rc = s.be->open(job->device_index, &s.ctx, err, sizeof err);
  if (rc == KA_OK) {
    s.be->device_info(s.ctx, &s.dev);
    s.dev.index = job->device_index;
    rn_fill_device(&dev, &s.dev);
    res.device = &dev;
    /* the cache flush must cover at least twice the last-level cache */
    size_t fb = 0;
    if (s.be->flush_bytes && s.be->flush_bytes(s.ctx, &fb) == KA_OK && s.dev.l2_bytes > 0 &&
        fb < 2 * (size_t)s.dev.l2_bytes) {
      rc = ka_seterr(err, sizeof err, KA_ESTATE,
                     "the %s backend's cache flush writes %zu bytes, less than twice the "
                     "%lld-byte last-level cache",
                     s.be->name, fb, (long long)s.dev.l2_bytes);
    } else if (!s.be->flush_bytes) {
      ka_sb_printf(&s.log, "[kernelarena] the %s backend does not report its cache flush size\n",
                   s.be->name);
    }
  }
  if (rc == KA_OK) {
    rc = rn_build(&s, job, 1, &impl[0], &blog, err, sizeof err);
    if (rc) {
      char tmp[RN_ERRLEN];
      snprintf(tmp, sizeof tmp, "the task's baseline failed to build (%s): %s", ka_strerror(rc),
               err);
      snprintf(err, sizeof err, "%s", tmp);
      if (blog) ka_sb_printf(&s.log, "baseline build log:\n%s\n", blog);
      rc = KA_EINTERNAL;
    }
  }
  if (rc == KA_OK) {
    double t0 = ka_now_s();
    /* include allowlist, then Landlock and seccomp (sandbox.h) */
    rc = ka_sandbox_candidate(task, job, &clog, err, sizeof err);
    if (rc == KA_OK) rc = rn_build(&s, job, 0, &impl[1], &clog, err, sizeof err);
    res.compile_s = ka_now_s() - t0;
    res.compile_log = clog ? clog : "";
    if (rc == KA_ECOMPILE) {
      res.status = KERNELARENA__V1__STATUS__COMPILE_ERROR;
      /* the compiler's own words stay in the compile log (a first error line could quote
       * an included file); an import check's refusal names only the symbol */
      if (strncmp(err, "import check: ", 14)) snprintf(err, sizeof err, "compilation failed");
    }
  }
  if (rc == KA_OK) {
    res.status = KERNELARENA__V1__STATUS__OK;
    for (size_t ci = 0; ci < job->n_cases; ci++) {
      crs[ci] = malloc(sizeof **crs);
      kernelarena__v1__case_result__init(crs[ci]);
      crs[ci]->name = job->cases[ci]->name;
      crs[ci]->held_out = job->cases[ci]->held_out;
      res.n_cases = ci + 1;
      int st;
      rc = rn_case(&s, job, (int)ci, impl, crs[ci], &st, err, sizeof err);
      if (rc) {
        res.status = st;
        crs[ci]->message = err;
        break;
      }
    }
  }
  ka_telemetry tm;
  if (s.ctx && s.be->telemetry && s.be->telemetry(s.ctx, &tm) == KA_OK && tm.valid) {
    tel.valid = 1;
    tel.device_name = tm.device_name;
    tel.sm_clock_mhz = tm.sm_clock_mhz;
    tel.mem_clock_mhz = tm.mem_clock_mhz;
    tel.temperature_c = tm.temperature_c;
    tel.power_w = tm.power_w;
    res.telemetry = &tel;
  }
  res.cases = crs;
  if (rc) res.message = err;
  res.runtime_log = s.log.s ? s.log.s : "";
  size_t len = kernelarena__v1__runner_result__get_packed_size(&res);
  uint8_t *out = malloc(len + 1);
  kernelarena__v1__runner_result__pack(&res, out);
  int wrc = rn_write_all(KA_RUNNER_RESULT_FD, out, len);
  /* close the channel before tearing down the device: a teardown fault must not
   * lose a result that was already produced */
  close(KA_RUNNER_RESULT_FD);
  fflush(NULL);
  _exit(wrc == KA_OK ? 0 : 3);
}
