/* ka-runner: the evaluation of one case, as its phases (docs/integrity.md).
 *
 *   setup   map the worker's tensors, allocate device tensors and scratch, resolve both
 *           implementations' launches;
 *   trial   the candidate's correctness trial on the worker's inputs (outputs poisoned
 *           first, inputs checked unchanged after), its outputs written back for the
 *           worker to judge against the reference;
 *   time    warm-up, then timed calls of baseline and candidate interleaved (order
 *           alternating), each staged outside the timed interval on inputs and poison
 *           drawn anew for that call, the cache flushed, timed by device events and
 *           followed by a check that its inputs are unchanged; the candidate's outputs
 *           put aside (checksummed with a secret key where they stay on the device);
 *           repeated until the estimate is stable or the budget is spent;
 *   verify  every timed call (device path) or a secret half and the last (host path), drawn after
 * all calls ran where every call's outputs could be kept: that call's inputs drawn again, the
 * baseline run on them (untimed; its inputs checked after it too), and the candidate's kept outputs
 * compared with the baseline's at the task's tolerance; only the verified calls give the reported
 * timings; judge   medians, then the checks on the timings: host wall clock against device timer,
 * physics floor, work outside the calls.
 *
 * Device path (a backend with fill_device, close_device, copy_device, compare_device and
 * checksum_device: cuda): inputs and poison are drawn on the device by the trusted
 * counter-based generator (trusted_kernels.h) from keys the submission never sees, checked
 * there by drawing them again, and outputs compared there; nothing of a timed call
 * crosses to the host. Host path (host and hip backends): the same
 * draws on the host (ka_fill_input with a seed per call, fresh every call at any size),
 * copies to and from the device, compares on the host. A device without room for every
 * call's kept outputs keeps the device path and draws the verified calls before them.
 *
 * Verdicts: a fault before any launch of the candidate is the infrastructure's
 * (INFRA_ERROR) unless it is device memory (OOM: the task fits its device, so memory
 * the candidate's module holds is the candidate's); any device fault after the first
 * launch of the candidate, of the baseline's calls included, is the candidate's. */
#include "runner_case.h"

#include "runner.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "data.h"

/* Integrity thresholds (docs/integrity.md).
 * Physics floor: a median time below task bytes / (RN_FLOOR_MARGIN x peak bandwidth) is a
 * measurement fault. The margin covers writes that a cache absorbs before the kernel ends
 * and a peak bandwidth that is a little low; the floor only has to catch the impossible.
 * Wall clock: the median host wall time of the timed calls (from before the timer starts
 * to after a device-wide synchronize) may exceed the median device time by
 * RN_WALL_FACTOR x plus RN_WALL_SLACK_MS (launch latency, waking the host); more means
 * work the timer did not see. A device time above the wall time means a forged timer.
 * Untimed work (host modules): CPU time of the module processes while no call of theirs
 * was in flight, from the modules' load on (between cases too), may be at most
 * RN_IDLE_FRACTION of the candidate's total timed time plus RN_IDLE_SLACK_MS: honest
 * module processes use well under 1 ms there (0.3 ms measured, plus a few ms of process
 * start), and a thread that precomputes a call's outputs from inputs staged before the
 * timer must fit its work into that budget (red team 2026-12-01: 15% precomputed with 21
 * ms of idle CPU passed the former 25% + 10 ms). */
#define RN_FLOOR_MARGIN 2.0
#define RN_WALL_FACTOR 1.5
#define RN_WALL_SLACK_MS 0.2
#define RN_IDLE_FRACTION 0.02
#define RN_IDLE_SLACK_MS 5.0
/* Verification of timed calls (property 5). Device path: every timed call is verified
 * right after its rep (baseline and candidate on the same inputs), against the baseline's
 * outputs of that call when it ran second, else against a run of the baseline again.
 * Host path: the candidate's outputs of every timed call are kept (a copy after the call,
 * outside the timer) when all of them take at most RN_KEEP_MAX_HOST_BYTES, and the
 * verified half is drawn after the last call; above it the draw is made before the calls
 * from the secret seed, and each verified call is compared right after it ran. The
 * candidate's outputs must be within the task's own tolerance of the baseline's
 * (RN_VERIFY_SLACK x atol, rtol). */
#define RN_KEEP_MAX_HOST_BYTES ((size_t)2 << 30)
#define RN_VERIFY_SLACK 1.0
/* Adaptive repetition (issue 15; GPU MODE's stopping rule in spirit): after the job's
 * reps (the minimum), timed calls continue while the standard error of the median log
 * speedup over the repetitions, estimated robustly (rn_median_se: from the median
 * absolute deviation; the mean's sd / sqrt(n) before 2026-12-04, which a rare slow call
 * blew up), exceeds RN_RSE_TARGET (a relative error of the speedup estimate of about
 * 0.1%), up to the job's max_reps (gpuexec
 * --adaptive-reps), RN_REPS_MAX repetitions, or RN_TIMED_BUDGET_S seconds of wall time
 * in the timed phase (not counting waits for the shared device), whichever comes first.
 * On the device path (every call verified) and where every call's outputs are kept;
 * otherwise the job's reps exactly. The budget: on the H200 a rep of a 16M-element
 * elementwise case costs ~1.4 ms with its staging and checks, so such a case (per-call
 * noise ~1.5%) stops at RN_REPS_MAX or the budget, and a large case (less noise, ~5 ms
 * a rep) after ~60 reps, which held its self-speedup within 0.3% in the 2026-12-01 runs
 * (docs/benchmarks/2026-12-01-h200-concurrency.md). */
#define RN_RSE_TARGET 1e-3
#define RN_REPS_MAX 400
#define RN_TIMED_BUDGET_S 0.3
/* How long a runner keeps the device lock exclusive over consecutive pairs of timed
 * calls before other evaluations' waiting work gets the device (rn_slice_end). Handing
 * the lock over after every call, with other evaluations in flight, made them take turns
 * call by call: each call's staging and checks, under the lock held shared, kept the
 * next evaluation's exclusive hold waiting, and the device idled in every handover
 * (H200: 1.14 steps/s with 16 gelu episodes in flight against 1.56 with one,
 * docs/benchmarks/2026-12-02-session19-h200.md). 20 ms is a few calls of the slowest
 * cases' pairs and makes a handover (flock wake-up and a GPU context switch, tens of
 * microseconds) under 1% of the slice. */
#define RN_SLICE_S 0.02

#define RN_T KA_MAX_TENSORS

/* One case's evaluation: everything its phases share. */
typedef struct rn_cx {
  rn_state *s;
  const ka_task *t;
  rn_impl *impl;
  const Kernelarena__V1__RunnerJob *job;
  ka_case c;
  int ci, tcase; /* index in the job, index in the task (-1 if unknown) */
  Kernelarena__V1__CaseResult *cr;
  int *status;
  char *err;
  size_t errlen;
  int dev; /* device path */
  /* secret streams, all from the job's poison seed (which the worker keeps secret) */
  uint64_t in_seed, poison_seed, ver_seed, sum_seed, rot_seed, trial_sum_key;
  uint64_t trial_seed; /* the worker's input seed of the trial (trial_drawn) */
  int trial_drawn;     /* device path: the trial's inputs drawn on the device, not uploaded */
  /* tensors: the worker's memfd mappings, the device buffers both implementations use */
  void *maps[RN_T];
  ka_devptr tensors[RN_T];
  size_t bytes[RN_T];
  int64_t elems[RN_T];
  ka_fill in_fill[RN_T]; /* each input's distribution and bounds; the key is per call */
  uint64_t trial_sum[RN_T];
  uint64_t in_sum[RN_T]; /* device path: keyed checksum of each input as staged for the
                            current call (rn_stage_for), checked after it (rn_check_inputs) */
  ka_devptr scratch[2][KA_MAX_SCRATCH];
  size_t scratch_bytes[2][KA_MAX_SCRATCH];
  ka_launch ls[2][KA_MAX_LAUNCHES];
  ka_arg args[2][KA_MAX_LAUNCHES][KA_MAX_ARGS];
  /* the candidate's timed outputs put aside: slot r of output i at byte r * stride[i] of
   * aside[i] (device, checksum aside_sum[i][r]) or aside_host[i] (host path) */
  int kept;  /* every timed call has a slot (draw after); else one slot (draw before) */
  int slots; /* slots per output */
  ka_devptr aside[RN_T];
  unsigned char *aside_host[RN_T];
  uint64_t *aside_sum[RN_T];
  size_t stride[RN_T];
  /* host path: what a call gets, inputs read back, the poison pool, baseline outputs */
  void *stage[RN_T], *back[RN_T], *pool[RN_T], *out0[RN_T];
  /* timings */
  int warm, reps, reps_min, reps_max;
  double *ms[2], *wall[2];
  double *scratch_se;   /* 2 x reps_max doubles for rn_median_se */
  unsigned char *vflag; /* vflag[r]: timed call r was verified */
  int verified;
  double slice0; /* when the current exclusive hold of the device lock began (rn_time) */
  double ph_setup, ph_trial, ph_stage, ph_flush, ph_calls, ph_checks, ph_verify;
  /* parts of setup and trial (the runtime log's second phase line) */
  double ph_map, ph_alloc, ph_aside, ph_tstage, ph_trun, ph_tcheck, ph_tout;
} rn_cx;

const char *rn_be_err(rn_state *s) {
  return s->be->last_error ? s->be->last_error(s->ctx) : "";
}

void rn_device_vars(const ka_device_info *d, ka_vars *v) {
  ka_vars_set(v, "sm_count", d->multiprocessors);
  ka_vars_set(v, "warp_size", d->warp_size);
  ka_vars_set(v, "max_threads", d->max_threads_per_block);
  ka_vars_set(v, "l2_bytes", d->l2_bytes);
  ka_vars_set(v, "shared_per_block", d->shared_bytes_per_block);
}

/* ---- verdicts ------------------------------------------------------------------- */

/* The verdict of a backend fault rc at this point of the case (see the file comment). */
static int rn_blame(const rn_cx *x, int rc) {
  if (rc == KA_EOOM) return KERNELARENA__V1__STATUS__OOM;
  if (!x->s->candidate_ran || rc == KA_ENOMEM || rc == KA_ESYS || rc == KA_EIO)
    return KERNELARENA__V1__STATUS__INFRA_ERROR;
  return KERNELARENA__V1__STATUS__RUNTIME_ERROR;
}

/* Sets the case's verdict and reason; returns rc (a ka_err, never KA_OK). */
static int rn_fail(rn_cx *x, int status, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int rn_fail(rn_cx *x, int status, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->err, x->errlen, fmt, ap);
  va_end(ap);
  *x->status = status;
  return rc ? rc : KA_EINTERNAL;
}

/* A backend fault: the verdict rn_blame gives, the backend's reason after `what`. */
static int rn_fault(rn_cx *x, int rc, const char *what) {
  return rn_fail(x, rn_blame(x, rc), rc, "case %s: %s: %s", x->c.name, what, rn_be_err(x->s));
}

/* ---- keys and draws ------------------------------------------------------------- */

/* Call q of the case: 0 .. warm-1 the warm-up calls, then the timed calls; the trial is
 * RN_TRIAL. Input i of call q is drawn under rn_in_key, output i poisoned under
 * rn_poison_key: both secret, distinct per call, tensor and case. */
#define RN_TRIAL (-1)
static uint64_t rn_in_key(const rn_cx *x, int q, int i) {
  /* the trial: the worker's key (ka_fill_input's); a call: its own seed, the same
   * derivation, so host and device paths draw the same inputs for a call */
  if (q == RN_TRIAL) return ka_fill_key(x->trial_seed, x->tcase, i);
  return ka_fill_key(ka_mix64(x->in_seed, (uint64_t)q), x->tcase, i);
}
static uint64_t rn_poison_key(const rn_cx *x, int q, int i) {
  return ka_mix64(ka_mix64(x->poison_seed, (uint64_t)(q + 1)), (uint64_t)i);
}
/* Host path: rotation of output i's poison pool for call q (0 <= off < elems). */
static int64_t rn_pool_off(const rn_cx *x, int q, int i) {
  if (x->elems[i] <= 0) return 0;
  return (int64_t)(ka_mix64(x->rot_seed, (uint64_t)((q + 1) * RN_T + i)) % (uint64_t)x->elems[i]);
}
static ka_fill rn_poison_fill(const rn_cx *x, int q, int i) {
  ka_fill f = {
      .dtype = (int)x->t->tensors[i].dtype, .dist = KA_FILL_POISON, .key = rn_poison_key(x, q, i)};
  return f;
}
static int rn_is_input(const rn_cx *x, int i) {
  return x->t->tensors[i].role == KA_ROLE_INPUT;
}

/* Writes src rotated left by off elements (of es bytes) into dst: dst[k] = src[(k+off) % n]. */
static void rn_rotate(void *dst, const void *src, int64_t n, int64_t off, size_t es) {
  if (n <= 0) return;
  off %= n;
  memcpy(dst, (const char *)src + (size_t)off * es, (size_t)(n - off) * es);
  memcpy((char *)dst + (size_t)(n - off) * es, src, (size_t)off * es);
}

/* Elements of got that differ from want (both tensor i's dtype, n elements) beyond `slack`
 * times the task's tolerance, taking want's largest finite magnitude as the scale (as
 * ka_compare_outputs does with the reference): the host twin of close_device. Equal
 * values match (equal infinities too; any other non-finite value differs); NaN matches NaN, except
 * an element of got that still holds the poison written before the call: element k of that poison
 * is pool[(k + off) % n] (pool may be NULL). */
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
    if (a == g) continue;
    /* an infinity on either side that is not matched exactly differs (rtol x |Inf| would
     * let any value pass) */
    if (!isfinite(a) || !isfinite(g) || !(fabs(g - a) <= slack * (atol * scale + rtol * fabs(a))))
      bad++;
  }
  return bad;
}

/* ---- setup ---------------------------------------------------------------------- */

/* Maps tensor i's memfd from the worker (host work only: rn_case does it before it
 * takes the device lock, so that populating a large output stalls no neighbour's timed
 * calls). */
static int rn_map_tensor(rn_cx *x, int i) {
  const Kernelarena__V1__RunnerCase *jc = x->job->cases[x->ci];
  const ka_tensor_spec *ts = &x->t->tensors[i];
  int rc = ka_task_tensor_elems(x->t, i, &x->c, &x->elems[i], x->err, x->errlen);
  if (rc) return rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, rc, "%s", x->err);
  x->bytes[i] = (size_t)x->elems[i] * ka_dtype_size(ts->dtype);
  size_t len = x->bytes[i] ? x->bytes[i] : 1;
  int in = rn_is_input(x, i);
  int fd = in ? jc->input_fds[i] : jc->output_fds[i];
  /* an input without a memfd: the worker draws it while this runner works, and the trial
   * draws it on the device (rn_stage_for); no other path can run without it */
  if (in && fd < 0 && !(x->dev && x->trial_drawn))
    return rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_EINVAL,
                   "case %s: input %s came without its memfd, and %s", x->c.name, ts->name,
                   !x->dev        ? "this backend cannot draw it on the device"
                   : x->tcase < 0 ? "the runner's copy of the task has no case of that name"
                                  : "the job gave no input seed");
  /* outputs populated up front: the trial's device-to-host copy then takes no page
   * faults (a 256 MiB output is 65536 of them) */
  double tm = ka_now_s();
  x->maps[i] = in && fd < 0 ? NULL
                            : mmap(NULL, len, in ? PROT_READ : PROT_READ | PROT_WRITE,
                                   MAP_SHARED | (in ? 0 : MAP_POPULATE), fd, 0);
  x->ph_map += ka_now_s() - tm;
  if (x->maps[i] == MAP_FAILED) {
    x->maps[i] = NULL;
    return rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_ESYS, "mmap of tensor %s: %s",
                   ts->name, strerror(errno));
  }
  return KA_OK;
}

/* Every tensor's memfd mapped (rn_map_tensor), timed into the setup phase. */
static int rn_map(rn_cx *x) {
  double t0 = ka_now_s();
  int rc = KA_OK;
  for (int i = 0; i < x->t->ntensors && rc == KA_OK; i++) rc = rn_map_tensor(x, i);
  x->ph_setup += ka_now_s() - t0;
  return rc;
}

/* Allocates tensor i's device buffer (and the host buffers of the host path), its memfd
 * mapped already (rn_map). */
static int rn_setup_tensor(rn_cx *x, int i) {
  const ka_tensor_spec *ts = &x->t->tensors[i];
  size_t len = x->bytes[i] ? x->bytes[i] : 1;
  int in = rn_is_input(x, i), rc;
  if (!x->dev) {
    x->stage[i] = malloc(len);
    if (in)
      x->back[i] = malloc(len);
    else
      x->pool[i] = malloc(len), x->out0[i] = malloc(len);
    if (!x->stage[i] || (in ? !x->back[i] : !x->pool[i] || !x->out0[i]))
      return rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_ENOMEM,
                     "out of host memory for tensor %s", ts->name);
    if (!in)
      ka_fill_poison(ts->dtype, x->pool[i], x->elems[i],
                     ka_mix64(x->poison_seed, 0x74696d6564ULL + (uint64_t)(x->ci * RN_T + i)));
  }
  if (in) {
    ka_fill *f = &x->in_fill[i];
    f->dtype = (int)ts->dtype, f->dist = (int)ts->dist, f->a = ts->a, f->b = ts->b;
    if ((ts->init_expr[0] || ts->init_expr[1]) && x->tcase >= 0 &&
        (rc = ka_task_init_bounds(x->t, i, &x->t->cases[x->tcase], &f->a, &f->b, x->err,
                                  x->errlen)) != KA_OK)
      return rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, rc, "%s", x->err);
  }
  /* an empty tensor still gets a valid address (the cuda backend refuses 0 bytes) */
  double tm = ka_now_s();
  rc = x->s->be->mem_alloc(x->s->ctx, len, &x->tensors[i]);
  x->ph_alloc += ka_now_s() - tm;
  if (rc)
    return rn_fail(x, rn_blame(x, rc), rc, "allocating %s (%zu bytes): %s", ts->name, x->bytes[i],
                   rn_be_err(x->s));
  return KA_OK;
}

/* Allocates impl w's scratch buffers (at least 1 byte each: a count of 0 is valid) and
 * resolves its launches for the case. A candidate's bad plan is its RUNTIME_ERROR. */
static int rn_setup_impl(rn_cx *x, int w) {
  rn_impl *im = &x->impl[w];
  int fail = w ? KERNELARENA__V1__STATUS__RUNTIME_ERROR : KERNELARENA__V1__STATUS__INFRA_ERROR;
  ka_vars v = {0};
  ka_task_case_vars(x->t, &x->c, &v);
  rn_device_vars(&x->s->dev, &v);
  for (int k = 0; k < im->plan->nscratch; k++) {
    int64_t cnt;
    int rc = ka_expr_eval(im->plan->scratch[k].count, &v, &cnt, x->err, x->errlen);
    if (rc == KA_OK && (cnt < 0 || cnt > ((int64_t)1 << 34)))
      rc = ka_seterr(x->err, x->errlen, KA_ERANGE, "scratch %s: count %lld out of range",
                     im->plan->scratch[k].name, (long long)cnt);
    if (rc) return rn_fail(x, fail, rc, "%s launch plan: %s", im->label, x->err);
    x->scratch_bytes[w][k] = (size_t)cnt * ka_dtype_size(im->plan->scratch[k].dtype);
    size_t len = x->scratch_bytes[w][k] ? x->scratch_bytes[w][k] : 1;
    rc = x->s->be->mem_alloc(x->s->ctx, len, &x->scratch[w][k]);
    if (rc)
      return rn_fail(x, rc == KA_EOOM ? KERNELARENA__V1__STATUS__OOM : fail, rc,
                     "case %s: %s scratch %s (%zu bytes): %s", x->c.name, im->label,
                     im->plan->scratch[k].name, len, rn_be_err(x->s));
  }
  char e[RN_ERRLEN];
  int rc = 0;
  for (int i = 0; i < im->plan->nlaunches && rc == KA_OK; i++) {
    const ka_plan_launch *pl = &im->plan->launches[i];
    ka_launch *l = &x->ls[w][i];
    memset(l, 0, sizeof *l);
    l->kernel = pl->kernel;
    int64_t val, threads = 1;
    for (int d = 0; d < 3 && rc == KA_OK; d++) {
      if ((rc = ka_expr_eval(pl->grid[d], &v, &val, e, sizeof e)) != KA_OK) break;
      if (val < 1 || val > 0x7fffffff)
        rc = ka_seterr(e, sizeof e, KA_ERANGE, "launch %d (%s): grid[%d] = %lld is out of range", i,
                       pl->kernel, d, (long long)val);
      l->grid[d] = (unsigned)val;
      if (rc || (rc = ka_expr_eval(pl->block[d], &v, &val, e, sizeof e)) != KA_OK) break;
      if (val < 1 || val > 1024)
        rc = ka_seterr(e, sizeof e, KA_ERANGE, "launch %d (%s): block[%d] = %lld is out of range",
                       i, pl->kernel, d, (long long)val);
      l->block[d] = (unsigned)val;
      threads *= val;
    }
    if (rc == KA_OK && x->s->dev.max_threads_per_block > 1 &&
        threads > x->s->dev.max_threads_per_block)
      rc = ka_seterr(e, sizeof e, KA_ERANGE, "launch %d (%s): %lld threads per block exceed %d", i,
                     pl->kernel, (long long)threads, x->s->dev.max_threads_per_block);
    if (rc == KA_OK && (rc = ka_expr_eval(pl->shared_bytes, &v, &val, e, sizeof e)) == KA_OK &&
        (val < 0 ||
         (x->s->dev.shared_bytes_per_block > 0 && val > x->s->dev.shared_bytes_per_block)))
      rc = ka_seterr(e, sizeof e, KA_ERANGE, "launch %d (%s): shared_bytes %lld out of range", i,
                     pl->kernel, (long long)val);
    l->shared_bytes = (unsigned)val;
    for (int a = 0; a < pl->nargs && rc == KA_OK; a++) {
      const char *name = pl->args[a];
      ka_arg *arg = &x->args[w][i][a];
      int ti = ka_task_tensor(x->t, name), pi = ka_task_param(x->t, name);
      if (ti >= 0) {
        arg->kind = KA_ARG_PTR, arg->v.ptr = x->tensors[ti];
      } else if (pi >= 0 && x->t->params[pi].is_i32) {
        arg->kind = KA_ARG_I32, arg->v.i32 = (int32_t)x->c.values[pi];
      } else if (pi >= 0) {
        arg->kind = KA_ARG_I64, arg->v.i64 = x->c.values[pi];
      } else {
        for (int k = 0; k < im->plan->nscratch; k++)
          if (!strcmp(im->plan->scratch[k].name, name))
            arg->kind = KA_ARG_PTR, arg->v.ptr = x->scratch[w][k];
      }
    }
    l->args = x->args[w][i];
    l->nargs = pl->nargs;
  }
  if (rc) return rn_fail(x, fail, rc, "%s launch plan: %s", im->label, e);
  return KA_OK;
}

/* Where the candidate's timed outputs go (rn_cx.aside): host path, one slot per timed
 * call if all fit the budget (kept), else one slot; device path, one slot in device
 * memory (every call is verified right after its rep). Sets reps_max. */
static int rn_setup_aside(rn_cx *x) {
  size_t all = 0;
  for (int i = 0; i < x->t->ntensors; i++)
    if (!rn_is_input(x, i)) all += (x->bytes[i] + 15) & ~(size_t)15;
  size_t budget = RN_KEEP_MAX_HOST_BYTES;
  int want = x->job->max_reps > x->reps_min ? x->job->max_reps : x->reps_min;
  if (want > RN_REPS_MAX) want = RN_REPS_MAX;
  if (want < x->reps_min) want = x->reps_min;
  /* device path: every timed call is verified right after its rep (rn_drawn), one slot
   * suffices and the reps are not bounded by a memory budget */
  if (!x->dev && all > 0 && (size_t)want * all > budget) want = (int)(budget / all);
  x->kept = !x->dev && want >= x->reps_min;
  for (int attempt = 0; attempt < 2; attempt++) {
    x->slots = x->kept ? want : 1;
    int ok = 1;
    for (int i = 0; i < x->t->ntensors && ok; i++) {
      if (rn_is_input(x, i) || !x->bytes[i]) continue;
      x->stride[i] = (x->bytes[i] + 15) & ~(size_t)15;
      size_t n = (size_t)x->slots * x->stride[i];
      x->aside_sum[i] = calloc((size_t)x->slots, sizeof(uint64_t));
      if (!x->aside_sum[i])
        return rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_ENOMEM,
                       "out of host memory for the kept outputs");
      if (x->dev) {
        int rc = x->s->be->mem_alloc(x->s->ctx, n, &x->aside[i]);
        if (rc == KA_EOOM && x->kept)
          ok = 0;
        else if (rc)
          return rn_fault(x, rc, "allocating a copy of the outputs");
      } else if (!(x->aside_host[i] = malloc(n))) {
        if (!x->kept)
          return rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_ENOMEM,
                         "out of host memory for the kept outputs");
        ok = 0;
      }
    }
    if (ok) break;
    for (int i = 0; i < x->t->ntensors; i++) {
      if (x->aside[i]) x->s->be->mem_free(x->s->ctx, x->aside[i]);
      free(x->aside_host[i]);
      free(x->aside_sum[i]);
      x->aside[i] = 0, x->aside_host[i] = NULL, x->aside_sum[i] = NULL;
    }
    x->kept = 0;
  }
  x->reps_max = x->kept ? x->slots : x->dev ? want : x->reps_min;
  if (!x->kept && !x->dev && all > 0)
    ka_sb_printf(&x->s->log,
                 "[kernelarena] case %s: the outputs of %d timed calls (%zu bytes each) are not "
                 "kept: the verified calls are drawn before the calls\n",
                 x->c.name, x->reps_min, all);
  return KA_OK;
}

static int rn_setup(rn_cx *x) {
  double t0 = ka_now_s();
  int rc = KA_OK;
  for (int i = 0; i < x->t->ntensors && rc == KA_OK; i++) rc = rn_setup_tensor(x, i);
  for (int w = 0; w < 2 && rc == KA_OK; w++) rc = rn_setup_impl(x, w);
  double ta = ka_now_s();
  if (rc == KA_OK) rc = rn_setup_aside(x);
  x->ph_aside = ka_now_s() - ta;
  int n = x->reps_max > 0 ? x->reps_max : 1;
  for (int w = 0; w < 2 && rc == KA_OK; w++) {
    x->ms[w] = calloc((size_t)n, sizeof(double));
    x->wall[w] = calloc((size_t)n, sizeof(double));
    if (!x->ms[w] || !x->wall[w])
      rc = rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_ENOMEM, "out of host memory");
  }
  if (rc == KA_OK && (!(x->vflag = calloc((size_t)n, 1)) ||
                      !(x->scratch_se = calloc((size_t)n * 2, sizeof(double)))))
    rc = rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_ENOMEM, "out of host memory");
  x->ph_setup += ka_now_s() - t0;
  return rc;
}

/* ---- staging and checks of one call ------------------------------------------------ */

/* The trial's inputs drawn on the device must be the worker's (the reference is computed
 * from those): RN_SPOT_RUNS runs of RN_SPOT_RUN consecutive elements of input i, at secret
 * starts, compared with the generator's definition (ka_gen_bits, element for element
 * what the worker's ka_fill_input draws: common_test), so that the worker need not have
 * drawn them yet (it starts this runner first and draws them while it works). A copy per
 * run, not per element: the check runs under the device lock, where 256 round trips took
 * 5-20 ms of every step under load (docs/benchmarks/2026-12-03-session24-h200.md). It
 * checks the trusted generators before any candidate code has run on these inputs, so
 * contiguous runs lose nothing a scattered sample had. A difference is the generator's
 * fault, never the submission's. */
#define RN_SPOT_RUNS 4
#define RN_SPOT_RUN 64
static int rn_spot_check(rn_cx *x, int i) {
  const ka_fill *f = &x->in_fill[i];
  size_t es = ka_dtype_size(x->t->tensors[i].dtype);
  uint64_t key = rn_in_key(x, RN_TRIAL, i), n = (uint64_t)x->elems[i];
  uint64_t len = n < RN_SPOT_RUN ? n : RN_SPOT_RUN;
  unsigned char got[RN_SPOT_RUN * 8];
  for (int k = 0; k < RN_SPOT_RUNS && len > 0; k++) {
    uint64_t at0 = ka_mix64(x->ver_seed, (uint64_t)(i * RN_SPOT_RUNS + k)) % (n - len + 1);
    int rc = x->s->be->copy_to_host(x->s->ctx, got, x->tensors[i] + at0 * es, len * es);
    if (rc) return rc;
    for (uint64_t j = 0; j < len; j++) {
      uint64_t bits = ka_gen_bits(at0 + j, (ka_dtype)f->dtype, f->dist, f->a, f->b, key);
      unsigned char want[8];
      memcpy(want, &bits, sizeof want);
      if (memcmp(got + j * es, want, es))
        return rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_EINTERNAL,
                       "case %s: input %s drawn on the device differs from the generator at "
                       "element %llu (the generators disagree)",
                       x->c.name, x->t->tensors[i].name, (unsigned long long)(at0 + j));
    }
  }
  return KA_OK;
}

/* Device path: the keyed checksum (trusted_kernels.h, ka_trusted_sum) of input i under a
 * key secret to call q, for checking the input unchanged after the call: a read at
 * memory speed, where drawing the input again to compare costs the generator's work. */
static int rn_sum_input(rn_cx *x, int q, int i, uint64_t *sum) {
  uint64_t key =
      ka_mix64(x->sum_seed ^ 0x696e707574000000ULL, (uint64_t)(q + 1) * RN_T + (uint64_t)i);
  return x->s->be->checksum_device(x->s->ctx, x->tensors[i], 0, x->bytes[i], key, sum);
}

/* The distribution a timed (or warm-up) call's input of fill f is drawn from on the device:
 * a normal in f32, f16 or bf16 in single precision (KA_FILL_FAST_NORMAL, a quarter of the
 * exact generator's device time on the H200: 30.8 against 134.4 us for 16M fp32,
 * docs/benchmarks/2026-12-03-session21-h200.md), anything else as the worker draws it. These inputs
 * never leave the device and no reference is computed from them: the candidate's outputs of the
 * call are verified against the baseline's on the same inputs (rn_verify_call), so they need the
 * distribution, not the host's bits. */
static int rn_timed_dist(const ka_fill *f) {
  int narrow = f->dtype == KA_DT_F32 || f->dtype == KA_DT_F16 || f->dtype == KA_DT_BF16;
  return f->dist == KA_DIST_NORMAL && narrow ? KA_FILL_FAST_NORMAL : f->dist;
}

/* Whether this runner holds the device lock exclusive (a slice of timed calls, rn_time):
 * no other evaluation's work can reach the device before this runner's own work queued
 * now has run, so that work need not be waited for before the next op on the stream
 * (which runs after it). Under a shared hold, or without a lock, the work is waited for
 * where it ends: a shared hold is given up (for an exclusive one, or at a downgrade)
 * only with nothing of this runner's left on the device. */
static int rn_exclusive(const rn_cx *x) {
  return x->s->lock.m >= 0 && x->s->lock.held == KA_DEVLOCK_EXCLUSIVE;
}

/* Everything call q gets before it runs, outside any timed interval: the scratch of both
 * implementations zeroed, each input drawn for call q, each output poisoned for call q.
 * The trial (q RN_TRIAL) gets the worker's inputs (drawn again on the device path, or
 * copied in and checksummed). On the device path the work is waited for unless the hold
 * is exclusive (rn_exclusive): then the cache flush after it (which waits) or the next
 * op that reads a result covers it, and the device does not idle while the host queues
 * the flush (one host round trip less per call). The phase log's staging is then the
 * host's time to queue it, and the device's time for it shows in the cache flush. */
static int rn_stage_for(rn_cx *x, int q, int inputs);
static int rn_stage(rn_cx *x, int q) {
  return rn_stage_for(x, q, 1);
}

/* rn_stage, and with inputs 0 (the device path) the inputs
 * are left as they are: they hold call q's draws already (the call before, of the same
 * q, was the baseline's or had its inputs checked unchanged after it). Both
 * implementations' outputs are poisoned alike: without the poison write before the
 * baseline's calls (tried in 9b4988c) its timed calls were measured after other work
 * than the candidate's, and the baseline against itself read 1.002 at the median on
 * gelu n16M (7 of 10 steps within 0.3%, docs/benchmarks/2026-12-01-h200-concurrency.md). */
static int rn_stage_for(rn_cx *x, int q, int inputs) {
  rn_state *s = x->s;
  int rc = KA_OK;
  /* both implementations' scratch: what the baseline left in its own (it may run just
   * before on the same inputs) must not be there for the candidate to read */
  for (int v = 0; v < 2; v++)
    for (int k = 0; k < x->impl[v].plan->nscratch && rc == KA_OK; k++)
      rc = s->be->memset8(s->ctx, x->scratch[v][k], 0, x->scratch_bytes[v][k]);
  for (int i = 0; i < x->t->ntensors && rc == KA_OK; i++) {
    int in = rn_is_input(x, i);
    if (in && !inputs && x->dev && q != RN_TRIAL) continue;
    if (q == RN_TRIAL && in && x->dev && x->trial_drawn) {
      ka_fill f = x->in_fill[i];
      f.key = rn_in_key(x, q, i);
      rc = s->be->fill_device(s->ctx, x->tensors[i], &f, x->elems[i], 0, NULL);
      if (rc == KA_OK) rc = rn_spot_check(x, i);
      if (rc == KA_OK) rc = rn_sum_input(x, q, i, &x->in_sum[i]);
    } else if (q == RN_TRIAL && in) {
      rc = s->be->copy_to_device(s->ctx, x->tensors[i], x->maps[i], x->bytes[i]);
      if (rc == KA_OK && x->dev)
        rc = s->be->checksum_device(s->ctx, x->tensors[i], 0, x->bytes[i],
                                    ka_mix64(x->trial_sum_key, (uint64_t)i), &x->trial_sum[i]);
    } else if (x->dev) {
      ka_fill f = in ? x->in_fill[i] : rn_poison_fill(x, q, i);
      if (in) f.key = rn_in_key(x, q, i), f.dist = rn_timed_dist(&f);
      rc = s->be->fill_device(s->ctx, x->tensors[i], &f, x->elems[i], 0, NULL);
      /* a fast draw is checked after the call by drawing it again (as cheap as a
       * checksum, and no checksum of it is needed before: rn_check_inputs) */
      if (rc == KA_OK && in && f.dist != KA_FILL_FAST_NORMAL)
        rc = rn_sum_input(x, q, i, &x->in_sum[i]);
    } else {
      if (in)
        ka_fill_input(&x->t->tensors[i], x->stage[i], x->elems[i],
                      ka_mix64(x->in_seed, (uint64_t)q), x->tcase, i);
      else
        rn_rotate(x->stage[i], x->pool[i], x->elems[i], rn_pool_off(x, q, i),
                  ka_dtype_size(x->t->tensors[i].dtype));
      rc = s->be->copy_to_device(s->ctx, x->tensors[i], x->stage[i], x->bytes[i]);
    }
  }
  if (rc == KA_OK && x->dev && !rn_exclusive(x)) rc = s->be->synchronize(s->ctx);
  return rc;
}

/* After call q: *changed = the first input that no longer holds what rn_stage gave it,
 * or -1. Device path: its keyed checksum again, or a fast draw drawn again and compared
 * there (the trial: its checksum again);
 * host path: read back and compared with what was staged. */
static int rn_check_inputs(rn_cx *x, int q, int *changed) {
  rn_state *s = x->s;
  *changed = -1;
  for (int i = 0; i < x->t->ntensors; i++) {
    if (!rn_is_input(x, i) || !x->bytes[i]) continue;
    int differs = 0, rc;
    if (x->dev && q == RN_TRIAL && !x->trial_drawn) {
      uint64_t sum = 0;
      rc = s->be->checksum_device(s->ctx, x->tensors[i], 0, x->bytes[i],
                                  ka_mix64(x->trial_sum_key, (uint64_t)i), &sum);
      differs = sum != x->trial_sum[i];
    } else if (x->dev && q != RN_TRIAL && rn_timed_dist(&x->in_fill[i]) == KA_FILL_FAST_NORMAL) {
      ka_fill f = x->in_fill[i];
      f.key = rn_in_key(x, q, i), f.dist = KA_FILL_FAST_NORMAL;
      rc = s->be->fill_device(s->ctx, x->tensors[i], &f, x->elems[i], 1, &differs);
    } else if (x->dev) {
      uint64_t sum = 0;
      rc = rn_sum_input(x, q, i, &sum);
      differs = sum != x->in_sum[i];
    } else {
      rc = s->be->copy_to_host(s->ctx, x->back[i], x->tensors[i], x->bytes[i]);
      const void *want = q == RN_TRIAL ? x->maps[i] : x->stage[i];
      if (rc == KA_OK) differs = memcmp(x->back[i], want, x->bytes[i]) != 0;
    }
    if (rc) return rc;
    if (differs) {
      *changed = i;
      return KA_OK;
    }
  }
  return KA_OK;
}

/* Marks the start (w 1: the candidate) of work on the device that the call watchdog
 * bounds (runner.c), and sets candidate_ran. */
static void rn_work_begin(rn_state *s, int w) {
  if (w != 1) return;
  s->candidate_ran = 1;
  atomic_store(&s->cand_since_ns, (long long)(ka_now_s() * 1e9) | 1);
}

/* Marks the end of the candidate's work begun with rn_work_begin. */
static void rn_work_end(rn_state *s) {
  atomic_store(&s->cand_since_ns, 0);
}

/* Enqueues impl w's launches and waits for the device; the baseline's (w 0) on the
 * device path under an exclusive hold is not waited for (rn_exclusive): the compare that
 * reads its outputs next waits, and reports a fault of it as its own. */
static int rn_run(rn_cx *x, int w) {
  rn_state *s = x->s;
  rn_work_begin(s, w);
  int rc = KA_OK;
  for (int i = 0; i < x->impl[w].plan->nlaunches && rc == KA_OK; i++)
    rc = s->be->launch(s->ctx, x->impl[w].mod, &x->ls[w][i]);
  if (rc == KA_OK) {
    if (w == 1 || !x->dev || !rn_exclusive(x)) rc = s->be->synchronize(s->ctx);
  } else {
    s->be->synchronize(s->ctx); /* what the failed launch's predecessors queued, under the
                                   call limit */
  }
  rn_work_end(s);
  return rc;
}

/* Checks the inputs after call q of impl w: INCORRECT naming the input if one changed.
 * On the device path the baseline's calls are not checked: nothing but the task's own
 * baseline runs on the device then (calls are synchronized, and no submitted code runs
 * on the host), so the inputs after it are what it got. On the host path a thread of
 * the candidate's module process may still run beside the baseline, so they are. */
static int rn_after_call(rn_cx *x, int w, int q, const char *kind) {
  if (x->dev && w == 0) return KA_OK;
  int changed = -1;
  int rc = rn_check_inputs(x, q, &changed);
  if (rc) return rn_fault(x, rc, "checking the inputs after a call");
  if (changed >= 0 && q == RN_TRIAL)
    return rn_fail(x, KERNELARENA__V1__STATUS__INCORRECT, KA_EINVAL,
                   "case %s: the candidate changed its input %s (inputs must be left as they "
                   "are; a write past the bounds of an output can land in an input)",
                   x->c.name, x->t->tensors[changed].name);
  if (changed >= 0)
    return rn_fail(x, KERNELARENA__V1__STATUS__INCORRECT, KA_EINVAL,
                   "case %s: input %s changed during %s of the %s (inputs must be left as they "
                   "are; a write past the bounds of an output can land in an input)",
                   x->c.name, x->t->tensors[changed].name, kind, x->impl[w].label);
  return KA_OK;
}

/* ---- trial ---------------------------------------------------------------------- */

/* Tells the worker that this case's trial outputs are in its memfds for good
 * (RunnerJob.trial_fd): the outputs' maps are unmapped first, so nothing here writes them
 * again (and submitted code never runs in this process; the host backend's module
 * process never has these memfds). A worker that is gone changes nothing: it judges at
 * the end. */
static void rn_trial_done(rn_cx *x) {
  if (x->s->trial_fd < 0) return;
  int unmapped = 1;
  for (int i = 0; i < x->t->ntensors; i++)
    if (!rn_is_input(x, i) && x->maps[i]) {
      if (munmap(x->maps[i], x->bytes[i] ? x->bytes[i] : 1) != 0)
        unmapped = 0;
      else
        x->maps[i] = NULL;
    }
  if (!unmapped) return; /* not announced: the worker compares this case at the end */
  unsigned char b = (unsigned char)x->ci;
  while (write(x->s->trial_fd, &b, 1) < 0 && errno == EINTR) {
  }
}

/* The candidate's correctness trial: the worker's inputs, outputs poisoned, one run,
 * inputs checked, outputs copied back into the worker's memfds. */
static int rn_trial(rn_cx *x) {
  double t0 = ka_now_s();
  rn_state *s = x->s;
  int rc = rn_stage(x, RN_TRIAL);
  double t1 = ka_now_s();
  x->ph_tstage = t1 - t0;
  if (rc == KA_EINTERNAL && x->err[0]) return rc; /* rn_spot_check said why */
  if (rc) return rn_fault(x, rc, "staging the candidate's trial");
  if ((rc = rn_run(x, 1)) != KA_OK) return rn_fault(x, rc, "candidate run failed");
  double t2 = ka_now_s();
  x->ph_trun = t2 - t1;
  if ((rc = rn_after_call(x, 1, RN_TRIAL, "the correctness trial")) != KA_OK) return rc;
  double t3 = ka_now_s();
  x->ph_tcheck = t3 - t2;
  for (int i = 0; i < x->t->ntensors && rc == KA_OK; i++)
    if (!rn_is_input(x, i))
      rc = s->be->copy_to_host(s->ctx, x->maps[i], x->tensors[i], x->bytes[i]);
  x->ph_tout = ka_now_s() - t3;
  if (rc) return rn_fault(x, rc, "copying the trial's outputs");
  x->cr->trial_outputs = 1;
  rn_trial_done(x);
  x->ph_trial = ka_now_s() - t0;
  return KA_OK;
}

/* ---- verification of timed calls -------------------------------------------------- */

/* Puts the candidate's outputs of timed call r (just run) into aside slot `slot`. */
static int rn_put_aside(rn_cx *x, int r, int slot) {
  rn_state *s = x->s;
  int rc = KA_OK;
  for (int i = 0; i < x->t->ntensors && rc == KA_OK; i++) {
    if (rn_is_input(x, i) || !x->bytes[i]) continue;
    size_t at = (size_t)slot * x->stride[i];
    if (x->dev) {
      rc = s->be->copy_device(s->ctx, x->aside[i], at, x->tensors[i], 0, x->bytes[i]);
      /* kept for later: a checksum shows whether a later call of the candidate wrote
       * into the copy; compared right after the rep, no submitted code runs between */
      if (rc == KA_OK && x->kept)
        rc = s->be->checksum_device(s->ctx, x->aside[i], at, x->bytes[i],
                                    ka_mix64(x->sum_seed, (uint64_t)(r * RN_T + i)),
                                    &x->aside_sum[i][slot]);
    } else {
      rc = s->be->copy_to_host(s->ctx, x->aside_host[i] + at, x->tensors[i], x->bytes[i]);
    }
  }
  return rc ? rn_fault(x, rc, "keeping a timed call's outputs") : KA_OK;
}

/* Verifies timed call r (call index q = warm + r), whose candidate outputs are in slot:
 * against the baseline's outputs of call q, which are on the device already (fresh: the
 * baseline's timed call ran after the candidate's) or made now by running the baseline
 * again on call q's inputs (drawn again where they may have been overwritten: the host
 * path and kept outputs; its inputs checked after it on the host path); a kept slot's
 * checksum checked; each output compared at the task's tolerance. */
static int rn_verify_call(rn_cx *x, int r, int slot, int fresh) {
  rn_state *s = x->s;
  int q = x->warm + r;
  int rc = KA_OK;
  /* fresh: the outputs on the device are the baseline's timed call q, run after the
   * candidate's (so it could not read them): nothing to run again. Otherwise the
   * baseline runs again on call q's inputs, which on the device path, right after the
   * rep, still hold them (checked unchanged after the candidate's call). */
  if (!fresh) {
    rc = rn_stage_for(x, q, !(x->dev && !x->kept));
    if (rc) return rn_fault(x, rc, "staging a verification run");
    if ((rc = rn_run(x, 0)) != KA_OK) return rn_fault(x, rc, "the baseline's verification run");
    if ((rc = rn_after_call(x, 0, q, "a verification run")) != KA_OK) return rc;
  }
  for (int i = 0; i < x->t->ntensors; i++) {
    if (rn_is_input(x, i) || !x->bytes[i]) continue;
    size_t at = (size_t)slot * x->stride[i];
    double atol, rtol;
    ka_task_tolerance(x->t, i, &atol, &rtol);
    int64_t bad = 0, first = -1;
    if (x->dev) {
      uint64_t sum = 0;
      if (x->kept)
        rc = s->be->checksum_device(s->ctx, x->aside[i], at, x->bytes[i],
                                    ka_mix64(x->sum_seed, (uint64_t)(r * RN_T + i)), &sum);
      if (rc == KA_OK && x->kept && sum != x->aside_sum[i][slot])
        return rn_fail(x, KERNELARENA__V1__STATUS__INCORRECT, KA_EINVAL,
                       "case %s: the runner's kept copy of output %s of timed call %d changed "
                       "after the call (a kernel wrote outside its own buffers)",
                       x->c.name, x->t->tensors[i].name, r + 1);
      ka_fill poison = rn_poison_fill(x, q, i);
      if (rc == KA_OK)
        rc = s->be->close_device(s->ctx, x->tensors[i], x->aside[i] + at,
                                 (int)x->t->tensors[i].dtype, x->elems[i], RN_VERIFY_SLACK * atol,
                                 RN_VERIFY_SLACK * rtol, &poison, &bad, &first);
    } else {
      rc = s->be->copy_to_host(s->ctx, x->out0[i], x->tensors[i], x->bytes[i]);
      if (rc == KA_OK)
        bad = rn_count_differences(x->t, i, x->out0[i], x->aside_host[i] + at, x->pool[i],
                                   rn_pool_off(x, q, i), x->elems[i], RN_VERIFY_SLACK);
    }
    if (rc) return rn_fault(x, rc, "comparing a timed call's outputs");
    if (bad)
      return rn_fail(x, KERNELARENA__V1__STATUS__INCORRECT, KA_EINVAL,
                     "case %s: the outputs of timed call %d differ from the baseline's on the "
                     "same inputs in %lld of %lld elements of %s (work skipped, cached or "
                     "changed in timed calls)",
                     x->c.name, r + 1, (long long)bad, (long long)x->elems[i],
                     x->t->tensors[i].name);
  }
  x->verified++;
  x->vflag[r] = 1;
  return KA_OK;
}

/* Whether timed call r of n is verified. Device path: every one (a verification there
 * costs a baseline call and a compare on the device). Host path: a secret half and the
 * last. Only verified calls give the reported timings (rn_judge), so work skipped in the
 * others gains nothing. */
static int rn_drawn(const rn_cx *x, uint64_t seed, int r, int n) {
  return x->dev || (ka_mix64(seed, (uint64_t)r) & 1) == 0 || r == n - 1;
}

/* Kept outputs: draws the verified calls now, from the secret seed and the measured
 * times, and verifies each. */
static int rn_verify_kept(rn_cx *x) {
  double t0 = ka_now_s();
  uint64_t draw = x->ver_seed;
  for (int r = 0; r < x->reps; r++) {
    uint64_t bits;
    memcpy(&bits, &x->ms[1][r], sizeof bits);
    draw = ka_mix64(draw, bits);
  }
  int rc = KA_OK;
  for (int r = 0; r < x->reps && rc == KA_OK; r++)
    if (rn_drawn(x, draw, r, x->reps)) rc = rn_verify_call(x, r, r, 0);
  x->ph_verify += ka_now_s() - t0;
  return rc;
}

/* ---- timed calls ---------------------------------------------------------------- */

/* The sample standard deviation of the log speedup (baseline over candidate time) over
 * the first n repetitions, for the phase log (the stopping rule uses rn_median_se: a few
 * slow calls blow this one up). 0 for n < 2; NaN when a time is 0 or not finite. */
static double rn_log_speedup_sd(const rn_cx *x, int n) {
  if (n < 2) return 0;
  double sum = 0, sq = 0;
  for (int r = 0; r < n; r++) {
    double l = log(x->ms[0][r] / x->ms[1][r]);
    if (!isfinite(l)) return NAN;
    sum += l, sq += l * l;
  }
  double mean = sum / n, var = (sq - n * mean * mean) / (n - 1);
  return sqrt(var > 0 ? var : 0);
}

/* The k-th smallest (0-based) of v[0..n), n >= 1, reordering v: Hoare's selection
 * ("Algorithm 65: FIND", CACM 4(7), 1961), expected O(n). */
static double rn_select(double *v, int n, int k) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    double pivot = v[lo + (hi - lo) / 2];
    int i = lo, j = hi;
    while (i <= j) {
      while (v[i] < pivot) i++;
      while (v[j] > pivot) j--;
      if (i <= j) {
        double t = v[i];
        v[i++] = v[j], v[j--] = t;
      }
    }
    if (k <= j)
      hi = j;
    else if (k >= i)
      lo = i;
    else
      return v[k];
  }
  return v[k];
}

/* The median of v[0..n), n >= 1, reordering v. */
static double rn_median_inplace(double *v, int n) {
  double hi = rn_select(v, n, n / 2);
  if (n & 1) return hi;
  double lo = v[0]; /* after the selection v[0 .. n/2) holds the n/2 smallest */
  for (int i = 1; i < n / 2; i++)
    if (v[i] > lo) lo = v[i];
  return 0.5 * (lo + hi);
}

double rn_median_se_of(const double *base_ms, const double *cand_ms, int n, double *scratch,
                       int *outliers) {
  if (outliers) *outliers = 0;
  if (n < 2) return 0;
  double *l = scratch, *d = scratch + n;
  for (int r = 0; r < n; r++) {
    l[r] = log(base_ms[r] / cand_ms[r]);
    if (!isfinite(l[r])) return NAN;
  }
  double med = rn_median_inplace(l, n);
  for (int r = 0; r < n; r++) d[r] = fabs(l[r] - med);
  double sigma = 1.4826 * rn_median_inplace(d, n);
  if (sigma == 0) {
    /* more than half the ratios equal (a kernel of a few timer ticks: red team
     * 2026-12-04): their root mean square deviation from the median instead (at least
     * the sample sd), 0 only if every ratio is equal */
    double sq = 0;
    for (int r = 0; r < n; r++) sq += d[r] * d[r];
    sigma = sqrt(sq / (n - 1));
  }
  if (outliers)
    for (int r = 0; r < n; r++) *outliers += sigma > 0 && d[r] > 5 * sigma;
  return 1.2533141373155 * sigma / sqrt((double)n);
}

/* rn_median_se_of over the first n repetitions of x (scratch: x->scratch_se). */
static double rn_median_se(const rn_cx *x, int n, int *outliers) {
  if (!x->scratch_se) {
    if (outliers) *outliers = 0;
    return n < 2 ? 0 : NAN;
  }
  return rn_median_se_of(x->ms[0], x->ms[1], n, x->scratch_se, outliers);
}

/* Whether the timed calls may stop after n repetitions (see RN_RSE_TARGET). */
static int rn_enough(const rn_cx *x, int n, double timed_wall_s) {
  if (n < x->reps_min) return 0;
  double budget = x->job->timed_budget_s > 0 ? x->job->timed_budget_s : RN_TIMED_BUDGET_S;
  if (n >= x->reps_max || timed_wall_s >= budget) return 1;
  double se = rn_median_se(x, n, NULL);
  return isfinite(se) && se <= RN_RSE_TARGET;
}

/* Holds the device lock exclusive for the timed calls' slice: a slice begins when the
 * hold is taken (x->slice0) and ends at rn_slice_end. KA_OK or KA_ESYS. */
static int rn_hold_exclusive(rn_cx *x) {
  ka_devlock *l = &x->s->lock;
  if (l->m < 0 || l->held == KA_DEVLOCK_EXCLUSIVE) return KA_OK;
  int rc = ka_devlock_exclusive(l);
  x->slice0 = ka_now_s();
  return rc;
}

/* Ends the slice of exclusive hold (a downgrade to shared: every other evaluation's
 * waiting work may run, and this runner's next rn_hold_exclusive waits its turn) when
 * it has lasted RN_SLICE_S or `now` is set, after waiting for this runner's own work.
 * Called only between pairs of calls. KA_OK, a fault's verdict (rn_fault) or an
 * INFRA_ERROR. */
static int rn_slice_end(rn_cx *x, int now) {
  ka_devlock *l = &x->s->lock;
  if (l->held != KA_DEVLOCK_EXCLUSIVE) return KA_OK;
  if (!now && ka_now_s() - x->slice0 < RN_SLICE_S) return KA_OK;
  /* nothing of this runner's may run once others may time their calls (a result's
   * clearing, rn_stage's and rn_run's unwaited work under the hold): waited for here */
  int rc = x->s->be->synchronize(x->s->ctx);
  if (rc != KA_OK) return rn_fault(x, rc, "finishing a slice of timed calls");
  if (ka_devlock_shared(l) != KA_OK)
    return rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_ESYS, "the device lock failed");
  return KA_OK;
}

/* One call q of impl w: staged, cache flushed, timed (r >= 0), inputs checked; the
 * candidate's outputs of a timed call put aside where they are verified. */
static int rn_timed_call(rn_cx *x, int w, int q, int verify_now, int inputs) {
  rn_state *s = x->s;
  int r = q - x->warm;
  double tp = ka_now_s();
  int rc = rn_stage_for(x, q, inputs);
  x->ph_stage += ka_now_s() - tp;
  /* the flush and the call alone on the device (devlock.h), in a slice (rn_time) */
  if (rc == KA_OK && rn_hold_exclusive(x) != KA_OK)
    return rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_ESYS, "the device lock failed");
  tp = ka_now_s();
  if (rc == KA_OK) rc = s->be->flush_cache(s->ctx);
  x->ph_flush += ka_now_s() - tp;
  if (rc) return rn_fault(x, rc, "preparing a call");
  double w0 = ka_now_s(), dms = 0;
  if (r >= 0) rc = s->be->timer_start(s->ctx);
  rn_work_begin(s, w);
  for (int i = 0; i < x->impl[w].plan->nlaunches && rc == KA_OK; i++)
    rc = s->be->launch(s->ctx, x->impl[w].mod, &x->ls[w][i]);
  if (rc == KA_OK && r >= 0) rc = s->be->timer_stop(s->ctx, &dms);
  if (rc == KA_OK) {
    rc = s->be->synchronize(s->ctx);
  } else {
    /* the timer or a launch failed: what was queued before runs now, under the call
     * limit and the hold (cuda: synchronize opens the timer's gate) */
    s->be->synchronize(s->ctx);
  }
  double w1 = ka_now_s();
  rn_work_end(s);
  x->ph_calls += w1 - w0;
  if (rc) {
    char what[128];
    snprintf(what, sizeof what, "%s %s call failed", r < 0 ? "warm-up" : "timed", x->impl[w].label);
    return rn_fault(x, rc, what);
  }
  if (r >= 0) x->ms[w][r] = dms, x->wall[w][r] = (w1 - w0) * 1e3;
  tp = ka_now_s();
  rc = rn_after_call(x, w, q, r < 0 ? "a warm-up call" : "a timed call");
  if (rc == KA_OK && w == 1 && r >= 0 && (x->kept || verify_now))
    rc = rn_put_aside(x, r, x->kept ? r : 0);
  x->ph_checks += ka_now_s() - tp;
  return rc;
}

/* Warm-up and timed calls, baseline and candidate interleaved, order alternating, until
 * rn_enough; verified calls compared as they run where outputs are not kept. */
static int rn_time(rn_cx *x) {
  double t0 = ka_now_s(), waited0 = x->s->lock.waited_s;
  int rc = KA_OK;
  for (int q = 0; rc == KA_OK; q++) {
    int r = q - x->warm;
    double own = ka_now_s() - t0 - (x->s->lock.waited_s - waited0);
    if (r >= 0 && rn_enough(x, r, own)) break;
    int verify_now = !x->kept && r >= 0 && rn_drawn(x, x->ver_seed, r, x->reps_min);
    /* on the device path call q's inputs are drawn once: the second call of the pair
     * gets them as the first left them (the baseline's: trusted; the candidate's:
     * checked unchanged after it) */
    for (int k = 0; k < 2 && rc == KA_OK; k++) {
      int w = (q & 1) ? 1 - k : k;
      rc = rn_timed_call(x, w, q, verify_now, k == 0 || !x->dev);
    }
    if (rc == KA_OK && r >= 0) x->reps = r + 1;
    if (rc == KA_OK && verify_now) {
      double tv = ka_now_s();
      /* odd q: the candidate ran first, the baseline's outputs of q are on the device */
      rc = rn_verify_call(x, r, 0, x->dev && (q & 1));
      x->ph_verify += ka_now_s() - tv;
    }
    if (rc == KA_OK) rc = rn_slice_end(x, 0);
  }
  /* after a failure the hold stays until rn_case releases it: the wait in rn_slice_end
   * would report the same fault again over the verdict already given */
  return rc ? rc : rn_slice_end(x, 1);
}

/* ---- judge ---------------------------------------------------------------------- */

static int rn_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts a copy). */
static double rn_median(const double *v, int n) {
  double *c = malloc((size_t)(n > 0 ? n : 1) * sizeof *c);
  if (!c || n <= 0) {
    free(c);
    return 0;
  }
  memcpy(c, v, (size_t)n * sizeof *c);
  qsort(c, (size_t)n, sizeof(double), rn_cmp_double);
  double m = n & 1 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
  free(c);
  return m;
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

/* The first integrity check of the timings that fails, written into flag ("" if none). */
static void rn_timing_flag(rn_cx *x, double bwall, double cwall_q25, const char *bound, char *flag,
                           size_t len) {
  Kernelarena__V1__CaseResult *cr = x->cr;
  rn_state *s = x->s;
  double timed_total = 0;
  for (int r = 0; r < x->reps; r++) timed_total += x->ms[1][r];
  double busy1 = 0, idle1 = 0;
  if (s->be->untimed_work) s->be->untimed_work(s->ctx, &busy1, &idle1);
  double busy = busy1 - s->busy_mark, idle = idle1 - s->idle_mark;
  s->busy_mark = busy1, s->idle_mark = idle1;
  flag[0] = '\0';
  if (busy > RN_IDLE_FRACTION * timed_total + RN_IDLE_SLACK_MS)
    snprintf(flag, len,
             "the submitted code used %.1f ms of CPU time while none of its calls was running "
             "(%.1f ms): work outside the timed calls",
             busy, idle);
  /* the lower quartile of the wall times: work outside the stream shows in every call,
   * a host thread delayed by other work on the machine (a reference computed alongside)
   * only in some (an honest first step was FLAGGED on the H200 with the median) */
  else if (cwall_q25 > RN_WALL_FACTOR * cr->candidate_ms + RN_WALL_SLACK_MS)
    snprintf(
        flag, len,
        "the device timer measured %.4f ms per call but the host wall clock %.4f ms: " KA_FLAG_WALL,
        cr->candidate_ms, cr->candidate_wall_ms);
  else if (cr->candidate_ms > RN_WALL_FACTOR * cr->candidate_wall_ms + RN_WALL_SLACK_MS ||
           cr->baseline_ms > RN_WALL_FACTOR * bwall + RN_WALL_SLACK_MS)
    snprintf(flag, len,
             "the device timer measured more than the host wall clock (%.4f ms > %.4f ms): the "
             "timer is not trustworthy",
             cr->candidate_ms, cr->candidate_wall_ms);
  else if (!(cr->candidate_ms > cr->floor_ms) || !(cr->baseline_ms > cr->floor_ms))
    snprintf(flag, len,
             "%s median time %.4f ms is below the physics floor %.4f ms (task %s over %.0fx the "
             "peak %s of %.0f %s): a measurement fault",
             cr->candidate_ms > cr->floor_ms ? "the baseline's" : "the candidate's",
             cr->candidate_ms > cr->floor_ms ? cr->baseline_ms : cr->candidate_ms, cr->floor_ms,
             bound, RN_FLOOR_MARGIN, strcmp(bound, "flops") ? "bandwidth" : "tensor rate",
             strcmp(bound, "flops") ? s->dev.mem_bandwidth_gbps : rn_peak_tflops(&s->dev),
             strcmp(bound, "flops") ? "GB/s" : "TFLOP/s");
  ka_sb_printf(&s->log,
               "[kernelarena] case %s: baseline %.4f ms (wall %.4f), candidate %.4f ms (wall "
               "%.4f), floor %.4g ms, %d of %d timed calls verified (drawn %s the calls), "
               "module CPU %.1f ms while idle %.1f ms\n",
               x->c.name, cr->baseline_ms, bwall, cr->candidate_ms, cr->candidate_wall_ms,
               cr->floor_ms, x->verified, x->reps, x->kept ? "after" : "before", busy, idle);
}

/* Medians and the checks on the timings: OK, or FLAGGED with the reason. */
static int rn_judge(rn_cx *x) {
  Kernelarena__V1__CaseResult *cr = x->cr;
  /* the timings of the verified calls only (red team 2026-12-01: skipping the work of
   * calls that go unverified moved the median of all calls; now it moves nothing) */
  size_t nv = (size_t)(x->reps + 1);
  double *v[4] = {calloc(nv, sizeof(double)), calloc(nv, sizeof(double)),
                  calloc(nv, sizeof(double)), calloc(nv, sizeof(double))};
  int n = 0;
  for (int r = 0; r < x->reps && v[0] && v[1] && v[2] && v[3]; r++)
    if (x->vflag[r])
      v[0][n] = x->ms[0][r], v[1][n] = x->ms[1][r], v[2][n] = x->wall[0][r],
      v[3][n++] = x->wall[1][r];
  cr->baseline_ms = rn_median(v[0], n);
  cr->candidate_ms = rn_median(v[1], n);
  double bwall = rn_median(v[2], n);
  cr->candidate_wall_ms = rn_median(v[3], n);
  double cwall_q25 = cr->candidate_wall_ms;
  if (n > 0 && v[3]) {
    qsort(v[3], (size_t)n, sizeof(double), rn_cmp_double);
    cwall_q25 = v[3][(n - 1) / 4];
  }
  for (int k = 0; k < 4; k++) free(v[k]);
  cr->speedup = cr->candidate_ms > 0 ? cr->baseline_ms / cr->candidate_ms : 0;
  cr->timed_calls = x->reps;
  cr->verified_calls = x->verified;
  cr->verified_after_calls = x->kept;
  const char *bound = "bytes";
  cr->floor_ms = rn_floor_ms(x->s, &x->c, &bound);
  char flag[512];
  rn_timing_flag(x, bwall, cwall_q25, bound, flag, sizeof flag);
  *x->status = KERNELARENA__V1__STATUS__OK;
  if (!flag[0]) return KA_OK;
  cr->flag = strdup(flag);
  cr->speedup = 0;
  return rn_fail(x, KERNELARENA__V1__STATUS__FLAGGED, KA_ERANGE, "case %s: %s", x->c.name, flag);
}

/* ---- the case ------------------------------------------------------------------- */

static void rn_teardown(rn_cx *x) {
  rn_state *s = x->s;
  for (int i = 0; i < RN_T; i++) {
    if (x->tensors[i]) s->be->mem_free(s->ctx, x->tensors[i]);
    if (x->aside[i]) s->be->mem_free(s->ctx, x->aside[i]);
    if (x->maps[i]) munmap(x->maps[i], x->bytes[i] ? x->bytes[i] : 1);
    free(x->aside_host[i]), free(x->aside_sum[i]);
    free(x->stage[i]), free(x->back[i]), free(x->pool[i]), free(x->out0[i]);
  }
  for (int w = 0; w < 2; w++) {
    for (int k = 0; k < KA_MAX_SCRATCH; k++)
      if (x->scratch[w][k]) s->be->mem_free(s->ctx, x->scratch[w][k]);
    free(x->ms[w]), free(x->wall[w]);
  }
  free(x->vflag);
  free(x->scratch_se);
}

void rn_case_seeds(uint64_t job_seed, int ci, int reproducible, rn_seeds *out) {
  out->in = ka_mix64(job_seed, 0x6672657368000000ULL + (uint64_t)ci);
  uint64_t r[5];
  if (reproducible)
    for (int k = 0; k < 5; k++)
      r[k] = ka_mix64(job_seed, 0x7265700000000000ULL + (uint64_t)(ci * 8 + k));
  else if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
    for (int k = 0; k < 5; k++)
      r[k] = ka_mix64(ka_mix64(job_seed, (uint64_t)(ka_now_s() * 1e9)),
                      0x6f776e0000000000ULL + (uint64_t)(ci * 8 + k));
  out->poison = r[0], out->rot = r[1], out->ver = r[2], out->sum = r[3], out->trial_sum = r[4];
}

/* The case's parameters, seeds and path from the job; KA_OK or INFRA_ERROR. */
static int rn_init(rn_cx *x) {
  const Kernelarena__V1__RunnerCase *jc = x->job->cases[x->ci];
  const ka_task *t = x->t;
  x->c.name = jc->name;
  x->c.held_out = jc->held_out;
  if ((int)jc->n_params != t->nparams || (int)jc->n_input_fds != t->ntensors ||
      (int)jc->n_output_fds != t->ntensors)
    return rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_EINVAL, "malformed runner case %s",
                   jc->name);
  for (int p = 0; p < t->nparams; p++) x->c.values[p] = jc->params[p];
  x->tcase = -1;
  for (int k = 0; k < t->ncases + t->nheld && x->tcase < 0; k++)
    if (!strcmp(t->cases[k].name, x->c.name)) x->tcase = k;
  rn_seeds sd;
  rn_case_seeds(x->job->poison_seed, x->ci, x->job->reproducible, &sd);
  x->in_seed = sd.in, x->poison_seed = sd.poison, x->rot_seed = sd.rot, x->ver_seed = sd.ver;
  x->sum_seed = sd.sum, x->trial_sum_key = sd.trial_sum;
  const ka_backend_ops *be = x->s->be;
  x->dev = ka_backend_device_staging(be);
  x->trial_seed = jc->input_seed;
  x->trial_drawn = x->dev && jc->has_input_seed && x->tcase >= 0;
  x->reps_min = x->job->reps > 0 ? x->job->reps : 20;
  x->warm = x->job->warmup >= 0 ? x->job->warmup : 3;
  return KA_OK;
}

int rn_case(rn_state *s, const Kernelarena__V1__RunnerJob *job, int ci, rn_impl *impl,
            Kernelarena__V1__CaseResult *cr, int *status, char *err, size_t errlen) {
  rn_cx *x = calloc(1, sizeof *x);
  if (!x) {
    *status = KERNELARENA__V1__STATUS__INFRA_ERROR;
    return ka_seterr(err, errlen, KA_ENOMEM, "out of host memory");
  }
  *x = (rn_cx){.s = s,
               .t = s->task,
               .impl = impl,
               .job = job,
               .ci = ci,
               .cr = cr,
               .status = status,
               .err = err,
               .errlen = errlen};
  *status = KERNELARENA__V1__STATUS__INFRA_ERROR;
  double t0 = ka_now_s(), waited0 = s->lock.waited_s;
  int excl0 = s->lock.exclusive_n;
  int rc = rn_init(x);
  if (rc == KA_OK) rc = rn_map(x);
  if (rc == KA_OK && ka_devlock_shared(&s->lock) != KA_OK)
    rc = rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_ESYS, "the device lock failed");
  if (rc == KA_OK) rc = rn_setup(x);
  if (rc == KA_OK) rc = rn_trial(x);
  if (rc == KA_OK) rc = rn_time(x);
  if (rc == KA_OK && x->kept) rc = rn_verify_kept(x);
  if (rc == KA_OK) {
    int outliers = 0;
    double se = rn_median_se(x, x->reps, &outliers);
    ka_sb_printf(&s->log,
                 "[kernelarena] case %s phases (%s staging, fresh inputs, %d calls, %d reps, "
                 "log-speedup sd %.2f%%, median's robust se %.3f%%, %d outliers): "
                 "setup %.1f ms, trial %.1f ms, staging %.1f ms, cache flush %.1f ms, calls "
                 "%.1f ms, checks %.1f ms, verification %.1f ms, device lock waits %.1f ms, "
                 "case %.1f ms\n",
                 x->c.name, x->dev ? "device" : "host", 2 * (x->warm + x->reps) + x->verified,
                 x->reps, rn_log_speedup_sd(x, x->reps) * 100, se * 100, outliers,
                 x->ph_setup * 1e3, x->ph_trial * 1e3, x->ph_stage * 1e3, x->ph_flush * 1e3,
                 x->ph_calls * 1e3, x->ph_checks * 1e3, x->ph_verify * 1e3,
                 (s->lock.waited_s - waited0) * 1e3, (ka_now_s() - t0) * 1e3);
    ka_sb_printf(&s->log,
                 "[kernelarena] case %s setup: maps %.1f ms, device buffers %.1f ms, output "
                 "copies %.1f ms; trial: staging %.1f ms, run %.1f ms, input checks %.1f ms, "
                 "outputs to the host %.1f ms\n",
                 x->c.name, x->ph_map * 1e3, x->ph_alloc * 1e3, x->ph_aside * 1e3,
                 x->ph_tstage * 1e3, x->ph_trun * 1e3, x->ph_tcheck * 1e3, x->ph_tout * 1e3);
    if (s->lock.m >= 0)
      ka_sb_printf(&s->log,
                   "[kernelarena] case %s device lock: %d exclusive holds, %.1f ms waiting\n",
                   x->c.name, s->lock.exclusive_n - excl0, (s->lock.waited_s - waited0) * 1e3);
    rc = rn_judge(x);
  }
  /* nothing of this runner's left on the device when the lock goes (a failure leaves the
   * exclusive hold with unwaited staging or a verification run queued: rn_time); its
   * rc is ignored, the case's verdict is already given */
  if (s->ctx && s->lock.held != KA_DEVLOCK_NONE) (void)s->be->synchronize(s->ctx);
  rn_teardown(x);
  /* device memory freed (rn_teardown) before others may time their calls */
  if (ka_devlock_release(&s->lock) != KA_OK && rc == KA_OK)
    rc = rn_fail(x, KERNELARENA__V1__STATUS__INFRA_ERROR, KA_ESYS, "the device lock failed");
  free(x);
  return rc;
}
