/* The host backend: C submissions compiled by the system C compiler into a shared
 * object, called through libffi with the task's entry-point arguments, timed with
 * CLOCK_MONOTONIC. "Device memory" is host memory; the last-level cache is flushed by
 * writing a buffer of twice its size. */
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
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "ka_common.h"

struct ka_backend_ctx {
  char err[1024];
  unsigned char *flush;
  size_t flush_bytes;
  unsigned flush_round;
  double t0;
};

struct ka_module {
  void *dl;
  int nkernels;
  char **names;
  void **syms;
};

static int64_t host_llc_bytes(void) {
  /* Largest cache level reported by sysfs (index3 is L3 on x86; fall back to sysconf). */
  int64_t best = 0;
  for (int i = 0; i < 8; i++) {
    char p[128], *txt;
    snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (ka_read_file(p, 64, &txt, NULL)) continue;
    char *end;
    long long v = strtoll(txt, &end, 10);
    if (*end == 'K')
      v *= 1024;
    else if (*end == 'M')
      v *= 1024 * 1024;
    free(txt);
    if (v > best) best = v;
  }
  if (!best) best = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return best > 0 ? best : 32 << 20;
}

static int host_device_count(int *count, char *err, size_t errlen) {
  *count = 1;
  return KA_OK;
}

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
  *out = c;
  return KA_OK;
}

static void host_close(ka_backend_ctx *c) {
  if (!c) return;
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
  snprintf(d->driver, sizeof d->driver, "%s", u.release);
  return KA_OK;
}

/* Runs argv with stdout/stderr captured into *log, killing it after timeout_s. */
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
    execvp(argv[0], argv);
    _exit(127);
  }
  close(pfd[1]);
  ka_sb sb = {0};
  double deadline = ka_now_s() + timeout_s;
  int timed_out = 0;
  for (;;) {
    int ms = (int)((deadline - ka_now_s()) * 1000);
    if (ms <= 0) {
      timed_out = 1;
      break;
    }
    struct pollfd p = {pfd[0], POLLIN, 0};
    int r = poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;
    char buf[4096];
    ssize_t n = read(pfd[0], buf, sizeof buf);
    if (n <= 0) break;
    if (sb.len < (64 << 10)) ka_sb_append(&sb, buf, (size_t)n);
  }
  close(pfd[0]);
  if (timed_out) {
    kill(-pid, SIGKILL);
    ka_sb_puts(&sb, "\n[kernelarena] compiler killed at its deadline\n");
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  *log = ka_sb_take(&sb);
  if (timed_out) return KA_ETIMEDOUT;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 127) return KA_EUNAVAIL;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? KA_OK : KA_ECOMPILE;
}

static void host_module_free(ka_backend_ctx *c, ka_module *m) {
  if (!m) return;
  if (m->dl) dlclose(m->dl);
  for (int i = 0; i < m->nkernels; i++) free(m->names[i]);
  free(m->names);
  free(m->syms);
  free(m);
}

static int host_compile(ka_backend_ctx *c, const ka_compile_req *req, ka_module **out, char **log,
                        char *err, size_t errlen) {
  if (out) *out = NULL;
  if (log) *log = NULL;
  if (strcmp(req->language, "c"))
    return ka_seterr(err, errlen, KA_EINVAL, "host backend compiles C, not %s", req->language);
  if (!req->workdir) return ka_seterr(err, errlen, KA_EINVAL, "host compile needs a workdir");
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
  const char *cc = getenv("KA_HOST_CC");
  char *argv[] = {
      (char *)(cc && *cc ? cc : "cc"), "-std=gnu11", "-O2",       "-shared", "-fPIC", "-o", so,
      (char *)req->sources[0].name,    "-lm",        "-lpthread", NULL};
  char *clog = NULL;
  int rc = host_run_compiler(argv, req->workdir, req->timeout_s > 0 ? req->timeout_s : 60, &clog);
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
    return ka_seterr(err, errlen, rc == KA_ETIMEDOUT ? KA_ECOMPILE : rc, "compilation failed");
  }
  ka_module *m = calloc(1, sizeof *m);
  if (!m) {
    free(clog);
    return KA_ENOMEM;
  }
  m->dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  ka_sb sb = {0};
  ka_sb_puts(&sb, clog ? clog : "");
  free(clog);
  if (!m->dl) {
    ka_sb_printf(&sb, "loading the compiled module failed: %s\n", dlerror());
    rc = KA_ECOMPILE;
  } else {
    m->names = calloc((size_t)req->nkernels + 1, sizeof *m->names);
    m->syms = calloc((size_t)req->nkernels + 1, sizeof *m->syms);
    for (int i = 0; i < req->nkernels && m->names; i++) {
      m->names[i] = strdup(req->kernels[i]);
      m->nkernels = i + 1;
      m->syms[i] = dlsym(m->dl, req->kernels[i]);
      if (!m->syms[i]) {
        ka_sb_printf(&sb, "entry point '%s' not found in the compiled module\n", req->kernels[i]);
        rc = KA_ECOMPILE;
      }
    }
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

static int host_mem_alloc(ka_backend_ctx *c, size_t bytes, ka_devptr *out) {
  void *p = NULL;
  if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0) {
    snprintf(c->err, sizeof c->err, "host allocation of %zu bytes failed", bytes);
    return KA_EOOM;
  }
  *out = (ka_devptr)(uintptr_t)p;
  return KA_OK;
}

static void host_mem_free(ka_backend_ctx *c, ka_devptr p) {
  free((void *)(uintptr_t)p);
}

static int host_copy_to_device(ka_backend_ctx *c, ka_devptr dst, const void *src, size_t n) {
  memcpy((void *)(uintptr_t)dst, src, n);
  return KA_OK;
}

static int host_copy_to_host(ka_backend_ctx *c, void *dst, ka_devptr src, size_t n) {
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return KA_OK;
}

static int host_memset8(ka_backend_ctx *c, ka_devptr dst, uint8_t v, size_t n) {
  memset((void *)(uintptr_t)dst, v, n);
  return KA_OK;
}

static int host_launch(ka_backend_ctx *c, ka_module *m, const ka_launch *l) {
  void *fn = NULL;
  for (int i = 0; i < m->nkernels; i++)
    if (!strcmp(m->names[i], l->kernel)) fn = m->syms[i];
  if (!fn) {
    snprintf(c->err, sizeof c->err, "entry point '%s' is not in the module", l->kernel);
    return KA_ELAUNCH;
  }
  if (l->nargs > 32) return KA_EINVAL;
  ffi_type *types[32];
  void *vals[32];
  void *ptrs[32];
  for (int i = 0; i < l->nargs; i++) {
    switch (l->args[i].kind) {
      case KA_ARG_PTR:
        types[i] = &ffi_type_pointer;
        ptrs[i] = (void *)(uintptr_t)l->args[i].v.ptr;
        vals[i] = &ptrs[i];
        break;
      case KA_ARG_I32:
        types[i] = &ffi_type_sint32;
        vals[i] = (void *)&l->args[i].v.i32;
        break;
      case KA_ARG_I64:
        types[i] = &ffi_type_sint64;
        vals[i] = (void *)&l->args[i].v.i64;
        break;
    }
  }
  ffi_cif cif;
  if (ffi_prep_cif(&cif, FFI_DEFAULT_ABI, (unsigned)l->nargs, &ffi_type_void, types) != FFI_OK) {
    snprintf(c->err, sizeof c->err, "libffi could not prepare the call of %s", l->kernel);
    return KA_ELAUNCH;
  }
  ffi_call(&cif, FFI_FN(fn), NULL, vals);
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
  c->t0 = ka_now_s();
  return KA_OK;
}

static int host_timer_stop(ka_backend_ctx *c, double *ms) {
  *ms = (ka_now_s() - c->t0) * 1e3;
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
};

const ka_backend_ops *ka_backend_host(void) {
  return &host_ops;
}
