/* ka-runner: one evaluation in its own process.
 *
 * Started by a gpuexec worker for every job (runner.h describes the channel). It
 * compiles the task's baseline and the candidate, runs the candidate once per case
 * on inputs the worker generated (outputs poisoned first) and hands the outputs back
 * through shared memory, then times baseline and candidate interleaved: warm-up
 * calls, then for each repetition the cache is flushed outside the timed interval and
 * one call of each is timed with device events (host: CLOCK_MONOTONIC), alternating
 * which goes first. The median of the repetitions is reported.
 *
 * The runner never sees reference outputs: correctness is judged by the worker, which
 * compares the outputs written here with the reference it computed itself. A fault in
 * submitted code (crash, illegal address, hang) ends only this process. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend.h"
#include "data.h"
#include "ka_common.h"
#include "kernelarena.pb-c.h"
#include "runner.h"
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

/* Zeroes scratch buffers, then enqueues every launch of an implementation. */
static int rn_run_impl(rn_state *s, rn_impl *im, int which, rn_case_bufs *b, const ka_launch *ls,
                       int n) {
  for (int k = 0; k < im->plan->nscratch; k++) {
    int rc = s->be->memset8(s->ctx, b->scratch[which][k], 0, b->scratch_bytes[which][k]);
    if (rc) return rc;
  }
  for (int i = 0; i < n; i++) {
    int rc = s->be->launch(s->ctx, im->mod, &ls[i]);
    if (rc) return rc;
  }
  return KA_OK;
}

static int rn_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void rn_free_bufs(rn_state *s, rn_case_bufs *b) {
  for (int i = 0; i < KA_MAX_TENSORS; i++)
    if (b->tensors[i]) s->be->mem_free(s->ctx, b->tensors[i]);
  for (int w = 0; w < 2; w++)
    for (int k = 0; k < KA_MAX_SCRATCH; k++)
      if (b->scratch[w][k]) s->be->mem_free(s->ctx, b->scratch[w][k]);
  memset(b, 0, sizeof *b);
}

/* Elements of got that differ from want (both tensor i's dtype) beyond the task's
 * tolerance, taking want's largest magnitude as the scale (as ka_compare_outputs does
 * with the reference). NaN matches NaN. */
static int64_t rn_count_differences(const ka_task *t, int i, const void *want, const void *got,
                                    int64_t n) {
  ka_dtype dt = t->tensors[i].dtype;
  double scale = 0;
  for (int64_t k = 0; k < n; k++) {
    double v = fabs(ka_load_double(dt, want, k));
    if (isfinite(v) && v > scale) scale = v;
  }
  if (scale == 0) scale = 1;
  int64_t bad = 0;
  for (int64_t k = 0; k < n; k++) {
    double a = ka_load_double(dt, want, k), g = ka_load_double(dt, got, k);
    if (isnan(a) && isnan(g)) continue;
    if (!(fabs(g - a) <= t->atol * scale + t->rtol * fabs(a))) bad++;
  }
  return bad;
}

/* Maps an error of the backend during a candidate run to a status. */
static int rn_status_of(int rc) {
  return rc == KA_EOOM || rc == KA_EDEVICE || rc == KA_ELAUNCH || rc == KA_ERANGE
             ? KERNELARENA__V1__STATUS__RUNTIME_ERROR
             : KERNELARENA__V1__STATUS__INFRA_ERROR;
}

/* Runs one case: correctness run of the candidate, then interleaved timing. Returns
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
  int rc = KA_OK;
  void *maps[KA_MAX_TENSORS] = {0};
  *status = KERNELARENA__V1__STATUS__INFRA_ERROR;

  for (int i = 0; i < t->ntensors && rc == KA_OK; i++) {
    rc = ka_task_tensor_elems(t, i, &c, &b.elems[i], err, errlen);
    if (rc) break;
    b.bytes[i] = (size_t)b.elems[i] * ka_dtype_size(t->tensors[i].dtype);
    int fd = t->tensors[i].role == KA_ROLE_INPUT ? jc->input_fds[i] : jc->output_fds[i];
    maps[i] = mmap(NULL, b.bytes[i] ? b.bytes[i] : 1,
                   t->tensors[i].role == KA_ROLE_INPUT ? PROT_READ : PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
    if (maps[i] == MAP_FAILED) {
      maps[i] = NULL;
      rc = ka_seterr(err, errlen, KA_ESYS, "mmap of tensor %s: %s", t->tensors[i].name,
                     strerror(errno));
      break;
    }
    rc = s->be->mem_alloc(s->ctx, b.bytes[i], &b.tensors[i]);
    if (rc) {
      *status = rn_status_of(rc);
      ka_seterr(err, errlen, rc, "allocating %s (%zu bytes): %s", t->tensors[i].name, b.bytes[i],
                rn_be_err(s));
      break;
    }
    if (t->tensors[i].role == KA_ROLE_INPUT) {
      rc = s->be->copy_to_device(s->ctx, b.tensors[i], maps[i], b.bytes[i]);
    } else {
      /* poison: differs per trial and per tensor, never a fixed sentinel */
      ka_fill_poison(t->tensors[i].dtype, maps[i], b.elems[i],
                     ka_mix64(job->poison_seed, (uint64_t)(ci * KA_MAX_TENSORS + i)));
      rc = s->be->copy_to_device(s->ctx, b.tensors[i], maps[i], b.bytes[i]);
    }
    if (rc) ka_seterr(err, errlen, rc, "copy of %s: %s", t->tensors[i].name, rn_be_err(s));
  }

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
      if (rc) *status = rn_status_of(rc);
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

  /* correctness run of the candidate (impl[1]) */
  if (rc == KA_OK) {
    rc = rn_run_impl(s, &impl[1], 1, &b, ls[1], impl[1].plan->nlaunches);
    if (rc == KA_OK) rc = s->be->synchronize(s->ctx);
    if (rc) {
      *status = rn_status_of(rc);
      ka_seterr(err, errlen, rc, "case %s: candidate run failed: %s", c.name, rn_be_err(s));
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

  /* timing: baseline (0) and candidate (1) interleaved, order alternating */
  int reps = job->reps > 0 ? job->reps : 20, warm = job->warmup >= 0 ? job->warmup : 3;
  double *ms[2] = {calloc((size_t)reps, sizeof(double)), calloc((size_t)reps, sizeof(double))};
  if (rc == KA_OK && (!ms[0] || !ms[1])) rc = KA_ENOMEM;
  /* Timed candidate calls are verified too: the outputs are poisoned before every
   * timed call (outside the timer), and the outputs of a random subset of the timed
   * calls must match the outputs the worker checks against the reference. A candidate
   * that skips work in timed calls (e.g. returns early after the first call) fails. */
  void *tpoison[KA_MAX_TENSORS] = {0}, *tcheck[KA_MAX_TENSORS] = {0};
  for (int i = 0; i < t->ntensors && rc == KA_OK; i++) {
    if (t->tensors[i].role != KA_ROLE_OUTPUT) continue;
    tpoison[i] = malloc(b.bytes[i] ? b.bytes[i] : 1);
    tcheck[i] = malloc(b.bytes[i] ? b.bytes[i] : 1);
    if (!tpoison[i] || !tcheck[i]) {
      rc = KA_ENOMEM;
      break;
    }
    ka_fill_poison(t->tensors[i].dtype, tpoison[i], b.elems[i],
                   ka_mix64(job->poison_seed, 0x74696d6564ULL + (uint64_t)(ci * KA_MAX_TENSORS + i)));
  }
  for (int r = 0; r < warm && rc == KA_OK; r++)
    for (int w = 0; w < 2 && rc == KA_OK; w++) {
      rc = rn_run_impl(s, &impl[w], w, &b, ls[w], impl[w].plan->nlaunches);
      if (rc == KA_OK) rc = s->be->synchronize(s->ctx);
      if (rc) {
        *status = w ? rn_status_of(rc) : KERNELARENA__V1__STATUS__INFRA_ERROR;
        ka_seterr(err, errlen, rc, "case %s: %s warm-up failed: %s", c.name, impl[w].label,
                  rn_be_err(s));
      }
    }
  for (int r = 0; r < reps && rc == KA_OK; r++)
    for (int k = 0; k < 2 && rc == KA_OK; k++) {
      int w = (r & 1) ? 1 - k : k;
      /* scratch reset and cache flush stay outside the timed interval */
      for (int q = 0; q < impl[w].plan->nscratch && rc == KA_OK; q++)
        rc = s->be->memset8(s->ctx, b.scratch[w][q], 0, b.scratch_bytes[w][q]);
      /* before baseline calls too, so that both see the same memory traffic before the
       * timer (measured: poisoning only the candidate's calls cost it 3-6% on the H200) */
      for (int i = 0; i < t->ntensors && rc == KA_OK; i++)
        if (tpoison[i]) rc = s->be->copy_to_device(s->ctx, b.tensors[i], tpoison[i], b.bytes[i]);
      if (rc == KA_OK) rc = s->be->flush_cache(s->ctx);
      if (rc == KA_OK) rc = s->be->timer_start(s->ctx);
      for (int i = 0; i < impl[w].plan->nlaunches && rc == KA_OK; i++)
        rc = s->be->launch(s->ctx, impl[w].mod, &ls[w][i]);
      if (rc == KA_OK) rc = s->be->timer_stop(s->ctx, &ms[w][r]);
      if (rc == KA_OK) rc = s->be->synchronize(s->ctx);
      if (rc) {
        *status = w ? rn_status_of(rc) : KERNELARENA__V1__STATUS__INFRA_ERROR;
        ka_seterr(err, errlen, rc, "case %s: timed %s call failed: %s", c.name, impl[w].label,
                  rn_be_err(s));
      }
      /* about a quarter of the timed calls, chosen from the secret seed, and the last */
      int verify = (ka_mix64(job->poison_seed, (uint64_t)(ci * 1000 + r)) & 3) == 0 || r == reps - 1;
      for (int i = 0; w == 1 && verify && i < t->ntensors && rc == KA_OK; i++) {
        if (!tcheck[i]) continue;
        rc = s->be->copy_to_host(s->ctx, tcheck[i], b.tensors[i], b.bytes[i]);
        if (rc) {
          *status = rn_status_of(rc);
          ka_seterr(err, errlen, rc, "case %s: copy of timed output: %s", c.name, rn_be_err(s));
          break;
        }
        int64_t bad = rn_count_differences(t, i, maps[i], tcheck[i], b.elems[i]);
        if (bad) {
          *status = KERNELARENA__V1__STATUS__INCORRECT;
          rc = ka_seterr(err, errlen, KA_EINVAL,
                         "case %s: the outputs of timed call %d differ from the verified outputs "
                         "in %lld of %lld elements of %s (work skipped or changed in timed calls)",
                         c.name, r + 1, (long long)bad, (long long)b.elems[i], t->tensors[i].name);
        }
      }
    }
  for (int i = 0; i < KA_MAX_TENSORS; i++) free(tpoison[i]), free(tcheck[i]);
  if (rc == KA_OK) {
    qsort(ms[0], (size_t)reps, sizeof(double), rn_cmp_double);
    qsort(ms[1], (size_t)reps, sizeof(double), rn_cmp_double);
    cr->baseline_ms = reps & 1 ? ms[0][reps / 2] : 0.5 * (ms[0][reps / 2 - 1] + ms[0][reps / 2]);
    cr->candidate_ms = reps & 1 ? ms[1][reps / 2] : 0.5 * (ms[1][reps / 2 - 1] + ms[1][reps / 2]);
    cr->speedup = cr->candidate_ms > 0 ? cr->baseline_ms / cr->candidate_ms : 0;
    cr->timed_calls = reps;
    *status = KERNELARENA__V1__STATUS__OK;
  }
  free(ms[0]);
  free(ms[1]);
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
  return rc == KA_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--discover")) return rn_discover(argv[2]);
  if (argc != 1) {
    fprintf(stderr,
            "usage: ka-runner            (job on stdin, result on fd %d; started by gpuexec)\n"
            "       ka-runner --discover BACKEND\n",
            KA_RUNNER_RESULT_FD);
    return 2;
  }
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
    rc = rn_build(&s, job, 0, &impl[1], &clog, err, sizeof err);
    res.compile_s = ka_now_s() - t0;
    res.compile_log = clog ? clog : "";
    if (rc == KA_ECOMPILE) {
      res.status = KERNELARENA__V1__STATUS__COMPILE_ERROR;
      snprintf(err, sizeof err, "compilation failed");
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
