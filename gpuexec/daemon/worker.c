/* Evaluation of one job: inputs, reference, a sandboxed ka-runner process, verdict. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data.h"
#include "gpuexec.h"
#include "ka_common.h"
#include "runner.h"
#include "refcache.h"
#include "sandbox.h"
#include "devlock.h"
#include "command.h"

#define WK_LOG_MAX (64u << 10)
/* Sandbox limits of an evaluation (docs/sandbox.md). RLIMIT_AS only for the host
 * backend: the CUDA driver reserves far more virtual address space than it uses. */
#define WK_FSIZE_BYTES ((rlim_t)256 << 20)
#define WK_NOFILE 1024
#define WK_NPROC 4096
#define WK_HOST_AS_MIB 8192
#define WK_GRACE_S 5.0      /* after the deadline, for the supervisor's report */
#define WK_REFS_GRACE_S 1.0 /* a runner's least time after the references (wk_await_runner) */
#define WK_MAX_CASES 64
/* descriptors passed with a runner's job: a memfd per tensor and case, the two build
 * caches' memfds (wk_pack_images), and up to three more (the go pipe, the device lock's
 * two files: wk_runner) */
#define WK_SHARE_MAX (WK_MAX_CASES * KA_MAX_TENSORS + 2)
#define WK_PASS_MAX (WK_SHARE_MAX + 4) /* + the go byte or the lock's two, + the trial pipe */
#define WK_COMPILE_S 60.0 /* longest compile of a candidate (RunnerJob.compile_timeout_s) */

/* One tensor of a case as the worker hands it to the runner. Inputs: the cache entry's
 * sealed memfd and read-only mapping (not owned here); outputs: a memfd of this
 * evaluation that the runner fills (owned), and the entry's reference values. */
typedef struct wk_tensor {
  int fd;            /* memfd shared with the runner, -1 if none */
  const void *map;   /* our mapping of fd */
  const double *ref; /* outputs: reference values (the entry's) */
  size_t bytes;
  int64_t elems;
  int owned;    /* fd and map are this evaluation's (outputs) */
  int reusable; /* an output memfd that may be kept for a later evaluation (wk_out_give) */
} wk_tensor;

typedef struct wk_case {
  const ka_case *c;
  ka_refentry *e; /* correctness inputs and reference (refcache.h), held */
  wk_tensor t[KA_MAX_TENSORS];
  int compared;                   /* cmp holds the outputs' comparisons (wk_compare_case) */
  ka_compare cmp[KA_MAX_TENSORS]; /* per output tensor */
} wk_case;

static char *wk_strdup(const char *s) {
  return strdup(s ? s : "");
}

/* Frees a string field of a message: protobuf-c's INIT macros point unset strings at
 * a shared constant, which must not be freed. */
static void wk_free_str(char *s) {
  if (s && s != protobuf_c_empty_string) free(s);
}

Kernelarena__V1__Device *ka_device_dup(const Kernelarena__V1__Device *d) {
  if (!d) return NULL;
  size_t n = kernelarena__v1__device__get_packed_size(d);
  uint8_t *buf = malloc(n + 1);
  if (!buf) return NULL;
  kernelarena__v1__device__pack(d, buf);
  Kernelarena__V1__Device *c = kernelarena__v1__device__unpack(NULL, n, buf);
  free(buf);
  return c;
}

void ka_device_free(Kernelarena__V1__Device *d) {
  if (d) kernelarena__v1__device__free_unpacked(d, NULL);
}

void ka_result_clear(Kernelarena__V1__Result *res) {
  wk_free_str(res->job_id);
  wk_free_str(res->compile_log);
  wk_free_str(res->runtime_log);
  wk_free_str(res->message);
  for (size_t i = 0; i < res->n_cases; i++) {
    wk_free_str(res->cases[i]->name);
    wk_free_str(res->cases[i]->message);
    wk_free_str(res->cases[i]->flag);
    free(res->cases[i]);
  }
  free(res->cases);
  ka_device_free(res->device);
  if (res->telemetry) {
    wk_free_str(res->telemetry->device_name);
    free(res->telemetry);
  }
  kernelarena__v1__result__init(res);
}

static void wk_fail(Kernelarena__V1__Result *res, Kernelarena__V1__Status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void wk_fail(Kernelarena__V1__Result *res, Kernelarena__V1__Status st, const char *fmt,
                    ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  res->status = st;
  wk_free_str(res->message);
  res->message = strdup(buf);
}

/* ---- output memfds kept for reuse (issue 15): a new 256 MiB output memfd costs the
 * runner ~0.1 s of page faults and zeroing before its trial's copy can land in it
 * (setup of gelu's n64M case on the H200). A finished evaluation's output memfds of at
 * most WK_OUTS_BYTES in all are kept and handed to later evaluations of the same size.
 * What a reused one holds is never judged as a new evaluation's: the runner copies every
 * byte of the trial's outputs over it before it reports trial_outputs, and the worker
 * judges only then. */
#define WK_OUTS_MAX 32
#define WK_OUTS_BYTES ((size_t)4 << 30)
typedef struct wk_out {
  int fd;
  void *map;
  size_t len;
} wk_out;
static wk_out wk_outs[WK_OUTS_MAX];
static int wk_nouts;
static size_t wk_outs_bytes;
static pthread_mutex_t wk_outs_mu = PTHREAD_MUTEX_INITIALIZER;

/* A kept output memfd of len bytes into *fd and *map (1), or 0 if none. */
static int wk_out_take(size_t len, int *fd, void **map) {
  int got = 0;
  pthread_mutex_lock(&wk_outs_mu);
  for (int i = 0; i < wk_nouts && !got; i++)
    if (wk_outs[i].len == len) {
      *fd = wk_outs[i].fd, *map = wk_outs[i].map;
      wk_outs_bytes -= len;
      wk_outs[i] = wk_outs[--wk_nouts];
      got = 1;
    }
  pthread_mutex_unlock(&wk_outs_mu);
  return got;
}

/* Keeps (fd, map) of len bytes for reuse, or frees them when the pool is full. */
static void wk_out_give(int fd, void *map, size_t len) {
  pthread_mutex_lock(&wk_outs_mu);
  int keep = wk_nouts < WK_OUTS_MAX && wk_outs_bytes + len <= WK_OUTS_BYTES;
  if (keep) {
    wk_outs[wk_nouts++] = (wk_out){.fd = fd, .map = map, .len = len};
    wk_outs_bytes += len;
  }
  pthread_mutex_unlock(&wk_outs_mu);
  if (keep) return;
  munmap(map, len);
  close(fd);
}

static void wk_free_cases(const ka_exec_config *cfg, const ka_task *t, wk_case *cs, int n) {
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < t->ntensors; k++) {
      wk_tensor *x = &cs[i].t[k];
      if (!x->owned) continue;
      size_t len = x->bytes ? x->bytes : 1;
      if (x->fd >= 0 && x->map && x->map != MAP_FAILED && x->reusable) {
        wk_out_give(x->fd, (void *)x->map, len);
        continue;
      }
      if (x->map && x->map != MAP_FAILED) munmap((void *)x->map, len);
      if (x->fd >= 0) close(x->fd);
    }
    ka_ref_release(cfg->ref_cache, cs[i].e);
    cs[i].e = NULL;
  }
}

/* A case's tensors: its inputs (and, later, its reference) from the cache entry of
 * (task, case, seed), drawn now if it has none, or with `lazy` left for wk_references to
 * draw (the runner draws them on the device and gets no input memfds: fd -1); fresh
 * memfds for its outputs. */
static int wk_prepare_case(const ka_exec_config *cfg, const ka_task *t, wk_case *wc, int case_index,
                           uint64_t seed, int reuse, int lazy, char *err, size_t errlen) {
  for (int k = 0; k < t->ntensors; k++) wc->t[k].fd = -1;
  int rc = lazy ? ka_ref_acquire_lazy(cfg->ref_cache, t, case_index, seed, &wc->e, err, errlen)
                : ka_ref_acquire(cfg->ref_cache, t, case_index, seed, &wc->e, err, errlen);
  if (rc) return rc;
  for (int k = 0; k < t->ntensors; k++) {
    wk_tensor *x = &wc->t[k];
    x->elems = wc->e->elems[k];
    x->bytes = wc->e->bytes[k];
    if (t->tensors[k].role == KA_ROLE_INPUT) {
      x->fd = lazy ? -1 : wc->e->fd[k];
      x->map = lazy ? NULL : wc->e->in[k];
      continue;
    }
    x->owned = 1;
    x->reusable = reuse;
    void *kept = NULL;
    if (reuse && wk_out_take(x->bytes ? x->bytes : 1, &x->fd, &kept)) {
      x->map = kept;
      continue;
    }
    int fd = memfd_create(t->tensors[k].name, MFD_CLOEXEC);
    if (fd < 0) return ka_seterr(err, errlen, KA_ESYS, "memfd_create: %s", strerror(errno));
    /* keep shared fds above the runner's fixed descriptors (0-3) */
    x->fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    if (x->fd < 0) return ka_seterr(err, errlen, KA_ESYS, "fcntl: %s", strerror(errno));
    if (ftruncate(x->fd, (off_t)(x->bytes ? x->bytes : 1)) != 0)
      return ka_seterr(err, errlen, KA_ESYS, "ftruncate %zu bytes: %s", x->bytes, strerror(errno));
    void *m = mmap(NULL, x->bytes ? x->bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
    if (m == MAP_FAILED) return ka_seterr(err, errlen, KA_ESYS, "mmap: %s", strerror(errno));
    x->map = m;
  }
  return KA_OK;
}

typedef struct wk_ref_job {
  wk_case *wc;
  const ka_task *t;
  ka_reference_fn fn;
  int rc;
  char err[256]; /* why rc is not KA_OK */
} wk_ref_job;

/* A reference thread, at the lowest priority: it runs while the runner times its calls,
 * and the runner's host thread (whose wall clock is checked against the device timer)
 * must get its CPU first. */
static void *wk_ref_thread_low(void *arg);
static void *wk_ref_thread(void *arg) {
  wk_ref_job *j = arg;
  j->rc = ka_ref_reference(j->wc->e, j->fn, j->err, sizeof j->err);
  for (int k = 0; k < j->t->ntensors && j->rc == KA_OK; k++)
    if (j->t->tensors[k].role == KA_ROLE_OUTPUT) j->wc->t[k].ref = j->wc->e->ref[k];
  return NULL;
}

static void *wk_ref_thread_low(void *arg) {
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19); /* this thread only */
  return wk_ref_thread(arg);
}

/* The reference outputs of every case (computed once per cache entry, its inputs drawn
 * first where wk_prepare left them), the cases in parallel threads. KA_OK, or KA_ENOMEM /
 * KA_ESYS with the first failing case's reason in err. */
static int wk_references(const ka_task *t, ka_reference_fn fn, wk_case *cs, int n, char *err,
                         size_t errlen) {
  wk_ref_job jobs[WK_MAX_CASES];
  pthread_t th[WK_MAX_CASES];
  int started[WK_MAX_CASES] = {0};
  for (int i = 0; i < n; i++) {
    jobs[i] = (wk_ref_job){.wc = &cs[i], .t = t, .fn = fn, .rc = KA_OK, .err = ""};
    started[i] = pthread_create(&th[i], NULL, wk_ref_thread_low, &jobs[i]) == 0;
  }
  for (int i = 0; i < n; i++)
    if (!started[i]) wk_ref_thread(&jobs[i]);
  int rc = KA_OK;
  for (int i = 0; i < n; i++) {
    if (started[i]) pthread_join(th[i], NULL);
    if (jobs[i].rc && rc == KA_OK)
      rc = ka_seterr(err, errlen, jobs[i].rc, "case %s: %s", cs[i].c->name,
                     jobs[i].err[0] ? jobs[i].err : "failed");
  }
  return rc;
}

/* The runner's environment: nothing of ours beyond what compilers and drivers need
 * (device selection and toolkit locations of CUDA and ROCm, the sandbox switches). */
static void wk_runner_env(char **env, int max, char *storage, size_t slen, const char *workdir,
                          const char *preopen) {
  static const char *keep[] = {"PATH",
                               "LD_LIBRARY_PATH",
                               "CUDA_HOME",
                               "KA_HOST_CC",
                               "KA_BACKEND_PATH",
                               "CUDA_VISIBLE_DEVICES",
                               "HIP_VISIBLE_DEVICES", /* device selection on ROCm */
                               "ROCR_VISIBLE_DEVICES",
                               "ROCM_PATH", /* where hiprtc finds its headers */
                               "HIP_PATH",
                               "KA_SANDBOX_SECCOMP",
                               "KA_SANDBOX_LANDLOCK",
                               "KA_SANDBOX_UNIX",
                               "KA_SANDBOX_HIDE",  /* folders hidden (ka_sandbox_hide) */
                               "KA_TRITON_PYTHON", /* language triton (triton.h) */
                               "KA_TRITON_PREFIX",
                               "KA_TRITON_SITE",
                               "KA_TRITON_VERSION",
                               "KA_TRITON_CACHE",
                               NULL};
  int n = 0;
  size_t used = 0;
  for (int i = 0; keep[i] && n < max - 4; i++) {
    const char *v = getenv(keep[i]);
    if (!v) continue;
    int w = snprintf(storage + used, slen - used, "%s=%s", keep[i], v);
    if (w < 0 || (size_t)w >= slen - used) {
      /* that one only (a long PATH must not take the later ones with it), and said */
      fprintf(stderr, "gpuexec: %s (%zu bytes) left out of a runner's environment: no room\n",
              keep[i], strlen(v));
      storage[used] = '\0';
      continue;
    }
    env[n++] = storage + used;
    used += (size_t)w + 1;
  }
  const char *fixed[] = {"HOME", "TMPDIR"};
  for (int i = 0; i < 2; i++) {
    int w = snprintf(storage + used, slen - used, "%s=%s", fixed[i], workdir);
    if (w < 0 || (size_t)w >= slen - used) break;
    env[n++] = storage + used;
    used += (size_t)w + 1;
  }
  env[n++] = "LANG=C";
  if (preopen && n < max - 1) {
    int w = snprintf(storage + used, slen - used, "%s=%s", KA_RUNNER_PREOPEN_ENV, preopen);
    if (w > 0 && (size_t)w < slen - used) env[n++] = storage + used;
  }
  env[n] = NULL;
}

/* Process groups of running runners, so that gpuexec can kill them when it stops. */
static pthread_mutex_t wk_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t wk_running[256];

static void wk_track(pid_t pid, int add) {
  pthread_mutex_lock(&wk_mu);
  for (int i = 0; i < 256; i++)
    if (add ? wk_running[i] == 0 : wk_running[i] == pid) {
      wk_running[i] = add ? pid : 0;
      break;
    }
  pthread_mutex_unlock(&wk_mu);
}

void ka_kill_runners(void) {
  pthread_mutex_lock(&wk_mu);
  for (int i = 0; i < 256; i++)
    if (wk_running[i] > 0) kill(-wk_running[i], SIGKILL);
  pthread_mutex_unlock(&wk_mu);
}

/* One evaluation's processes: pid is the supervisor (`ka-runner --supervise`, sandbox.h),
 * the leader of its own process group; runner is the runner it started (0 until the
 * supervisor names it). */
typedef struct wk_child {
  pid_t pid, runner;
  int in_fd, out_fd, err_fd, st_fd; /* our ends: job in, result out, stderr, report */
  /* the runner's device lock descriptions (devlock.h), kept open here until the runner is
   * reaped, so that a runner that dies holding the lock keeps it until its context is gone
   * with its process (flock belongs to the description); -1 if none */
  int lock_m, lock_t;
  ka_sandbox_report report;
} wk_child;

/* Closes the runner's lock descriptions kept in ch (after it was reaped). */
static void wk_close_lock(wk_child *ch) {
  if (ch->lock_m >= 0) close(ch->lock_m);
  if (ch->lock_t >= 0) close(ch->lock_t);
  ch->lock_m = ch->lock_t = -1;
}

/* AddressSanitizer reserves terabytes of shadow address space at start, which no
 * RLIMIT_AS that still stops a memory hog allows: a build with ASan (-DKA_SANITIZER=
 * address, the sanitize lane) sets none. */
#if defined(__SANITIZE_ADDRESS__)
#define WK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WK_ASAN 1
#endif
#endif

/* Address-space limit of host-backend runners in bytes: KA_HOST_MEMORY_LIMIT_MB from
 * gpuexec's environment, else WK_HOST_AS_MIB; none (RLIM_INFINITY) in an ASan build. */
static rlim_t wk_host_as_bytes(void) {
#ifdef WK_ASAN
  return RLIM_INFINITY;
#endif
  const char *v = getenv("KA_HOST_MEMORY_LIMIT_MB");
  long long mb = v && *v ? atoll(v) : 0;
  if (mb <= 0) mb = WK_HOST_AS_MIB;
  return (rlim_t)mb << 20;
}

/* In a vfork child: every caught signal back to its default action (the child has its
 * own table of actions; a handler of ours would run on the parent's memory), then the
 * parent's signal mask restored. System calls only. */
static void wk_child_signals(const sigset_t *mask) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++) {
    struct sigaction cur;
    if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &cur) != 0) continue;
    if (cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN) sigaction(sig, &dfl, NULL);
  }
  sigprocmask(SIG_SETMASK, mask, NULL);
}

/* Starts the supervisor and its runner in workdir. The runner's stdin is a socket: the
 * job and its memfds come over it later (wk_send_job). preopen ("cuda:0", or NULL): the
 * runner opens that device before it reads the job (a warm runner of the pool). */
static int wk_spawn(const ka_exec_config *cfg, const char *backend, const char *workdir,
                    const char *preopen, double cpu_limit_s, wk_child *ch, char *err,
                    size_t errlen) {
  int pin[2], pres[2], perr[2], pst[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pin))
    return ka_seterr(err, errlen, KA_ESYS, "socketpair: %s", strerror(errno));
  if (pipe2(pres, O_CLOEXEC)) {
    close(pin[0]), close(pin[1]);
    return ka_seterr(err, errlen, KA_ESYS, "pipe: %s", strerror(errno));
  }
  if (pipe2(perr, O_CLOEXEC)) {
    close(pin[0]), close(pin[1]), close(pres[0]), close(pres[1]);
    return ka_seterr(err, errlen, KA_ESYS, "pipe: %s", strerror(errno));
  }
  if (pipe2(pst, O_CLOEXEC)) {
    close(pin[0]), close(pin[1]), close(pres[0]), close(pres[1]), close(perr[0]), close(perr[1]);
    return ka_seterr(err, errlen, KA_ESYS, "pipe: %s", strerror(errno));
  }
  char *env[32], storage[16384]; /* the keep list (18) and four of ours */
  wk_runner_env(env, 32, storage, sizeof storage, workdir, preopen);
  /* the supervisor, which starts the runner (sandbox.h) */
  char *argv[] = {(char *)cfg->runner_path, KA_SANDBOX_SUPERVISE_ARG, (char *)cfg->runner_path,
                  NULL};
  /* Limits, inherited by the supervisor, the runner and what it starts. RLIMIT_NPROC
   * counts all processes of the user and binds nobody running as root: the seccomp
   * filter, which refuses new processes, is what stops a fork bomb. */
  struct rlimit core = {0, 0}, fsize = {WK_FSIZE_BYTES, WK_FSIZE_BYTES},
                nofile = {WK_NOFILE, WK_NOFILE}, nproc = {WK_NPROC, WK_NPROC};
  rlim_t cpu = (rlim_t)(cpu_limit_s + 10);
  struct rlimit cpul = {cpu, cpu + 5};
  int host = backend && !strcmp(backend, "host");
  rlim_t as_bytes = wk_host_as_bytes();
  struct rlimit as = {as_bytes, as_bytes};
  /* vfork, not fork: gpuexec maps gigabytes (the reference cache, the outputs' memfds),
   * and fork copies the page tables of all of it (~20 ms at 2 GiB, ~80 ms at 8 GiB on a
   * step's critical path, bench/spawn_cost.c) and makes every later write of the other
   * threads a copy-on-write fault until the child's execve. The child shares our memory
   * until then, so it only makes system calls: no signal handler of ours may run in it
   * (all blocked across the vfork, its caught ones reset before they are unblocked). */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = vfork();
  if (pid != 0) pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) {
    int e = errno;
    close(pin[0]), close(pin[1]), close(pres[0]), close(pres[1]), close(perr[0]), close(perr[1]);
    close(pst[0]), close(pst[1]);
    return ka_seterr(err, errlen, KA_ESYS, "vfork: %s", strerror(e));
  }
  if (pid == 0) {
    /* child: system calls only until execve (it runs on the parent's memory) */
    wk_child_signals(&old);
    setpgid(0, 0);
    dup2(pin[0], 0);
    dup2(perr[1], 1);
    dup2(perr[1], 2);
    dup2(pres[1], KA_RUNNER_RESULT_FD);
    dup2(pst[1], KA_SANDBOX_STATUS_FD);
    setrlimit(RLIMIT_CORE, &core);
    setrlimit(RLIMIT_FSIZE, &fsize);
    setrlimit(RLIMIT_NOFILE, &nofile);
    setrlimit(RLIMIT_CPU, &cpul);
    setrlimit(RLIMIT_NPROC, &nproc);
    if (host) setrlimit(RLIMIT_AS, &as);
    if (chdir(workdir) != 0) _exit(126);
    execve(argv[0], argv, env);
    _exit(127);
  }
  setpgid(pid, pid); /* also from the parent, so killpg works whoever runs first */
  wk_track(pid, 1);
  close(pin[0]), close(pres[1]), close(perr[1]), close(pst[1]);
  ch->pid = pid;
  ch->runner = 0;
  ch->lock_m = ch->lock_t = -1;
  ch->in_fd = pin[1];
  ch->out_fd = pres[0];
  ch->err_fd = perr[0];
  ch->st_fd = pst[0];
  memset(&ch->report, 0, sizeof ch->report);
  return KA_OK;
}

/* Appends at most what fits under max bytes; returns 1 if something was dropped. */
static int wk_append_capped(ka_sb *sb, const char *buf, size_t n, size_t max) {
  size_t room = sb->len < max ? max - sb->len : 0;
  ka_sb_append(sb, buf, n < room ? n : room);
  return n > room;
}

/* Writes the job, then collects the result, stderr (at most WK_LOG_MAX bytes kept, the
 * rest read and dropped) and the supervisor's report until all three close. At the
 * deadline the supervisor is told to stop (SIGTERM: it kills the runner and everything
 * the runner left behind, then reports); if it has not reported WK_GRACE_S later, its
 * process group and the runner's are killed. *status: the runner's wait status from the
 * report, or the supervisor's own if it never reported. Returns KA_ETIMEDOUT if the
 * deadline passed. pending (GPU backends; NULL: wait for everything): return as soon as the
 * whole result is in, with *pending = 1 and the child still to be finished (wk_leave). */
static int wk_collect(wk_child *ch, const uint8_t *job, size_t jlen, double deadline, ka_sb *result,
                      ka_sb *log, int *status, size_t *dropped, int *pending) {
  size_t off = 0;
  int timed_out = 0;
  int open_out = 1, open_err = 1, open_st = 1;
  double hard = 0;
  ka_sb st = {0};
  *dropped = 0;
  int early = pending != NULL;
  if (pending) *pending = 0;
  if (ch->in_fd >= 0) fcntl(ch->in_fd, F_SETFL, O_NONBLOCK);
  while (open_out || open_err || open_st || ch->in_fd >= 0) {
    double now = ka_now_s();
    if (early && !open_out && result->len > 0 && !timed_out && ch->in_fd < 0) {
      /* the whole result is in: the runner's exit (its device context torn down) is
       * waited for by wk_drain, off this job's path */
      ka_sb_free(&st);
      *pending = 1;
      *status = 0;
      return KA_OK;
    }
    if (!timed_out && now >= deadline) {
      timed_out = 1;
      kill(ch->pid, SIGTERM);
      hard = now + WK_GRACE_S;
      if (ch->in_fd >= 0) close(ch->in_fd), ch->in_fd = -1;
    }
    if (timed_out && now >= hard) break;
    double left = (timed_out ? hard : deadline) - now;
    struct pollfd p[4];
    int np = 0, io = -1, ir = -1, ie = -1, is = -1;
    if (ch->in_fd >= 0) io = np, p[np++] = (struct pollfd){ch->in_fd, POLLOUT, 0};
    if (open_out) ir = np, p[np++] = (struct pollfd){ch->out_fd, POLLIN, 0};
    if (open_err) ie = np, p[np++] = (struct pollfd){ch->err_fd, POLLIN, 0};
    if (open_st) is = np, p[np++] = (struct pollfd){ch->st_fd, POLLIN, 0};
    int ms = left > 1 ? 1000 : (int)(left * 1000) + 1;
    int r = poll(p, (nfds_t)np, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    if (io >= 0 && p[io].revents) {
      ssize_t w = write(ch->in_fd, job + off, jlen - off);
      if (w > 0) off += (size_t)w;
      if (off == jlen || (w < 0 && errno != EAGAIN && errno != EINTR)) {
        close(ch->in_fd);
        ch->in_fd = -1;
      }
    }
    char buf[65536];
    if (ir >= 0 && p[ir].revents) {
      ssize_t n = read(ch->out_fd, buf, sizeof buf);
      if (n > 0)
        wk_append_capped(result, buf, (size_t)n, KA_RUNNER_MAX_JOB_BYTES);
      else if (n == 0 || (n < 0 && errno != EINTR))
        open_out = 0;
    }
    if (ie >= 0 && p[ie].revents) {
      ssize_t n = read(ch->err_fd, buf, sizeof buf);
      if (n > 0) {
        size_t before = log->len;
        if (wk_append_capped(log, buf, (size_t)n, WK_LOG_MAX))
          *dropped += (size_t)n - (log->len - before);
      } else if (n == 0 || (n < 0 && errno != EINTR)) {
        open_err = 0;
      }
    }
    if (is >= 0 && p[is].revents) {
      ssize_t n = read(ch->st_fd, buf, sizeof buf);
      if (n > 0) {
        wk_append_capped(&st, buf, (size_t)n, 4096);
        const char *pp = st.s ? strstr(st.s, "pid ") : NULL;
        if (pp && !ch->runner) ch->runner = (pid_t)atoi(pp + 4);
      } else if (n == 0 || (n < 0 && errno != EINTR)) {
        open_st = 0;
      }
    }
  }
  if (ch->in_fd >= 0) close(ch->in_fd);
  ka_sandbox_parse_report(st.s, &ch->report);
  ka_sb_free(&st);
  /* Normally all is gone already; after a supervisor that did not report, kill both
   * process groups (the runner has its own). */
  kill(-ch->pid, SIGKILL);
  if (!ch->report.valid && ch->runner > 0) kill(-ch->runner, SIGKILL);
  int sst = 0;
  int reaped = 0;
  for (int i = 0; i < 100 && !reaped; i++) {
    if (waitpid(ch->pid, &sst, WNOHANG) == ch->pid)
      reaped = 1;
    else
      usleep(50000);
  }
  if (!reaped)
    while (waitpid(ch->pid, &sst, 0) < 0 && errno == EINTR) {
    }
  wk_track(ch->pid, 0);
  wk_close_lock(ch);
  close(ch->out_fd);
  close(ch->err_fd);
  close(ch->st_fd);
  *status = ch->report.valid ? ch->report.wstatus : sst;
  return timed_out ? KA_ETIMEDOUT : KA_OK;
}

/* Cuts *s (a result string) to at most max bytes, saying so. */
static void wk_truncate(char **s, size_t max) {
  if (!*s || *s == protobuf_c_empty_string || strlen(*s) <= max) return;
  ka_sb sb = {0};
  ka_sb_append(&sb, *s, max);
  ka_sb_printf(&sb, "\n[kernelarena] log truncated: %zu more bytes were dropped\n",
               strlen(*s) - max);
  wk_free_str(*s);
  *s = ka_sb_take(&sb);
}

/* What the supervisor's report adds to the verdict: processes left behind (killed) make
 * a run that would otherwise count a RUNTIME_ERROR, because they ran beside the timed
 * calls; a runner stopped by the sandbox (SIGSYS) or a limit is named. */
static void wk_sandbox_verdict(const ka_sandbox_report *r, Kernelarena__V1__Result *res,
                               ka_sb *log) {
  if (!r->valid) return;
  if (r->leftovers > 0) {
    ka_sb_printf(log,
                 "\n[kernelarena] the evaluation left %d process%s running; killed by the "
                 "supervisor\n",
                 r->leftovers, r->leftovers == 1 ? "" : "es");
    if (res->status == KERNELARENA__V1__STATUS__OK ||
        res->status == KERNELARENA__V1__STATUS__INCORRECT) {
      wk_fail(res, KERNELARENA__V1__STATUS__RUNTIME_ERROR,
              "the submission left %d process%s running after the evaluation (killed)",
              r->leftovers, r->leftovers == 1 ? "" : "es");
      res->geomean_speedup = 0;
    }
  }
}

/* A runner's result must name a known status and, when it says OK, carry one case per
 * case asked for with finite positive timings; anything else is malformed. */
static int wk_result_valid(const Kernelarena__V1__RunnerResult *rr, int ncases, char *err,
                           size_t errlen) {
  if (rr->status <= KERNELARENA__V1__STATUS__STATUS_UNSPECIFIED ||
      rr->status > KERNELARENA__V1__STATUS__OOM)
    return !ka_seterr(err, errlen, KA_EINVAL, "unknown status %d", (int)rr->status);
  if (rr->status != KERNELARENA__V1__STATUS__OK) return 1;
  if ((int)rr->n_cases != ncases)
    return !ka_seterr(err, errlen, KA_EINVAL, "%zu cases instead of %d", rr->n_cases, ncases);
  for (size_t i = 0; i < rr->n_cases; i++) {
    const Kernelarena__V1__CaseResult *c = rr->cases[i];
    if (!c || !isfinite(c->baseline_ms) || !isfinite(c->candidate_ms) || c->baseline_ms <= 0 ||
        c->candidate_ms <= 0 || c->timed_calls <= 0)
      return !ka_seterr(err, errlen, KA_EINVAL, "case %zu has no valid timings", i);
  }
  return 1;
}

/* ---- the baseline's history (gpuexec.h, ka_baseline_outlier) */
#define WK_HIST_KEYS 4096
typedef struct wk_hist {
  char key[192];
  double ms[KA_BASELINE_HISTORY];
  int n, next;
} wk_hist;
static wk_hist *wk_hists;
static int wk_nhists;
static pthread_mutex_t wk_hist_mu = PTHREAD_MUTEX_INITIALIZER;

static int wk_cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* key's history (made when make and missing; the oldest key's slot is reused when
 * full); NULL if none. wk_hist_mu held. */
static wk_hist *wk_hist_of(const char *key, int make) {
  if (!wk_hists) wk_hists = calloc(WK_HIST_KEYS, sizeof *wk_hists);
  if (!wk_hists) return NULL;
  for (int i = 0; i < wk_nhists; i++)
    if (!strcmp(wk_hists[i].key, key)) return &wk_hists[i];
  if (!make) return NULL;
  static int reuse;
  wk_hist *h = &wk_hists[wk_nhists < WK_HIST_KEYS ? wk_nhists++ : reuse++ % WK_HIST_KEYS];
  memset(h, 0, sizeof *h);
  snprintf(h->key, sizeof h->key, "%s", key);
  return h;
}

int ka_baseline_outlier(const char *key, double ms, double *history_ms) {
  *history_ms = 0;
  if (!(ms > 0) || !isfinite(ms)) return 0;
  pthread_mutex_lock(&wk_hist_mu);
  wk_hist *h = wk_hist_of(key, 0);
  int out = 0;
  if (h && h->n >= KA_BASELINE_MIN_HISTORY) {
    double v[KA_BASELINE_HISTORY];
    memcpy(v, h->ms, sizeof(double) * (size_t)h->n);
    qsort(v, (size_t)h->n, sizeof(double), wk_cmp_d);
    double med = h->n & 1 ? v[h->n / 2] : 0.5 * (v[h->n / 2 - 1] + v[h->n / 2]);
    *history_ms = med;
    out = ms > KA_BASELINE_SPREAD * med || ms * KA_BASELINE_SPREAD < med;
  }
  pthread_mutex_unlock(&wk_hist_mu);
  return out;
}

void ka_baseline_record(const char *key, double ms) {
  if (!(ms > 0) || !isfinite(ms)) return;
  pthread_mutex_lock(&wk_hist_mu);
  wk_hist *h = wk_hist_of(key, 1);
  if (h) {
    h->ms[h->next] = ms;
    h->next = (h->next + 1) % KA_BASELINE_HISTORY;
    if (h->n < KA_BASELINE_HISTORY) h->n++;
  }
  pthread_mutex_unlock(&wk_hist_mu);
}

/* An OK result whose baseline disagrees with its history in any case becomes FLAGGED
 * (ka_baseline_outlier), the case naming both times. */
static void wk_baseline_check(const ka_task *t, const Kernelarena__V1__Device *dev,
                              Kernelarena__V1__Result *res) {
  for (size_t i = 0; i < res->n_cases; i++) {
    Kernelarena__V1__CaseResult *cr = res->cases[i];
    char key[192];
    snprintf(key, sizeof key, "%s@%s/%s/%s:%d", t->id, t->version, cr->name,
             dev && dev->name ? dev->name : "?", dev ? (int)dev->index : 0);
    double hist = 0;
    /* only a baseline slower than its history inflates the reward, and only when the
     * candidate did not slow down with it (the two are timed interleaved): a machine
     * under load slows both, and that is no reason to flag an honest step */
    if (!ka_baseline_outlier(key, cr->baseline_ms, &hist) || !(cr->baseline_ms > hist) ||
        !(cr->speedup > KA_BASELINE_SPEEDUP) || res->status != KERNELARENA__V1__STATUS__OK) {
      ka_baseline_record(key, cr->baseline_ms);
      continue;
    }
    char flag[256];
    snprintf(flag, sizeof flag,
             "the baseline's median %.4f ms " KA_FLAG_HISTORY
             " (median %.4f ms): a measurement "
             "fault",
             cr->baseline_ms, hist);
    wk_free_str(cr->flag);
    cr->flag = strdup(flag);
    cr->speedup = 0;
    res->status = KERNELARENA__V1__STATUS__FLAGGED;
    res->geomean_speedup = 0;
    wk_free_str(res->message);
    res->message = strdup(flag);
  }
}

/* Compares case wc's trial outputs (in its memfds) with its reference, every output
 * tensor at the task's tolerance, into wc->cmp; sets wc->compared. */
static void wk_compare_case(const ka_task *t, wk_case *wc) {
  for (int k = 0; k < t->ntensors; k++) {
    if (t->tensors[k].role != KA_ROLE_OUTPUT) continue;
    double atol, rtol;
    ka_task_tolerance(t, k, &atol, &rtol);
    ka_compare_outputs_scaled(t->tensors[k].dtype, wc->t[k].map, wc->t[k].ref, wc->t[k].elems, atol,
                              rtol, wc->e->ref_max[k], &wc->cmp[k]);
  }
  wc->compared = 1;
}

static void wk_judge(const ka_task *t, wk_case *cs, int ncases, Kernelarena__V1__RunnerResult *rr,
                     Kernelarena__V1__Result *res) {
  int all_ok = 1;
  double logsum = 0;
  int nshown = 0;
  res->cases = calloc((size_t)ncases + 1, sizeof *res->cases);
  for (int i = 0; i < ncases && i < (int)rr->n_cases; i++) {
    Kernelarena__V1__CaseResult *cr = malloc(sizeof *cr);
    kernelarena__v1__case_result__init(cr);
    Kernelarena__V1__CaseResult *rc = rr->cases[i];
    cr->name = wk_strdup(cs[i].c->name);
    cr->held_out = cs[i].c->held_out;
    KA_CASE_TIMINGS_COPY(cr, rc);
    cr->correct = 1;
    ka_sb msg = {0};
    /* compared already while the runner timed its calls (wk_early_main), or now */
    if (!cs[i].compared) wk_compare_case(t, &cs[i]);
    for (int k = 0; k < t->ntensors; k++) {
      if (t->tensors[k].role != KA_ROLE_OUTPUT) continue;
      const ka_compare cmp = cs[i].cmp[k];
      int ok = cmp.mismatches == 0;
      cr->elements += cmp.elements;
      cr->mismatches += cmp.mismatches;
      if (cmp.max_abs_err > cr->max_abs_err) cr->max_abs_err = cmp.max_abs_err;
      if (cmp.max_rel_err > cr->max_rel_err) cr->max_rel_err = cmp.max_rel_err;
      if (!ok) {
        cr->correct = 0;
        ka_sb_printf(&msg,
                     "%s: %lld of %lld elements differ; first at [%lld]: got %.9g, expected %.9g",
                     t->tensors[k].name, (long long)cmp.mismatches, (long long)cmp.elements,
                     (long long)cmp.first_bad, cmp.first_out, cmp.first_ref);
        if (cmp.nonfinite) ka_sb_printf(&msg, " (%lld NaN/Inf)", (long long)cmp.nonfinite);
      }
    }
    cr->message = ka_sb_take(&msg);
    if (!cr->correct) all_ok = 0;
    if (cr->correct && cr->candidate_ms > 0 && cr->baseline_ms > 0)
      cr->speedup = cr->baseline_ms / cr->candidate_ms;
    if (!cr->held_out) {
      nshown++;
      logsum += cr->speedup > 0 ? log(cr->speedup) : -INFINITY;
    }
    res->cases[res->n_cases++] = cr;
  }
  if ((int)rr->n_cases < ncases) all_ok = 0;
  if (all_ok) {
    res->status = KERNELARENA__V1__STATUS__OK;
    res->geomean_speedup = nshown ? exp(logsum / nshown) : 0;
  } else {
    res->status = KERNELARENA__V1__STATUS__INCORRECT;
    res->geomean_speedup = 0;
    wk_free_str(res->message);
    res->message = strdup("output differs from the reference");
  }
}

/* The executor's secret, drawn once per process: mixed with a job's problem seed it
 * gives the correctness inputs, which the steps of an episode share (refcache.h). */
static uint64_t wk_secret;
static void wk_secret_init(void) {
  if (getrandom(&wk_secret, sizeof wk_secret, 0) != (ssize_t)sizeof wk_secret)
    wk_secret = (uint64_t)(ka_now_s() * 1e9) ^ ((uint64_t)getpid() << 40);
}

/* What the worker holds for one evaluation. */
typedef struct wk_eval {
  const ka_exec_config *cfg;
  const Kernelarena__V1__Job *job;
  const Kernelarena__V1__Device *dev;
  const ka_task *t;
  ka_reference_fn ref;
  char workdir[PATH_MAX];
  wk_case cs[WK_MAX_CASES];
  int ncases, prepared;
  uint64_t in_seed, eval_secret;
  double timeout;
  int locked;        /* the runner got the device lock (wk_runner) */
  int image_fd;      /* the build cache's memfd passed to the runner, or -1 */
  int cand_image_fd; /* the candidates' build cache's memfd passed to the runner, or -1 */
} wk_eval;

/* Checks the job against this executor's task copy; KA_OK or a message in res. */
static int wk_check_job(wk_eval *ev, Kernelarena__V1__Result *res, char *err, size_t errlen) {
  const Kernelarena__V1__Job *job = ev->job;
  ev->t = ka_registry_find(ev->cfg->tasks, job->task_id);
  if (!ev->t) {
    const char *why = ka_registry_skipped(ev->cfg->tasks, job->task_id);
    wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR, "executor has no task %s%s%s", job->task_id,
            why ? ": it was skipped at load: " : "", why ? why : "");
    return KA_ENOENT;
  }
  if (strcmp(ev->t->version, job->task_version)) {
    wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR,
            "task %s differs between server (%s) and executor (%s)", ev->t->id, job->task_version,
            ev->t->version);
    return KA_ESTATE;
  }
  for (size_t i = 0; i < job->n_files; i++)
    if (!ka_path_is_safe(job->files[i]->path) || !ka_task_is_editable(ev->t, job->files[i]->path)) {
      wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR, "job names a non-editable file");
      return KA_EINVAL;
    }
  if (ka_reference_get(ev->t, ev->cfg->cache_dir, &ev->ref, err, errlen)) {
    wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR, "%s", err);
    return KA_EUNAVAIL;
  }
  return KA_OK;
}

/* The correctness inputs' seed of job (gpuexec.h): evaluations and prefetches alike. */
uint64_t ka_job_input_seed(const ka_exec_config *cfg, const Kernelarena__V1__Job *job) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  uint64_t problem = job->problem_seed ? job->problem_seed : job->seed;
  if (cfg->fixed_inputs) return job->seed;
  if (job->reproducible) return ka_mix64(problem, 0x726570726fULL); /* admin only: no secret */
  pthread_once(&once, wk_secret_init);
  return ka_mix64(problem, wk_secret);
}

/* The seeds (docs/integrity.md, property 2): the correctness inputs from the job's
 * problem seed and the executor's secret (ka_job_input_seed: shared by an episode's steps
 * and its Reset prefetch, refcache.h), everything of the timed calls (their inputs,
 * poison, which are verified) from a secret drawn for this evaluation alone; ka-validate
 * (fixed_inputs) and a reproducible Evaluate (Job.reproducible, admin only): the job's
 * seeds alone. */
static void wk_seeds(wk_eval *ev) {
  const Kernelarena__V1__Job *job = ev->job;
  ev->in_seed = ka_job_input_seed(ev->cfg, job);
  if (ev->cfg->fixed_inputs || job->reproducible) {
    ev->eval_secret = ka_mix64(job->seed, 0x6576616c);
    return;
  }
  if (getrandom(&ev->eval_secret, sizeof ev->eval_secret, 0) != (ssize_t)sizeof ev->eval_secret)
    ev->eval_secret = ka_mix64((uint64_t)(ka_now_s() * 1e9), (uint64_t)getpid());
}

/* The cases the job asks for, with their inputs (from the cache or drawn now) and output
 * memfds; KA_OK, or INFRA_ERROR in res. */
static int wk_prepare(wk_eval *ev, Kernelarena__V1__Result *res, char *err, size_t errlen) {
  const ka_task *t = ev->t;
  for (int i = 0; i < t->ncases + t->nheld && ev->ncases < WK_MAX_CASES; i++)
    if (!t->cases[i].held_out || ev->job->include_held_out) ev->cs[ev->ncases++].c = &t->cases[i];
  int rc = KA_OK;
  /* every descriptor of the job must fit the runner's limit (runner.h) */
  if (ev->ncases * t->ntensors + WK_PASS_MAX - WK_MAX_CASES * KA_MAX_TENSORS > KA_RUNNER_MAX_FDS) {
    wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR,
            "task %s: %d cases x %d tensors need more descriptors than a runner takes (%d)", t->id,
            ev->ncases, t->ntensors, KA_RUNNER_MAX_FDS);
    return KA_ERANGE;
  }
  /* a runner that draws the trial's inputs on the device needs none of the host's: it
   * starts before they are drawn, and they are drawn beside it for the reference (the
   * first step of a seed: its draw no longer comes before the runner's whole work) */
  int lazy = ev->dev && ev->dev->device_staging && strcmp(ev->dev->backend, "host") != 0;
  for (int i = 0; i < ev->ncases && rc == KA_OK; i++, ev->prepared++)
    rc = wk_prepare_case(ev->cfg, t, &ev->cs[i], (int)(ev->cs[i].c - t->cases), ev->in_seed, 1,
                         lazy, err, errlen);
  if (rc) wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR, "preparing inputs: %s", err);
  return rc;
}

/* ---- the build cache (issue 15 item 2): the baseline's loadable image (a CUBIN) per
 * (task, task version, backend, device architecture), built by the first runner of a
 * key and loaded by every later one instead of compiling it again (~65 ms on the H200).
 * The image comes from a memfd the runner writes and seals right after the baseline's
 * build, before any candidate code runs (runner.c, rn_give_image); one without every
 * seal is not taken. It lives in this process's memory only: nothing on disk that
 * another process could change. */
#define WK_IMAGES_MAX 128
/* well below the runner's job limit (KA_RUNNER_MAX_JOB_BYTES), which the image rides in */
#define WK_IMAGE_MAX_BYTES ((size_t)16 << 20)
typedef struct wk_image {
  char key[65];
  uint8_t *data;
  size_t len;
} wk_image;
static wk_image wk_images[WK_IMAGES_MAX];
static int wk_nimages;
static pthread_mutex_t wk_images_mu = PTHREAD_MUTEX_INITIALIZER;

/* The cache key of ev: SHA-256 (hex) of task id, version, backend and architecture, each
 * NUL-terminated (no length limit, no ambiguity). */
static void wk_image_key(const wk_eval *ev, char key[65]) {
  const char *parts[4] = {ev->t->id, ev->t->version, ev->dev->backend,
                          ev->dev->arch ? ev->dev->arch : ""};
  ka_sb sb = {0};
  for (int i = 0; i < 4; i++) {
    ka_sb_puts(&sb, parts[i] ? parts[i] : "");
    ka_sb_puts(&sb, "|");
  }
  ka_sha256_hex(sb.s ? sb.s : "", sb.len, key);
  ka_sb_free(&sb);
}

/* A malloc'd copy of the cached image of ev's key in *data (NULL and 0 if none). */
static void wk_image_get(const wk_eval *ev, uint8_t **data, size_t *len) {
  char key[65];
  wk_image_key(ev, key);
  *data = NULL, *len = 0;
  pthread_mutex_lock(&wk_images_mu);
  for (int i = 0; i < wk_nimages; i++)
    if (!strcmp(wk_images[i].key, key) && (*data = malloc(wk_images[i].len))) {
      memcpy(*data, wk_images[i].data, wk_images[i].len);
      *len = wk_images[i].len;
      break;
    }
  pthread_mutex_unlock(&wk_images_mu);
}

/* Takes the image the runner left in memfd fd (sealed against writes, growth and
 * shrinking, 1 byte to WK_IMAGE_MAX_BYTES) into the cache under ev's key. */
static uint8_t *wk_sealed_image(int fd, size_t *len);
static void wk_image_put(const wk_eval *ev, int fd) {
  size_t len = 0;
  uint8_t *data = wk_sealed_image(fd, &len);
  if (!data) return;
  char key[65];
  wk_image_key(ev, key);
  pthread_mutex_lock(&wk_images_mu);
  int have = 0;
  for (int i = 0; i < wk_nimages && !have; i++) have = !strcmp(wk_images[i].key, key);
  if (!have && wk_nimages < WK_IMAGES_MAX) {
    wk_image *im = &wk_images[wk_nimages++];
    snprintf(im->key, sizeof im->key, "%s", key);
    im->data = data, im->len = len;
    data = NULL;
  }
  pthread_mutex_unlock(&wk_images_mu);
  free(data);
}

/* The candidates' build cache: a candidate's image (cuda: CUBIN) under the SHA-256 of
 * task id, version, backend, architecture and every submitted file (path and content),
 * built by an earlier runner from exactly those files and handed over sealed, before
 * any candidate code ran (runner.c), so a later step of the same files (an unchanged
 * resubmission, the duplicates of a GRPO group) loads it instead of compiling (~45 ms
 * with NVRTC on the H200). Only images built with an empty compiler log are cached (so
 * a step's compile log does not depend on a hit), never triton bundles (their compile
 * has its own cache) nor the host backend's modules, nor images above
 * WK_CAND_IMAGE_MAX_BYTES. A ring of WK_CAND_IMAGES entries; in this process's memory only. */
#define WK_CAND_IMAGES 64
/* a candidate's image above this is not kept: 64 entries at most 64 MiB in all, however
 * large the submissions' CUBINs (a big initialised __device__ array; review 2026-12-01) */
#define WK_CAND_IMAGE_MAX_BYTES ((size_t)1 << 20)
static wk_image wk_cand_images[WK_CAND_IMAGES];
static unsigned wk_cand_next;

/* The candidate cache key of ev (see above); 0 if the job has no files. */
static int wk_cand_key(const wk_eval *ev, char key[65]) {
  const Kernelarena__V1__Job *job = ev->job;
  if (!job->n_files) return 0;
  ka_sb sb = {0};
  const char *parts[4] = {ev->t->id, ev->t->version, ev->dev->backend,
                          ev->dev->arch ? ev->dev->arch : ""};
  ka_sb_puts(&sb, "candidate|");
  for (int i = 0; i < 4; i++) {
    ka_sb_puts(&sb, parts[i] ? parts[i] : "");
    ka_sb_puts(&sb, "|");
  }
  for (size_t i = 0; i < job->n_files; i++) {
    const Kernelarena__V1__File *f = job->files[i];
    ka_sb_printf(&sb, "%s|%zu|", f->path ? f->path : "", f->content.len);
    if (f->content.len) ka_sb_append(&sb, (const char *)f->content.data, f->content.len);
  }
  ka_sha256_hex(sb.s ? sb.s : "", sb.len, key);
  ka_sb_free(&sb);
  return 1;
}

/* A malloc'd copy of ev's cached candidate image in *data (NULL and 0 if none). */
static void wk_cand_image_get(const wk_eval *ev, uint8_t **data, size_t *len) {
  char key[65];
  *data = NULL, *len = 0;
  if (!wk_cand_key(ev, key)) return;
  pthread_mutex_lock(&wk_images_mu);
  for (int i = 0; i < WK_CAND_IMAGES; i++)
    if (wk_cand_images[i].data && !strcmp(wk_cand_images[i].key, key) &&
        (*data = malloc(wk_cand_images[i].len))) {
      memcpy(*data, wk_cand_images[i].data, wk_cand_images[i].len);
      *len = wk_cand_images[i].len;
      break;
    }
  pthread_mutex_unlock(&wk_images_mu);
}

/* A malloc'd copy of the image the runner left in memfd fd if it carries every seal
 * (write, grow, shrink) and 1 byte to WK_IMAGE_MAX_BYTES; NULL otherwise. */
static uint8_t *wk_sealed_image(int fd, size_t *len) {
  int seals = fcntl(fd, F_GET_SEALS);
  int need = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
  struct stat st;
  if (seals < 0 || (seals & need) != need || fstat(fd, &st) != 0 || st.st_size <= 0 ||
      (size_t)st.st_size > WK_IMAGE_MAX_BYTES)
    return NULL;
  uint8_t *data = malloc((size_t)st.st_size);
  if (!data || pread(fd, data, (size_t)st.st_size, 0) != st.st_size) {
    free(data);
    return NULL;
  }
  *len = (size_t)st.st_size;
  return data;
}

/* Takes the candidate's image from memfd fd (sealed, wk_sealed_image) into the ring under
 * ev's key, replacing the oldest entry when full. */
static void wk_cand_image_put(const wk_eval *ev, int fd) {
  char key[65];
  size_t len = 0;
  if (!wk_cand_key(ev, key)) return;
  uint8_t *data = wk_sealed_image(fd, &len);
  if (!data) return;
  if (len > WK_CAND_IMAGE_MAX_BYTES) {
    free(data);
    return;
  }
  pthread_mutex_lock(&wk_images_mu);
  int have = 0;
  for (int i = 0; i < WK_CAND_IMAGES && !have; i++)
    have = wk_cand_images[i].data && !strcmp(wk_cand_images[i].key, key);
  if (!have) {
    wk_image *im = &wk_cand_images[wk_cand_next++ % WK_CAND_IMAGES];
    free(im->data);
    snprintf(im->key, sizeof im->key, "%s", key);
    im->data = data, im->len = len;
    data = NULL;
  }
  pthread_mutex_unlock(&wk_images_mu);
  free(data);
}

/* The build caches' part of rj (GPU backends): the baseline's image from its cache, else
 * a memfd for the runner to leave it in; the same for the candidate's (never for triton,
 * whose compile has its own cache). share[] gets the memfds; *img and *cimg the
 * malloc'd images given (the caller frees them after packing). */
static void wk_pack_images(wk_eval *ev, Kernelarena__V1__RunnerJob *rj, int *share, int *nshare,
                           uint8_t **img, uint8_t **cimg) {
  size_t len = 0;
  wk_image_get(ev, img, &len);
  if (*img) {
    rj->baseline_image.data = *img;
    rj->baseline_image.len = len;
  } else if ((ev->image_fd = memfd_create("ka-image", MFD_CLOEXEC | MFD_ALLOW_SEALING)) >= 0) {
    rj->has_image_fd = 1;
    rj->image_fd = *nshare;
    share[(*nshare)++] = ev->image_fd;
  }
  if (!strcmp(ev->t->language, "triton")) return;
  wk_cand_image_get(ev, cimg, &len);
  if (*cimg) {
    rj->candidate_image.data = *cimg;
    rj->candidate_image.len = len;
  } else if ((ev->cand_image_fd = memfd_create("ka-cand-image", MFD_CLOEXEC | MFD_ALLOW_SEALING)) >=
             0) {
    rj->has_cand_image_fd = 1;
    rj->cand_image_fd = *nshare;
    share[(*nshare)++] = ev->cand_image_fd;
  }
}

/* The runner's job, packed into *buf (caller frees); share[] gets every memfd the runner
 * inherits. */
static int wk_pack_runner_job(wk_eval *ev, uint8_t **buf, size_t *len, int *share, int *nshare) {
  const ka_task *t = ev->t;
  const Kernelarena__V1__Job *job = ev->job;
  Kernelarena__V1__RunnerJob rj = KERNELARENA__V1__RUNNER_JOB__INIT;
  rj.backend = ev->dev->backend;
  rj.device_index = ev->dev->index;
  rj.task_dir = t->dir;
  rj.task_version = t->version;
  rj.candidate = job->files;
  rj.n_candidate = job->n_files;
  rj.warmup = job->warmup;
  rj.reps = job->reps;
  rj.poison_seed = ka_mix64(ev->eval_secret, 0x706f69736f6eULL);
  rj.reproducible = job->reproducible;
  int reps = job->reps > 0 ? job->reps : 20;
  /* adaptive repetition on GPUs only: CPU timings on a shared host do not settle to 0.1%,
   * and the host backend's cache flush costs more than its calls */
  int host = !strcmp(ev->dev->backend, "host");
  rj.max_reps = ev->cfg->adaptive_reps > 1 && !host ? reps * ev->cfg->adaptive_reps : reps;
  rj.timed_budget_s = ev->cfg->timed_budget_s;
  rj.workdir = ev->workdir;
  rj.fds_passed = 1;
  /* the compile gets its own deadline, inside the evaluation's: half of it, at most
   * WK_COMPILE_S (a compile that never ends is a compile error, not a timeout) */
  double tmo = job->timeout_s > 0 ? job->timeout_s : t->timeout_s;
  rj.compile_timeout_s = tmo / 2 < WK_COMPILE_S ? tmo / 2 : WK_COMPILE_S;
  /* one call of the candidate holds the (shared) device at most this long; inside the
   * evaluation's deadline, which stays the limit of the rest */
  rj.call_limit_s = host && ev->cfg->host_slots <= 1 ? 0 : ev->cfg->call_limit_s;
  static __thread Kernelarena__V1__RunnerCase rcs[WK_MAX_CASES];
  static __thread Kernelarena__V1__RunnerCase *rcp[WK_MAX_CASES];
  static __thread int64_t params[WK_MAX_CASES][KA_MAX_PARAMS];
  static __thread int32_t in_fds[WK_MAX_CASES][KA_MAX_TENSORS],
      out_fds[WK_MAX_CASES][KA_MAX_TENSORS];
  *nshare = 0;
  for (int i = 0; i < ev->ncases; i++) {
    wk_case *wc = &ev->cs[i];
    kernelarena__v1__runner_case__init(&rcs[i]);
    rcp[i] = &rcs[i];
    rcs[i].name = wc->c->name;
    rcs[i].held_out = wc->c->held_out;
    for (int p = 0; p < t->nparams; p++) params[i][p] = wc->c->values[p];
    rcs[i].params = params[i];
    rcs[i].n_params = (size_t)t->nparams;
    rcs[i].input_seed = wc->e->seed; /* its inputs are ka_fill_input under this seed */
    rcs[i].has_input_seed = 1;
    for (int k = 0; k < t->ntensors; k++) {
      int in = t->tensors[k].role == KA_ROLE_INPUT;
      /* indices into the fds passed with the job (runner.h) */
      if (wc->t[k].fd < 0) { /* an input the runner draws itself (wk_prepare) */
        in_fds[i][k] = out_fds[i][k] = -1;
        continue;
      }
      in_fds[i][k] = in ? *nshare : -1;
      out_fds[i][k] = in ? -1 : *nshare;
      share[(*nshare)++] = wc->t[k].fd;
    }
    rcs[i].input_fds = in_fds[i];
    rcs[i].n_input_fds = (size_t)t->ntensors;
    rcs[i].output_fds = out_fds[i];
    rcs[i].n_output_fds = (size_t)t->ntensors;
  }
  rj.cases = rcp;
  rj.n_cases = (size_t)ev->ncases;
  /* GPU backends: the images of the build caches, else memfds for them */
  uint8_t *img = NULL, *cimg = NULL;
  if (!host) wk_pack_images(ev, &rj, share, nshare, &img, &cimg);
  *len = kernelarena__v1__runner_job__get_packed_size(&rj);
  *buf = malloc(*len + 1);
  if (*buf) kernelarena__v1__runner_job__pack(&rj, *buf);
  free(img);
  free(cimg);
  return *buf ? KA_OK : KA_ENOMEM;
}

/* Sends the (small) job and its memfds to the runner before anything else, so it is
 * not kept waiting: KA_RUNNER_FDS_PER_MSG fds per message, each with a slice of the
 * job's bytes, then the rest of the bytes, then shuts the socket down for writing.
 * KA_OK, or KA_EIO if the runner is gone (a warm runner that died). */
static int wk_send_job(wk_child *ch, const uint8_t *jbuf, size_t jlen, const int *fds, int nfds) {
  size_t off = 0;
  int sent = 0, rc = KA_OK;
  double until = ka_now_s() + 10;
  while ((off < jlen || sent < nfds) && rc == KA_OK) {
    int n = nfds - sent < KA_RUNNER_FDS_PER_MSG ? nfds - sent : KA_RUNNER_FDS_PER_MSG;
    size_t chunk = jlen - off;
    if (sent + n < nfds && chunk > 1) chunk = 1; /* more fds follow: one byte carries these */
    struct iovec iov = {.iov_base = (void *)(jbuf + off), .iov_len = chunk};
    union {
      struct cmsghdr h;
      char buf[CMSG_SPACE(sizeof(int) * KA_RUNNER_FDS_PER_MSG)];
    } cm;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n > 0) {
      memset(&cm, 0, sizeof cm);
      msg.msg_control = cm.buf;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
      struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
      memcpy(CMSG_DATA(c), fds + sent, sizeof(int) * (size_t)n);
    }
    ssize_t w = sendmsg(ch->in_fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EAGAIN || errno == EINTR) && ka_now_s() < until) {
      struct pollfd p = {ch->in_fd, POLLOUT, 0};
      poll(&p, 1, 100);
      continue;
    }
    if (w <= 0) {
      rc = KA_EIO;
      break;
    }
    off += (size_t)w;
    sent += n;
  }
  shutdown(ch->in_fd, SHUT_WR);
  close(ch->in_fd);
  ch->in_fd = -1;
  return rc;
}

/* ---- the pool of warm runners (issue 15): per GPU device, one runner started ahead
 * of its job with its device open (KA_RUNNER_PREOPEN_ENV), so a job does not wait for
 * process start, driver load and context creation. Each serves one evaluation and exits,
 * as every runner does; the next is started when a job is done. Host backend: none
 * (nothing to warm, and host limits are per job). */
#define WK_POOL_MAX 64
#define WK_POOL_CPU_S 3600.0 /* CPU limit of a warm runner (the job's deadline still holds) */
typedef struct wk_warm {
  char key[64]; /* "backend:index" */
  wk_child ch;
  char workdir[PATH_MAX];
  int used;
  double born; /* when it was started (ka_now_s): the oldest is taken first */
} wk_warm;
static wk_warm wk_pool[WK_POOL_MAX];
static pthread_mutex_t wk_pool_mu = PTHREAD_MUTEX_INITIALIZER;

static void wk_pool_key(const Kernelarena__V1__Device *dev, char *key, size_t len) {
  snprintf(key, len, "%s:%d", dev->backend, (int)dev->index);
}

/* Removes a warm runner that is no longer wanted or alive (kills and reaps it). */
static void wk_warm_discard(wk_warm *w) {
  kill(-w->ch.pid, SIGKILL);
  if (w->ch.runner > 0) kill(-w->ch.runner, SIGKILL);
  while (waitpid(w->ch.pid, NULL, 0) < 0 && errno == EINTR) {
  }
  wk_track(w->ch.pid, 0);
  wk_close_lock(&w->ch);
  int fds[] = {w->ch.in_fd, w->ch.out_fd, w->ch.err_fd, w->ch.st_fd};
  for (int i = 0; i < 4; i++)
    if (fds[i] >= 0) close(fds[i]);
  ka_rmtree(w->workdir);
  memset(w, 0, sizeof *w);
}

/* Takes the oldest live warm runner of dev: *ch and workdir become the caller's. The
 * oldest, because the one started at the end of the previous job may still be opening
 * its device (a CUDA context takes ~0.2 s), while an older one has long been ready. */
static int wk_pool_take(const Kernelarena__V1__Device *dev, wk_child *ch, char *workdir,
                        size_t wlen) {
  char key[64];
  wk_pool_key(dev, key, sizeof key);
  int got = 0;
  pthread_mutex_lock(&wk_pool_mu);
  while (!got) {
    wk_warm *best = NULL;
    for (int i = 0; i < WK_POOL_MAX; i++) {
      wk_warm *w = &wk_pool[i];
      if (w->used && !strcmp(w->key, key) && (!best || w->born < best->born)) best = w;
    }
    if (!best) break;
    if (waitpid(best->ch.pid, NULL, WNOHANG) != 0) { /* it died while waiting: reaped now */
      wk_warm_discard(best);
      continue;
    }
    *ch = best->ch;
    snprintf(workdir, wlen, "%s", best->workdir);
    memset(best, 0, sizeof *best);
    got = 1;
  }
  pthread_mutex_unlock(&wk_pool_mu);
  return got;
}

/* A runner's open descriptions of dev's device lock (devlock.h) in *m and *t (the
 * caller closes them once passed): KA_OK, or an error (no lock: the host backend, or the
 * files could not be made) with both -1. Defined with the device slots below. */
static int wk_lock_fds(const Kernelarena__V1__Device *dev, int *m, int *t);

/* Set by ka_pool_drain (gpuexec stopping): no runner is warmed after it. */
static int wk_pool_closed;

/* Starts one warm runner of dev (pool key key) into the free slot w (wk_pool_mu held).
 * It opens its device without the device lock (runner.h KA_RUNNER_PREOPEN_ENV). A
 * runner that cannot be started is not kept. */
static void wk_pool_start(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                          const char *key, wk_warm *w) {
  char err[256];
  snprintf(w->workdir, sizeof w->workdir, "%s/ka-eval-XXXXXX", cfg->tmp_dir);
  int ok = mkdtemp(w->workdir) != NULL;
  if (ok && wk_spawn(cfg, dev->backend, w->workdir, key, WK_POOL_CPU_S, &w->ch, err, sizeof err) !=
                KA_OK) {
    ka_rmtree(w->workdir);
    ok = 0;
  }
  if (ok) {
    snprintf(w->key, sizeof w->key, "%s", key);
    w->used = 1;
    w->born = ka_now_s();
  }
  if (!ok) memset(w, 0, sizeof *w);
}

void ka_pool_warm(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev) {
  if (!cfg->pool || !dev->backend || !strcmp(dev->backend, "host")) return;
  char key[64];
  wk_pool_key(dev, key, sizeof key);
  pthread_mutex_lock(&wk_pool_mu);
  if (wk_pool_closed) {
    pthread_mutex_unlock(&wk_pool_mu);
    return;
  }
  /* as many warm runners per device as evaluations may share it */
  int slot = -1, have = 0, want = cfg->jobs_per_device > 1 ? cfg->jobs_per_device : 1;
  for (int i = 0; i < WK_POOL_MAX; i++) {
    if (wk_pool[i].used && !strcmp(wk_pool[i].key, key)) have++;
    if (!wk_pool[i].used && slot < 0) slot = i;
  }
  if (have < want && slot >= 0) wk_pool_start(cfg, dev, key, &wk_pool[slot]);
  pthread_mutex_unlock(&wk_pool_mu);
}

/* Runners whose result is in but whose exit is still to be waited for (wk_collect's
 * early return, GPU backends): one per device at most; wk_drain waits for it before the
 * device's next job is sent, so that one context's teardown never overlaps another
 * evaluation's timed calls. */
static wk_warm wk_leaving[WK_POOL_MAX];

static void wk_finish(wk_child *ch) {
  double until = ka_now_s() + 10;
  int fds[2] = {ch->err_fd, ch->st_fd};
  for (int i = 0; i < 2; i++) {
    while (fds[i] >= 0 && ka_now_s() < until) {
      struct pollfd p = {fds[i], POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = read(fds[i], buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EINTR)) break;
    }
  }
  /* only the supervisor's group: it is our unreaped child, so its pid is still ours; the
   * runner's pid may be reused by now (its parent-death signal ended it with the
   * supervisor anyway) */
  kill(-ch->pid, SIGKILL);
  while (waitpid(ch->pid, NULL, 0) < 0 && errno == EINTR) {
  }
  wk_track(ch->pid, 0);
  wk_close_lock(ch);
  close(ch->out_fd), close(ch->err_fd), close(ch->st_fd);
}

/* Counts a runner of dev that is leaving (delta 1) or gone (-1); defined with the device
 * slots below (an evaluation again alone waits until none is leaving). */
static void wk_leaving_add(const Kernelarena__V1__Device *dev, int delta);

/* The number of dev's runners still tearing down; defined with the device slots below. */
static int wk_leaving_count(const Kernelarena__V1__Device *dev);

typedef struct wk_leaver {
  wk_child ch;
  double since;                       /* when its result was in (ka_now_s): the teardown's start */
  const Kernelarena__V1__Device *dev; /* the worker's, lives as long as the process */
  const ka_exec_config *cfg;          /* gpuexec's, likewise */
} wk_leaver;

static void *wk_finish_main(void *arg) {
  wk_leaver *l = arg;
  wk_finish(&l->ch);
  wk_leaving_add(l->dev, -1);
  /* how long a runner took to leave after its result (its context's teardown, off the
   * device lock but not off the driver): the figure issue 15's pool decisions need
   * (docs/benchmarks/2026-12-02-session18-h200.md) */
  if (l->cfg->verbose)
    fprintf(stderr, "gpuexec: %s:%d: a runner left %.1f ms after its result (teardown)\n",
            l->dev->backend, (int)l->dev->index, (ka_now_s() - l->since) * 1e3);
  /* the next runner opens its context now that this one's is gone (ka_evaluate_finish
   * leaves the warming to us while a runner is leaving); a full pool makes it a no-op */
  ka_pool_warm(l->cfg, l->dev);
  free(l);
  return NULL;
}

/* Waits for a runner whose result is in on a thread of its own (with the device lock,
 * the runner waited for its context's work under it before it let go: nobody else need
 * wait for its exit). */
static void wk_finish_detached(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                               const wk_child *ch) {
  wk_leaver *l = malloc(sizeof *l);
  pthread_t th;
  pthread_attr_t a;
  wk_leaving_add(dev, 1);
  if (l) l->ch = *ch, l->dev = dev, l->cfg = cfg, l->since = ka_now_s();
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  if (!l || pthread_create(&th, &a, wk_finish_main, l) != 0) {
    wk_child copy = *ch;
    wk_finish(&copy);
    wk_leaving_add(dev, -1);
    free(l);
  }
  pthread_attr_destroy(&a);
}

static void wk_leave(const Kernelarena__V1__Device *dev, const wk_child *ch) {
  char key[64];
  wk_pool_key(dev, key, sizeof key);
  pthread_mutex_lock(&wk_pool_mu);
  for (int i = 0; i < WK_POOL_MAX; i++)
    if (!wk_leaving[i].used) {
      wk_leaving[i].ch = *ch;
      snprintf(wk_leaving[i].key, sizeof wk_leaving[i].key, "%s", key);
      wk_leaving[i].used = 1;
      pthread_mutex_unlock(&wk_pool_mu);
      return;
    }
  pthread_mutex_unlock(&wk_pool_mu);
  wk_child c = *ch;
  wk_finish(&c); /* no slot: wait now */
}

static void wk_drain(const Kernelarena__V1__Device *dev) {
  char key[64];
  wk_pool_key(dev, key, sizeof key);
  for (;;) {
    wk_child c;
    int got = 0;
    pthread_mutex_lock(&wk_pool_mu);
    for (int i = 0; i < WK_POOL_MAX && !got; i++)
      if (wk_leaving[i].used && !strcmp(wk_leaving[i].key, key)) {
        c = wk_leaving[i].ch;
        memset(&wk_leaving[i], 0, sizeof wk_leaving[i]);
        got = 1;
      }
    pthread_mutex_unlock(&wk_pool_mu);
    if (!got) return;
    wk_finish(&c);
  }
}

void ka_pool_drain(void) {
  pthread_mutex_lock(&wk_pool_mu);
  wk_pool_closed = 1; /* a teardown's thread that ends after this warms nothing */
  for (int i = 0; i < WK_POOL_MAX; i++)
    if (wk_pool[i].used) wk_warm_discard(&wk_pool[i]);
  pthread_mutex_unlock(&wk_pool_mu);
}

/* The evaluation's runner, with the job and its memfds sent: the device's warm runner
 * if it has a live one, else one started now (in a new workdir); a warm runner that
 * cannot take the job is discarded and a fresh one started. KA_OK, or INFRA_ERROR in res. */
static int wk_runner_send(wk_eval *ev, wk_child *ch, uint8_t *jbuf, size_t jlen, const int *allfds,
                          int nall, int go[2], int lock_at, int trial_at,
                          Kernelarena__V1__Result *res, char *err, size_t errlen);

static int wk_runner(wk_eval *ev, wk_child *ch, uint8_t *jbuf, size_t jlen, const int *fds,
                     int nfds, int trial_w, Kernelarena__V1__Result *res, char *err,
                     size_t errlen) {
  /* the job goes out at once; the runner compiles meanwhile, and starts its cases only
   * once the device's previous runner is gone (the "go" byte after wk_drain), so that one
   * context's teardown never overlaps another evaluation's timed calls */
  /* with the device lock, the runner itself keeps its device work off others' timed
   * calls (its teardown included), and no go byte is needed */
  int go[2] = {-1, -1}, lk[2] = {-1, -1};
  int gpu = strcmp(ev->dev->backend, "host") != 0;
  /* the host backend shares its "device" only when told to (--jobs-per-device) */
  int locked = (gpu || ev->cfg->host_slots > 1) && wk_lock_fds(ev->dev, &lk[0], &lk[1]) == KA_OK;
  if (gpu && !locked && pipe2(go, O_CLOEXEC) != 0) go[0] = go[1] = -1;
  int allfds[WK_PASS_MAX];
  memcpy(allfds, fds, sizeof(int) * (size_t)nfds);
  int nall = nfds;
  if (go[0] >= 0) allfds[nall++] = go[0];
  if (locked) allfds[nall++] = lk[0], allfds[nall++] = lk[1];
  int trial_at = trial_w >= 0 ? nall : -1;
  if (trial_w >= 0) allfds[nall++] = trial_w;
  if (go[0] < 0 && !locked) wk_drain(ev->dev);
  int rc = wk_runner_send(ev, ch, jbuf, jlen, allfds, nall, go, locked ? nfds : -1, trial_at, res,
                          err, errlen);
  /* kept until the runner is reaped (wk_finish): see wk_child; no runner: closed now */
  if (locked && rc == KA_OK) ch->lock_m = lk[0], ch->lock_t = lk[1];
  if (locked && rc != KA_OK) close(lk[0]), close(lk[1]);
  ev->locked = locked;
  return rc;
}

/* wk_runner's attempts: a warm runner, else (or if it is gone) a fresh one, gets the job
 * with allfds; go is the go byte's pipe ({-1, -1}: none), lock_at the index of the device
 * lock's two fds in allfds (-1: none), trial_at the trial pipe's (-1: none), the last. */
static int wk_runner_send(wk_eval *ev, wk_child *ch, uint8_t *jbuf, size_t jlen, const int *allfds,
                          int nall, int go[2], int lock_at, int trial_at,
                          Kernelarena__V1__Result *res, char *err, size_t errlen) {
  int nfds = nall - (go[0] >= 0) - (lock_at >= 0 ? 2 : 0) - (trial_at >= 0);
  for (int attempt = 0; attempt < 2; attempt++) {
    int warm = attempt == 0 && wk_pool_take(ev->dev, ch, ev->workdir, sizeof ev->workdir);
    if (!warm) {
      snprintf(ev->workdir, sizeof ev->workdir, "%s/ka-eval-XXXXXX", ev->cfg->tmp_dir);
      if (!mkdtemp(ev->workdir)) {
        ev->workdir[0] = '\0';
        wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR, "mkdtemp: %s", strerror(errno));
        if (go[0] >= 0) close(go[0]), close(go[1]);
        return KA_ESYS;
      }
      /* GPU runners: the warm runners' CPU limit, so that a verdict never depends on the
       * pool (host-path draws use every core); host runners: the evaluation's deadline */
      double cpu = strcmp(ev->dev->backend, "host") ? WK_POOL_CPU_S : ev->timeout;
      int rc = wk_spawn(ev->cfg, ev->dev->backend, ev->workdir, NULL, cpu, ch, err, errlen);
      if (rc) {
        wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR, "starting the runner: %s", err);
        if (go[0] >= 0) close(go[0]), close(go[1]);
        return rc;
      }
    }
    /* the job names its workdir: the warm runner's */
    Kernelarena__V1__RunnerJob *rj = kernelarena__v1__runner_job__unpack(NULL, jlen, jbuf);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (rj) {
      rj->workdir = ev->workdir;
      rj->has_go_fd = go[0] >= 0;
      rj->go_fd = nfds;
      rj->has_lock_fds = lock_at >= 0;
      rj->lock_fd = lock_at;
      rj->turn_fd = lock_at + 1;
      rj->has_trial_fd = trial_at >= 0;
      rj->trial_fd = trial_at;
      len = kernelarena__v1__runner_job__get_packed_size(rj);
      buf = malloc(len + 1);
      if (buf) kernelarena__v1__runner_job__pack(rj, buf);
      rj->workdir = NULL; /* not ours to free */
      kernelarena__v1__runner_job__free_unpacked(rj, NULL);
    }
    if (!buf) {
      wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR, "out of host memory");
      if (go[0] >= 0) close(go[0]), close(go[1]);
      return KA_ENOMEM;
    }
    int rc = wk_send_job(ch, buf, len, allfds, nall);
    free(buf);
    if (rc == KA_OK) {
      if (go[0] >= 0) {
        close(go[0]);
        wk_drain(ev->dev);
        if (write(go[1], "g", 1) != 1) { /* the runner is gone: its verdict says so */
        }
        close(go[1]);
      }
      return KA_OK;
    }
    /* the runner is gone before it had the job: never the submission's */
    wk_warm w = {.ch = *ch, .used = 1};
    snprintf(w.workdir, sizeof w.workdir, "%s", ev->workdir);
    wk_warm_discard(&w);
    ev->workdir[0] = '\0';
    if (!warm) {
      wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR, "the runner exited before its job");
      if (go[0] >= 0) close(go[0]), close(go[1]);
      return KA_EIO;
    }
  }
  if (go[0] >= 0) close(go[0]), close(go[1]);
  return KA_EIO;
}

/* Turns the runner's result (or its absence) into the verdict in res. */
static void wk_verdict(wk_eval *ev, int rc, const ka_sb *result, int wstatus, ka_sb *log,
                       Kernelarena__V1__Result *res, char *err, size_t errlen) {
  const ka_task *t = ev->t;
  wk_case *cs = ev->cs;
  int ncases = ev->ncases;
  double timeout = ev->timeout;
  Kernelarena__V1__RunnerResult *rr = NULL;
  if (rc == KA_ETIMEDOUT) {
    wk_fail(res, KERNELARENA__V1__STATUS__TIMEOUT,
            "evaluation exceeded its %.0f s limit; the runner's process group was killed", timeout);
  } else if (result->len > 0 && !(rr = kernelarena__v1__runner_result__unpack(
                                      NULL, result->len, (uint8_t *)result->s))) {
    /* never a score: the verdict is missing (docs/integrity.md) */
    wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR,
            "the runner's result is malformed (%zu bytes that do not decode)", result->len);
  } else if (rr && !wk_result_valid(rr, ncases, err, errlen)) {
    wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR, "the runner's result is malformed: %s", err);
  } else if (rr) {
    res->compile_log = wk_strdup(rr->compile_log);
    res->compile_s = rr->compile_s;
    if (rr->device) {
      ka_device_free(res->device);
      res->device = ka_device_dup(rr->device);
    }
    if (rr->telemetry && rr->telemetry->valid) {
      res->telemetry = malloc(sizeof *res->telemetry);
      kernelarena__v1__telemetry__init(res->telemetry);
      *res->telemetry = *rr->telemetry;
      res->telemetry->base.unknown_fields = NULL;
      res->telemetry->base.n_unknown_fields = 0;
      res->telemetry->device_name = wk_strdup(rr->telemetry->device_name);
    }
    if (rr->runtime_log && *rr->runtime_log) ka_sb_puts(log, rr->runtime_log);
    /* An INCORRECT from the runner (an input changed, a timed output differs) after
     * correctness trials whose outputs it delivered: judge those against the
     * reference first, so that a plainly wrong output is reported as such, with its
     * first mismatch */
    int judged = 0;
    if (rr->status == KERNELARENA__V1__STATUS__INCORRECT) {
      int n = 0;
      while (n < (int)rr->n_cases && n < ncases && rr->cases[n]->trial_outputs) n++;
      Kernelarena__V1__Result tmp = KERNELARENA__V1__RESULT__INIT;
      if (n > 0) wk_judge(t, cs, n, rr, &tmp);
      if (n > 0 && tmp.status == KERNELARENA__V1__STATUS__INCORRECT) {
        wk_fail(res, KERNELARENA__V1__STATUS__INCORRECT, "%s", tmp.message);
        res->cases = tmp.cases;
        res->n_cases = tmp.n_cases;
        tmp.cases = NULL;
        tmp.n_cases = 0;
        judged = 1;
      }
      ka_result_clear(&tmp);
    }
    if (judged) {
      /* reported above */
    } else if (rr->status == KERNELARENA__V1__STATUS__OK) {
      wk_judge(t, cs, ncases, rr, res);
      wk_baseline_check(t, ev->dev, res);
    } else {
      wk_fail(res, rr->status, "%s", rr->message && *rr->message ? rr->message : "failed");
      /* keep the per-case messages of a failing run (e.g. illegal address in case 2) */
      res->cases = calloc(rr->n_cases + 1, sizeof *res->cases);
      for (size_t i = 0; i < rr->n_cases; i++) {
        Kernelarena__V1__CaseResult *cr = malloc(sizeof *cr);
        kernelarena__v1__case_result__init(cr);
        cr->name = wk_strdup(rr->cases[i]->name);
        cr->message = wk_strdup(rr->cases[i]->message);
        cr->held_out = rr->cases[i]->held_out;
        /* a FLAGGED case keeps its timings and the reason, for the record */
        KA_CASE_TIMINGS_COPY(cr, rr->cases[i]);
        if (rr->cases[i]->flag && *rr->cases[i]->flag) cr->flag = wk_strdup(rr->cases[i]->flag);
        res->cases[res->n_cases++] = cr;
      }
    }
  } else if (WIFSIGNALED(wstatus) &&
             (WTERMSIG(wstatus) == SIGKILL || WTERMSIG(wstatus) == SIGTERM)) {
    /* before the deadline nothing of ours sends these, and submitted code may signal only
     * its own process (seccomp, docs/sandbox.md): an operator or the OOM killer did (module
     * processes are the OOM killer's first choice, oom_score_adj 1000), never a score */
    wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR,
            "the evaluation process was killed from outside (signal %d, %s) before its "
            "deadline; the step was not evaluated",
            WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
  } else if (WIFSIGNALED(wstatus)) {
    int sig = WTERMSIG(wstatus);
    wk_fail(res, KERNELARENA__V1__STATUS__RUNTIME_ERROR,
            "the evaluation process was terminated by signal %d (%s)%s", sig, strsignal(sig),
            sig == SIGXCPU   ? ": CPU time limit"
            : sig == SIGXFSZ ? ": file size limit"
            : sig == SIGSYS  ? ": a system call the sandbox forbids"
                             : "");
  } else {
    /* submitted code does not run in the runner's process: a runner that exits without
     * a verdict is our fault, never a score (docs/integrity.md) */
    wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR,
            "the evaluation process exited with code %d without a result",
            WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
  }
  if (rr) kernelarena__v1__runner_result__free_unpacked(rr, NULL);
}

/* ---- judging while the runner times ------------------------------------------------
 * The runner writes a case's index on the trial pipe once that case's trial outputs are
 * in their memfds for good (RunnerJob.trial_fd: it has unmapped them, so that no kernel
 * reaches them through the runner's address space even with HMM or ATS, and submitted
 * code never runs in a runner's process; the host backend's module process never gets
 * these memfds). A thread of ours compares them with the
 * reference meanwhile, so that gelu's ~55 ms of host comparison leave the step's
 * critical path; a case it did not get to is compared by wk_judge at the end, as before.
 * Which case comes when changes nothing but time: the comparison of a case is the same
 * whenever it is made, and only the runner's result decides whether it counts. */
typedef struct wk_early {
  const ka_task *t;
  wk_case *cs;
  int ncases;
  int trial_r;  /* the trial pipe's read end (non-blocking) */
  int stop[2];  /* a pipe: the main thread's "the runner is done" */
  int compared; /* cases this thread compared */
  pthread_t th;
  int started;
} wk_early;

/* Compares the cases whose index the runner wrote in buf[0..n). */
static void wk_early_take(wk_early *e, const unsigned char *buf, ssize_t n) {
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] < e->ncases && !e->cs[buf[i]].compared) {
      wk_compare_case(e->t, &e->cs[buf[i]]);
      e->compared++;
    }
}

/* The thread: until the trial pipe's end (the runner is gone) or the stop byte, after
 * which what is left on the pipe is taken too. */
static void *wk_early_main(void *arg) {
  wk_early *e = arg;
  /* at the lowest priority, as the references: the runner's host thread, whose wall
   * clock is checked against the device timer, gets its CPU first (the comparison's own
   * threads inherit this) */
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
  unsigned char buf[WK_MAX_CASES];
  for (;;) {
    struct pollfd p[2] = {{e->trial_r, POLLIN, 0}, {e->stop[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    ssize_t n = read(e->trial_r, buf, sizeof buf);
    if (n > 0) {
      wk_early_take(e, buf, n);
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) break; /* the runner is gone */
    if (p[1].revents) break;
  }
  return NULL;
}

/* Starts the thread on the trial pipe's read end trial_r (taken: closed by
 * wk_early_end). Without a thread, wk_judge compares every case at the end. */
static void wk_early_start(wk_early *e, const ka_task *t, wk_case *cs, int ncases, int trial_r) {
  *e = (wk_early){.t = t, .cs = cs, .ncases = ncases, .trial_r = trial_r, .stop = {-1, -1}};
  if (trial_r < 0) return;
  if (fcntl(trial_r, F_SETFL, O_NONBLOCK) == 0 && pipe2(e->stop, O_CLOEXEC) == 0)
    e->started = pthread_create(&e->th, NULL, wk_early_main, e) == 0;
}

/* Stops the thread (the runner's result is in) and joins it; closes the pipes. */
static void wk_early_end(wk_early *e) {
  if (e->started) {
    if (write(e->stop[1], "s", 1) != 1) { /* a full or broken pipe: poll sees it anyway */
    }
    pthread_join(e->th, NULL);
  }
  int fds[3] = {e->trial_r, e->stop[0], e->stop[1]};
  for (int i = 0; i < 3; i++)
    if (fds[i] >= 0) close(fds[i]);
  e->trial_r = e->stop[0] = e->stop[1] = -1;
  e->started = 0;
}

int ka_prefetch(const ka_exec_config *cfg, const Kernelarena__V1__Job *job, double *ms, char *err,
                size_t errlen) {
  double t0 = ka_now_s();
  wk_eval *ev = calloc(1, sizeof *ev);
  if (!ev) return KA_ENOMEM;
  Kernelarena__V1__Result res = KERNELARENA__V1__RESULT__INIT;
  ev->cfg = cfg, ev->job = job;
  const ka_task *ct = ka_registry_find(cfg->tasks, job->task_id);
  int rc = !ct || ct->command ? KA_EINVAL : wk_check_job(ev, &res, err, errlen);
  if (rc == KA_OK) wk_seeds(ev); /* the step's derivation: the same cache entries */
  for (int i = 0; rc == KA_OK && i < ev->t->ncases + ev->t->nheld; i++) {
    if (ev->t->cases[i].held_out && !job->include_held_out) continue;
    /* a case at a time, none while a host evaluation's runner works (prefetch.c) */
    if ((rc = ka_prefetch_unit_begin()) != KA_OK) {
      snprintf(err, errlen, "dropped: it waited past its age bound");
      break;
    }
    ka_refentry *e = NULL;
    rc = ka_ref_acquire_prefetch(cfg->ref_cache, ev->t, i, ev->in_seed, &e, err, errlen);
    if (rc == KA_OK) rc = ka_ref_reference(e, ev->ref, err, errlen);
    if (e) ka_ref_release(cfg->ref_cache, e);
    ka_prefetch_unit_end();
  }
  if (rc && res.message && !err[0]) snprintf(err, errlen, "%s", res.message);
  ka_result_clear(&res);
  free(ev);
  if (ms) *ms = (ka_now_s() - t0) * 1e3;
  return rc;
}

/* A command task's evaluation (command.c): its own commands, which hold the device's
 * lock as a runner does (devlock.h); on the host backend no prefetch runs beside them
 * (they time on the CPU). Fills res. */
static void wk_evaluate_command(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                                const Kernelarena__V1__Job *job, const ka_task *ct,
                                Kernelarena__V1__Result *res) {
  ka_devlock lock = {.m = -1, .t = -1};
  wk_lock_fds(dev, &lock.m, &lock.t);
  int host = !strcmp(dev->backend, "host");
  if (host) ka_prefetch_pause();
  ka_command_evaluate(cfg, dev, job, ct, &lock, res);
  if (host) ka_prefetch_resume();
  ka_devlock_release(&lock);
  if (lock.m >= 0) close(lock.m), close(lock.t);
}

/* With ev's runner started (wk_runner returned KA_OK): computes the references here, in the trusted
 * process, while the runner works (once per cache entry); compares each case's trial outputs as the
 * runner announces them on trial_r (wk_early); collects the runner's result until ev->timeout after
 * the references are in; judges (wk_verdict, the sandbox's report); gives the build caches their
 * images; and writes the phase line and the logs into res. *hold: a host runner's prefetch pause,
 * ended here once the runner is done. t_prep: the preparation's seconds; t_run0: when the
 * runner started (ka_now_s). */
static void wk_await_runner(wk_eval *ev, wk_child *ch, const uint8_t *jbuf, int trial_r, int *hold,
                            double t_prep, double t_run0, Kernelarena__V1__Result *res, char *err,
                            size_t errlen) {
  const ka_task *t = ev->t;
  int gpu = strcmp(ev->dev->backend, "host") != 0;
  double t_refs = ka_now_s();
  char ref_err[320] = "";
  int ref_rc = wk_references(t, ev->ref, ev->cs, ev->ncases, ref_err, sizeof ref_err);
  t_refs = ka_now_s() - t_refs;
  /* the runner's deadline starts once the references are in: their time (a new seed's
   * draw on a loaded host) is ours, and a deadline from before them scored an honest
   * step whose result was already waiting TIMEOUT (tests/slow_reference_test.sh). At
   * most twice the timeout from the runner's start, so a step stays bounded (review
   * 2026-12-04), but always WK_REFS_GRACE_S after the references for a result that
   * is waiting. */
  double now = ka_now_s(), deadline = now + ev->timeout;
  if (deadline > t_run0 + 2 * ev->timeout) deadline = t_run0 + 2 * ev->timeout;
  if (deadline < now + WK_REFS_GRACE_S) deadline = now + WK_REFS_GRACE_S;
  wk_early early;
  wk_early_start(&early, t, ev->cs, ref_rc == KA_OK ? ev->ncases : 0, trial_r);
  ka_sb result = {0}, log = {0};
  int wstatus = 0;
  size_t dropped = 0;
  /* GPU backends: no submitted code runs on the host, so once the runner's result is
   * in nothing of the runner's exit changes the verdict */
  int left = 0;
  int rc = wk_collect(ch, jbuf, 0, deadline, &result, &log, &wstatus, &dropped, gpu ? &left : NULL);
  if (*hold) ka_prefetch_resume(), *hold = 0;
  wk_early_end(&early);
  if (left && ev->locked)
    wk_finish_detached(ev->cfg, ev->dev, ch);
  else if (left)
    wk_leave(ev->dev, ch);
  double t_run = ka_now_s() - t_run0, t_judge = ka_now_s();
  if (ref_rc != KA_OK) {
    wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR, "the reference failed: %s", ref_err);
  } else {
    wk_verdict(ev, rc, &result, wstatus, &log, res, err, errlen);
    wk_sandbox_verdict(&ch->report, res, &log);
  }
  /* the build cache takes the baseline's image of an evaluation with a verdict */
  if (ev->image_fd >= 0 && res->status != KERNELARENA__V1__STATUS__INFRA_ERROR)
    wk_image_put(ev, ev->image_fd);
  if (ev->cand_image_fd >= 0 && res->status != KERNELARENA__V1__STATUS__INFRA_ERROR)
    wk_cand_image_put(ev, ev->cand_image_fd);
  ka_sb_printf(&log,
               "[kernelarena] executor: inputs %.1f ms, runner (references alongside) %.1f "
               "ms, of which references %.1f ms, judging %.1f ms (%d of %d cases compared "
               "while the runner timed)\n",
               t_prep * 1e3, t_run * 1e3, t_refs * 1e3, (ka_now_s() - t_judge) * 1e3,
               early.compared, ev->ncases);
  if (dropped)
    ka_sb_printf(&log, "\n[kernelarena] output truncated: %zu more bytes were dropped\n", dropped);
  res->runtime_log = ka_sb_take(&log);
  wk_truncate(&res->compile_log, WK_LOG_MAX);
  ka_sb_free(&result);
}

/* One evaluation of job on dev into res: a command task's commands, or the job checked,
 * its cases prepared (inputs, reference entries), a runner started with the packed job,
 * and its result awaited and judged (wk_await_runner). What is left (buffers, folder)
 * goes to *left_over for ka_evaluate_finish, after the result is sent. */
static void wk_evaluate_once(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                             const Kernelarena__V1__Job *job, Kernelarena__V1__Result *res,
                             wk_eval **left_over) {
  double t0 = ka_now_s();
  *left_over = NULL;
  char err[2048] = "";
  res->job_id = wk_strdup(job->job_id);
  res->device = ka_device_dup(dev);
  const ka_task *ct = ka_registry_find(cfg->tasks, job->task_id);
  if (ct && ct->command) {
    wk_evaluate_command(cfg, dev, job, ct, res);
    return;
  }
  wk_eval *ev = calloc(1, sizeof *ev);
  if (!ev) {
    wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR, "out of host memory");
    return;
  }
  ev->cfg = cfg, ev->job = job, ev->dev = dev;
  ev->image_fd = -1;
  ev->cand_image_fd = -1;
  if (wk_check_job(ev, res, err, sizeof err)) {
    free(ev);
    return;
  }
  wk_seeds(ev);
  uint8_t *jbuf = NULL;
  size_t jlen = 0;
  int share[WK_SHARE_MAX], nshare = 0;
  int rc = wk_prepare(ev, res, err, sizeof err);
  if (rc == KA_OK && (rc = wk_pack_runner_job(ev, &jbuf, &jlen, share, &nshare)) != KA_OK)
    wk_fail(res, KERNELARENA__V1__STATUS__INFRA_ERROR, "out of host memory");
  ev->timeout = job->timeout_s > 0 ? job->timeout_s : ev->t->timeout_s;
  wk_child ch = {
      .pid = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1, .st_fd = -1, .lock_m = -1, .lock_t = -1};
  double t_prep = ka_now_s() - t0, t_run0 = ka_now_s();
  /* the trial pipe (wk_early) */
  int gpu = strcmp(dev->backend, "host") != 0, trial[2] = {-1, -1};
  if (rc == KA_OK && pipe2(trial, O_CLOEXEC) != 0) trial[0] = trial[1] = -1;
  int hold = !gpu && rc == KA_OK; /* a host runner's calls: no prefetch beside them */
  if (hold) ka_prefetch_pause();
  if (rc == KA_OK)
    rc = wk_runner(ev, &ch, jbuf, jlen, share, nshare, trial[1], res, err, sizeof err);
  if (trial[1] >= 0) close(trial[1]); /* the runner has its own */
  if (rc != KA_OK && trial[0] >= 0) close(trial[0]);
  if (rc == KA_OK)
    wk_await_runner(ev, &ch, jbuf, trial[0], &hold, t_prep, t_run0, res, err, sizeof err);
  if (hold) ka_prefetch_resume(); /* the runner did not start */
  free(jbuf);
  res->wall_s = ka_now_s() - t0;
  /* what is left (its buffers, its folder; the next runner to warm) is for after the
   * result has been sent: ka_evaluate_finish. The job is the caller's and freed by then. */
  ev->job = NULL;
  *left_over = ev;
}

/* Frees what an evaluation kept until its result was sent: the build caches' memfds,
 * the cases' buffers (their reference-cache entries released), the evaluation folder. */
static void wk_eval_release(wk_eval *ev) {
  if (!ev) return;
  if (ev->image_fd >= 0) close(ev->image_fd);
  if (ev->cand_image_fd >= 0) close(ev->cand_image_fd);
  wk_free_cases(ev->cfg, ev->t, ev->cs, ev->prepared);
  if (ev->workdir[0]) ka_rmtree(ev->workdir);
  free(ev);
}

/* The calling worker thread's last evaluation, kept for ka_evaluate_finish. */
static __thread wk_eval *wk_left_over;
static __thread const Kernelarena__V1__Device *wk_left_dev;

void ka_evaluate_finish(const ka_exec_config *cfg) {
  if (!wk_left_dev) return;
  wk_eval_release(wk_left_over);
  wk_left_over = NULL;
  /* the next job's runner, once the leaving one is gone (else wk_finish_main warms it):
   * with both under the device lock, a context's creation and another's teardown did
   * not overlap usefully. H200, 2026-12-02 (docs/benchmarks/
   * 2026-12-02-session18-h200.md): warmed after the teardown the step took 1.17x base
   * (522.7 ms against 445.6), warmed at once 1.26x (548.9 against 435.1). Off the lock
   * (session 19) warming at once is not measured yet. */
  if (!wk_leaving_count(wk_left_dev)) ka_pool_warm(cfg, wk_left_dev);
  wk_left_dev = NULL;
}

/* ---- several evaluations per device (issue 15 item 3) ------------------------------
 * cfg->jobs_per_device workers share a device; their runners keep timed calls alone on
 * it through the device lock (devlock.h). What one evaluation can do to another beyond
 * that (take the device memory the other needs, load the host while the other's wall
 * clock is checked) shows as OOM, FLAGGED or INFRA_ERROR in the other: an evaluation
 * that ends so while it shared the device is evaluated again alone (a writer's hold of
 * the device's rwlock: no other evaluation runs meanwhile), and that verdict stands. */
typedef struct wk_devslot {
  char key[64];
  pthread_rwlock_t rw;
  int m, t; /* the device lock's files (-1: none could be made) */
  int inflight;
  unsigned long starts; /* evaluations started on the device, ever */
  int leaving;          /* runners whose result is in, still tearing down (wk_finish_detached) */
} wk_devslot;
static pthread_cond_t wk_devs_cv = PTHREAD_COND_INITIALIZER; /* a slot's leaving reached 0 */
static wk_devslot wk_devs[WK_POOL_MAX];
static int wk_ndevs;
static pthread_mutex_t wk_devs_mu = PTHREAD_MUTEX_INITIALIZER;

/* The slot of dev, made at its first use (NULL when the table is full). */
static wk_devslot *wk_devslot_of(const Kernelarena__V1__Device *dev) {
  char key[64];
  wk_pool_key(dev, key, sizeof key);
  pthread_mutex_lock(&wk_devs_mu);
  wk_devslot *d = NULL;
  for (int i = 0; i < wk_ndevs && !d; i++)
    if (!strcmp(wk_devs[i].key, key)) d = &wk_devs[i];
  if (!d && wk_ndevs < WK_POOL_MAX) {
    d = &wk_devs[wk_ndevs++];
    snprintf(d->key, sizeof d->key, "%s", key);
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    /* a waiting re-evaluation goes before new evaluations (glibc) */
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&d->rw, &a);
    pthread_rwlockattr_destroy(&a);
    char err[128];
    if (ka_devlock_create(&d->m, &d->t, err, sizeof err) != KA_OK) {
      fprintf(stderr, "gpuexec: %s: %s (timed calls are not kept alone)\n", key, err);
      d->m = d->t = -1;
    }
  }
  pthread_mutex_unlock(&wk_devs_mu);
  return d;
}

static int wk_lock_fds(const Kernelarena__V1__Device *dev, int *m, int *t) {
  *m = *t = -1;
  wk_devslot *d = wk_devslot_of(dev);
  if (!d || d->m < 0) return KA_ENOENT;
  char err[128];
  return ka_devlock_reopen(d->m, d->t, m, t, err, sizeof err);
}

/* The number of dev's runners still tearing down (wk_finish_detached). */
static int wk_leaving_count(const Kernelarena__V1__Device *dev) {
  char key[64];
  wk_pool_key(dev, key, sizeof key);
  int n = 0;
  pthread_mutex_lock(&wk_devs_mu); /* a lookup: no slot is made for a device without one */
  for (int i = 0; i < wk_ndevs; i++)
    if (!strcmp(wk_devs[i].key, key)) n = wk_devs[i].leaving;
  pthread_mutex_unlock(&wk_devs_mu);
  return n;
}

static void wk_leaving_add(const Kernelarena__V1__Device *dev, int delta) {
  wk_devslot *d = wk_devslot_of(dev);
  if (!d) return;
  pthread_mutex_lock(&wk_devs_mu);
  d->leaving += delta;
  if (d->leaving <= 0) pthread_cond_broadcast(&wk_devs_cv);
  pthread_mutex_unlock(&wk_devs_mu);
}

/* Waits (at most WK_LEAVE_WAIT_S) until no runner of d is still tearing down, so that an
 * evaluation again alone finds the device as no other evaluation left it. */
#define WK_LEAVE_WAIT_S 15
static void wk_wait_left(wk_devslot *d) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += WK_LEAVE_WAIT_S;
  pthread_mutex_lock(&wk_devs_mu);
  while (d->leaving > 0 && pthread_cond_timedwait(&wk_devs_cv, &wk_devs_mu, &until) == 0) {
  }
  pthread_mutex_unlock(&wk_devs_mu);
}

/* Whether res is FLAGGED for KA_FLAG_WALL or KA_FLAG_HISTORY (runner.h) alone: faults of
 * the measurement that other work on the machine can cause (a host thread delayed, one
 * module's calls stalled by a scheduler tick and the other's not). */
static int wk_measurement_fault(const Kernelarena__V1__Result *res) {
  if (res->status != KERNELARENA__V1__STATUS__FLAGGED) return 0;
  for (size_t i = 0; i < res->n_cases; i++) {
    const char *f = res->cases[i]->flag;
    if (f && *f && !strstr(f, KA_FLAG_WALL) && !strstr(f, KA_FLAG_HISTORY)) return 0;
  }
  return 1;
}

/* Whether the verdict res of an evaluation that shared its device may be the others'
 * doing: device memory (OOM), a deadline that included waits for the device and
 * time-sliced calls (TIMEOUT), our own faults (INFRA_ERROR), and the FLAGGED reasons
 * of KA_FLAG_WALL and KA_FLAG_HISTORY (runner.h) only. */
static int wk_neighbour_verdict(const Kernelarena__V1__Result *res) {
  Kernelarena__V1__Status st = res->status;
  if (st == KERNELARENA__V1__STATUS__OOM || st == KERNELARENA__V1__STATUS__TIMEOUT ||
      st == KERNELARENA__V1__STATUS__INFRA_ERROR)
    return 1;
  return wk_measurement_fault(res);
}

/* The enum name of st ("OOM"), from the generated descriptor. */
static const char *wk_status_name(Kernelarena__V1__Status st) {
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&kernelarena__v1__status__descriptor, (int)st);
  return v ? v->name : "?";
}

/* Prefixes res->runtime_log with why the evaluation was run again (alone among others
 * in flight, or, others 0, once more on a device of one slot). */
static void wk_note_alone(Kernelarena__V1__Result *res, Kernelarena__V1__Status first,
                          const char *why, int others) {
  ka_sb sb = {0};
  if (others > 0)
    ka_sb_printf(&sb,
                 "[kernelarena] evaluated again alone on the device: the first evaluation, "
                 "with up to %d other(s) in flight there, ended %s (%.200s)\n",
                 others, wk_status_name(first), why && *why ? why : "no message");
  else
    ka_sb_printf(&sb, "[kernelarena] measured again: the first evaluation ended %s (%.200s)\n",
                 wk_status_name(first), why && *why ? why : "no message");
  if (res->runtime_log) ka_sb_puts(&sb, res->runtime_log);
  wk_free_str(res->runtime_log);
  res->runtime_log = ka_sb_take(&sb);
}

void ka_evaluate(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                 const Kernelarena__V1__Job *job, Kernelarena__V1__Result *res) {
  ka_evaluate_finish(cfg); /* a caller that did not: the last evaluation's leftovers */
  wk_left_dev = dev;
  int host = dev->backend && !strcmp(dev->backend, "host");
  wk_devslot *d = (host ? cfg->host_slots : cfg->jobs_per_device) > 1 ? wk_devslot_of(dev) : NULL;
  if (!d) {
    wk_evaluate_once(cfg, dev, job, res, &wk_left_over);
    if (!wk_measurement_fault(res)) return;
    wk_eval_release(wk_left_over); /* before it runs again, on a warm runner */
    wk_left_over = NULL;
    ka_pool_warm(cfg, dev);
    /* one slot: a measurement fault is measured once more (a load on the machine that
     * passed); a submission that causes it causes it again, and keeps the verdict */
    Kernelarena__V1__Status first = res->status;
    double wall = res->wall_s;
    char *why = wk_strdup(res->message);
    ka_result_clear(res);
    wk_evaluate_once(cfg, dev, job, res, &wk_left_over);
    res->wall_s += wall;
    wk_note_alone(res, first, why, 0);
    free(why);
    return;
  }
  pthread_rwlock_rdlock(&d->rw);
  pthread_mutex_lock(&wk_devs_mu);
  int others = d->inflight++;
  unsigned long started = ++d->starts;
  pthread_mutex_unlock(&wk_devs_mu);
  wk_evaluate_once(cfg, dev, job, res, &wk_left_over);
  /* others in flight at some time during this one: at its start, at its end, or started
   * (and maybe ended) in between */
  pthread_mutex_lock(&wk_devs_mu);
  if (d->inflight - 1 > others) others = d->inflight - 1;
  if (d->starts != started && others == 0) others = 1;
  d->inflight--;
  pthread_mutex_unlock(&wk_devs_mu);
  pthread_rwlock_unlock(&d->rw);
  Kernelarena__V1__Status first = res->status;
  if (others == 0 || !wk_neighbour_verdict(res)) return;
  wk_eval_release(wk_left_over); /* before it runs again, on a warm runner */
  wk_left_over = NULL;
  ka_pool_warm(cfg, dev);
  pthread_rwlock_wrlock(&d->rw);
  wk_wait_left(d);
  double wall = res->wall_s;
  char *why = wk_strdup(res->message);
  ka_result_clear(res);
  wk_evaluate_once(cfg, dev, job, res, &wk_left_over);
  res->wall_s += wall;
  pthread_rwlock_unlock(&d->rw);
  wk_note_alone(res, first, why, others);
  free(why);
}
