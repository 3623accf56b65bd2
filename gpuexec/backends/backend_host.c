/* The host backend: C submissions compiled by the system C compiler into a shared
 * object, timed with CLOCK_MONOTONIC. "Device memory" is host memory; the last-level
 * cache is flushed by writing a buffer of twice its size.
 *
 * Isolation (docs/integrity.md): a compiled module is never loaded into the caller's
 * process. Each module gets its own process (ka-runner --host-module, a fresh exec, so
 * it inherits no memory and no descriptor of the caller but its command socket and
 * stderr), which dlopens the shared object and calls its entry points through libffi
 * on command; it sandboxes itself first (sandbox.h, ka_sandbox_module), the baseline's
 * as much as the candidate's. "Device memory" is the caller's own memory; each module
 * process gets a view of its own of an allocation (a memfd made for it alone, passed
 * with SCM_RIGHTS) when a launch first passes it, so baseline and candidate never map
 * the same memory (docs/integrity.md, property 13). The caller keeps its timer, its
 * result channel and everything else out of the submission's reach, and times every
 * launch from outside: a launch is a command and its reply, which echoes a per-call
 * nonce.
 * The kernel's CPU-time accounting of each module process, read by the caller, shows
 * work done while no launch was in flight (untimed_work). The candidate's shared object
 * is checked against the task's import allow-list (sandbox.h, ka_import_check) after it
 * is built and before a module process loads it. The C compiler runs sandboxed
 * (ka_sandbox_compiler) with a deadline of its own, in two steps so that the generated
 * assembly is checked (ka_asm_check) before it is assembled. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ffi.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "data.h"
#include "ka_common.h"
#include "runner.h"
#include "sandbox.h"

#define HOST_MAX_ALLOCS 256
#define HOST_MAX_MODULES 8
#define HOST_MAX_ARGS 32
#define HOST_MAX_KERNELS 16

/* SYNC: answered (its nonce echoed) once every earlier command is carried out */
enum { HOST_OP_MAP = 1, HOST_OP_UNMAP = 2, HOST_OP_CALL = 3, HOST_OP_SYNC = 4 };
enum { HOST_ARG_NULL = 0, HOST_ARG_PTR = 1, HOST_ARG_I32 = 2, HOST_ARG_I64 = 3 };

/* One command to a module process (one SOCK_SEQPACKET message). */
typedef struct host_cmd {
  uint32_t op, id, nargs, kernel; /* MAP/UNMAP: id = allocation; CALL: kernel index */
  uint64_t size, nonce;           /* MAP: bytes; CALL: echoed in the reply */
  struct {
    uint32_t kind, alloc;
    uint64_t v; /* PTR: offset in the allocation; I32/I64: the value */
  } args[HOST_MAX_ARGS];
} host_cmd;

/* A module process's answer: once after loading, then once per CALL. */
typedef struct host_reply {
  int32_t rc; /* 0 ok */
  uint32_t pad;
  uint64_t nonce;
  char msg[240];
} host_reply;

/* One allocation ("device memory"): the runner's own copy, in memory no other process
 * maps. Each module process that is given the allocation as an argument gets a view of
 * its own (host_view), so that baseline and candidate never share memory. */
typedef struct host_alloc {
  uint32_t id;
  unsigned char *base; /* the runner's copy: anonymous memory of this process only */
  size_t bytes;
  ka_module *owner; /* NULL: base is current; else the module whose view is */
} host_alloc;

/* A module process's own copy of one allocation: a memfd created for that module only,
 * mapped here and in that module's process. */
typedef struct host_view {
  uint32_t id; /* the allocation's */
  unsigned char *map;
  size_t bytes;
  int stale; /* another module's call or a partial write made it out of date */
} host_view;

struct ka_backend_ctx {
  char err[1024];
  unsigned char *flush;
  size_t flush_bytes;
  unsigned flush_round;
  double t0;
  double excluded_s; /* view setup inside launches since timer_start, not timed */
  double bw_gbps;    /* peak for the physics floor: 8 x measured single-thread write bandwidth */
  host_alloc allocs[HOST_MAX_ALLOCS];
  int nallocs;
  uint32_t next_id;
  ka_module *mods[HOST_MAX_MODULES];
  int nmods;
  uint64_t nonce_key;
  uint64_t calls;
  double busy_ms, idle_ms; /* module CPU time and wall time while no launch was in flight */
};

struct ka_module {
  ka_backend_ctx *ctx; /* NULL for a compile-only check */
  pid_t pid;
  int sock;
  clockid_t clk;
  int have_clk, have_mark;
  double cpu_after_ms, wall_after_s; /* at the end of the last launch (or the last reading) */
  int nkernels;
  char **names;
  host_view views[HOST_MAX_ALLOCS];
  int nviews;
};

/* A small sysfs file of cpu's cache index idx ("size", "shared_cpu_list") into txt;
 * 0 or -1. (sysfs files stat as 4096 bytes whatever they hold: read, not ka_read_file.) */
static int host_cache_attr(int cpu, int idx, const char *attr, char *txt, size_t len) {
  char p[160];
  snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu%d/cache/index%d/%s", cpu, idx, attr);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, txt, len - 1);
  close(fd);
  if (n <= 0) return -1;
  txt[n] = 0;
  txt[strcspn(txt, "\n")] = 0;
  return 0;
}

#define HOST_MAX_LLCS 64

/* The last-level cache in bytes: every online CPU's largest cache as sysfs reports it,
 * summed over distinct instances; else sysconf's, else 32 MiB. (glibc's sysconf, from
 * CPUID, said 320 MiB for the 2-core CI machine's 32 MiB L3: each flush wrote 640 MiB,
 * 70 ms instead of 7.) */
static int64_t host_llc_bytes(void) {
  /* each online CPU's largest cache (index3 is L3 on x86), summed over its distinct
   * instances (by shared_cpu_list): on a CPU of several chiplets each has an L3 of its
   * own, and a module's threads may run on any of them (review 2026-12-01) */
  char seen[HOST_MAX_LLCS][64];
  int nseen = 0;
  int64_t total = 0;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  for (int cpu = 0; cpu < ncpu && cpu < 1024; cpu++) {
    int64_t best = 0;
    char best_list[64] = "";
    for (int i = 0; i < 8; i++) {
      char txt[64], list[64];
      if (host_cache_attr(cpu, i, "size", txt, sizeof txt)) continue;
      char *end;
      long long v = strtoll(txt, &end, 10);
      if (*end == 'K')
        v *= 1024;
      else if (*end == 'M')
        v *= 1024 * 1024;
      if (v <= best) continue;
      best = v;
      if (host_cache_attr(cpu, i, "shared_cpu_list", list, sizeof list))
        snprintf(list, sizeof list, "cpu%d", cpu);
      snprintf(best_list, sizeof best_list, "%s", list);
    }
    int dup = 0;
    for (int k = 0; k < nseen && !dup; k++) dup = !strcmp(seen[k], best_list);
    if (!best || dup || nseen == HOST_MAX_LLCS) continue;
    snprintf(seen[nseen++], sizeof seen[0], "%s", best_list);
    total += best;
  }
  if (!total) total = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return total > 0 ? total : 32 << 20;
}

static int host_device_count(int *count, char *err, size_t errlen) {
  *count = 1;
  return KA_OK;
}

static int host_flush_cache(ka_backend_ctx *c);

static int host_open(int index, ka_backend_ctx **out, char *err, size_t errlen) {
  *out = NULL;
  if (index != 0) return ka_seterr(err, errlen, KA_EINVAL, "host backend has one device");
  ka_backend_ctx *c = calloc(1, sizeof *c);
  if (!c) return KA_ENOMEM;
  c->flush_bytes = (size_t)host_llc_bytes() * 2;
  c->flush = malloc(c->flush_bytes);
  if (!c->flush) {
    free(c);
    return ka_seterr(err, errlen, KA_ENOMEM, "cannot allocate the cache flush buffer");
  }
  if (getrandom(&c->nonce_key, sizeof c->nonce_key, 0) != (ssize_t)sizeof c->nonce_key)
    c->nonce_key = (uint64_t)(ka_now_s() * 1e9) ^ ((uint64_t)getpid() << 32);
  /* Peak memory bandwidth for the physics floor (docs/integrity.md): 8 x the best of
   * three single-thread passes over the flush buffer (twice the last-level cache, so
   * the writes reach DRAM). One thread reaches a fraction of what all cores do, and a
   * loaded machine measures low, so the factor makes this a generous upper bound: the
   * floor must never flag honest code. */
  double best = 0;
  for (int i = 0; i < 3; i++) {
    double t0 = ka_now_s();
    host_flush_cache(c);
    double dt = ka_now_s() - t0;
    if (dt > 0 && (best == 0 || dt < best)) best = dt;
  }
  c->bw_gbps = best > 0 ? 8.0 * (double)c->flush_bytes / best / 1e9 : 0;
  /* an allocation beyond RLIMIT_FSIZE fails with EFBIG instead of killing the runner */
  signal(SIGXFSZ, SIG_IGN);
  *out = c;
  return KA_OK;
}

static void host_module_free(ka_backend_ctx *c, ka_module *m);
static void host_mem_free(ka_backend_ctx *c, ka_devptr p);

static void host_close(ka_backend_ctx *c) {
  if (!c) return;
  while (c->nmods > 0) host_module_free(c, c->mods[c->nmods - 1]);
  while (c->nallocs > 0) host_mem_free(c, (ka_devptr)(uintptr_t)c->allocs[c->nallocs - 1].base);
  free(c->flush);
  free(c);
}

static const char *host_last_error(ka_backend_ctx *c) {
  return c ? c->err : "";
}

static int host_device_info(ka_backend_ctx *c, ka_device_info *d) {
  memset(d, 0, sizeof *d);
  snprintf(d->backend, sizeof d->backend, "host");
  struct utsname u;
  if (uname(&u) == 0) snprintf(d->arch, sizeof d->arch, "%s", u.machine);
  snprintf(d->name, sizeof d->name, "CPU");
  char *info;
  if (ka_read_file("/proc/cpuinfo", 0, &info, NULL) == KA_OK) {
    char *m = strstr(info, "model name");
    if (m && (m = strchr(m, ':'))) {
      m++;
      while (*m == ' ') m++;
      size_t n = strcspn(m, "\n");
      if (n >= sizeof d->name) n = sizeof d->name - 1;
      memcpy(d->name, m, n);
      d->name[n] = 0;
    }
    free(info);
  }
  d->multiprocessors = (int)sysconf(_SC_NPROCESSORS_ONLN);
  d->warp_size = 1;
  d->memory_bytes = (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
  d->l2_bytes = host_llc_bytes();
  d->max_threads_per_block = 1;
  d->mem_bandwidth_gbps = c ? c->bw_gbps : 0; /* upper bound, measured at open */
  snprintf(d->driver, sizeof d->driver, "%s", u.release);
  snprintf(d->timer, sizeof d->timer, "CLOCK_MONOTONIC");
  return KA_OK;
}

/* Runs argv in cwd, sandboxed (ka_sandbox_compiler), with stdout/stderr captured into
 * *log (malloc'd, at most 64 KiB kept), killing its process group after timeout_s.
 * KA_OK, KA_ECOMPILE (it failed), KA_ETIMEDOUT, KA_EUNAVAIL (no such program) or
 * KA_ESYS (the sandbox could not be applied). */
static int host_run_compiler(char *const argv[], const char *cwd, double timeout_s, char **log) {
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) return KA_ESYS;
  pid_t pid = fork();
  if (pid < 0) {
    close(pfd[0]), close(pfd[1]);
    return KA_ESYS;
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(pfd[1], 1);
    dup2(pfd[1], 2);
    if (chdir(cwd) != 0) _exit(126);
    /* the compiler reads the workspace and the system folders only (sandbox.h); its
     * temporary files go to its own folder, the one it may write */
    char err[256];
    if (ka_sandbox_compiler(cwd, err, sizeof err) != KA_OK) {
      dprintf(2, "[kernelarena] sandbox of the compiler: %s\n", err);
      _exit(125);
    }
    setenv("TMPDIR", cwd, 1);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(pfd[1]);
  ka_sb sb = {0};
  double deadline = ka_now_s() + timeout_s;
  int timed_out = ka_sb_read_until(&sb, pfd[0], deadline, 64 << 10);
  close(pfd[0]);
  if (timed_out) {
    kill(-pid, SIGKILL);
    ka_sb_printf(&sb,
                 "\n[kernelarena] the compiler did not finish within its deadline (%.0f s) "
                 "and was killed\n",
                 timeout_s);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  /* the compiler's own children (cc1, as) die with the group; wait until they are gone
   * (they are reparented to the supervisor, which reaps them), so that none is counted
   * as a process the submission left behind */
  for (int i = 0; timed_out && i < 2000 && kill(-pid, 0) == 0; i++) usleep(1000);
  *log = ka_sb_take(&sb);
  if (timed_out) return KA_ETIMEDOUT;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 127) return KA_EUNAVAIL;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 125) return KA_ESYS;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? KA_OK : KA_ECOMPILE;
}

/* ---- module processes */

/* CPU time (ms) the module's process has used, all threads, as the kernel accounts it. */
static double host_cpu_ms(ka_module *m) {
  struct timespec ts;
  if (!m->have_clk || clock_gettime(m->clk, &ts) != 0) return 0;
  return (double)ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Sends one command, with fd attached when fd >= 0. */
static int host_send(ka_module *m, const host_cmd *cmd, int fd) {
  struct iovec iov = {(void *)cmd, sizeof *cmd};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    memset(&u, 0, sizeof u);
    msg.msg_control = u.buf;
    msg.msg_controllen = sizeof u.buf;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  }
  for (;;) {
    ssize_t n = sendmsg(m->sock, &msg, MSG_NOSIGNAL);
    if (n == (ssize_t)sizeof *cmd) return KA_OK;
    if (n < 0 && errno == EINTR) continue;
    return KA_EIO;
  }
}

/* Receives one reply; KA_EIO when the process closed the socket or sent garbage. */
static int host_recv(ka_module *m, host_reply *r) {
  for (;;) {
    ssize_t n = recv(m->sock, r, sizeof *r, 0);
    if (n == (ssize_t)sizeof *r) {
      r->msg[sizeof r->msg - 1] = 0;
      return KA_OK;
    }
    if (n < 0 && errno == EINTR) continue;
    return KA_EIO;
  }
}

/* Describes why a module process stopped answering, and makes sure it is gone. */
static void host_why_dead(ka_module *m, char *out, size_t outlen) {
  int st = 0;
  pid_t r = 0;
  for (int i = 0; i < 50 && r == 0; i++) {
    r = waitpid(m->pid, &st, WNOHANG);
    if (r == 0) usleep(2000);
  }
  if (r == 0) {
    kill(m->pid, SIGKILL);
    while (waitpid(m->pid, &st, 0) < 0 && errno == EINTR) {
    }
    snprintf(out, outlen, "the process running the submitted code broke its command channel");
  } else if (r < 0) {
    snprintf(out, outlen, "the process running the submitted code is gone");
  } else if (WIFSIGNALED(st)) {
    snprintf(out, outlen, "the process running the submitted code was terminated by signal %d (%s)",
             WTERMSIG(st), strsignal(WTERMSIG(st)));
  } else {
    snprintf(out, outlen, "the process running the submitted code exited with code %d",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  m->pid = -1;
}

/* The nonce of the next command: drawn from the kernel's generator for each command, so
 * that the module, which sees every nonce, cannot tell the next one (splitmix64 of a key
 * and a counter, as before, is invertible from one nonce: review 2026-12-01) and so
 * cannot answer a call before it is made. Without getrandom: that mix, counted on. */
static uint64_t host_nonce(ka_backend_ctx *c) {
  uint64_t v;
  ++c->calls;
  if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) v = ka_mix64(c->nonce_key, c->calls);
  return v;
}

/* Waits until module m has carried out every command sent before: a SYNC, whose reply
 * echoes a per-command nonce (as a call's does). KA_OK; a module that answers anything
 * else, or nothing, is killed (KA_EDEVICE): its next launch finds it gone, the
 * submission's verdict. */
static int host_sync(ka_backend_ctx *c, ka_module *m) {
  host_cmd cmd;
  memset(&cmd, 0, sizeof cmd);
  cmd.op = HOST_OP_SYNC;
  cmd.nonce = host_nonce(c);
  host_reply r;
  if (host_send(m, &cmd, -1) == KA_OK && host_recv(m, &r) == KA_OK && r.nonce == cmd.nonce)
    return KA_OK;
  kill(m->pid, SIGKILL);
  return KA_EDEVICE;
}

/* Work the runner asks of module m (mapping or unmapping views) between calls: begin
 * charges what m used since its last reading (as a launch does) and notes the clocks;
 * end, after a host_sync, does not charge the module's CPU time since then up to the
 * wall time that passed (one thread: the loop carrying out the commands), so that an
 * honest module is not charged for the runner's work (unmapping a case's views took
 * 0.4-2 ms per 8 MiB on the 2-core CI machine, and an honest step was FLAGGED), while
 * any more (another thread working meanwhile) still is. What is not charged is at most
 * HOST_WORK_BASE_MS + HOST_WORK_MS_PER_MIB per MiB of the views (bytes): the loop that
 * answers the SYNC runs in the submission's process, and a module that took it over
 * answered late and worked 4.5 s uncharged in the windows (red team 2026-12-01). */
#define HOST_WORK_BASE_MS 1.0
#define HOST_WORK_MS_PER_MIB 0.5
typedef struct host_work {
  double cpu, wall, bytes;
  int on;
} host_work;

static void host_work_begin(ka_backend_ctx *c, ka_module *m, host_work *w) {
  w->bytes = 0;
  w->on = m->have_mark && m->pid > 0;
  if (!w->on) return;
  w->cpu = host_cpu_ms(m), w->wall = ka_now_s();
  c->busy_ms += w->cpu - m->cpu_after_ms;
  c->idle_ms += (w->wall - m->wall_after_s) * 1e3;
}

static void host_work_end(ka_backend_ctx *c, ka_module *m, const host_work *w) {
  if (!w->on || !m->have_mark) return;
  double cpu = host_cpu_ms(m), now = ka_now_s();
  double used = cpu - w->cpu, wall = (now - w->wall) * 1e3;
  double cap = HOST_WORK_BASE_MS + HOST_WORK_MS_PER_MIB * w->bytes / (1024.0 * 1024.0);
  double excused = wall < cap ? wall : cap;
  c->busy_ms += used > excused ? used - excused : 0;
  c->idle_ms += wall;
  m->cpu_after_ms = cpu;
  m->wall_after_s = now;
}

static host_view *host_view_of(ka_module *m, uint32_t id) {
  for (int i = 0; i < m->nviews; i++)
    if (m->views[i].id == id) return &m->views[i];
  return NULL;
}

/* The current contents of allocation a: the owner's view after its call, else base. */
static const unsigned char *host_current(ka_backend_ctx *c, host_alloc *a) {
  host_view *v = a->owner ? host_view_of(a->owner, a->id) : NULL;
  (void)c;
  return v ? v->map : a->base;
}

/* Makes base current again (copies the owner's view into it) and drops the owner. */
static void host_pull(ka_backend_ctx *c, host_alloc *a) {
  const unsigned char *cur = host_current(c, a);
  if (cur != a->base) memcpy(a->base, cur, a->bytes);
  a->owner = NULL;
}

/* Forgets module m's view of allocation a: tells m to unmap it (best effort: m may be
 * gone) and, with sync (not when m is about to be killed), waits until it has, as the
 * runner's work (host_work_end); then unmaps it here. Base is made current first when m
 * owned it. Unmapped here last, the memfd's pages are freed by this process. */
static void host_view_drop(ka_backend_ctx *c, ka_module *m, host_alloc *a, int sync) {
  host_view *v = host_view_of(m, a->id);
  if (!v) return;
  if (a->owner == m) host_pull(c, a);
  if (m->sock >= 0 && m->pid > 0) {
    host_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.op = HOST_OP_UNMAP;
    cmd.id = a->id;
    host_work w;
    host_work_begin(c, m, &w);
    w.bytes = (double)v->bytes;
    if (host_send(m, &cmd, -1) == KA_OK && sync) host_sync(c, m);
    if (sync) host_work_end(c, m, &w);
  }
  munmap(v->map, v->bytes);
  *v = m->views[--m->nviews];
}

/* Gives module m a view of allocation a holding its current contents: a memfd of m's
 * own, mapped here and passed to m's process (SCM_RIGHTS); no other process gets it.
 * An existing stale view is refreshed. KA_EIO when m's process cannot be told,
 * KA_EOOM when the memfd cannot be made. */
static int host_view_ensure(ka_backend_ctx *c, ka_module *m, host_alloc *a) {
  host_view *v = host_view_of(m, a->id);
  if (v) {
    if (v->stale && a->owner != m) memcpy(v->map, host_current(c, a), a->bytes);
    v->stale = 0;
    return KA_OK;
  }
  if (m->nviews >= HOST_MAX_ALLOCS) return KA_EOOM;
  int fd = memfd_create("ka-tensor", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)a->bytes) != 0) {
    if (fd >= 0) close(fd);
    return KA_EOOM;
  }
  void *p = mmap(NULL, a->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return KA_EOOM;
  }
  memcpy(p, host_current(c, a), a->bytes);
  host_cmd cmd;
  memset(&cmd, 0, sizeof cmd);
  cmd.op = HOST_OP_MAP;
  cmd.id = a->id;
  cmd.size = a->bytes;
  int rc = host_send(m, &cmd, fd);
  close(fd); /* the mappings here and in m's process keep the memory */
  if (rc != KA_OK) {
    munmap(p, a->bytes);
    return KA_EIO;
  }
  v = &m->views[m->nviews++];
  v->id = a->id;
  v->map = p;
  v->bytes = a->bytes;
  v->stale = 0;
  return KA_OK;
}

static void host_module_free(ka_backend_ctx *c, ka_module *m) {
  if (!m) return;
  /* what it owned comes back to base first; its memfds go with its mappings */
  for (int i = 0; m->ctx && i < m->ctx->nallocs; i++)
    host_view_drop(m->ctx, m, &m->ctx->allocs[i], 0);
  for (int i = 0; i < m->nviews; i++) munmap(m->views[i].map, m->views[i].bytes);
  m->nviews = 0;
  if (m->sock >= 0) close(m->sock);
  if (m->pid > 0) {
    kill(m->pid, SIGKILL);
    while (waitpid(m->pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  if (m->ctx)
    for (int i = 0; i < m->ctx->nmods; i++)
      if (m->ctx->mods[i] == m) {
        m->ctx->mods[i] = m->ctx->mods[--m->ctx->nmods];
        break;
      }
  for (int i = 0; i < m->nkernels; i++) free(m->names[i]);
  free(m->names);
  free(m);
}

/* Starts the process that loads so and resolves the kernels; waits for its answer.
 * KA_ECOMPILE with the reason in log when the module does not load. */
static int host_spawn(ka_backend_ctx *c, const char *so, const ka_compile_req *req, ka_module *m,
                      ka_sb *log) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return KA_ESYS;
  exe[n] = 0;
  if (req->nkernels > HOST_MAX_KERNELS) return KA_ERANGE;
  char *argv[HOST_MAX_KERNELS + 4];
  int k = 0;
  argv[k++] = exe;
  argv[k++] = (char *)KA_RUNNER_HOST_MODULE_ARG;
  argv[k++] = (char *)so;
  for (int i = 0; i < req->nkernels; i++) argv[k++] = (char *)req->kernels[i];
  argv[k] = NULL;
  /* OpenMP worker threads sleep between calls instead of spinning (a spinning pool
   * would count as work outside the timed calls) */
  char home[PATH_MAX + 8];
  snprintf(home, sizeof home, "HOME=%s", req->workdir);
  /* the operator's sandbox switches (sandbox.h), so that the module process applies the
   * layers the runner applies */
  char sw[3][64 + 4 * PATH_MAX];
  char *env[7] = {"LANG=C", "OMP_WAIT_POLICY=PASSIVE", home, NULL};
  int ne = 3;
  const char *names[] = {"KA_SANDBOX_SECCOMP", "KA_SANDBOX_LANDLOCK", KA_SANDBOX_HIDE_ENV};
  for (int i = 0; i < 3; i++) {
    const char *v = getenv(names[i]);
    if (!v) continue;
    if (snprintf(sw[i], sizeof sw[i], "%s=%s", names[i], v) >= (int)sizeof sw[i])
      return KA_EINVAL; /* never a module process without its hidden folders */
    env[ne++] = sw[i];
  }
  env[ne] = NULL;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return KA_ESYS;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]), close(sv[1]);
    return KA_ESYS;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(125);
    if (dup2(sv[1], 0) != 0) _exit(126);
    close_range(3, ~0U, 0); /* the result channel (fd 3) and everything else */
    if (chdir(req->workdir) != 0) _exit(126);
    execve(exe, argv, env);
    _exit(127);
  }
  close(sv[1]);
  m->pid = pid;
  m->sock = sv[0];
  m->have_clk = clock_getcpuclockid(pid, &m->clk) == 0;
  host_reply r;
  if (host_recv(m, &r) != KA_OK) {
    char why[256];
    host_why_dead(m, why, sizeof why);
    ka_sb_printf(log, "loading the compiled module failed: %s\n", why);
    return KA_ECOMPILE;
  }
  if (r.rc != 0) {
    ka_sb_printf(log, "%s\n", r.msg);
    return KA_ECOMPILE;
  }
  /* no allocation is mapped yet: each comes when a launch first passes it (host_launch).
   * Idle time is counted from here on: CPU a constructor's thread burns before the first
   * call is work outside the calls too */
  m->cpu_after_ms = host_cpu_ms(m);
  m->wall_after_s = ka_now_s();
  m->have_mark = 1;
  return KA_OK;
}

/* The C compiler's own deadline in seconds (docs/sandbox.md): well inside every host
 * task's evaluation deadline (60 s), so that a compile that never ends is the
 * submission's COMPILE_ERROR, never the evaluation's TIMEOUT. */
#define HOST_CC_DEADLINE_S 20.0

/* Builds req->sources[0] into the shared object at so in two steps, both sandboxed and
 * within one deadline (the smaller of req->timeout_s and HOST_CC_DEADLINE_S): C to
 * assembly (module.s), which ka_asm_check reads, then assembly to the shared object.
 * *log gets the compilers' output and the check's refusals. KA_OK; KA_ECOMPILE (a
 * compile error, a refused directive, the deadline) with err; KA_EUNAVAIL (no compiler)
 * or KA_ESYS (the compiler could not be sandboxed, an infrastructure fault). */
static int host_build_so(const ka_compile_req *req, const char *so, char **log, char *err,
                         size_t errlen) {
  const char *cc = getenv("KA_HOST_CC");
  char *ccp = (char *)(cc && *cc ? cc : "cc");
  char asmf[PATH_MAX];
  snprintf(asmf, sizeof asmf, "%s/module.s", req->workdir);
  double budget = req->timeout_s > 0 && req->timeout_s < HOST_CC_DEADLINE_S ? req->timeout_s
                                                                            : HOST_CC_DEADLINE_S;
  double t0 = ka_now_s();
  char *argv1[] = {
      ccp, "-std=gnu11", "-O2", "-fPIC", "-S", "-o", asmf, (char *)req->sources[0].name, NULL};
  ka_sb sb = {0};
  char *part = NULL;
  int said = 0; /* err names the refusal */
  int rc = host_run_compiler(argv1, req->workdir, budget, &part);
  ka_sb_puts(&sb, part ? part : "");
  free(part);
  part = NULL;
  if (rc == KA_OK) {
    char *text = NULL, *alog = NULL;
    size_t len = 0;
    if (ka_read_file(asmf, (size_t)1 << 30, &text, &len) != KA_OK) {
      rc = ka_seterr(err, errlen, KA_ECOMPILE, "the compiler wrote no assembly");
      said = 1;
    } else if (ka_asm_check(text, len, &alog)) {
      ka_sb_puts(&sb, alog);
      int n = (int)strcspn(alog, "\n");
      rc = ka_seterr(err, errlen, KA_ECOMPILE, "%.*s", n, alog);
      said = 1;
    }
    free(text);
    free(alog);
  }
  if (rc == KA_OK) {
    char *argv2[] = {ccp, "-shared", "-fPIC", "-o", (char *)so, asmf, "-lm", "-lpthread", NULL};
    double left = budget - (ka_now_s() - t0);
    rc = host_run_compiler(argv2, req->workdir, left > 0.1 ? left : 0.1, &part);
    ka_sb_puts(&sb, part ? part : "");
    free(part);
  }
  *log = ka_sb_take(&sb);
  if (rc == KA_ETIMEDOUT)
    return ka_seterr(err, errlen, KA_ECOMPILE,
                     "the compiler did not finish within its deadline (%.0f s)", budget);
  if (rc == KA_ESYS) return ka_seterr(err, errlen, KA_ESYS, "the compiler's sandbox failed");
  if (rc == KA_ECOMPILE && !said) ka_seterr(err, errlen, KA_ECOMPILE, "compilation failed");
  return rc;
}

static int host_compile(ka_backend_ctx *c, const ka_compile_req *req, ka_module **out, char **log,
                        char *err, size_t errlen) {
  if (out) *out = NULL;
  if (log) *log = NULL;
  if (strcmp(req->language, "c"))
    return ka_seterr(err, errlen, KA_EINVAL, "host backend compiles C, not %s", req->language);
  if (!req->workdir) return ka_seterr(err, errlen, KA_EINVAL, "host compile needs a workdir");
  if (c && c->nmods >= HOST_MAX_MODULES)
    return ka_seterr(err, errlen, KA_ERANGE, "too many modules loaded");
  for (int i = 0; i < req->nsources; i++) {
    char p[PATH_MAX];
    if (!ka_path_is_safe(req->sources[i].name) || strchr(req->sources[i].name, '/'))
      return ka_seterr(err, errlen, KA_EINVAL, "bad source name %s", req->sources[i].name);
    snprintf(p, sizeof p, "%s/%s", req->workdir, req->sources[i].name);
    if (ka_write_file(p, req->sources[i].text, req->sources[i].len))
      return ka_seterr(err, errlen, KA_EIO, "cannot write %s", p);
  }
  char so[PATH_MAX];
  snprintf(so, sizeof so, "%s/module.so", req->workdir);
  char *clog = NULL;
  int rc = host_build_so(req, so, &clog, err, errlen);
  if (rc == KA_EUNAVAIL) {
    free(clog);
    clog = strdup("C compiler not found (set KA_HOST_CC or install gcc)\n");
    if (log)
      *log = clog;
    else
      free(clog);
    return ka_seterr(err, errlen, KA_EUNAVAIL, "C compiler not found");
  }
  if (rc) {
    if (log)
      *log = clog;
    else
      free(clog);
    return rc;
  }
  /* the candidate's imports against the task's allow-list, before anything loads it
   * (sandbox.h; armed by the runner for the candidate only) */
  char *ilog = NULL;
  if (ka_sandbox_module_imports(so, &ilog)) {
    ka_sb sb = {0};
    ka_sb_puts(&sb, clog ? clog : "");
    ka_sb_puts(&sb, ilog ? ilog : "");
    /* the first refused import names the symbol: it becomes the verdict's message */
    const char *first = ilog && *ilog ? ilog : "import check: a refused import\n";
    int n = (int)strcspn(first, "\n");
    ka_seterr(err, errlen, KA_ECOMPILE, "%.*s", n, first);
    free(clog);
    free(ilog);
    if (log)
      *log = ka_sb_take(&sb);
    else
      ka_sb_free(&sb);
    return KA_ECOMPILE;
  }
  ka_module *m = calloc(1, sizeof *m);
  if (!m) {
    free(clog);
    return KA_ENOMEM;
  }
  m->sock = -1;
  m->pid = -1;
  ka_sb sb = {0};
  ka_sb_puts(&sb, clog ? clog : "");
  free(clog);
  m->names = calloc((size_t)req->nkernels + 1, sizeof *m->names);
  for (int i = 0; i < req->nkernels && m->names; i++) {
    m->names[i] = strdup(req->kernels[i]);
    m->nkernels = i + 1;
  }
  /* loaded in its own process, never here: its constructors run there */
  rc = host_spawn(c, so, req, m, &sb);
  if (rc == KA_OK && c && out) {
    m->ctx = c;
    c->mods[c->nmods++] = m;
  }
  if (log)
    *log = ka_sb_take(&sb);
  else
    ka_sb_free(&sb);
  if (rc || !out) {
    host_module_free(c, m);
    return rc ? ka_seterr(err, errlen, rc, "compilation failed") : KA_OK;
  }
  *out = m;
  return KA_OK;
}

/* ---- memory: the runner's own copy of each allocation, and per module process a view
 * of its own (docs/integrity.md, property 13). Writes of the runner (staging) go to the
 * copy and to every view; a launch gives the module a view of each allocation it is
 * passed, and after its call that view is the current contents (outputs are read back
 * from it). No memory is mapped into two module processes, so a thread the candidate
 * left running cannot read or change what the baseline reads or writes. */

static int host_mem_alloc(ka_backend_ctx *c, size_t bytes, ka_devptr *out) {
  if (c->nallocs >= HOST_MAX_ALLOCS) {
    snprintf(c->err, sizeof c->err, "more than %d host allocations", HOST_MAX_ALLOCS);
    return KA_EOOM;
  }
  size_t len = bytes ? bytes : 1;
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    snprintf(c->err, sizeof c->err, "host allocation of %zu bytes failed: %s", bytes,
             strerror(errno));
    return KA_EOOM;
  }
  host_alloc *a = &c->allocs[c->nallocs++];
  a->id = ++c->next_id;
  a->base = p;
  a->bytes = len;
  a->owner = NULL;
  *out = (ka_devptr)(uintptr_t)p;
  return KA_OK;
}

/* The allocation holding [p, p + n) and p's offset in it; NULL if there is none. */
static host_alloc *host_find(ka_backend_ctx *c, ka_devptr p, size_t n, size_t *off) {
  for (int i = 0; i < c->nallocs; i++) {
    uintptr_t b = (uintptr_t)c->allocs[i].base;
    if (p >= b && p - b <= c->allocs[i].bytes && n <= c->allocs[i].bytes - (p - b)) {
      *off = (size_t)(p - b);
      return &c->allocs[i];
    }
  }
  return NULL;
}

static void host_mem_free(ka_backend_ctx *c, ka_devptr p) {
  for (int i = 0; i < c->nallocs; i++) {
    host_alloc *a = &c->allocs[i];
    if ((uintptr_t)a->base != (uintptr_t)p) continue;
    a->owner = NULL;
    for (int k = 0; k < c->nmods; k++) host_view_drop(c, c->mods[k], a, 1);
    munmap(a->base, a->bytes);
    c->allocs[i] = c->allocs[--c->nallocs];
    return;
  }
}

/* Writes n bytes at dst (src, or the byte v when src is NULL) into the runner's copy and
 * every module's view, so that each module process finds them at its next call. */
static int host_write(ka_backend_ctx *c, ka_devptr dst, const void *src, uint8_t v, size_t n) {
  size_t off;
  host_alloc *a = host_find(c, dst, n, &off);
  if (!a) {
    snprintf(c->err, sizeof c->err, "a host copy of %zu bytes outside any allocation", n);
    return KA_EINVAL;
  }
  if (a->owner && (off != 0 || n != a->bytes)) host_pull(c, a);
  a->owner = NULL;
  if (src)
    memcpy(a->base + off, src, n);
  else
    memset(a->base + off, v, n);
  for (int k = 0; k < c->nmods; k++) {
    host_view *w = host_view_of(c->mods[k], a->id);
    if (!w) continue;
    if (w->stale)
      memcpy(w->map, a->base, a->bytes);
    else
      memcpy(w->map + off, a->base + off, n);
    w->stale = 0;
  }
  return KA_OK;
}

static int host_copy_to_device(ka_backend_ctx *c, ka_devptr dst, const void *src, size_t n) {
  return host_write(c, dst, src, 0, n);
}

static int host_copy_to_host(ka_backend_ctx *c, void *dst, ka_devptr src, size_t n) {
  size_t off;
  host_alloc *a = host_find(c, src, n, &off);
  if (!a) {
    snprintf(c->err, sizeof c->err, "a host copy of %zu bytes outside any allocation", n);
    return KA_EINVAL;
  }
  memcpy(dst, host_current(c, a) + off, n);
  return KA_OK;
}

static int host_memset8(ka_backend_ctx *c, ka_devptr dst, uint8_t v, size_t n) {
  return host_write(c, dst, NULL, v, n);
}

/* Before a call of module m: a view of every allocation passed in l, current. Time spent
 * here (first use of an allocation, or a view another call made stale) is kept out of
 * the timed interval (excluded_s). Marks in *used which allocations the call gets. */
static int host_views_for(ka_backend_ctx *c, ka_module *m, const ka_launch *l, int *used) {
  double t0 = ka_now_s();
  int rc = KA_OK, nviews = m->nviews;
  host_work w;
  host_work_begin(c, m, &w);
  for (int i = 0; i < l->nargs && rc == KA_OK; i++) {
    const ka_arg *g = &l->args[i];
    if (g->kind != KA_ARG_PTR || !g->v.ptr) continue;
    size_t off;
    host_alloc *a = host_find(c, g->v.ptr, 0, &off);
    if (!a) continue; /* reported by the caller */
    used[a - c->allocs] = 1;
    rc = host_view_ensure(c, m, a);
  }
  /* new views mapped there before the call (not during it), as the runner's work */
  for (int k = nviews; k < m->nviews; k++) w.bytes += (double)m->views[k].bytes;
  if (rc == KA_OK && m->nviews != nviews && host_sync(c, m) != KA_OK) rc = KA_EIO;
  host_work_end(c, m, &w);
  c->excluded_s += ka_now_s() - t0;
  if (rc == KA_EOOM)
    snprintf(c->err, sizeof c->err, "cannot map an allocation into a module process: %s",
             strerror(errno));
  else if (rc)
    snprintf(c->err, sizeof c->err, "cannot share an allocation with a module process");
  return rc;
}

/* After a call of module m: its views of the allocations it was passed are the current
 * contents; every other view of them is stale. */
static void host_views_after(ka_backend_ctx *c, ka_module *m, const int *used) {
  for (int i = 0; i < c->nallocs; i++) {
    if (!used[i]) continue;
    host_alloc *a = &c->allocs[i];
    a->owner = m;
    for (int k = 0; k < c->nmods; k++) {
      host_view *w = c->mods[k] != m ? host_view_of(c->mods[k], a->id) : NULL;
      if (w) w->stale = 1;
    }
  }
}

/* One call of an entry point in the module's process: the command, then its reply. */
static int host_launch(ka_backend_ctx *c, ka_module *m, const ka_launch *l) {
  host_cmd cmd;
  memset(&cmd, 0, sizeof cmd);
  cmd.op = HOST_OP_CALL;
  cmd.kernel = UINT32_MAX;
  for (int i = 0; i < m->nkernels; i++)
    if (!strcmp(m->names[i], l->kernel)) cmd.kernel = (uint32_t)i;
  if (cmd.kernel == UINT32_MAX) {
    snprintf(c->err, sizeof c->err, "entry point '%s' is not in the module", l->kernel);
    return KA_ELAUNCH;
  }
  if (m->pid <= 0) {
    snprintf(c->err, sizeof c->err, "the process running the submitted code is gone");
    return KA_EDEVICE;
  }
  if (l->nargs > HOST_MAX_ARGS) return KA_EINVAL;
  cmd.nargs = (uint32_t)l->nargs;
  for (int i = 0; i < l->nargs; i++) {
    const ka_arg *a = &l->args[i];
    if (a->kind == KA_ARG_I32) {
      cmd.args[i].kind = HOST_ARG_I32;
      cmd.args[i].v = (uint64_t)(uint32_t)a->v.i32;
    } else if (a->kind == KA_ARG_I64) {
      cmd.args[i].kind = HOST_ARG_I64;
      cmd.args[i].v = (uint64_t)a->v.i64;
    } else if (!a->v.ptr) {
      cmd.args[i].kind = HOST_ARG_NULL;
    } else {
      size_t off;
      host_alloc *al = host_find(c, a->v.ptr, 0, &off);
      if (!al) {
        snprintf(c->err, sizeof c->err, "argument %d of %s is not device memory", i, l->kernel);
        return KA_ELAUNCH;
      }
      cmd.args[i].kind = HOST_ARG_PTR;
      cmd.args[i].alloc = al->id;
      cmd.args[i].v = off;
    }
  }
  int used[HOST_MAX_ALLOCS] = {0};
  int vrc = host_views_for(c, m, l, used);
  if (vrc == KA_EOOM) return KA_EOOM;
  if (vrc != KA_OK) { /* the module process no longer takes commands */
    char why[256];
    host_why_dead(m, why, sizeof why);
    snprintf(c->err, sizeof c->err, "%s", why);
    return KA_EDEVICE;
  }
  cmd.nonce = host_nonce(c);
  double cpu0 = host_cpu_ms(m), wall0 = ka_now_s();
  if (m->have_mark) {
    c->busy_ms += cpu0 - m->cpu_after_ms;
    c->idle_ms += (wall0 - m->wall_after_s) * 1e3;
  }
  host_reply r;
  int rc = host_send(m, &cmd, -1);
  if (rc == KA_OK) rc = host_recv(m, &r);
  if (rc != KA_OK) {
    host_why_dead(m, c->err, sizeof c->err);
    m->have_mark = 0;
    return KA_EDEVICE;
  }
  m->cpu_after_ms = host_cpu_ms(m);
  m->wall_after_s = ka_now_s();
  m->have_mark = 1;
  host_views_after(c, m, used);
  if (r.nonce != cmd.nonce) {
    snprintf(c->err, sizeof c->err,
             "the process running the submitted code answered a call it was not given");
    kill(m->pid, SIGKILL);
    return KA_EDEVICE;
  }
  if (r.rc != 0) {
    snprintf(c->err, sizeof c->err, "%s", r.msg);
    return KA_ELAUNCH;
  }
  return KA_OK;
}

static int host_synchronize(ka_backend_ctx *c) {
  return KA_OK;
}

static int host_flush_cache(ka_backend_ctx *c) {
  /* Write then read every line so that dirty lines of the timed data are evicted. */
  unsigned char v = (unsigned char)++c->flush_round;
  memset(c->flush, v, c->flush_bytes);
  volatile unsigned sink = 0;
  for (size_t i = 0; i < c->flush_bytes; i += 64) sink += c->flush[i];
  (void)sink;
  return KA_OK;
}

static int host_timer_start(ka_backend_ctx *c) {
  c->excluded_s = 0;
  c->t0 = ka_now_s();
  return KA_OK;
}

/* The interval since timer_start, less the time launches spent mapping allocations into
 * a module process (host_views_for: the runner's work, not the module's). */
static int host_timer_stop(ka_backend_ctx *c, double *ms) {
  double dt = ka_now_s() - c->t0 - c->excluded_s;
  *ms = (dt > 0 ? dt : 0) * 1e3;
  return KA_OK;
}

static int host_flush_bytes(ka_backend_ctx *c, size_t *out) {
  *out = c->flush_bytes;
  return KA_OK;
}

/* Also charges, up to now, what each module process used since its last call ended, so
 * that work after a module's last call (of a case, or of the evaluation) is counted when
 * the runner reads this at the end of the case, not at a next launch that never comes. */
static int host_untimed_work(ka_backend_ctx *c, double *busy_ms, double *idle_ms) {
  for (int i = 0; i < c->nmods; i++) {
    ka_module *m = c->mods[i];
    if (!m->have_mark || m->pid <= 0) continue;
    double cpu = host_cpu_ms(m), now = ka_now_s();
    c->busy_ms += cpu - m->cpu_after_ms;
    c->idle_ms += (now - m->wall_after_s) * 1e3;
    m->cpu_after_ms = cpu;
    m->wall_after_s = now;
  }
  *busy_ms = c->busy_ms;
  *idle_ms = c->idle_ms;
  return KA_OK;
}

static const ka_backend_ops host_ops = {
    .api_version = KA_BACKEND_API_VERSION,
    .name = "host",
    .device_count = host_device_count,
    .open = host_open,
    .close = host_close,
    .last_error = host_last_error,
    .device_info = host_device_info,
    .telemetry = NULL,
    .compile = host_compile,
    .module_free = host_module_free,
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .copy_to_device = host_copy_to_device,
    .copy_to_host = host_copy_to_host,
    .memset8 = host_memset8,
    .launch = host_launch,
    .synchronize = host_synchronize,
    .flush_cache = host_flush_cache,
    .timer_start = host_timer_start,
    .timer_stop = host_timer_stop,
    .flush_bytes = host_flush_bytes,
    .untimed_work = host_untimed_work,
};

const ka_backend_ops *ka_backend_host(void) {
  return &host_ops;
}

/* ---- the module process (ka-runner --host-module SO KERNEL...)
 *
 * Its CPU time outside calls is judged as the submission's work (host_untimed_work).
 * MAP and UNMAP are carried out when they come; the runner follows them with a SYNC and
 * does not count the time up to its answer (host_work_end). Before it replies to a
 * call, the loop reads its own CPU clock: the kernel brings a running thread's
 * accounted time up to date only on a tick, a switch or such a read, so the runner,
 * reading the clock right after the reply while this thread still ran, saw up to a tick
 * of the call's work too little and counted it at the next reading, as work outside the
 * calls. */

/* One allocation as the module process holds it: a view of the runner's memfd. */
typedef struct host_mp_view {
  uint32_t id;
  unsigned char *base;
  size_t bytes;
} host_mp_view;

typedef struct host_mp {
  host_mp_view v[HOST_MAX_ALLOCS];
  int n;
} host_mp;

/* Receives one command; *fd gets a descriptor passed with it (-1 if none). 0; 1 when the
 * runner closed the socket; -1 when the message is not a command. */
static int host_mp_recv(int sock, host_cmd *cmd, int *fd) {
  for (;;) {
    struct iovec iov = {cmd, sizeof *cmd};
    union {
      char buf[CMSG_SPACE(sizeof(int))];
      struct cmsghdr align;
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    *fd = -1;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    if (n > 0 && cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
      memcpy(fd, CMSG_DATA(cm), sizeof *fd);
    if (n == (ssize_t)sizeof *cmd) return 0;
    if (*fd >= 0) close(*fd);
    return n == 0 ? 1 : -1;
  }
}

/* Carries out a MAP (fd: the allocation's memfd, closed here) or an UNMAP. 0, or -1 on a
 * MAP without a descriptor, beyond HOST_MAX_ALLOCS or that cannot be mapped. */
static int host_mp_view_cmd(host_mp *mp, const host_cmd *cmd, int fd) {
  if (cmd->op == HOST_OP_MAP) {
    if (fd < 0 || mp->n >= HOST_MAX_ALLOCS) return -1;
    void *p = mmap(NULL, cmd->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return -1;
    mp->v[mp->n++] = (host_mp_view){.id = cmd->id, .base = p, .bytes = cmd->size};
    return 0;
  }
  if (fd >= 0) close(fd);
  for (int i = 0; i < mp->n; i++)
    if (mp->v[i].id == cmd->id) {
      munmap(mp->v[i].base, mp->v[i].bytes);
      mp->v[i] = mp->v[--mp->n];
      break;
    }
  return 0;
}

/* Runs one CALL: its arguments resolved against the views, the entry point called
 * through libffi; *rep gets rc and a message (the nonce is the caller's). */
static void host_mp_call(const host_mp *mp, const host_cmd *cmd, void *sym, const char *name,
                         host_reply *rep) {
  ffi_type *types[HOST_MAX_ARGS];
  void *vals[HOST_MAX_ARGS], *ptrs[HOST_MAX_ARGS];
  int32_t i32s[HOST_MAX_ARGS];
  int64_t i64s[HOST_MAX_ARGS];
  memset(rep, 0, sizeof *rep);
  for (uint32_t i = 0; i < cmd->nargs && rep->rc == 0; i++) {
    switch (cmd->args[i].kind) {
      case HOST_ARG_I32:
        types[i] = &ffi_type_sint32;
        i32s[i] = (int32_t)(uint32_t)cmd->args[i].v;
        vals[i] = &i32s[i];
        break;
      case HOST_ARG_I64:
        types[i] = &ffi_type_sint64;
        i64s[i] = (int64_t)cmd->args[i].v;
        vals[i] = &i64s[i];
        break;
      default:
        types[i] = &ffi_type_pointer;
        ptrs[i] = NULL;
        if (cmd->args[i].kind == HOST_ARG_PTR) {
          for (int k = 0; k < mp->n; k++)
            if (mp->v[k].id == cmd->args[i].alloc && mp->v[k].base &&
                cmd->args[i].v <= mp->v[k].bytes)
              ptrs[i] = mp->v[k].base + cmd->args[i].v;
          if (!ptrs[i]) {
            rep->rc = -1;
            snprintf(rep->msg, sizeof rep->msg, "argument %u: unknown allocation", i);
          }
        }
        vals[i] = &ptrs[i];
        break;
    }
  }
  ffi_cif cif;
  if (rep->rc == 0 &&
      ffi_prep_cif(&cif, FFI_DEFAULT_ABI, cmd->nargs, &ffi_type_void, types) != FFI_OK) {
    rep->rc = -1;
    snprintf(rep->msg, sizeof rep->msg, "libffi could not prepare the call of %s", name);
  }
  if (rep->rc == 0) ffi_call(&cif, FFI_FN(sym), NULL, vals);
}

/* Loads the module and resolves its kernels into syms; *rep says how it went. */
static void *host_mp_load(int argc, char **argv, void **syms, host_reply *rep) {
  memset(rep, 0, sizeof *rep);
  void *dl = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    rep->rc = -1;
    snprintf(rep->msg, sizeof rep->msg, "loading the compiled module failed: %s", dlerror());
  }
  for (int i = 0; dl && i < argc - 3 && rep->rc == 0; i++) {
    syms[i] = dlsym(dl, argv[3 + i]);
    if (!syms[i]) {
      rep->rc = -1;
      snprintf(rep->msg, sizeof rep->msg, "entry point '%s' not found in the compiled module",
               argv[3 + i]);
    }
  }
  return dl;
}

int ka_host_module_main(int argc, char **argv) {
  const int sock = 0;
  if (argc < 3 || argc - 3 > HOST_MAX_KERNELS) return 2;
  const uint32_t nk = (uint32_t)(argc - 3);
  void *syms[HOST_MAX_KERNELS];
  host_reply rep;
  host_mp_load(argc, argv, syms, &rep);
  if (send(sock, &rep, sizeof rep, MSG_NOSIGNAL) != (ssize_t)sizeof rep || rep.rc) return 1;
  static host_mp mp; /* large: not on the stack */
  for (;;) {
    host_cmd cmd;
    int fd;
    int got = host_mp_recv(sock, &cmd, &fd);
    if (got) _exit(got > 0 ? 0 : 1);
    if (cmd.op == HOST_OP_MAP || cmd.op == HOST_OP_UNMAP) {
      if (host_mp_view_cmd(&mp, &cmd, fd)) _exit(1);
      continue;
    }
    if (fd >= 0) close(fd);
    memset(&rep, 0, sizeof rep);
    if (cmd.op == HOST_OP_CALL && cmd.kernel < nk && cmd.nargs <= HOST_MAX_ARGS)
      host_mp_call(&mp, &cmd, syms[cmd.kernel], argv[3 + cmd.kernel], &rep);
    else if (cmd.op != HOST_OP_SYNC) /* SYNC: every earlier command is done */
      _exit(1);
    rep.nonce = cmd.nonce;
    struct timespec cpu; /* the kernel's account of this thread brought up to date */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    if (send(sock, &rep, sizeof rep, MSG_NOSIGNAL) != (ssize_t)sizeof rep) _exit(1);
  }
}
