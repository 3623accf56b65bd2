/* ka-validate: deterministic checks of task definitions (`envctl validate` execs it).
 *
 *   ka-validate [TASK...] [--tasks DIR] [--backends LIST] [--seeds N] [--seed S]
 *               [--reps N] [--warmup N] [--min-time-us X] [--report FILE]... [--json]
 *               [--strict] [--cache DIR] [--quiet]
 *
 * Every check ends PASS, WARN or FAIL with a reason (docs/validate.md lists them and why).
 * Two kinds of checks:
 *   - data-level, in this process: the task's trusted reference is called directly on
 *     inputs drawn exactly as an evaluation draws them (ka_fill_input), and synthetic
 *     outputs (the "canned bad submissions": zeros, constants, copies of an input, the
 *     reference of another seed or of re-drawn inputs) are judged by the same comparison
 *     as a step (ka_compare_outputs). They need no compiler and no device, so they hold
 *     for every language and backend.
 *   - evaluation-level, per available backend: the baseline is submitted as the
 *     candidate through ka_evaluate (the executor's own path: sandboxed ka-runner,
 *     reference in this process, judge), over several seeds with held-out cases.
 * Exit status: 0 when no check FAILs (and, with --strict, none WARNs), 1 otherwise, 2 on
 * a usage error. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "data.h"
#include "gpuexec.h"
#include "ka_common.h"
#include "ka_opt.h"
#include "torchproc.h"
#include "triton.h"

#define VD_MAX_SEEDS 16
#define VD_MAX_BACKENDS 3
#define VD_DEFAULT_SEED 0x6b612d76616c6964ULL /* "ka-valid" */

typedef enum vd_level { VD_PASS, VD_WARN, VD_FAIL } vd_level;
static const char *const vd_level_name[] = {"PASS", "WARN", "FAIL"};

typedef struct vd_check {
  char name[32];
  char backend[16]; /* "" for backend-independent checks */
  vd_level level;
  char *reason;
} vd_check;

typedef struct vd_time {
  char backend[16];
  char name[64];
  int held_out;
  double baseline_ms; /* median of the timed baseline calls, ms */
  int timed_calls;
} vd_time;

typedef struct vd_task {
  char *id; /* task id, or the path given when the task does not load */
  vd_check *checks;
  int nchecks;
  vd_time *times;
  int ntimes;
  double wall_s;
  vd_level verdict;
} vd_task;

typedef struct vd_opts {
  const char *tasks_dir, *backends, *cache_dir, *tmp_dir, *runner;
  const char *exedir; /* the binaries' folder (language triton: the venv beside it) */
  int nseeds, reps, warmup, strict, json, quiet;
  uint64_t seeds[VD_MAX_SEEDS];
  double min_time_ms;
  const char *reports[8];
  int nreports;
} vd_opts;

/* A discovered backend: its first device, or why there is none. */
typedef struct vd_backend {
  char name[16];
  int tried;
  Kernelarena__V1__Device *dev; /* NULL: unavailable */
  char why[512];
} vd_backend;

static vd_backend vd_backends[VD_MAX_BACKENDS] = {
    {.name = "host"}, {.name = "cuda"}, {.name = "hip"}};

/* ---- report building */

static vd_check *vd_add(vd_task *r, const char *name, const char *backend, vd_level lv,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static vd_check *vd_add(vd_task *r, const char *name, const char *backend, vd_level lv,
                        const char *fmt, ...) {
  vd_check *n = realloc(r->checks, sizeof *n * (size_t)(r->nchecks + 1));
  if (!n) abort(); /* our own memory; nothing sensible to report without it */
  r->checks = n;
  vd_check *c = &r->checks[r->nchecks++];
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", name);
  snprintf(c->backend, sizeof c->backend, "%s", backend ? backend : "");
  c->level = lv;
  va_list ap;
  va_start(ap, fmt);
  char buf[4096];
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  c->reason = strdup(buf);
  if (lv > r->verdict) r->verdict = lv;
  return c;
}

static void vd_add_time(vd_task *r, const char *backend, const Kernelarena__V1__CaseResult *cr) {
  vd_time *n = realloc(r->times, sizeof *n * (size_t)(r->ntimes + 1));
  if (!n) abort();
  r->times = n;
  vd_time *t = &r->times[r->ntimes++];
  snprintf(t->backend, sizeof t->backend, "%s", backend);
  snprintf(t->name, sizeof t->name, "%s", cr->name ? cr->name : "");
  t->held_out = cr->held_out;
  t->baseline_ms = cr->baseline_ms;
  t->timed_calls = cr->timed_calls;
}

static void vd_task_free(vd_task *r) {
  for (int i = 0; i < r->nchecks; i++) free(r->checks[i].reason);
  free(r->checks);
  free(r->times);
  free(r->id);
}

/* Appends to a bounded list of examples: at most 3 items, then a count. */
typedef struct vd_list {
  ka_sb sb;
  int n;
} vd_list;

static void vd_list_add(vd_list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vd_list_add(vd_list *l, const char *fmt, ...) {
  if (l->n++ >= 3) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  ka_sb_printf(&l->sb, "%s%s", l->n > 1 ? "; " : "", buf);
}

/* The list as text (static buffer, valid until the next call). */
static const char *vd_list_text(vd_list *l) {
  static char out[2048];
  snprintf(out, sizeof out, "%s%s", l->sb.s ? l->sb.s : "", l->n > 3 ? "; ..." : "");
  if (l->n > 3) snprintf(out + strlen(out), sizeof out - strlen(out), " (%d in all)", l->n);
  ka_sb_free(&l->sb);
  l->n = 0;
  return out;
}

/* ---- device discovery (ka-runner --discover, as gpuexec does: this process never
 * loads a vendor library) */

static void vd_discover(const vd_opts *o, vd_backend *b) {
  if (b->tried) return;
  b->tried = 1;
  int po[2], pe[2];
  if (pipe(po)) {
    snprintf(b->why, sizeof b->why, "pipe: %s", strerror(errno));
    return;
  }
  if (pipe(pe)) {
    close(po[0]), close(po[1]);
    snprintf(b->why, sizeof b->why, "pipe: %s", strerror(errno));
    return;
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
    snprintf(b->why, sizeof b->why, "fork: %s", strerror(errno));
    return;
  }
  if (pid == 0) {
    dup2(po[1], 1);
    dup2(pe[1], 2);
    close(po[0]), close(pe[0]), close(po[1]), close(pe[1]);
    execl(o->runner, o->runner, "--discover", b->name, (char *)NULL);
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  ka_sb out = {0}, errs = {0};
  char buf[4096];
  ssize_t n;
  while ((n = read(po[0], buf, sizeof buf)) > 0) ka_sb_append(&out, buf, (size_t)n);
  while ((n = read(pe[0], buf, sizeof buf)) > 0) ka_sb_append(&errs, buf, (size_t)n);
  close(po[0]);
  close(pe[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  const char *e = errs.s ? errs.s : "";
  Kernelarena__V1__DescribeResponse *d = NULL;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
    d = kernelarena__v1__describe_response__unpack(NULL, out.len,
                                                   (const uint8_t *)(out.s ? out.s : ""));
  if (d && d->n_devices > 0) {
    b->dev = ka_device_dup(d->devices[0]);
  } else {
    snprintf(b->why, sizeof b->why, "%s", *e ? e : "no devices");
    size_t l = strlen(b->why);
    while (l && b->why[l - 1] == '\n') b->why[--l] = 0;
  }
  if (d) kernelarena__v1__describe_response__free_unpacked(d, NULL);
  ka_sb_free(&out);
  ka_sb_free(&errs);
}

static int vd_backend_wanted(const vd_opts *o, const char *name) {
  if (!strcmp(o->backends, "auto")) return 1;
  char list[256];
  snprintf(list, sizeof list, "%s", o->backends);
  for (char *save = NULL, *b = strtok_r(list, ",", &save); b; b = strtok_r(NULL, ",", &save))
    if (!strcmp(b, name)) return 1;
  return 0;
}

/* ---- data-level checks */

/* Stores v into element i of buf (dtype dt), rounding to nearest and saturating for
 * integer dtypes. */
static void vd_store(ka_dtype dt, void *buf, int64_t i, double v) {
  switch (dt) {
    case KA_DT_F32:
      ((float *)buf)[i] = (float)v;
      return;
    case KA_DT_F64:
      ((double *)buf)[i] = v;
      return;
    case KA_DT_F16:
      ((_Float16 *)buf)[i] = (_Float16)v;
      return;
    case KA_DT_BF16:
      ((uint16_t *)buf)[i] = ka_f32_to_bf16((float)v);
      return;
    default:
      break;
  }
  double lo = -9.2e18, hi = 9.2e18;
  if (dt == KA_DT_I8) lo = -128, hi = 127;
  if (dt == KA_DT_U8) lo = 0, hi = 255;
  if (dt == KA_DT_I32) lo = -2147483648.0, hi = 2147483647.0;
  v = isnan(v) ? 0 : nearbyint(v < lo ? lo : v > hi ? hi : v);
  if (dt == KA_DT_I8) ((int8_t *)buf)[i] = (int8_t)v;
  if (dt == KA_DT_U8) ((uint8_t *)buf)[i] = (uint8_t)v;
  if (dt == KA_DT_I32) ((int32_t *)buf)[i] = (int32_t)v;
  if (dt == KA_DT_I64) ((int64_t *)buf)[i] = (int64_t)v;
}

/* One case's tensors: inputs in their dtype, outputs as reference doubles. */
typedef struct vd_bufs {
  void *in[KA_MAX_TENSORS];
  double *ref[KA_MAX_TENSORS];
  int64_t elems[KA_MAX_TENSORS];
} vd_bufs;

static void vd_bufs_free(vd_bufs *b) {
  for (int k = 0; k < KA_MAX_TENSORS; k++) free(b->in[k]), free(b->ref[k]);
  memset(b, 0, sizeof *b);
}

static int vd_bufs_alloc(const ka_task *t, const ka_case *c, vd_bufs *b, char *err, size_t errlen) {
  memset(b, 0, sizeof *b);
  for (int k = 0; k < t->ntensors; k++) {
    int rc = ka_task_tensor_elems(t, k, c, &b->elems[k], err, errlen);
    if (rc) return rc;
    size_t n = (size_t)(b->elems[k] ? b->elems[k] : 1);
    if (t->tensors[k].role == KA_ROLE_INPUT)
      b->in[k] = malloc(n * ka_dtype_size(t->tensors[k].dtype));
    else
      b->ref[k] = malloc(n * sizeof(double));
    if (!b->in[k] && !b->ref[k]) return ka_seterr(err, errlen, KA_ENOMEM, "out of memory");
  }
  return KA_OK;
}

static void vd_fill(const ka_task *t, int ci, vd_bufs *b, uint64_t seed) {
  for (int k = 0; k < t->ntensors; k++)
    if (t->tensors[k].role == KA_ROLE_INPUT)
      ka_fill_input(&t->tensors[k], b->in[k], b->elems[k], seed, ci, k);
}

static void vd_ref(const ka_task *t, ka_reference_fn fn, const ka_case *c, vd_bufs *b) {
  void *ptrs[KA_MAX_TENSORS];
  for (int k = 0; k < t->ntensors; k++)
    ptrs[k] = t->tensors[k].role == KA_ROLE_INPUT ? b->in[k] : (void *)b->ref[k];
  fn(ptrs, c->values);
}

/* Judges a synthetic output (values[i] for i < n, stored in the tensor's dtype) against
 * the reference ref, exactly as a step is judged. Returns 1 if it would pass; *bad_frac
 * gets the fraction of elements outside the tolerance. */
static int vd_judge(const ka_task *t, int k, const double *ref, int64_t n, void *scratch,
                    double (*value)(const void *ctx, int64_t i), const void *ctx,
                    double *bad_frac) {
  ka_dtype dt = t->tensors[k].dtype;
  for (int64_t i = 0; i < n; i++) vd_store(dt, scratch, i, value(ctx, i));
  ka_compare cmp;
  double atol, rtol;
  ka_task_tolerance(t, k, &atol, &rtol);
  int ok = ka_compare_outputs(dt, scratch, ref, n, atol, rtol, &cmp);
  *bad_frac = n ? (double)cmp.mismatches / (double)n : 0;
  return ok;
}

typedef struct vd_src {
  const double *d; /* doubles */
  const void *raw; /* or elements of dtype dt, repeated modulo n */
  ka_dtype dt;
  int64_t n;
  double c; /* or a constant */
} vd_src;

static double vd_val_const(const void *ctx, int64_t i) {
  return ((const vd_src *)ctx)->c;
}
static double vd_val_doubles(const void *ctx, int64_t i) {
  return ((const vd_src *)ctx)->d[i];
}
static double vd_val_copy(const void *ctx, int64_t i) {
  const vd_src *s = ctx;
  return ka_load_double(s->dt, s->raw, i % s->n);
}

/* Accumulated evidence of one data-level check over cases and seeds. */
typedef struct vd_acc {
  vd_list bad;         /* examples of failures */
  double min_bad_frac; /* smallest share of failing elements among canned outputs */
  int judged;
} vd_acc;

static void vd_acc_init(vd_acc *a) {
  memset(a, 0, sizeof *a);
  a->min_bad_frac = 1;
}

/* A canned output must fail: records it if it would pass. */
static void vd_expect_fail(vd_acc *a, int passes, double bad_frac, const char *what,
                           const ka_case *c, uint64_t seed, const char *tensor) {
  a->judged++;
  if (passes)
    vd_list_add(&a->bad, "%s passes %s of case %s (seed %#llx)", what, tensor, c->name,
                (unsigned long long)seed);
  else if (bad_frac < a->min_bad_frac)
    a->min_bad_frac = bad_frac;
}

typedef struct vd_data {
  vd_acc finite, determ, seed, zero, constant, copy, depend;
  int nseeds_used;
} vd_data;

/* Canned bad submissions for every output tensor of one case against reference b. */
static void vd_canned(const ka_task *t, const ka_case *c, uint64_t seed, const vd_bufs *b,
                      void *scratch, vd_data *dd) {
  for (int k = 0; k < t->ntensors; k++) {
    if (t->tensors[k].role != KA_ROLE_OUTPUT) continue;
    const double *ref = b->ref[k];
    int64_t n = b->elems[k];
    const char *name = t->tensors[k].name;
    double frac, sum = 0, lo = INFINITY, hi = -INFINITY;
    int64_t nfinite = 0;
    for (int64_t i = 0; i < n; i++) {
      if (!isfinite(ref[i])) continue;
      sum += ref[i];
      if (ref[i] < lo) lo = ref[i];
      if (ref[i] > hi) hi = ref[i];
      nfinite++;
    }
    vd_src s = {.c = 0};
    int ok = vd_judge(t, k, ref, n, scratch, vd_val_const, &s, &frac);
    vd_expect_fail(&dd->zero, ok, frac, "an all-zero output", c, seed, name);
    /* the best constants in the L2 sense (mean) and the max-norm sense (midrange) */
    double consts[2] = {nfinite ? sum / (double)nfinite : 0, nfinite ? 0.5 * (lo + hi) : 0};
    /* (a one-element output is always "constant": the oracle constant is the value) */
    for (int j = 0; j < 2 && n > 1; j++) {
      s.c = consts[j];
      ok = vd_judge(t, k, ref, n, scratch, vd_val_const, &s, &frac);
      char what[96];
      snprintf(what, sizeof what, "the constant %.6g (%s)", consts[j], j ? "midrange" : "mean");
      vd_expect_fail(&dd->constant, ok, frac, what, c, seed, name);
    }
    for (int q = 0; q < t->ntensors; q++) {
      if (t->tensors[q].role != KA_ROLE_INPUT || b->elems[q] == 0) continue;
      vd_src cp = {.raw = b->in[q], .dt = t->tensors[q].dtype, .n = b->elems[q]};
      ok = vd_judge(t, k, ref, n, scratch, vd_val_copy, &cp, &frac);
      char what[96];
      snprintf(what, sizeof what, "a copy of input %s", t->tensors[q].name);
      vd_expect_fail(&dd->copy, ok, frac, what, c, seed, name);
    }
  }
}

/* 1 if every output of a and b is the same within the task's tolerance (b judged
 * against reference a); *frac gets the largest share of differing elements. */
static int vd_same_outputs(const ka_task *t, const vd_bufs *a, const vd_bufs *b, void *scratch,
                           double *frac) {
  int same = 1;
  *frac = 0;
  for (int k = 0; k < t->ntensors; k++) {
    if (t->tensors[k].role != KA_ROLE_OUTPUT) continue;
    vd_src s = {.d = b->ref[k]};
    double f;
    if (!vd_judge(t, k, a->ref[k], a->elems[k], scratch, vd_val_doubles, &s, &f)) same = 0;
    if (f > *frac) *frac = f;
  }
  return same;
}

static void vd_check_finite(const ka_task *t, const ka_case *c, uint64_t seed, const vd_bufs *b,
                            vd_acc *a) {
  for (int k = 0; k < t->ntensors; k++) {
    if (t->tensors[k].role != KA_ROLE_OUTPUT) continue;
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < b->elems[k]; i++)
      if (!isfinite(b->ref[k][i])) {
        if (first < 0) first = i;
        bad++;
      }
    a->judged++;
    if (bad)
      vd_list_add(&a->bad, "%lld NaN/Inf in %s of case %s (seed %#llx), first at [%lld]",
                  (long long)bad, t->tensors[k].name, c->name, (unsigned long long)seed,
                  (long long)first);
  }
}

static vd_level vd_acc_level(const vd_acc *a) {
  return a->bad.n ? VD_FAIL : VD_PASS;
}

/* The data-level checks of one task. */
static void vd_data_checks(const vd_opts *o, const ka_task *t, ka_reference_fn fn, vd_task *r) {
  vd_data dd;
  vd_acc *accs[] = {&dd.finite, &dd.determ, &dd.seed, &dd.zero, &dd.constant, &dd.copy, &dd.depend};
  for (size_t i = 0; i < sizeof accs / sizeof accs[0]; i++) vd_acc_init(accs[i]);
  int ndata = o->nseeds < 2 ? o->nseeds : 2; /* seeds used at the data level */
  char err[1024] = "";
  int infra = 0;
  vd_list dep_ok = {0};
  for (int ci = 0; ci < t->ncases + t->nheld && !infra; ci++) {
    const ka_case *c = &t->cases[ci];
    vd_bufs b0, b1;
    memset(&b1, 0, sizeof b1);
    void *scratch = NULL;
    size_t sbytes = 8;
    if (vd_bufs_alloc(t, c, &b0, err, sizeof err) || vd_bufs_alloc(t, c, &b1, err, sizeof err)) {
      infra = 1;
    } else {
      for (int k = 0; k < t->ntensors; k++)
        if ((size_t)b0.elems[k] * 8 > sbytes) sbytes = (size_t)b0.elems[k] * 8;
      scratch = malloc(sbytes);
      if (!scratch) infra = 1, snprintf(err, sizeof err, "out of memory");
    }
    if (infra) {
      vd_bufs_free(&b0);
      vd_bufs_free(&b1);
      break;
    }
    uint64_t s0 = o->seeds[0];
    vd_fill(t, ci, &b0, s0);
    vd_ref(t, fn, c, &b0);
    vd_check_finite(t, c, s0, &b0, &dd.finite);
    vd_canned(t, c, s0, &b0, scratch, &dd);
    /* determinism: the same inputs give bitwise the same reference */
    vd_fill(t, ci, &b1, s0);
    vd_ref(t, fn, c, &b1);
    for (int k = 0; k < t->ntensors; k++)
      if (t->tensors[k].role == KA_ROLE_OUTPUT) {
        dd.determ.judged++;
        if (memcmp(b0.ref[k], b1.ref[k], sizeof(double) * (size_t)b0.elems[k]))
          vd_list_add(&dd.determ.bad, "%s of case %s differs between two calls on one seed",
                      t->tensors[k].name, c->name);
      }
    /* every input matters: re-draw one input at a time; the reference must change */
    for (int q = 0; q < t->ntensors; q++) {
      if (t->tensors[q].role != KA_ROLE_INPUT) continue;
      vd_fill(t, ci, &b1, s0);
      ka_fill_input(&t->tensors[q], b1.in[q], b1.elems[q], ka_mix64(s0, 0x646570ULL + (uint64_t)q),
                    ci, q);
      vd_ref(t, fn, c, &b1);
      double frac;
      dd.depend.judged++;
      if (vd_same_outputs(t, &b0, &b1, scratch, &frac))
        vd_list_add(&dd.depend.bad,
                    "re-drawing input %s leaves every output of case %s within tolerance",
                    t->tensors[q].name, c->name);
      else if (ci == 0)
        vd_list_add(&dep_ok, "%s changes %.1f%%", t->tensors[q].name, 100 * frac);
    }
    /* other seeds: finite, canned outputs, and the reference must change with the seed */
    for (int si = 1; si < ndata; si++) {
      vd_fill(t, ci, &b1, o->seeds[si]);
      vd_ref(t, fn, c, &b1);
      vd_check_finite(t, c, o->seeds[si], &b1, &dd.finite);
      double frac;
      dd.seed.judged++;
      if (vd_same_outputs(t, &b0, &b1, scratch, &frac))
        vd_list_add(&dd.seed.bad, "case %s: seeds %#llx and %#llx give the same outputs", c->name,
                    (unsigned long long)s0, (unsigned long long)o->seeds[si]);
      else if (frac < dd.seed.min_bad_frac)
        dd.seed.min_bad_frac = frac;
    }
    free(scratch);
    vd_bufs_free(&b0);
    vd_bufs_free(&b1);
  }
  if (infra) {
    vd_add(r, "reference_runs", NULL, VD_FAIL, "cannot prepare the reference's buffers: %s", err);
    ka_sb_free(&dep_ok.sb);
    for (size_t i = 0; i < sizeof accs / sizeof accs[0]; i++) ka_sb_free(&accs[i]->bad.sb);
    return;
  }
  int ncs = t->ncases + t->nheld;
  /* levels first: vd_list_text empties the list */
  vd_level finite_lv = vd_acc_level(&dd.finite), determ_lv = vd_acc_level(&dd.determ);
  vd_add(r, "reference_finite", NULL, finite_lv, "%s",
         dd.finite.bad.n ? vd_list_text(&dd.finite.bad)
                         : "no NaN/Inf in any reference output (every case, data seeds)");
  vd_add(r, "reference_determinism", NULL, determ_lv, "%s",
         dd.determ.bad.n ? vd_list_text(&dd.determ.bad)
                         : "two calls on the same inputs give bitwise equal outputs");
  if (ndata < 2)
    vd_add(r, "seed_dependence", NULL, VD_WARN, "needs --seeds >= 2");
  else if (dd.seed.bad.n)
    vd_add(r, "seed_dependence", NULL, VD_FAIL, "%s", vd_list_text(&dd.seed.bad));
  else
    vd_add(r, "seed_dependence", NULL, VD_PASS,
           "another seed changes the outputs of all %d cases (at least %.1f%% of elements)", ncs,
           100 * dd.seed.min_bad_frac);
  struct {
    const char *name, *what;
    vd_acc *a;
  } canned[] = {{"canned_zeros", "all-zero outputs", &dd.zero},
                {"canned_constant", "constant outputs (mean, midrange)", &dd.constant},
                {"canned_input_copy", "copies of an input", &dd.copy}};
  for (int i = 0; i < 3; i++) {
    vd_acc *a = canned[i].a;
    if (a->bad.n)
      vd_add(r, canned[i].name, NULL, VD_FAIL, "%s", vd_list_text(&a->bad));
    else if (a->judged == 0)
      vd_add(r, canned[i].name, NULL, VD_PASS, "not applicable (no %s)",
             i == 2 ? "inputs" : "outputs");
    else
      vd_add(r, canned[i].name, NULL, VD_PASS,
             "%s fail all %d judgements (every output of all %d cases); at least %.1f%% of "
             "elements outside tolerance",
             canned[i].what, a->judged, ncs, 100 * a->min_bad_frac);
  }
  if (dd.depend.bad.n)
    vd_add(r, "input_dependence", NULL, VD_FAIL, "%s", vd_list_text(&dd.depend.bad));
  else
    vd_add(r, "input_dependence", NULL, VD_PASS,
           "re-drawing any one input changes the outputs of every case (case %s: %s)",
           t->cases[0].name, dep_ok.n ? vd_list_text(&dep_ok) : "-");
  ka_sb_free(&dep_ok.sb);
  for (size_t i = 0; i < sizeof accs / sizeof accs[0]; i++) ka_sb_free(&accs[i]->bad.sb);
}

/* ---- static checks */

static int vd_tensor_shape(const ka_task *t, int k, const ka_case *c, int64_t *dims) {
  ka_vars v = {0};
  ka_task_case_vars(t, c, &v);
  char e[256];
  for (int d = 0; d < t->tensors[k].ndim; d++)
    if (ka_expr_eval(t->tensors[k].shape[d], &v, &dims[d], e, sizeof e)) return -1;
  return 0;
}

/* 1 if cases a and b give every tensor the same shape. */
static int vd_same_shapes(const ka_task *t, const ka_case *a, const ka_case *b) {
  for (int k = 0; k < t->ntensors; k++) {
    int64_t da[KA_MAX_DIMS] = {0}, db[KA_MAX_DIMS] = {0};
    if (vd_tensor_shape(t, k, a, da) || vd_tensor_shape(t, k, b, db)) return 0;
    if (memcmp(da, db, sizeof da)) return 0;
  }
  return 1;
}

static void vd_static_checks(const ka_task *t, vd_task *r) {
  /* files */
  vd_list miss = {0};
  char p[PATH_MAX];
  struct stat st;
  if (!t->prompt || strlen(t->prompt) < 40) vd_list_add(&miss, "prompt.md is empty or too short");
  snprintf(p, sizeof p, "%s/reference.c", t->dir);
  if (stat(p, &st) || st.st_size == 0) vd_list_add(&miss, "reference.c is missing or empty");
  for (int i = 0; i < t->neditable; i++) {
    snprintf(p, sizeof p, "%s/baseline/%s", t->dir, t->editable[i]);
    if (stat(p, &st) || st.st_size == 0) vd_list_add(&miss, "baseline/%s is empty", t->editable[i]);
  }
  if (miss.n)
    vd_add(r, "files", NULL, VD_FAIL, "%s", vd_list_text(&miss));
  else
    vd_add(r, "files", NULL, VD_PASS,
           "task.yaml, prompt.md (%zu bytes), reference.c, %d baseline "
           "file(s)",
           strlen(t->prompt), t->neditable);
  vd_list meta = {0};
  if (t->ntags == 0) vd_list_add(&meta, "no tags");
  if (!t->bytes_expr && !t->flops_expr) vd_list_add(&meta, "neither bytes nor flops");
  if (!t->description) vd_list_add(&meta, "no description");
  if (meta.n)
    vd_add(r, "metadata", NULL, VD_WARN, "%s", vd_list_text(&meta));
  else
    vd_add(r, "metadata", NULL, VD_PASS, "description, %d tag(s), %s%s%s", t->ntags,
           t->bytes_expr ? "bytes" : "", t->bytes_expr && t->flops_expr ? " and " : "",
           t->flops_expr ? "flops" : "");

  /* held-out cases exist and differ in shape from every shown case */
  vd_list bad = {0};
  for (int h = t->ncases; h < t->ncases + t->nheld; h++)
    for (int s = 0; s < t->ncases; s++)
      if (vd_same_shapes(t, &t->cases[h], &t->cases[s]))
        vd_list_add(&bad, "held-out case %s has the shapes of shown case %s", t->cases[h].name,
                    t->cases[s].name);
  if (t->ncases < 2) vd_list_add(&bad, "%d shown case(s); at least 2 are required", t->ncases);
  if (t->nheld == 0) {
    int more = bad.n;
    const char *text = vd_list_text(&bad);
    vd_add(r, "held_out", NULL, VD_FAIL, "no held-out cases%s%s", more ? "; " : "", text);
  } else if (bad.n)
    vd_add(r, "held_out", NULL, VD_FAIL, "%s", vd_list_text(&bad));
  else
    vd_add(r, "held_out", NULL, VD_PASS,
           "%d shown and %d held-out case(s); every held-out shape differs from the shown ones",
           t->ncases, t->nheld);
}

/* Bytes of device memory one case needs in a runner (each tensor once, the baseline's
 * scratch buffers for baseline and candidate, the cache-flush buffer) and bytes of host
 * memory an evaluation keeps (in the executor: inputs twice, outputs once plus their
 * double references, for all cases at once; in the runner: two copies of the outputs
 * of the case running). */
static void vd_memory(const ka_task *t, const Kernelarena__V1__Device *dev, int64_t *dev_bytes,
                      int64_t *host_bytes) {
  ka_plan *plan = NULL;
  if (t->launch_plan) {
    char p[PATH_MAX], *text = NULL, e[256];
    size_t len = 0;
    snprintf(p, sizeof p, "%s/baseline/%s", t->dir, t->launch_plan);
    if (ka_read_file(p, 64 * 1024, &text, &len) == KA_OK)
      ka_plan_parse(t, text, len, &plan, e, 256);
    free(text);
  }
  *dev_bytes = 0;
  *host_bytes = 0;
  int64_t host_runner = 0;
  for (int ci = 0; ci < t->ncases + t->nheld; ci++) {
    const ka_case *c = &t->cases[ci];
    int64_t d = 0, h = 0, hr = 0, elems;
    char e[256];
    for (int k = 0; k < t->ntensors; k++) {
      if (ka_task_tensor_elems(t, k, c, &elems, e, sizeof e)) continue;
      int64_t bytes = elems * (int64_t)ka_dtype_size(t->tensors[k].dtype);
      d += bytes;
      if (t->tensors[k].role == KA_ROLE_INPUT) {
        h += 2 * bytes;
      } else {
        h += bytes + 8 * elems;
        hr += 2 * bytes;
      }
    }
    ka_vars v = {0};
    ka_task_case_vars(t, c, &v);
    ka_vars_set(&v, "sm_count", dev->multiprocessors);
    ka_vars_set(&v, "warp_size", dev->warp_size);
    ka_vars_set(&v, "max_threads", dev->max_threads_per_block);
    ka_vars_set(&v, "l2_bytes", dev->l2_bytes);
    ka_vars_set(&v, "shared_per_block", dev->shared_bytes_per_block);
    for (int s = 0; plan && s < plan->nscratch; s++) {
      int64_t cnt;
      if (ka_expr_eval(plan->scratch[s].count, &v, &cnt, e, sizeof e) == KA_OK)
        d += 2 * cnt * (int64_t)ka_dtype_size(plan->scratch[s].dtype);
    }
    d += 2 * dev->l2_bytes;
    if (d > *dev_bytes) *dev_bytes = d;
    if (hr > host_runner) host_runner = hr;
    *host_bytes += h;
  }
  *host_bytes += host_runner;
  ka_plan_free(plan);
}

/* ---- evaluation-level checks (one backend) */

static int vd_read_baseline(const ka_task *t, Kernelarena__V1__File *files,
                            Kernelarena__V1__File **fp, char *err, size_t errlen) {
  for (int i = 0; i < t->neditable; i++) {
    kernelarena__v1__file__init(&files[i]);
    char p[PATH_MAX], *text;
    size_t len;
    snprintf(p, sizeof p, "%s/baseline/%s", t->dir, t->editable[i]);
    if (ka_read_file(p, 16 << 20, &text, &len)) {
      for (int j = 0; j < i; j++) free(files[j].content.data);
      return ka_seterr(err, errlen, KA_EIO, "cannot read %s", p);
    }
    files[i].path = t->editable[i];
    files[i].content.data = (uint8_t *)text;
    files[i].content.len = len;
    fp[i] = &files[i];
  }
  return KA_OK;
}

static const char *vd_status_name(Kernelarena__V1__Status s) {
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&kernelarena__v1__status__descriptor, (int)s);
  return v ? v->name : "?";
}

/* 1 if an evaluation judged every output correct (status OK). */
static int vd_correct(const Kernelarena__V1__Result *res) {
  if (res->status != KERNELARENA__V1__STATUS__OK) return 0;
  for (size_t i = 0; i < res->n_cases; i++)
    if (!res->cases[i]->correct) return 0;
  return res->n_cases > 0;
}

/* 1 if the integrity checks flagged a timing (FLAGGED): the runner stops there and the
 * outputs are not judged, so such a run says nothing about correctness. */
static int vd_flagged(const Kernelarena__V1__Result *res) {
  return res->status == KERNELARENA__V1__STATUS__FLAGGED;
}

/* Why an evaluation did not pass, in one line (first failing case or the message). */
static void vd_why(const Kernelarena__V1__Result *res, char *out, size_t len) {
  const char *m = res->message && *res->message ? res->message : "";
  for (size_t i = 0; i < res->n_cases; i++)
    if (!res->cases[i]->correct && res->cases[i]->message && *res->cases[i]->message) {
      snprintf(out, len, "%s: case %s: %s", vd_status_name(res->status), res->cases[i]->name,
               res->cases[i]->message);
      return;
    }
  snprintf(out, len, "%s: %s", vd_status_name(res->status), m);
}

static void vd_eval_checks(const vd_opts *o, const ka_task *t, vd_backend *be, vd_task *r) {
  const char *bn = be->name;
  ka_task *tp = (ka_task *)t;
  ka_registry reg = {.ntasks = 1, .tasks = &tp, .root = (char *)"."};
  ka_exec_config cfg = {.runner_path = o->runner,
                        .cache_dir = o->cache_dir,
                        .tmp_dir = o->tmp_dir,
                        .tasks = &reg,
                        .fixed_inputs = 1};
  Kernelarena__V1__File files[KA_MAX_EDITABLE], *fp[KA_MAX_EDITABLE];
  char err[1024];
  if (vd_read_baseline(t, files, fp, err, sizeof err)) {
    vd_add(r, "baseline_compiles", bn, VD_FAIL, "%s", err);
    return;
  }
  int nruns = o->nseeds + 1; /* every seed, then the first seed again */
  Kernelarena__V1__Result res[VD_MAX_SEEDS + 1];
  for (int i = 0; i < nruns; i++) {
    kernelarena__v1__result__init(&res[i]);
    Kernelarena__V1__Job job = KERNELARENA__V1__JOB__INIT;
    char jid[64];
    snprintf(jid, sizeof jid, "validate-%d", i);
    job.job_id = jid;
    job.task_id = t->id;
    job.task_version = t->version;
    job.seed = o->seeds[i < o->nseeds ? i : 0];
    job.files = fp;
    job.n_files = (size_t)t->neditable;
    job.include_held_out = 1;
    /* the first run is timed in full; the others check correctness (one timed call) */
    job.warmup = i == 0 ? o->warmup : 0;
    job.reps = i == 0 ? o->reps : 1;
    ka_evaluate(&cfg, be->dev, &job, &res[i]);
    ka_evaluate_finish(&cfg);
    if (!o->quiet)
      fprintf(stderr, "validate: %s on %s, seed %#llx: %s in %.2f s\n", t->id, bn,
              (unsigned long long)job.seed, vd_status_name(res[i].status), res[i].wall_s);
    if (i == 0 && (res[0].status == KERNELARENA__V1__STATUS__COMPILE_ERROR ||
                   res[0].status == KERNELARENA__V1__STATUS__INFRA_ERROR)) {
      nruns = 1;
      break;
    }
  }
  for (int i = 0; i < t->neditable; i++) free(files[i].content.data);
  char why[2048];
  Kernelarena__V1__Result *r0 = &res[0];
  int built = r0->status != KERNELARENA__V1__STATUS__COMPILE_ERROR &&
              r0->status != KERNELARENA__V1__STATUS__INFRA_ERROR;
  if (!built) {
    vd_why(r0, why, sizeof why);
    const char *log = r0->compile_log && *r0->compile_log ? r0->compile_log : r0->runtime_log;
    vd_add(r, "baseline_compiles", bn, VD_FAIL, "%s%s%.1500s", why, log && *log ? "\n" : "",
           log ? log : "");
    for (int i = 0; i < nruns; i++) ka_result_clear(&res[i]);
    return;
  }
  vd_add(r, "baseline_compiles", bn, VD_PASS, "compiled on %s (%s) in %.2f s",
         r0->device && r0->device->name ? r0->device->name : bn,
         r0->device && r0->device->arch ? r0->device->arch : "", r0->compile_s);

  /* correctness over every seed, shown and held-out cases */
  vd_list bad = {0}, unjudged = {0};
  double worst_rel = 0;
  for (int i = 0; i < o->nseeds; i++) {
    if (vd_flagged(&res[i])) {
      vd_list_add(&unjudged, "seed %#llx", (unsigned long long)o->seeds[i]);
    } else if (!vd_correct(&res[i])) {
      vd_why(&res[i], why, sizeof why);
      vd_list_add(&bad, "seed %#llx: %s", (unsigned long long)o->seeds[i], why);
    }
    for (size_t c = 0; c < res[i].n_cases; c++)
      if (res[i].cases[c]->max_rel_err > worst_rel) worst_rel = res[i].cases[c]->max_rel_err;
  }
  if (bad.n) {
    ka_sb_free(&unjudged.sb);
    vd_add(r, "baseline_correct", bn, VD_FAIL, "%s", vd_list_text(&bad));
  } else if (unjudged.n) {
    vd_add(r, "baseline_correct", bn, VD_WARN,
           "correct where judged, but the runs of %s were FLAGGED (see not_flagged), so their "
           "outputs were not judged",
           vd_list_text(&unjudged));
  } else
    vd_add(r, "baseline_correct", bn, VD_PASS,
           "matches the reference on all %d cases (shown and held-out) over %d seeds; largest "
           "relative error %.3g",
           t->ncases + t->nheld, o->nseeds, worst_rel);

  /* the integrity checks (physics floor) must accept the trusted baseline's timings */
  vd_list flagged = {0};
  for (int i = 0; i < nruns; i++)
    for (size_t c = 0; c < res[i].n_cases; c++)
      if (res[i].cases[c]->flag && *res[i].cases[c]->flag)
        vd_list_add(&flagged, "case %s: %s", res[i].cases[c]->name, res[i].cases[c]->flag);
  if (flagged.n)
    vd_add(r, "not_flagged", bn, VD_WARN,
           "the integrity checks flagged the baseline's timing (check bytes/flops, or a noisy "
           "machine): %s",
           vd_list_text(&flagged));
  else
    vd_add(r, "not_flagged", bn, VD_PASS, "no timing of the baseline was flagged");

  /* repeatability: the first seed again */
  Kernelarena__V1__Result *ra = &res[0], *rb = &res[o->nseeds];
  vd_list diff = {0};
  int same_verdict = vd_correct(ra) == vd_correct(rb);
  if (!same_verdict)
    vd_list_add(&diff, "status %s then %s", vd_status_name(ra->status), vd_status_name(rb->status));
  for (size_t c = 0; c < ra->n_cases && c < rb->n_cases; c++) {
    const Kernelarena__V1__CaseResult *x = ra->cases[c], *y = rb->cases[c];
    if (x->correct != y->correct || x->mismatches != y->mismatches ||
        x->max_abs_err != y->max_abs_err || x->max_rel_err != y->max_rel_err)
      vd_list_add(&diff, "case %s: max abs error %.9g then %.9g", x->name, x->max_abs_err,
                  y->max_abs_err);
  }
  if (ra->n_cases != rb->n_cases) vd_list_add(&diff, "a different number of cases");
  if (vd_flagged(ra) || vd_flagged(rb)) {
    ka_sb_free(&diff.sb);
    vd_add(r, "repeatable", bn, VD_WARN, "not compared: a run on seed %#llx was FLAGGED",
           (unsigned long long)o->seeds[0]);
  } else if (!same_verdict)
    vd_add(r, "repeatable", bn, VD_FAIL, "two runs on seed %#llx disagree: %s",
           (unsigned long long)o->seeds[0], vd_list_text(&diff));
  else if (diff.n && t->nondeterministic)
    vd_add(r, "repeatable", bn, VD_PASS,
           "same verdict on two runs on seed %#llx; errors differ, as the task declares "
           "(nondeterministic: %.300s): %s",
           (unsigned long long)o->seeds[0], t->nondeterministic, vd_list_text(&diff));
  else if (diff.n)
    vd_add(r, "repeatable", bn, VD_WARN,
           "same verdict, but the baseline's errors differ between two runs on seed %#llx "
           "(not bitwise deterministic, e.g. float atomics; if that is expected, give the "
           "reason in task.yaml `nondeterministic:`): %s",
           (unsigned long long)o->seeds[0], vd_list_text(&diff));
  else
    vd_add(r, "repeatable", bn, VD_PASS,
           "two runs on seed %#llx agree: same verdict, identical errors on every case",
           (unsigned long long)o->seeds[0]);

  /* timings of the first run, and the floor */
  int timed = r0->n_cases > 0;
  for (size_t c = 0; c < r0->n_cases; c++) timed &= r0->cases[c]->timed_calls > 0;
  if (timed) {
    vd_list low = {0};
    double lo = INFINITY;
    for (size_t c = 0; c < r0->n_cases; c++) {
      vd_add_time(r, bn, r0->cases[c]);
      double ms = r0->cases[c]->baseline_ms;
      if (ms < lo) lo = ms;
      if (ms < o->min_time_ms) vd_list_add(&low, "case %s: %.2f us", r0->cases[c]->name, ms * 1000);
    }
    if (low.n)
      vd_add(r, "time_floor", bn, VD_WARN,
             "baseline below %.1f us, where launch overhead dominates: %s", o->min_time_ms * 1000,
             vd_list_text(&low));
    else
      vd_add(r, "time_floor", bn, VD_PASS, "every case's baseline takes >= %.1f us (least %.1f us)",
             o->min_time_ms * 1000, lo * 1000);
  } else {
    vd_add(r, "time_floor", bn, VD_WARN, "not measured: the first run (%s) has no timings",
           vd_status_name(r0->status));
  }

  /* the evaluation (baseline as candidate: compile, run, time) fits the timeout */
  double timeout = t->timeout_s;
  if (r0->status == KERNELARENA__V1__STATUS__TIMEOUT)
    vd_add(r, "timeout", bn, VD_FAIL,
           "an evaluation with held-out cases timed out (timeout_s %.0f s)", timeout);
  else if (r0->wall_s > 0.5 * timeout)
    vd_add(r, "timeout", bn, VD_WARN,
           "an evaluation with held-out cases took %.2f s, over half of timeout_s %.0f s (a slow "
           "or loaded machine, or cases too large)",
           r0->wall_s, timeout);
  else
    vd_add(r, "timeout", bn, VD_PASS,
           "an evaluation with held-out cases took %.2f s of %.0f s (%.0f%%)", r0->wall_s, timeout,
           100 * r0->wall_s / timeout);
  for (int i = 0; i < nruns; i++) ka_result_clear(&res[i]);
}

static void vd_memory_check(const ka_task *t, const vd_backend *be, vd_task *r) {
  int64_t need_dev, need_host;
  vd_memory(t, be->dev, &need_dev, &need_host);
  int64_t have = be->dev->memory_bytes;
  int64_t host_total = (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
  const double gib = 1024.0 * 1024 * 1024;
  if (!strcmp(be->name, "host")) need_host += need_dev, need_dev = 0;
  vd_level lv = VD_PASS;
  if (have > 0 && need_dev > 0.8 * (double)have)
    lv = VD_FAIL;
  else if ((have > 0 && need_dev > 0.5 * (double)have) ||
           (host_total > 0 && need_host > 0.5 * (double)host_total))
    lv = VD_WARN;
  vd_add(r, "memory", be->name, lv,
         "largest case needs %.3f GiB of device memory (of %.1f GiB); an evaluation holds "
         "%.3f GiB of host memory (of %.1f GiB)%s",
         need_dev / gib, have / gib, need_host / gib, host_total / gib,
         lv == VD_FAIL   ? ": over 80% of the device"
         : lv == VD_WARN ? ": over half"
                         : "");
}

/* ---- one task */

/* t's backends as "cuda", "cuda or hip" into sb. */
static void ep_join_backends(ka_sb *sb, const ka_task *t) {
  for (int i = 0; i < t->nbackends; i++)
    ka_sb_printf(sb, "%s%s", i == 0 ? "" : i == t->nbackends - 1 ? " or " : ", ", t->backends[i]);
}

/* ---- PyTorch tasks (torch2cuda, torch2triton) ----------------------------------- */

/* The shown or held-out case with the fewest elements in all (the cheapest to compare). */
static int vd_smallest_case(const ka_task *t) {
  int best = 0;
  double best_n = -1;
  char err[256];
  for (int ci = 0; ci < t->ncases + t->nheld; ci++) {
    double n = 0;
    for (int k = 0; k < t->ntensors; k++) {
      int64_t e = 0;
      if (ka_task_tensor_elems(t, k, &t->cases[ci], &e, err, sizeof err) == KA_OK) n += (double)e;
    }
    if (best_n < 0 || n < best_n) best = ci, best_n = n;
  }
  return best;
}

/* The module's float64 outputs from the trusted torch process (daemon/torchproc.h) for
 * case ci against reference.c's on the same inputs: *worst gets the largest difference
 * over max|ref| of any output. KA_EUNAVAIL (with err) where torch is absent. */
static int vd_torch_compare(const vd_opts *o, const ka_task *t, ka_reference_fn fn, int ci,
                            double *worst, const char **device, char *err, size_t errlen) {
  char driver[PATH_MAX + 16];
  snprintf(driver, sizeof driver, "%s/ka_torch.py", o->exedir ? o->exedir : ".");
  const char *over = getenv("KA_TORCH_DRIVER"); /* tests: a stand-in driver */
  if (over && *over) snprintf(driver, sizeof driver, "%s", over);
  const char *py = getenv("KA_TORCH_PYTHON");
  if (!py || !*py) py = "python3";
  ka_torch *tp = NULL;
  *device = "cuda";
  int rc = ka_torch_start(py, driver, "cuda", -1, -1, 300, &tp, NULL, err, errlen);
  if (rc == KA_EUNAVAIL && strstr(err, "sees no CUDA device")) /* float64 on the CPU then */
    *device = "cpu", rc = ka_torch_start(py, driver, "cpu", -1, -1, 300, &tp, NULL, err, errlen);
  if (rc) return rc;
  const ka_case *c = &t->cases[ci];
  vd_bufs b, m;
  rc = vd_bufs_alloc(t, c, &b, err, errlen);
  if (rc == KA_OK) rc = vd_bufs_alloc(t, c, &m, err, errlen);
  if (rc == KA_OK) rc = ka_torch_load(tp, t, c, err, errlen);
  int bits = 64;
  if (rc == KA_OK) {
    vd_fill(t, ci, &b, o->seeds[0]);
    vd_ref(t, fn, c, &b);
    void *ptrs[KA_MAX_TENSORS];
    for (int k = 0; k < t->ntensors; k++)
      ptrs[k] = t->tensors[k].role == KA_ROLE_INPUT ? b.in[k] : (void *)m.ref[k];
    rc = ka_torch_reference(tp, ptrs, &bits, err, errlen);
  }
  *worst = bits == 64 ? 0 : INFINITY;
  for (int k = 0; k < t->ntensors && rc == KA_OK; k++) {
    if (t->tensors[k].role == KA_ROLE_INPUT) continue;
    double scale = 0, diff = 0;
    for (int64_t i = 0; i < b.elems[k]; i++) {
      double d = fabs(m.ref[k][i] - b.ref[k][i]);
      if (fabs(b.ref[k][i]) > scale) scale = fabs(b.ref[k][i]);
      if (!(d <= diff)) diff = d; /* NaN: worst */
    }
    double w = scale > 0 ? diff / scale : diff;
    if (!(w <= *worst)) *worst = w;
  }
  vd_bufs_free(&b);
  vd_bufs_free(&m);
  ka_torch_stop(tp);
  return rc;
}

/* torch_model: model.py is there and the prompt shows it; torch_reference: the module's
 * float64 output agrees with reference.c (1e-9 of max|ref|) on the smallest case, or a
 * WARN that says torch is absent here (never a silent skip). */
static void vd_torch_checks(const vd_opts *o, const ka_task *t, ka_reference_fn fn, vd_task *r) {
  char path[PATH_MAX + 16], err[2048] = "";
  snprintf(path, sizeof path, "%s/model.py", t->dir);
  char *model = NULL;
  size_t len = 0;
  int rc = ka_read_file(path, 1 << 20, &model, &len);
  if (rc || !strstr(model, "class Model("))
    vd_add(r, "torch_model", NULL, VD_FAIL, "model.py %s",
           rc ? "is missing" : "has no class Model");
  else if (!t->prompt || !strstr(t->prompt, model))
    vd_add(r, "torch_model", NULL, VD_FAIL, "prompt.md does not show model.py verbatim");
  else
    vd_add(r, "torch_model", NULL, VD_PASS, "model.py (%zu bytes, class Model) shown in the prompt",
           len);
  free(model);
  int ci = vd_smallest_case(t);
  double worst = 0;
  const char *device = "cuda";
  rc = vd_torch_compare(o, t, fn, ci, &worst, &device, err, sizeof err);
  if (rc == KA_EUNAVAIL)
    vd_add(r, "torch_reference", NULL, VD_WARN,
           "%s: the module's float64 output was not compared with reference.c here "
           "(KA_TORCH_PYTHON picks the Python; tests/device/torch_h200.sh runs it on the H200)",
           err);
  else if (rc)
    vd_add(r, "torch_reference", NULL, VD_FAIL, "case %s: %s", t->cases[ci].name, err);
  else if (!(worst <= 1e-9))
    vd_add(
        r, "torch_reference", NULL, VD_FAIL,
        "case %s: the module's output (torch, %s) differs from reference.c by %.3g of max|ref|%s",
        t->cases[ci].name, device, worst, isinf(worst) ? " (computed in float32)" : "");
  else
    vd_add(r, "torch_reference", NULL, VD_PASS,
           "case %s: the module's float64 output (torch, %s) equals reference.c's to %.2g of "
           "max|ref|",
           t->cases[ci].name, device, worst);
}

static void vd_validate(const vd_opts *o, const char *dir, const char *expect_id, vd_task *r) {
  double t0 = ka_now_s();
  ka_task *t = NULL;
  char err[1024] = "";
  int rc = ka_task_load(dir, &t, err, sizeof err);
  if (rc) {
    r->id = strdup(expect_id ? expect_id : dir);
    vd_add(r, "schema", NULL, VD_FAIL, "%s", err);
    r->wall_s = ka_now_s() - t0;
    return;
  }
  r->id = strdup(t->id);
  if (expect_id && strcmp(expect_id, t->id))
    vd_add(r, "schema", NULL, VD_FAIL, "id '%s' does not match its folder '%s'", t->id, expect_id);
  else
    vd_add(r, "schema", NULL, VD_PASS, "task.yaml loads (%s %s, %s mode, version %s)", t->type,
           t->language, t->mode, t->version);
  if (!o->quiet) fprintf(stderr, "validate: %s\n", t->id);
  vd_static_checks(t, r);

  ka_reference_fn fn;
  if (ka_reference_get(t, o->cache_dir, &fn, err, sizeof err)) {
    vd_add(r, "reference_builds", NULL, VD_FAIL, "%s", err);
  } else {
    vd_add(r, "reference_builds", NULL, VD_PASS, "reference.c compiles and exports %s",
           t->reference_symbol);
    vd_data_checks(o, t, fn, r);
    if (!strncmp(t->type, "torch2", 6)) vd_torch_checks(o, t, fn, r);
    int nrun = 0;
    ka_sb skipped = {0};
    for (int b = 0; b < t->nbackends; b++) {
      vd_backend *be = NULL;
      for (int j = 0; j < VD_MAX_BACKENDS; j++)
        if (!strcmp(vd_backends[j].name, t->backends[b])) be = &vd_backends[j];
      if (!be || !vd_backend_wanted(o, t->backends[b])) {
        ka_sb_printf(&skipped, "%s%s: not selected", skipped.len ? "; " : "", t->backends[b]);
        continue;
      }
      vd_discover(o, be);
      if (!be->dev) {
        ka_sb_printf(&skipped, "%s%s: %s", skipped.len ? "; " : "", be->name, be->why);
        continue;
      }
      /* language triton: a Python with triton for the runners' compile (triton.h) */
      char why[640];
      if (!strcmp(t->language, "triton") &&
          !ka_triton_setup(o->exedir, o->cache_dir, NULL, NULL, why, sizeof why)) {
        vd_add(r, "triton", NULL, VD_FAIL, "%s", why);
        continue;
      }
      nrun++;
      vd_memory_check(t, be, r);
      vd_eval_checks(o, t, be, r);
    }
    if (nrun == 0) {
      ka_sb need = {0};
      ep_join_backends(&need, t);
      vd_add(r, "backends", NULL, VD_WARN,
             "no listed backend is available here, so the baseline was not run: the task needs "
             "a %s device (%s)",
             need.s ? need.s : "", skipped.s ? skipped.s : "");
      ka_sb_free(&need);
    } else if (skipped.len)
      vd_add(r, "backends", NULL, VD_PASS, "ran on %d backend(s); not here: %s", nrun, skipped.s);
    ka_sb_free(&skipped);
  }
  ka_task_free(t);
  r->wall_s = ka_now_s() - t0;
}

/* ---- output */

static void vd_print_text(FILE *f, const vd_opts *o, const vd_task *rs, int n) {
  char date[64];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
  fprintf(f, "kernelarena task validation, %s\n", date);
  fprintf(f, "tasks: %s; backends: %s; seeds:", o->tasks_dir, o->backends);
  for (int i = 0; i < o->nseeds; i++) fprintf(f, " %#llx", (unsigned long long)o->seeds[i]);
  fprintf(f, "; timed calls per case: %d (+%d warm-up)\n", o->reps, o->warmup);
  for (int b = 0; b < VD_MAX_BACKENDS; b++)
    if (vd_backends[b].dev)
      fprintf(f, "device: %s %s (%s), %d multiprocessors, %.1f GiB\n", vd_backends[b].name,
              vd_backends[b].dev->name, vd_backends[b].dev->arch,
              vd_backends[b].dev->multiprocessors,
              (double)vd_backends[b].dev->memory_bytes / (1024.0 * 1024 * 1024));
  for (int i = 0; i < n; i++) {
    const vd_task *r = &rs[i];
    fprintf(f, "\n== %s: %s (%.1f s)\n", r->id, vd_level_name[r->verdict], r->wall_s);
    for (int c = 0; c < r->nchecks; c++) {
      const vd_check *k = &r->checks[c];
      char name[64];
      snprintf(name, sizeof name, "%s%s%s", k->name, k->backend[0] ? "@" : "", k->backend);
      fprintf(f, "  %s %-28s %s\n", vd_level_name[k->level], name, k->reason);
    }
    if (r->ntimes) {
      fprintf(f, "  baseline times (median of timed calls):\n");
      for (int j = 0; j < r->ntimes; j++)
        fprintf(f, "    %-6s %-24s %-9s %12.4f ms  (%d calls)\n", r->times[j].backend,
                r->times[j].name, r->times[j].held_out ? "held-out" : "shown",
                r->times[j].baseline_ms, r->times[j].timed_calls);
    }
  }
  int counts[3] = {0};
  for (int i = 0; i < n; i++) counts[rs[i].verdict]++;
  fprintf(f, "\n== summary: %d task(s): %d PASS, %d WARN, %d FAIL\n", n, counts[0], counts[1],
          counts[2]);
  fprintf(f, "%-28s %-7s %s\n", "TASK", "VERDICT", "BASELINE PER CASE (ms; * held-out)");
  for (int i = 0; i < n; i++) {
    ka_sb sb = {0};
    for (int j = 0; j < rs[i].ntimes; j++)
      ka_sb_printf(&sb, "%s%s%s=%.4g", j ? " " : "", rs[i].times[j].name,
                   rs[i].times[j].held_out ? "*" : "", rs[i].times[j].baseline_ms);
    const char *first_fail = "";
    for (int c = 0; c < rs[i].nchecks && !*first_fail; c++)
      if (rs[i].checks[c].level == rs[i].verdict && rs[i].verdict != VD_PASS)
        first_fail = rs[i].checks[c].name;
    fprintf(f, "%-28s %-7s %s%s%s%s\n", rs[i].id, vd_level_name[rs[i].verdict], sb.s ? sb.s : "-",
            *first_fail ? " [" : "", first_fail, *first_fail ? "]" : "");
    ka_sb_free(&sb);
  }
}

static json_t *vd_json(const vd_opts *o, const vd_task *rs, int n) {
  json_t *root = json_object(), *tasks = json_array(), *seeds = json_array(), *devs = json_array();
  for (int i = 0; i < o->nseeds; i++) {
    char hex[32]; /* hex strings: JSON numbers lose 64-bit integers */
    snprintf(hex, sizeof hex, "%#llx", (unsigned long long)o->seeds[i]);
    json_array_append_new(seeds, json_string(hex));
  }
  for (int b = 0; b < VD_MAX_BACKENDS; b++)
    if (vd_backends[b].dev)
      json_array_append_new(
          devs, json_pack("{s:s, s:s, s:s, s:I}", "backend", vd_backends[b].name, "name",
                          vd_backends[b].dev->name, "arch", vd_backends[b].dev->arch,
                          "memory_bytes", (json_int_t)vd_backends[b].dev->memory_bytes));
  json_object_set_new(root, "generated_at", json_real(ka_wall_s()));
  json_object_set_new(root, "tasks_dir", json_string(o->tasks_dir));
  json_object_set_new(root, "seeds", seeds);
  json_object_set_new(root, "devices", devs);
  json_object_set_new(root, "reps", json_integer(o->reps));
  int counts[3] = {0};
  for (int i = 0; i < n; i++) {
    const vd_task *r = &rs[i];
    counts[r->verdict]++;
    json_t *checks = json_array(), *times = json_array();
    for (int c = 0; c < r->nchecks; c++)
      json_array_append_new(
          checks, json_pack("{s:s, s:s, s:s, s:s}", "check", r->checks[c].name, "backend",
                            r->checks[c].backend, "verdict", vd_level_name[r->checks[c].level],
                            "reason", r->checks[c].reason));
    for (int j = 0; j < r->ntimes; j++)
      json_array_append_new(
          times, json_pack("{s:s, s:s, s:b, s:f, s:i}", "backend", r->times[j].backend, "case",
                           r->times[j].name, "held_out", r->times[j].held_out, "baseline_ms",
                           r->times[j].baseline_ms, "timed_calls", r->times[j].timed_calls));
    json_array_append_new(tasks, json_pack("{s:s, s:s, s:f, s:o, s:o}", "id", r->id, "verdict",
                                           vd_level_name[r->verdict], "wall_s", r->wall_s, "checks",
                                           checks, "baseline_times", times));
  }
  json_object_set_new(root, "tasks", tasks);
  json_object_set_new(
      root, "summary",
      json_pack("{s:i, s:i, s:i}", "pass", counts[0], "warn", counts[1], "fail", counts[2]));
  return root;
}

static int vd_write_reports(const vd_opts *o, const vd_task *rs, int n) {
  int rc = 0;
  for (int i = 0; i < o->nreports; i++) {
    const char *p = o->reports[i];
    size_t l = strlen(p);
    if (l > 5 && !strcmp(p + l - 5, ".json")) {
      json_t *j = vd_json(o, rs, n);
      if (json_dump_file(j, p, JSON_INDENT(1)) != 0) {
        fprintf(stderr, "ka-validate: cannot write %s\n", p);
        rc = 1;
      }
      json_decref(j);
    } else {
      FILE *f = fopen(p, "w");
      if (!f) {
        fprintf(stderr, "ka-validate: cannot write %s: %s\n", p, strerror(errno));
        rc = 1;
        continue;
      }
      vd_print_text(f, o, rs, n);
      if (fclose(f)) rc = 1;
    }
  }
  return rc;
}

/* ---- task discovery and main */

typedef struct vd_item {
  char dir[PATH_MAX];
  char id[PATH_MAX]; /* "" when not known from the folder layout */
} vd_item;

static int vd_cmp_item(const void *a, const void *b) {
  return strcmp(((const vd_item *)a)->dir, ((const vd_item *)b)->dir);
}

static int vd_is_task_dir(const char *dir) {
  char p[PATH_MAX + 16];
  struct stat st;
  snprintf(p, sizeof p, "%s/task.yaml", dir);
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Every root/<family>/<name>/ that holds a task.yaml, sorted. */
static int vd_scan(const char *root, vd_item **items, int *n) {
  DIR *fam = opendir(root);
  if (!fam) return KA_ENOENT;
  struct dirent *f;
  while ((f = readdir(fam))) {
    if (f->d_name[0] == '.') continue;
    char fdir[PATH_MAX];
    snprintf(fdir, sizeof fdir, "%s/%s", root, f->d_name);
    DIR *td = opendir(fdir);
    if (!td) continue;
    struct dirent *e;
    while ((e = readdir(td))) {
      if (e->d_name[0] == '.') continue;
      char tdir[PATH_MAX];
      snprintf(tdir, sizeof tdir, "%s/%s", fdir, e->d_name);
      if (!vd_is_task_dir(tdir)) continue;
      vd_item *ni = realloc(*items, sizeof **items * (size_t)(*n + 1));
      if (!ni) break;
      *items = ni;
      snprintf(ni[*n].dir, sizeof ni[*n].dir, "%s", tdir);
      snprintf(ni[*n].id, sizeof ni[*n].id, "%s/%s", f->d_name, e->d_name);
      (*n)++;
    }
    closedir(td);
  }
  closedir(fam);
  qsort(*items, (size_t)*n, sizeof **items, vd_cmp_item);
  return KA_OK;
}

/* Resolves a TASK argument: a task id under tasks_dir (a safe relative path such as
 * host/gelu), or a task folder that lies inside tasks_dir once symlinks and ".." are
 * resolved; its id is then its path relative to tasks_dir. Anything else (a folder
 * outside tasks_dir, e.g. ../tasks/host/gelu run from the wrong place, a folder without
 * task.yaml, an unknown id) is refused: returns -1 with the reason in why. */
static int vd_resolve(const char *tasks_dir, const char *arg, vd_item *it, char *why, size_t len) {
  char p[PATH_MAX * 2];
  snprintf(p, sizeof p, "%s/%s", tasks_dir, arg);
  if (ka_path_is_safe(arg) && vd_is_task_dir(p)) {
    snprintf(it->dir, sizeof it->dir, "%s", p);
    snprintf(it->id, sizeof it->id, "%s", arg);
    return 0;
  }
  char *root = realpath(tasks_dir, NULL), *rp = realpath(arg, NULL);
  int rc = -1;
  size_t rl = root ? strlen(root) : 0;
  if (!root)
    snprintf(why, len, "task folder %s: %s", tasks_dir, strerror(errno));
  else if (!rp)
    snprintf(why, len, "'%s' is neither a task id under %s (%s) nor a task folder", arg, tasks_dir,
             root);
  else if (strncmp(rp, root, rl) || rp[rl] != '/')
    snprintf(why, len,
             "'%s' (%s) is outside the task folder %s (%s): give its id under --tasks (e.g. "
             "host/gelu), or --tasks with the folder of its suite",
             arg, rp, tasks_dir, root);
  else if (!vd_is_task_dir(rp))
    snprintf(why, len, "'%s' (%s) is not a task folder (no task.yaml)", arg, rp);
  else {
    snprintf(it->dir, sizeof it->dir, "%s", rp);
    snprintf(it->id, sizeof it->id, "%s", rp + rl + 1);
    rc = 0;
  }
  free(root);
  free(rp);
  return rc;
}

static void vd_usage(FILE *f) {
  fprintf(f,
          "usage: envctl validate [TASK...] [options]\n"
          "  TASK               a task id under --tasks (e.g. host/gelu) or a task folder\n"
          "                     inside --tasks (others are refused); default: every task\n"
          "                     under --tasks\n"
          "  --tasks DIR        task folder (default ./tasks, else the source tree's)\n"
          "  --backends LIST    comma-separated host,cuda,hip, or auto (default: every\n"
          "                     backend the task lists that has a device here)\n"
          "  --seeds N          seeds the baseline is checked on (default 3, 1..%d)\n"
          "  --seed S           first seed (default %#llx); the others derive from it\n"
          "  --reps N           timed calls per case in the timed run (default 20)\n"
          "  --warmup N         warm-up calls per case (default 3)\n"
          "  --min-time-us X    baseline time floor per case, us (default 5)\n"
          "  --report FILE      also write the report to FILE (JSON if it ends in .json);\n"
          "                     may be given more than once\n"
          "  --json             print the report as JSON instead of text\n"
          "  --strict           a WARN fails too\n"
          "  --cache DIR        compiled references (default $TMPDIR/kernelarena-cache-UID)\n"
          "  --quiet            no progress lines on stderr\n"
          "exit status: 0 no FAIL (with --strict: no WARN either), 1 otherwise, 2 usage\n",
          VD_MAX_SEEDS, (unsigned long long)VD_DEFAULT_SEED);
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"tasks", required_argument, 0, 'T'},
                                       /* exact, so that getopt does not take it for an
                                        * abbreviation of --tasks (new user 2026-12-01) */
                                       {"task", required_argument, 0, 't'},
                                       {"backends", required_argument, 0, 'b'},
                                       {"seeds", required_argument, 0, 'n'},
                                       {"seed", required_argument, 0, 'S'},
                                       {"reps", required_argument, 0, 'r'},
                                       {"warmup", required_argument, 0, 'w'},
                                       {"min-time-us", required_argument, 0, 'm'},
                                       {"report", required_argument, 0, 'o'},
                                       {"json", no_argument, 0, 'j'},
                                       {"strict", no_argument, 0, 's'},
                                       {"cache", required_argument, 0, 'c'},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  vd_opts o = {.backends = "auto", .nseeds = 3, .reps = 20, .warmup = 3, .min_time_ms = 0.005};
  uint64_t base = VD_DEFAULT_SEED;
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'T':
        o.tasks_dir = optarg;
        break;
      case 't':
        fprintf(stderr,
                "ka-validate: give the task id as an argument (envctl validate %s); --tasks DIR "
                "is the task folder\n",
                optarg);
        return 2;
      case 'b':
        o.backends = optarg;
        break;
      case 'n':
        if (ka_opt_int("ka-validate", "seeds", optarg, 1, VD_MAX_SEEDS, &o.nseeds)) return 2;
        break;
      case 'r':
        if (ka_opt_int("ka-validate", "reps", optarg, 1, 100000, &o.reps)) return 2;
        break;
      case 'w':
        if (ka_opt_int("ka-validate", "warmup", optarg, 0, 100000, &o.warmup)) return 2;
        break;
      case 'S':
        if (ka_opt_u64("ka-validate", "seed", optarg, &base)) return 2;
        break;
      case 'm': {
        double us;
        if (ka_opt_double("ka-validate", "min-time-us", optarg, 0, 1e15, &us)) return 2;
        o.min_time_ms = us / 1000;
        break;
      }
      case 'o':
        if (o.nreports == 8) {
          fprintf(stderr, "ka-validate: at most 8 --report files\n");
          return 2;
        }
        o.reports[o.nreports++] = optarg;
        break;
      case 'j':
        o.json = 1;
        break;
      case 's':
        o.strict = 1;
        break;
      case 'c':
        o.cache_dir = optarg;
        break;
      case 'q':
        o.quiet = 1;
        break;
      case 'h':
        vd_usage(stdout);
        return 0;
      default:
        vd_usage(stderr);
        return 2;
    }
  }
  if (strcmp(o.backends, "auto")) {
    char list[256];
    snprintf(list, sizeof list, "%s", o.backends);
    for (char *save = NULL, *b = strtok_r(list, ",", &save); b; b = strtok_r(NULL, ",", &save))
      if (strcmp(b, "host") && strcmp(b, "cuda") && strcmp(b, "hip")) {
        fprintf(stderr, "ka-validate: unknown backend '%s' (host, cuda or hip)\n", b);
        return 2;
      }
  }
  /* the first seed is the base itself, so `--seed S` reproduces an episode's seed S */
  o.seeds[0] = base;
  for (int i = 1; i < o.nseeds; i++) o.seeds[i] = ka_mix64(base, (uint64_t)i);
  char tbuf[PATH_MAX], exedir[PATH_MAX], runner[PATH_MAX + 16], cachebuf[PATH_MAX];
  o.tasks_dir = ka_tasks_dir(o.tasks_dir, tbuf, sizeof tbuf);
  if (ka_exe_dir(exedir, sizeof exedir)) {
    fprintf(stderr, "ka-validate: cannot find the executable's folder\n");
    return 2;
  }
  ka_helper_path("ka-runner", runner, sizeof runner);
  o.runner = runner;
  o.exedir = exedir;
  const char *tmp = getenv("TMPDIR");
  o.tmp_dir = tmp && *tmp ? tmp : "/tmp";
  if (!o.cache_dir) {
    snprintf(cachebuf, sizeof cachebuf, "%s/kernelarena-cache-%d", o.tmp_dir, (int)getuid());
    o.cache_dir = cachebuf;
  }
  signal(SIGPIPE, SIG_IGN);

  vd_item *items = NULL;
  int nitems = 0;
  if (optind == argc) {
    if (vd_scan(o.tasks_dir, &items, &nitems) || nitems == 0) {
      fprintf(stderr, "ka-validate: no tasks under %s\n", o.tasks_dir);
      free(items);
      return 2;
    }
  } else {
    /* every argument resolves to a task inside the task folder before any task loads */
    items = calloc((size_t)(argc - optind), sizeof *items);
    if (!items) return 2;
    int bad = 0;
    for (int i = optind; i < argc; i++, nitems++) {
      char why[PATH_MAX * 2 + 256];
      if (vd_resolve(o.tasks_dir, argv[i], &items[nitems], why, sizeof why)) {
        fprintf(stderr, "ka-validate: %s\n", why);
        bad = 1;
      }
    }
    if (bad) {
      fprintf(stderr, "ka-validate: nothing validated\n");
      free(items);
      return 2;
    }
  }
  vd_task *rs = calloc((size_t)nitems, sizeof *rs);
  if (!rs) return 2;
  for (int i = 0; i < nitems; i++)
    vd_validate(&o, items[i].dir, items[i].id[0] ? items[i].id : NULL, &rs[i]);
  if (o.json) {
    json_t *j = vd_json(&o, rs, nitems);
    json_dumpf(j, stdout, JSON_INDENT(1));
    fputc('\n', stdout);
    json_decref(j);
  } else {
    vd_print_text(stdout, &o, rs, nitems);
  }
  int wrc = vd_write_reports(&o, rs, nitems);
  int worst = VD_PASS;
  for (int i = 0; i < nitems; i++)
    if ((int)rs[i].verdict > worst) worst = rs[i].verdict;
  for (int i = 0; i < nitems; i++) vd_task_free(&rs[i]);
  free(rs);
  free(items);
  for (int b = 0; b < VD_MAX_BACKENDS; b++) ka_device_free(vd_backends[b].dev);
  if (wrc) return 1;
  return worst == VD_FAIL || (o.strict && worst == VD_WARN) ? 1 : 0;
}
