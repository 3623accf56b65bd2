/* ka-runner: one evaluation in its own process.
 *
 * Started by a gpuexec worker for every job, or ahead of it with its device open (the
 * pool: KA_RUNNER_PREOPEN_ENV); runner.h describes the channel. It compiles the task's
 * baseline and the candidate (the candidate's compile under its own deadline, a watchdog
 * thread), then evaluates each case in phases (runner_case.c: setup, trial, time, verify,
 * judge): the candidate's correctness trial on the worker's inputs, outputs handed back
 * through shared memory; baseline and candidate timed interleaved on inputs drawn anew
 * for every call; the timed calls (host path: a secret half) verified against the baseline's
 * outputs on the same inputs after the calls; the integrity checks on the timings
 * (docs/integrity.md).
 *
 * The runner never sees reference outputs: correctness is judged by the worker, which
 * compares the outputs written here with the reference it computed itself. Submitted
 * code never runs in this process: host modules run in their own processes
 * (backend_host.c), GPU kernels on the device; a fault in them (crash, illegal
 * address, hang) ends only that process or this one, never the worker. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "data.h"
#include "ka_common.h"
#include "kernelarena.pb-c.h"
#include "runner.h"
#include "runner_case.h"
#include "sandbox.h"
#include "task.h"
#include "triton.h"

/* Reads the job from fd 0 to EOF: a socket (the job's memfds come with it as SCM_RIGHTS,
 * into fds[0..*nfds), in order, close-on-exec) or, from tools, a pipe or file (no fds). */
static int rn_recv_job(size_t max, uint8_t **out, size_t *len, int *fds, int *nfds) {
  *nfds = 0;
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
    struct iovec iov = {.iov_base = buf + n, .iov_len = cap - n};
    union {
      struct cmsghdr h;
      char c[CMSG_SPACE(sizeof(int) * KA_RUNNER_FDS_PER_MSG)];
    } cm;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.c, .msg_controllen = sizeof cm.c};
    ssize_t r = recvmsg(0, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0 && errno == ENOTSOCK) {
      msg.msg_controllen = 0; /* a pipe or file: no descriptors */
      r = read(0, buf + n, cap - n);
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (msg.msg_flags & MSG_CTRUNC)) {
      free(buf);
      return KA_EIO;
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c && r >= 0; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < k; i++) {
        int fd;
        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (*nfds < KA_RUNNER_MAX_FDS)
          fds[(*nfds)++] = fd;
        else
          close(fd);
      }
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  *out = buf;
  *len = n;
  return KA_OK;
}

/* Seconds a warm runner may take to open its device: a CUDA context takes ~0.1 s on the
 * H200 (docs/benchmarks/2026-12-02-session18-h200.md), the first one after a driver load
 * a few seconds. */
#define RN_PREOPEN_LIMIT_S 30

/* A warm runner (KA_RUNNER_PREOPEN_ENV "BACKEND:INDEX"): loads the backend and opens the
 * device named there into s->be and s->ctx, holding no device lock (runner.h says why).
 * Without the variable, or if anything fails, s->ctx stays NULL and the job opens its
 * device as a cold runner does. The device's name goes into backend/index; returns the
 * seconds the open took (backend load and context). An open that hangs ends this runner
 * after RN_PREOPEN_LIMIT_S (SIGALRM's default action), and the pool finds it dead when a
 * job would take it (worker.c wk_pool_take). */
static double rn_preopen(rn_state *s, char *backend, size_t blen, int *index) {
  const char *pre = getenv(KA_RUNNER_PREOPEN_ENV);
  char fmt[32];
  snprintf(fmt, sizeof fmt, "%%%zu[^:]:%%d", blen - 1);
  if (!pre || sscanf(pre, fmt, backend, index) != 2) return 0;
  char perr[RN_ERRLEN];
  double t0 = ka_now_s();
  sigset_t al;
  sigemptyset(&al);
  sigaddset(&al, SIGALRM);
  signal(SIGALRM, SIG_DFL); /* whatever was inherited: the alarm must end the process */
  pthread_sigmask(SIG_UNBLOCK, &al, NULL);
  alarm(RN_PREOPEN_LIMIT_S);
  s->be = ka_backend_load(backend, perr, sizeof perr);
  if (!s->be || s->be->open(*index, &s->ctx, perr, sizeof perr) != KA_OK)
    s->be = NULL, s->ctx = NULL;
  alarm(0);
  return ka_now_s() - t0;
}

/* RunnerJob.fds_passed: turns the cases' fd indices into the received descriptors.
 * KA_EINVAL if an index is out of range. */
static int rn_map_fds(Kernelarena__V1__RunnerJob *job, const int *fds, int nfds) {
  if (!job->fds_passed) return KA_OK;
  for (size_t i = 0; i < job->n_cases; i++) {
    Kernelarena__V1__RunnerCase *c = job->cases[i];
    int32_t *lists[2] = {c->input_fds, c->output_fds};
    size_t ns[2] = {c->n_input_fds, c->n_output_fds};
    for (int l = 0; l < 2; l++)
      for (size_t k = 0; k < ns[l]; k++) {
        if (lists[l][k] < 0) continue;
        if (lists[l][k] >= nfds) return KA_EINVAL;
        lists[l][k] = fds[lists[l][k]];
      }
  }
  return KA_OK;
}

/* The compile deadline (RunnerJob.compile_timeout_s): a thread that, unless the candidate's
 * compile ends first, writes a COMPILE_ERROR result itself and ends the process. NVRTC
 * has no deadline of its own, and a compile that never ends must not become a TIMEOUT
 * (which scores above a compile error). */
#define RN_LOG_MAX ((size_t)1 << 20) /* bytes of the compile log in the result */

typedef struct rn_watch {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  double limit_s;
  Kernelarena__V1__Device *dev;
} rn_watch;

static int rn_write_all(int fd, const uint8_t *p, size_t n);

/* The result channel carries one result: the first of the main thread and the watchdogs
 * to claim it writes it. */
static atomic_int rn_result_claimed;
static int rn_claim_result(void) {
  return atomic_exchange(&rn_result_claimed, 1) == 0;
}

/* Packs res (small: no logs of the candidate's) and writes it as the runner's result if
 * nobody has, then ends the process. Watchdog threads only. */
static void rn_watchdog_result(Kernelarena__V1__RunnerResult *res) {
  size_t len = kernelarena__v1__runner_result__get_packed_size(res);
  uint8_t buf[4096];
  if (len <= sizeof buf && rn_claim_result()) {
    kernelarena__v1__runner_result__pack(res, buf);
    rn_write_all(KA_RUNNER_RESULT_FD, buf, len);
  }
  _exit(0);
}

static void *rn_watchdog(void *arg) {
  rn_watch *w = arg;
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until); /* the condition variable waits on it */
  until.tv_sec += (time_t)w->limit_s;
  until.tv_nsec += (long)((w->limit_s - (double)(time_t)w->limit_s) * 1e9);
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&w->mu);
  int rc = 0;
  while (!w->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
  int done = w->done;
  pthread_mutex_unlock(&w->mu);
  if (done) return NULL;
  char msg[160];
  snprintf(msg, sizeof msg, "compilation did not finish within its %.0f s limit", w->limit_s);
  Kernelarena__V1__RunnerResult res = KERNELARENA__V1__RUNNER_RESULT__INIT;
  res.status = KERNELARENA__V1__STATUS__COMPILE_ERROR;
  res.message = msg;
  res.compile_log = msg;
  res.compile_s = w->limit_s;
  res.device = w->dev;
  rn_watchdog_result(&res);
  return NULL;
}

/* The call limit (RunnerJob.call_limit_s): other evaluations wait for the device while
 * this one holds it (devlock.h), so one correctness or timed call of the candidate that
 * runs past the limit (rn_state.cand_since_ns) is its TIMEOUT, written by this thread,
 * which then ends the process (and with it the call and the lock). */
typedef struct rn_call_watch {
  rn_state *s;
  double limit_s;
  Kernelarena__V1__Device *dev;
} rn_call_watch;

#define RN_CALL_WATCH_TICK_NS 20000000L

static void *rn_call_watchdog(void *arg) {
  rn_call_watch *w = arg;
  for (;;) {
    struct timespec tick = {0, RN_CALL_WATCH_TICK_NS};
    nanosleep(&tick, NULL);
    long long since = atomic_load(&w->s->cand_since_ns);
    if (!since || ka_now_s() - (double)since * 1e-9 <= w->limit_s) continue;
    char msg[256];
    snprintf(msg, sizeof msg,
             "one call of the candidate ran for more than %.1f s (the call limit: the device is "
             "shared with other evaluations); the runner was ended",
             w->limit_s);
    Kernelarena__V1__RunnerResult res = KERNELARENA__V1__RUNNER_RESULT__INIT;
    res.status = KERNELARENA__V1__STATUS__TIMEOUT;
    res.message = msg;
    res.compile_log = "";
    res.device = w->dev;
    rn_watchdog_result(&res);
  }
  return NULL;
}

/* The device lock's fds from the job (RunnerJob.has_lock_fds), into s->lock. KA_EINVAL
 * for indices outside the passed fds. */
static int rn_take_lock(rn_state *s, const Kernelarena__V1__RunnerJob *job, const int *fds,
                        int nfds) {
  s->lock = (ka_devlock){.m = -1, .t = -1};
  if (!job->has_lock_fds) return KA_OK;
  if (job->lock_fd < 0 || job->lock_fd >= nfds || job->turn_fd < 0 || job->turn_fd >= nfds)
    return KA_EINVAL;
  s->lock.m = fds[job->lock_fd];
  s->lock.t = fds[job->turn_fd];
  return KA_OK;
}

/* The build cache's memfd from the job (RunnerJob.has_image_fd) into s->image_fd (-1:
 * none). KA_EINVAL for an index outside the passed fds. */
static int rn_take_image_fd(rn_state *s, const Kernelarena__V1__RunnerJob *job, const int *fds,
                            int nfds) {
  s->image_fd = -1, s->cand_image_fd = -1;
  if (job->has_cand_image_fd) {
    if (job->cand_image_fd < 0 || job->cand_image_fd >= nfds) return KA_EINVAL;
    s->cand_image_fd = fds[job->cand_image_fd];
  }
  if (!job->has_image_fd) return KA_OK;
  if (job->image_fd < 0 || job->image_fd >= nfds) return KA_EINVAL;
  s->image_fd = fds[job->image_fd];
  return KA_OK;
}

/* The trial pipe from the job (RunnerJob.has_trial_fd) into s->trial_fd (-1: none), and
 * SIGPIPE ignored. KA_EINVAL for an index outside the passed fds or a descriptor that is
 * not a pipe. */
static int rn_take_trial_fd(rn_state *s, const Kernelarena__V1__RunnerJob *job, const int *fds,
                            int nfds) {
  s->trial_fd = -1;
  if (!job->has_trial_fd) return KA_OK;
  if (job->trial_fd < 0 || job->trial_fd >= nfds) return KA_EINVAL;
  struct stat st;
  if (fstat(fds[job->trial_fd], &st) != 0 || !S_ISFIFO(st.st_mode)) return KA_EINVAL;
  s->trial_fd = fds[job->trial_fd];
  /* a worker that closed its end must not end this runner (its verdict stands) */
  signal(SIGPIPE, SIG_IGN);
  return KA_OK;
}

/* Drops the backend's "note: ... loaded from the build cache" line from *log (freed and
 * NULL when nothing else is left): a candidate's cached image was built with an empty
 * log, which is what its step shows. */
static void rn_drop_cache_note(char **log) {
  if (!*log) return;
  ka_sb sb = {0};
  for (char *p = *log; *p;) {
    char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) + 1 : strlen(p);
    int note = !strncmp(p, "note: ", 6) && n > 28 &&
               !strncmp(p + n - (e ? 28 : 27), "loaded from the build cache", 27);
    if (!note) ka_sb_append(&sb, p, n);
    p += n;
  }
  free(*log);
  *log = sb.len ? ka_sb_take(&sb) : NULL;
  ka_sb_free(&sb);
}

/* Whether a compiler log says nothing: only whitespace (or no log). A candidate's image
 * goes to the build cache only then, so that a later step of the same files, loaded from
 * the cache, shows the same (empty) compile log. */
static int rn_log_empty(const char *log) {
  for (const char *p = log; p && *p; p++)
    if (!isspace((unsigned char)*p)) return 0;
  return 1;
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
#define RN_DEVICE_NUMBER(f) d->f = i->f;
  KA_DEVICE_NUMBERS(RN_DEVICE_NUMBER)
#undef RN_DEVICE_NUMBER
  d->backend = strdup(i->backend);
  d->name = strdup(i->name);
  d->arch = strdup(i->arch);
  d->driver = strdup(i->driver);
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

/* Writes the baseline's image (n bytes) into the worker's memfd fd and seals it against
 * any change (worker.c's build cache takes it only sealed). Best effort: a failure only
 * leaves the cache empty. */
static void rn_give_image(int fd, const void *img, size_t n) {
  const char *p = img;
  size_t off = 0;
  while (off < n) {
    ssize_t w = write(fd, p + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += (size_t)w;
  }
  fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
}

/* Compiles req and loads it on s's device into *mod. On a GPU backend with a device lock
 * the compile runs first without the device (the host's work, no lock held) and only
 * the loading of its image (device memory: the module's code and __device__ arrays)
 * under the lock shared, so that it never overlaps another evaluation's timed call
 * (devlock.h). *img: the image built now (malloc'd, the caller frees; its size in
 * req->image_len), NULL when none was (req->image given, or a backend without images).
 * *log: the compiler's log (and the load's, if the load failed). Returns compile's codes. */
static int rn_compile_load(rn_state *s, ka_compile_req *req, ka_module **mod, void **img,
                           char **log, char *err, size_t errlen) {
  *img = NULL;
  size_t n = 0;
  int split = s->lock.m >= 0 && strcmp(s->be->name, "host") != 0 && !req->image;
  if (split) {
    ka_compile_req only = *req;
    only.arch = s->dev.arch;
    only.image_out = img, only.image_out_len = &n;
    int rc = s->be->compile(NULL, &only, NULL, log, err, errlen);
    if (rc != KA_OK || !*img) { /* an error, or a backend without images: as below */
      if (rc != KA_OK) return rc;
      if (log) free(*log), *log = NULL;
      split = 0;
    }
  }
  if (!split) {
    /* the host backend's compile uses no device: no lock (a slow compile would stall
     * every neighbour's timed calls; red team 2026-12-01) */
    int gpu = strcmp(s->be->name, "host") != 0;
    int lk = gpu && s->lock.m >= 0 && ka_devlock_shared(&s->lock) != KA_OK;
    if (lk) return ka_seterr(err, errlen, KA_ESYS, "the device lock failed");
    if (!req->image) req->image_out = img, req->image_out_len = &n;
    int rc = s->be->compile(s->ctx, req, mod, log, err, errlen);
    ka_devlock_release(&s->lock);
    if (*img) req->image_len = n;
    return rc;
  }
  ka_compile_req load = *req;
  load.image = *img, load.image_len = n;
  char *llog = NULL;
  if (ka_devlock_shared(&s->lock) != KA_OK)
    return ka_seterr(err, errlen, KA_ESYS, "the device lock failed");
  int rc = s->be->compile(s->ctx, &load, mod, &llog, err, errlen);
  ka_devlock_release(&s->lock);
  if (rc != KA_OK && llog && log) { /* the load's words after the compiler's */
    ka_sb sb = {0};
    if (*log) ka_sb_puts(&sb, *log);
    ka_sb_puts(&sb, llog);
    free(*log);
    *log = ka_sb_take(&sb);
  }
  free(llog);
  req->image_len = n;
  return rc;
}

/* impl's launch plan: parsed from plan_text (a bad plan is the implementation's
 * KA_ECOMPILE, its reason in *log) or, for a task without one, made from its entry. */
static int rn_build_plan(const ka_task *t, const char *plan_text, size_t plan_len, rn_impl *impl,
                         char **log, char *err, size_t errlen) {
  if (!t->launch_plan) return ka_plan_from_entry(t, &impl->plan, err, errlen);
  int rc = ka_plan_parse(t, plan_text, plan_len, &impl->plan, err, errlen);
  if (rc) {
    ka_sb sb = {0};
    ka_sb_printf(&sb, "%s: %s\n", t->launch_plan, err);
    *log = ka_sb_take(&sb);
    rc = KA_ECOMPILE;
  }
  return rc;
}

/* After a build (rc its result): the image built now (img, img_len; a triton bundle in
 * tri, tri_len) handed to the worker's build cache, the baseline's always, the
 * candidate's only with an empty compiler log (rn_give_image seals it, before any
 * candidate code runs); a candidate's cache hit (cand_hit) shows the empty log it was
 * built with; then this build's cache memfd is closed, so that nothing later in this
 * process can write or seal it (review 2026-12-01). */
static void rn_build_cached(rn_state *s, int baseline, int rc, int tri_lang, int cand_hit,
                            const void *img, size_t img_len, const void *tri, size_t tri_len,
                            char **log) {
  if (rc == KA_OK && baseline && s->image_fd >= 0) {
    if (img) rn_give_image(s->image_fd, img, img_len);
    if (tri) rn_give_image(s->image_fd, tri, tri_len);
  }
  if (rc == KA_OK && img && !baseline && !tri_lang && s->cand_image_fd >= 0 &&
      rn_log_empty(log ? *log : NULL))
    rn_give_image(s->cand_image_fd, img, img_len);
  if (rc == KA_OK && cand_hit && log) rn_drop_cache_note(log);
  int *done_fd = baseline ? &s->image_fd : &s->cand_image_fd;
  if (*done_fd >= 0) close(*done_fd), *done_fd = -1;
}

/* Compiles one implementation (baseline 1: the task's, from the build cache when the job
 * carries its image, and handed to the cache when built now). Returns KA_OK,
 * KA_ECOMPILE (log filled) or another error for infrastructure faults. */
static int rn_build(rn_state *s, const Kernelarena__V1__RunnerJob *job, int baseline, rn_impl *impl,
                    char **log, char *err, size_t errlen) {
  const ka_task *t = s->task;
  ka_source src[KA_MAX_EDITABLE];
  char *owned[KA_MAX_EDITABLE] = {0};
  int nsrc = 0;
  const char *plan_text;
  size_t plan_len = 0;
  int rc = rn_sources(t, job, baseline, src, owned, &nsrc, &plan_text, &plan_len, err, errlen);
  if (rc == KA_OK) rc = rn_build_plan(t, plan_text, plan_len, impl, log, err, errlen);
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
    /* from the worker's build cache (the candidate: built from the same files before), or
     * built now and handed to it */
    int tri_lang = !strcmp(t->language, "triton"), cand_hit = 0;
    if (baseline && job->baseline_image.len > 0) {
      req.image = job->baseline_image.data;
      req.image_len = job->baseline_image.len;
    } else if (!baseline && !tri_lang && job->candidate_image.len > 0) {
      req.image = job->candidate_image.data;
      req.image_len = job->candidate_image.len;
      cand_hit = 1;
    }
    void *img = NULL, *tri = NULL;
    size_t tri_len = 0;
    char *tlog = NULL;
    /* triton (triton.h): compiled to a bundle of cubins by its own sandboxed process,
     * the plan rewritten onto it; the backend only loads it */
    if (tri_lang) {
      /* the compile cache keeps baselines' and candidates' entries apart (triton.c) */
      setenv("KA_TRITON_ROLE", baseline ? "baseline" : "candidate", 1);
      /* inside the job's compile limit (a second for the rest), 60 s when it has none */
      double ct = job->compile_timeout_s;
      double limit = ct > 2 ? ct - 1 : ct > 0 ? ct / 2 : 60;
      rc = ka_triton_prepare(t, impl->plan, &src[0], req.image, req.image_len, s->dev.arch, wd,
                             limit, &tri, &tri_len, &tlog, err, errlen);
      if (tri) req.image = tri, req.image_len = tri_len;
      req.kernels = (const char *const *)impl->plan->kernels;
      req.nkernels = impl->plan->nkernels;
    }
    if (rc == KA_OK) rc = rn_compile_load(s, &req, &impl->mod, &img, log, err, errlen);
    rn_build_cached(s, baseline, rc, tri_lang, cand_hit, img, req.image_len, tri, tri_len, log);
    if (tlog) { /* the triton compile's words before the load's */
      ka_sb sb = {0};
      ka_sb_puts(&sb, tlog);
      if (*log) ka_sb_puts(&sb, *log);
      free(*log);
      free(tlog);
      *log = ka_sb_take(&sb);
    }
    free(img);
    free(tri);
  }
  for (int i = 0; i < KA_MAX_EDITABLE; i++) free(owned[i]);
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
      devs[got]->device_staging = ka_backend_device_staging(be);
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

/* The job's device into s (a warm runner's, opened ahead, or opened now), described in
 * *dev and res->device; refused (KA_ESTATE) if the backend's cache flush covers less than
 * twice the last-level cache. KA_OK or the error (err says why). */
static int rn_open_device(rn_state *s, const Kernelarena__V1__RunnerJob *job,
                          Kernelarena__V1__Device *dev, Kernelarena__V1__RunnerResult *res,
                          char *err, size_t errlen) {
  int rc = KA_OK;
  if (!s->ctx) {
    s->be = ka_backend_load(job->backend, err, errlen);
    if (!s->be) rc = KA_EUNAVAIL;
    if (rc == KA_OK) rc = s->be->open(job->device_index, &s->ctx, err, errlen);
  }
  if (rc != KA_OK) return rc;
  s->be->device_info(s->ctx, &s->dev);
  s->dev.index = job->device_index;
  rn_fill_device(dev, &s->dev);
  dev->device_staging = ka_backend_device_staging(s->be);
  res->device = dev;
  /* the cache flush must cover at least twice the last-level cache */
  size_t fb = 0;
  if (s->be->flush_bytes && s->be->flush_bytes(s->ctx, &fb) == KA_OK && s->dev.l2_bytes > 0 &&
      fb < 2 * (size_t)s->dev.l2_bytes)
    return ka_seterr(err, errlen, KA_ESTATE,
                     "the %s backend's cache flush writes %zu bytes, less than twice the "
                     "%lld-byte last-level cache",
                     s->be->name, fb, (long long)s->dev.l2_bytes);
  if (!s->be->flush_bytes)
    ka_sb_printf(&s->log, "[kernelarena] the %s backend does not report its cache flush size\n",
                 s->be->name);
  return KA_OK;
}

/* The task's baseline built into *impl (its build log in *blog, also in the runner's log
 * on failure). KA_OK, or KA_EINTERNAL with err saying why (the task's fault, not the
 * candidate's). */
static int rn_build_baseline(rn_state *s, const Kernelarena__V1__RunnerJob *job, rn_impl *impl,
                             char **blog, char *err, size_t errlen) {
  int rc = rn_build(s, job, 1, impl, blog, err, errlen);
  if (rc == KA_OK) return KA_OK;
  char tmp[RN_ERRLEN];
  snprintf(tmp, sizeof tmp, "the task's baseline failed to build (%s): %s", ka_strerror(rc), err);
  snprintf(err, errlen, "%s", tmp);
  if (*blog) ka_sb_printf(&s->log, "baseline build log:\n%s\n", *blog);
  return KA_EINTERNAL;
}

/* The candidate built into *impl under the compile watchdog (job->compile_timeout_s) and
 * the candidate sandbox (include allowlist, Landlock, seccomp: sandbox.h); its compile
 * time in res->compile_s, its log (at most RN_LOG_MAX) in res->compile_log (*clog owns
 * it), and the verdicts a build can give in res->status: OOM (a module larger than the
 * device's memory), COMPILE_ERROR (err: "compilation failed", or an import check's
 * refusal). Returns the build's code. */
static int rn_build_candidate(rn_state *s, const Kernelarena__V1__RunnerJob *job, rn_impl *impl,
                              Kernelarena__V1__Device *dev, Kernelarena__V1__RunnerResult *res,
                              char **clog, char *err, size_t errlen) {
  double t0 = ka_now_s();
  static rn_watch watch = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL};
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* a clock step must not end a compile */
  pthread_cond_init(&watch.cv, &ca);
  pthread_t wt;
  watch.limit_s = job->compile_timeout_s;
  watch.dev = dev;
  int watching = watch.limit_s > 0 && pthread_create(&wt, NULL, rn_watchdog, &watch) == 0;
  /* include allowlist, then Landlock and seccomp (sandbox.h) */
  int rc = ka_sandbox_candidate(s->task, job, clog, err, errlen);
  if (rc == KA_OK) rc = rn_build(s, job, 0, impl, clog, err, errlen);
  /* triton's compiler was a process: no more of them once it is done (sandbox.h) */
  if (rc == KA_OK && !strcmp(s->task->language, "triton")) rc = ka_sandbox_lock_runner(err, errlen);
  if (watching) {
    pthread_mutex_lock(&watch.mu);
    watch.done = 1;
    pthread_cond_signal(&watch.cv);
    pthread_mutex_unlock(&watch.mu);
    pthread_join(wt, NULL);
  }
  res->compile_s = ka_now_s() - t0;
  /* device memory the candidate's module needs beyond the device's (a huge __device__
   * array) is its own verdict, never the runner's */
  if (rc == KA_EOOM) res->status = KERNELARENA__V1__STATUS__OOM;
  /* the candidate controls its compile log's size: at most RN_LOG_MAX of it travels,
   * so that the result never outgrows its channel (an unscored, malformed result) */
  if (*clog && strlen(*clog) > RN_LOG_MAX)
    strcpy(*clog + RN_LOG_MAX - 64, "\n[kernelarena] compile log truncated\n");
  res->compile_log = *clog ? *clog : "";
  if (rc == KA_ECOMPILE) {
    res->status = KERNELARENA__V1__STATUS__COMPILE_ERROR;
    /* the compiler's own words stay in the compile log (a first error line could quote
     * an included file); an import check's refusal names only the symbol */
    if (strncmp(err, "import check: ", 14)) snprintf(err, errlen, "compilation failed");
  }
  return rc;
}

/* Every case of the job in order (rn_case) into crs[] and res->n_cases, res->status OK
 * until a case ends the evaluation: its status then, its message err. Returns KA_OK or
 * that case's code. */
static int rn_run_cases(rn_state *s, const Kernelarena__V1__RunnerJob *job, rn_impl *impl,
                        Kernelarena__V1__CaseResult **crs, Kernelarena__V1__RunnerResult *res,
                        char *err, size_t errlen) {
  res->status = KERNELARENA__V1__STATUS__OK;
  for (size_t ci = 0; ci < job->n_cases; ci++) {
    crs[ci] = malloc(sizeof **crs);
    kernelarena__v1__case_result__init(crs[ci]);
    crs[ci]->name = job->cases[ci]->name;
    crs[ci]->held_out = job->cases[ci]->held_out;
    res->n_cases = ci + 1;
    int st;
    int rc = rn_case(s, job, (int)ci, impl, crs[ci], &st, err, errlen);
    if (rc) {
      res->status = st;
      crs[ci]->message = err;
      return rc;
    }
  }
  return KA_OK;
}

/* The device's clocks, temperature and power after the cases into *tel and
 * res->telemetry, where the backend reports them. */
static void rn_telemetry(rn_state *s, Kernelarena__V1__Telemetry *tel,
                         Kernelarena__V1__RunnerResult *res) {
  ka_telemetry tm;
  if (!s->ctx || !s->be->telemetry || s->be->telemetry(s->ctx, &tm) != KA_OK || !tm.valid) return;
  tel->valid = 1;
  tel->device_name = tm.device_name;
  tel->sm_clock_mhz = tm.sm_clock_mhz;
  tel->mem_clock_mhz = tm.mem_clock_mhz;
  tel->temperature_c = tm.temperature_c;
  tel->power_w = tm.power_w;
  res->telemetry = tel;
}

/* Writes res on the result channel (unless a watchdog claimed it first: then it waits to
 * be ended), closes it, tears the device down and exits: 0, or 3 if the result could not
 * be written. With a device lock, every stream of the context is waited for under it
 * (shared) first, so no work of the candidate outlives the hold; the lock is released
 * before the context's teardown, which may overlap another evaluation's timed call
 * (runner.h KA_RUNNER_PREOPEN_ENV says why it may). */
static _Noreturn void rn_send_result(rn_state *s, Kernelarena__V1__RunnerResult *res) {
  size_t len = kernelarena__v1__runner_result__get_packed_size(res);
  uint8_t *out = malloc(len + 1);
  kernelarena__v1__runner_result__pack(res, out);
  /* a watchdog that claimed the channel first writes its verdict and ends the process */
  if (!rn_claim_result())
    for (;;) pause();
  int wrc = rn_write_all(KA_RUNNER_RESULT_FD, out, len);
  /* close the channel before tearing down the device: a teardown fault must not
   * lose a result that was already produced */
  close(KA_RUNNER_RESULT_FD);
  fflush(NULL);
  /* the context itself goes with the process (the driver tears it down at exit); a
   * fault of the wait has nothing left to report to, the result is out */
  if (s->ctx && s->lock.m >= 0 && ka_devlock_shared(&s->lock) == KA_OK) {
    s->be->synchronize(s->ctx);
    ka_devlock_release(&s->lock);
  }
  _exit(wrc == KA_OK ? 0 : 3);
}

/* The modes of ka-runner other than a job's runner: the supervisor (--supervise), a host
 * module process (--host-module), backend discovery (--discover) and usage errors.
 * Returns 1 with *rc the exit status when argv named one, 0 for a runner (no argument). */
static int rn_other_mode(int argc, char **argv, int *rc) {
  *rc = 0;
  /* sandbox.h: the supervisor gpuexec starts around a runner; a module process locks
   * itself (seccomp) before it loads submitted code */
  if (argc == 3 && !strcmp(argv[1], KA_SANDBOX_SUPERVISE_ARG))
    return *rc = ka_sandbox_supervise(argv[2]), 1;
  if (argc >= 3 && !strcmp(argv[1], KA_RUNNER_HOST_MODULE_ARG)) {
    /* the process running submitted code is the OOM killer's first choice, so memory it
     * takes cannot get its runner killed (an unscored step) instead */
    int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (adj >= 0) {
      if (write(adj, "1000", 4) != 4) { /* best effort */
      }
      close(adj);
    }
    ka_sandbox_lock_inherited();
    return *rc = ka_host_module_main(argc, argv), 1;
  }
  if (argc == 3 && !strcmp(argv[1], "--discover")) return *rc = rn_discover(argv[2]), 1;
  if (argc != 1) {
    fprintf(stderr,
            "usage: ka-runner            (job on stdin, result on fd %d; started by gpuexec)\n"
            "       ka-runner --discover BACKEND\n",
            KA_RUNNER_RESULT_FD);
    return *rc = 2, 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  int mode_rc;
  if (rn_other_mode(argc, argv, &mode_rc)) return mode_rc;
  /* Not dumpable: no other process of this user can open /proc/<pid>/mem, fd/3 or
   * ptrace this one, so code of the submission (in module processes) cannot reach the
   * result channel or the timer. */
  prctl(PR_SET_DUMPABLE, 0);
  /* a warm runner (gpuexec's pool): open the device before the job comes */
  rn_state s = {0};
  s.lock = (ka_devlock){.m = -1, .t = -1};
  s.image_fd = -1, s.cand_image_fd = -1, s.trial_fd = -1;
  char pre_backend[64] = "";
  int pre_index = -1;
  double pre_open_s = rn_preopen(&s, pre_backend, sizeof pre_backend, &pre_index);
  uint8_t *jbuf;
  size_t jlen;
  static int fds[KA_RUNNER_MAX_FDS];
  int nfds = 0;
  if (rn_recv_job(KA_RUNNER_MAX_JOB_BYTES, &jbuf, &jlen, fds, &nfds)) {
    fprintf(stderr, "ka-runner: cannot read the job\n");
    return 2;
  }
  Kernelarena__V1__RunnerJob *job = kernelarena__v1__runner_job__unpack(NULL, jlen, jbuf);
  free(jbuf);
  if (!job || rn_map_fds(job, fds, nfds) != KA_OK || rn_take_lock(&s, job, fds, nfds) != KA_OK ||
      rn_take_image_fd(&s, job, fds, nfds) != KA_OK ||
      rn_take_trial_fd(&s, job, fds, nfds) != KA_OK) {
    fprintf(stderr, "ka-runner: malformed job\n");
    return 2;
  }
  /* a device opened ahead that is not the job's is closed again */
  if (s.ctx && (strcmp(pre_backend, job->backend) || pre_index != job->device_index)) {
    s.be->close(s.ctx);
    s.be = NULL, s.ctx = NULL;
  }
  Kernelarena__V1__RunnerResult res = KERNELARENA__V1__RUNNER_RESULT__INIT;
  Kernelarena__V1__Device dev = KERNELARENA__V1__DEVICE__INIT;
  Kernelarena__V1__Telemetry tel = KERNELARENA__V1__TELEMETRY__INIT;
  res.status = KERNELARENA__V1__STATUS__INFRA_ERROR;
  char err[RN_ERRLEN] = "";
  ka_task *task = NULL;
  rn_impl impl[2] = {{.label = "baseline"}, {.label = "candidate"}};
  char *blog = NULL, *clog = NULL;
  Kernelarena__V1__CaseResult **crs = calloc(job->n_cases + 1, sizeof *crs);
  int rc = ka_task_load(job->task_dir, &task, err, sizeof err);
  /* the trial draws its inputs from this copy of the task, the worker's reference from
   * its own: they must be the same version (a task edited on disk while gpuexec runs) */
  if (rc == KA_OK && job->task_version && job->task_version[0] &&
      strcmp(task->version, job->task_version) != 0)
    rc = ka_seterr(err, sizeof err, KA_EINVAL,
                   "task %s changed on disk since the executor loaded it (version %s, the "
                   "executor's %s): restart gpuexec",
                   task->id, task->version, job->task_version);
  s.task = task;
  double t_open = ka_now_s();
  int was_warm = s.ctx != NULL;
  if (rc == KA_OK) rc = rn_open_device(&s, job, &dev, &res, err, sizeof err);
  t_open = ka_now_s() - t_open;
  double t_base = ka_now_s();
  if (rc == KA_OK) rc = rn_build_baseline(&s, job, &impl[0], &blog, err, sizeof err);
  if (rc == KA_OK) {
    double t0 = ka_now_s();
    rc = rn_build_candidate(&s, job, &impl[1], &dev, &res, &clog, err, sizeof err);
    char how[160];
    if (was_warm)
      snprintf(how, sizeof how, "opened ahead (warm, %.1f ms opening), job's part",
               pre_open_s * 1e3);
    else
      snprintf(how, sizeof how, "opened");
    ka_sb_printf(&s.log,
                 "[kernelarena] runner: device %s %.1f ms, baseline build %.1f ms, candidate "
                 "build %.1f ms%s%s\n",
                 how, t_open * 1e3, (t0 - t_base) * 1e3, res.compile_s * 1e3,
                 s.dev.timer[0] ? ", timer: " : "", s.dev.timer);
  }
  /* the worker's go: the device's previous runner is gone (worker.c, wk_runner) */
  double t_go = ka_now_s();
  if (rc == KA_OK && job->has_go_fd && job->go_fd >= 0 && job->go_fd < nfds) {
    char g;
    while (read(fds[job->go_fd], &g, 1) < 0 && errno == EINTR) {
    }
    close(fds[job->go_fd]);
  }
  static rn_call_watch cwatch;
  pthread_t cwt;
  cwatch = (rn_call_watch){.s = &s, .limit_s = job->call_limit_s, .dev = &dev};
  if (rc == KA_OK && job->call_limit_s > 0 &&
      pthread_create(&cwt, NULL, rn_call_watchdog, &cwatch) != 0)
    rc = ka_seterr(err, sizeof err, KA_ESYS, "cannot start the call watchdog");
  t_go = ka_now_s() - t_go;
  double t_cases = ka_now_s();
  if (rc == KA_OK) rc = rn_run_cases(&s, job, impl, crs, &res, err, sizeof err);
  t_cases = ka_now_s() - t_cases;
  ka_sb_printf(&s.log,
               "[kernelarena] runner: waited %.1f ms for the device's previous runner, "
               "cases %.1f ms (with their teardown)\n",
               t_go * 1e3, t_cases * 1e3);
  rn_telemetry(&s, &tel, &res);
  res.cases = crs;
  if (rc) res.message = err;
  res.runtime_log = s.log.s ? s.log.s : "";
  rn_send_result(&s, &res);
}
