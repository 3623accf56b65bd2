/* The Triton compile path (gpuexec/backends/triton.h) through the real driver, Python and
 * triton, in the compile sandbox, for sm_90, without a GPU.
 *
 *   triton_compile_test baselines TASKS  every triton task's baseline (and a task's starter/,
 *                                        instruction2triton): a bundle with a cubin
 *                                        per unit holding the kernel's symbol, num_warps as
 *                                        planned, the plan rewritten onto it (kernel names,
 *                                        block 32 x num_warps, Triton's two scratch pointers),
 *                                        and the cuda backend's compile-only check accepts it
 *   triton_compile_test candidates TASKS DIR  every candidate DIR/FAMILY/NAME/ builds for
 *                                        its task as the baselines do (at least 4)
 *   triton_compile_test adversarial TASKS SRC  the manifest's triton_compile runs
 *                                        (tests/adversarial/manifest.yaml): refused as
 *                                        expected, before anything of theirs runs
 *   triton_compile_test faults TASKS     a compile error (COMPILE_ERROR with the traceback's
 *                                        last lines), host code refused, a kernel the plan
 *                                        names but the source lacks, a compile that hangs
 *                                        (ended at its deadline), the cache (a hit the second
 *                                        time, a miss for another constexpr), a corrupt
 *                                        bundle refused
 *
 * Environment (tests/triton.cmake): KA_TRITON_PYTHON (a Python with triton 3.6; when it
 * lacks triton the test FAILS and says so: CI installs it, scripts/install-python-deps.sh),
 * KA_TRITON_PREFIX, KA_BACKEND_PATH. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "ka_check.h"
#include "ka_common.h"
#include "manifest.h"
#include "task.h"
#include "triton.h"
#include "triton_bundle.h"

static char tc_tmp[PATH_MAX];

/* A fresh folder under tc_tmp for one build. */
static void tc_workdir(const char *name, char *out, size_t n) {
  snprintf(out, n, "%s/%s", tc_tmp, name);
  ka_rmtree(out);
  ka_mkdirs(out);
}

static ka_plan *tc_plan(const ka_task *t, const char *yaml) {
  ka_plan *p = NULL;
  char err[512];
  int rc = ka_plan_parse(t, yaml, strlen(yaml), &p, err, sizeof err);
  check(rc == KA_OK, "plan parses", "%s", rc ? err : "ok");
  return p;
}

/* Builds text as t's source with plan yaml; returns the rc, bundle and log. */
static int tc_build(const ka_task *t, const char *yaml, const char *text, const char *wdname,
                    double timeout_s, void **b, size_t *n, int *cached, char **log, char *err,
                    size_t errlen) {
  ka_plan *p = tc_plan(t, yaml);
  if (!p) return KA_EPARSE;
  char wd[PATH_MAX];
  tc_workdir(wdname, wd, sizeof wd);
  ka_source src = {.name = t->source, .text = text, .len = strlen(text)};
  int rc = ka_triton_build(t, p, &src, "sm_90", wd, timeout_s, b, n, cached, log, err, errlen);
  ka_plan_free(p);
  return rc;
}

static char *tc_read(const char *dir, const char *name) {
  char p[PATH_MAX], *s = NULL;
  size_t n;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  if (ka_read_file(p, 1 << 20, &s, &n)) return NULL;
  return s;
}

/* The baseline's version of t's editable file name (NULL when unreadable). */
static char *tc_baseline_file(const ka_task *t, const char *name) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/baseline", t->dir);
  return tc_read(dir, name);
}

/* One set of t's editable files in folder `files` (what: "baseline", "starter" or
 * "candidate"): build, check the bundle against the plan, rewrite, backend check. */
static void tc_build_files(const ka_task *t, const ka_backend_ops *cuda, const char *files,
                           const char *what) {
  char *text = tc_read(files, t->source), *yaml = tc_read(files, t->launch_plan);
  if (!text || !yaml) {
    check(0, t->id, "cannot read the %s in %s", what, files);
    free(text);
    free(yaml);
    return;
  }
  ka_plan *p = tc_plan(t, yaml);
  char wd[PATH_MAX], err[1024] = "";
  snprintf(wd, sizeof wd, "%s_%s", t->id, what);
  for (char *c = wd; *c; c++)
    if (*c == '/') *c = '_';
  char dir[PATH_MAX];
  tc_workdir(wd, dir, sizeof dir);
  ka_source src = {.name = t->source, .text = text, .len = strlen(text)};
  void *b = NULL;
  size_t n = 0;
  int cached = -1;
  char *log = NULL;
  double t0 = ka_now_s();
  int rc =
      p ? ka_triton_build(t, p, &src, "sm_90", dir, 120, &b, &n, &cached, &log, err, sizeof err)
        : KA_EPARSE;
  check(rc == KA_OK && b && n > 0 && cached == 0, t->id, "%s compiled in %.2f s (%zu bytes): %s%s",
        what, ka_now_s() - t0, n, rc ? err : "ok", rc && log ? log : "");
  ka_triton_unit u[KA_TRITON_MAX_UNITS];
  int nu = 0;
  if (rc == KA_OK) {
    int prc = ka_triton_bundle_parse(b, n, u, &nu);
    check(prc == 0 && nu >= 1, "bundle parses", "%d unit(s)", nu);
    for (int k = 0; k < nu; k++) {
      int elf = u[k].cubin_len > 4 && !memcmp(u[k].cubin, "\177ELF", 4);
      int warps = 0;
      for (int i = 0; i < p->nlaunches; i++)
        if (!strcmp(p->launches[i].kernel, u[k].sym)) warps = p->launches[i].num_warps;
      char want[160];
      snprintf(want, sizeof want, "%s__ka%d", u[k].sym, k);
      check(elf && warps > 0 && (int)u[k].warps == warps && !strcmp(u[k].name, want) &&
                u[k].scratch_bytes == 0,
            "unit metadata",
            "%s: symbol %s, ELF %d, %zu bytes, warps %u (plan %d), shared %u, "
            "scratch %llu",
            u[k].name, u[k].sym, elf, u[k].cubin_len, u[k].warps, warps, u[k].shared,
            (unsigned long long)u[k].scratch_bytes);
    }
    /* a tl.dot kernel on sm_90 stages its tiles in shared memory */
    if (strstr(t->id, "matmul") && !strcmp(what, "baseline"))
      check(nu == 1 && u[0].shared > 0, "matmul uses shared memory", "%u bytes",
            nu ? u[0].shared : 0);
    int nargs0 = p->launches[0].nargs, warps0 = p->launches[0].num_warps;
    rc = ka_triton_plan_apply(t, p, b, n, err, sizeof err);
    char blk[16];
    snprintf(blk, sizeof blk, "%d", 32 * warps0);
    check(rc == KA_OK && !strcmp(p->launches[0].kernel, u[0].name) &&
              !strcmp(p->launches[0].block[0], blk) && p->launches[0].nargs == nargs0 + 2 &&
              p->nkernels == nu && p->nscratch >= 1,
          "plan rewritten", "%s: kernel %s block %s args %d shared %s", rc ? err : "ok",
          p->launches[0].kernel, p->launches[0].block[0], p->launches[0].nargs,
          p->launches[0].shared_bytes);
    /* what the runner evaluates per case: grid, block, shared memory, the scratch size */
    ka_vars v = {0};
    ka_task_case_vars(t, &t->cases[0], &v);
    static const char *const facts[] = {"sm_count", "warp_size", "max_threads", "l2_bytes",
                                        "shared_per_block"};
    static const int64_t fact_v[] = {132, 32, 1024, 60 << 20, 48 << 10};
    for (int f = 0; f < 5; f++) ka_vars_set(&v, facts[f], fact_v[f]);
    int bad = 0;
    char eerr[256] = "";
    for (int i = 0; i < p->nlaunches && !bad; i++) {
      const ka_plan_launch *l = &p->launches[i];
      const char *ex[] = {l->grid[0],  l->grid[1],  l->grid[2],     l->block[0],
                          l->block[1], l->block[2], l->shared_bytes};
      for (int j = 0; j < 7 && !bad; j++) {
        int64_t val;
        bad = ka_expr_eval(ex[j], &v, &val, eerr, sizeof eerr) != KA_OK;
      }
    }
    for (int i = 0; i < p->nscratch && !bad; i++) {
      int64_t val;
      bad = ka_expr_eval(p->scratch[i].count, &v, &val, eerr, sizeof eerr) != KA_OK || val < 1;
    }
    check(!bad, "rewritten plan evaluates", "case %s: %s", t->cases[0].name, bad ? eerr : "ok");
    if (cuda) {
      ka_source s0 = {.name = t->source, .text = text, .len = strlen(text)};
      ka_compile_req req = {.language = "triton",
                            .sources = &s0,
                            .nsources = 1,
                            .kernels = (const char *const *)p->kernels,
                            .nkernels = p->nkernels,
                            .arch = "sm_90",
                            .image = b,
                            .image_len = n};
      char *blog = NULL;
      rc = cuda->compile(NULL, &req, NULL, &blog, err, sizeof err);
      check(rc == KA_OK, "cuda backend accepts the bundle", "%s %s", rc ? err : "ok",
            blog ? blog : "");
      free(blog);
    }
  }
  free(b);
  free(log);
  ka_plan_free(p);
  free(text);
  free(yaml);
}

static const char *tc_gelu_plan =
    "kernels: [gelu_kernel]\n"
    "launches:\n"
    "  - kernel: gelu_kernel\n"
    "    grid: [\"ceil_div(n, 1024)\"]\n"
    "    args: [x, y, n]\n"
    "    constexprs: {BLOCK: 1024}\n";

static void tc_faults(const ka_task *gelu) {
  char err[1024];
  void *b = NULL;
  size_t n = 0;
  int cached = 0;
  char *log = NULL;
  /* an error inside the kernel: Triton's CompilationError, the traceback's last lines */
  const char *bad =
      "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
      "def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
      "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
      "    tl.store(y_ptr + offs, undefined_name * 2, mask=offs < n)\n";
  int rc = tc_build(gelu, tc_gelu_plan, bad, "bad", 60, &b, &n, &cached, &log, err, sizeof err);
  check(rc == KA_ECOMPILE && !b && log && strstr(log, "undefined_name") &&
            strstr(log, "triton compile of kernels.py failed") && err[0],
        "compile error", "rc=%s err='%s'\n%s", ka_strerror(rc), err, log ? log : "");
  free(log), log = NULL;
  /* host code at the top level is refused before anything runs */
  const char *host = "import os\nos.system('touch /tmp/ka_triton_pwned')\n";
  rc = tc_build(gelu, tc_gelu_plan, host, "host", 60, &b, &n, &cached, &log, err, sizeof err);
  check(rc == KA_ECOMPILE && log && strstr(log, "import of 'os'") &&
            access("/tmp/ka_triton_pwned", F_OK) != 0,
        "host code refused", "rc=%s log=%s", ka_strerror(rc), log ? log : "");
  free(log), log = NULL;
  const char *top = "import triton\nprint('hello from the submission')\n";
  rc = tc_build(gelu, tc_gelu_plan, top, "top", 60, &b, &n, &cached, &log, err, sizeof err);
  check(rc == KA_ECOMPILE && log && strstr(log, "Expr at the top level") &&
            !strstr(log, "hello from the submission\n"),
        "top-level statement refused", "rc=%s log=%s", ka_strerror(rc), log ? log : "");
  free(log), log = NULL;
  /* code in what a def evaluates (a default, an annotation, a decorator's argument) is
   * refused before anything runs (review 2026-12-01: a default of
   * __import__("sys").exit(125) made the compile an INFRA_ERROR) */
  static const char *const in_def[][2] = {
      {"@triton.jit\ndef gelu_kernel(x_ptr, y_ptr, n=__import__('os').system('touch "
       "/tmp/ka_triton_pwned2'), BLOCK: tl.constexpr = 4):\n    pass\n",
       "defaults of 'gelu_kernel' must be literals"},
      {"@triton.jit\ndef gelu_kernel(x_ptr: __import__('os').system('touch "
       "/tmp/ka_triton_pwned2'), "
       "y_ptr, n, BLOCK: tl.constexpr):\n    pass\n",
       "must name a type"},
      {"@triton.jit(do_not_specialize=[__import__('os').system('touch /tmp/ka_triton_pwned2')])\n"
       "def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n    pass\n",
       "must be literal keywords"},
      {"X: __import__('os').system('touch /tmp/ka_triton_pwned2') = 1\n", "must name a type"},
  };
  for (size_t i = 0; i < sizeof in_def / sizeof in_def[0]; i++) {
    char srcbuf[1024];
    snprintf(srcbuf, sizeof srcbuf, "import triton\nimport triton.language as tl\n\n\n%s",
             in_def[i][0]);
    rc = tc_build(gelu, tc_gelu_plan, srcbuf, "indef", 60, &b, &n, &cached, &log, err, sizeof err);
    check(rc == KA_ECOMPILE && log && strstr(log, in_def[i][1]) &&
              access("/tmp/ka_triton_pwned2", F_OK) != 0,
          "code in a def refused", "want '%s': rc=%s log=%s", in_def[i][1], ka_strerror(rc),
          log ? log : "");
    free(log), log = NULL;
  }
  /* a kernel body that starts a program through what Triton's code generator evaluates
   * (red team 2026-12-01: it ran): refused by the driver's audit hook, a COMPILE_ERROR */
  const char *body =
      "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
      "def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
      "    getattr(triton.compiler.compiler.os, 'system')('touch /tmp/ka_triton_pwned3')\n"
      "    offs = tl.arange(0, BLOCK)\n"
      "    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)\n";
  rc = tc_build(gelu, tc_gelu_plan, body, "body", 60, &b, &n, &cached, &log, err, sizeof err);
  check(rc == KA_ECOMPILE && access("/tmp/ka_triton_pwned3", F_OK) != 0,
        "a program started from a kernel body refused", "rc=%s log=%s", ka_strerror(rc),
        log ? log : "");
  free(log), log = NULL;
  /* the plan names a kernel the source does not define */
  const char *other =
      "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
      "def other(x_ptr):\n    pass\n";
  rc = tc_build(gelu, tc_gelu_plan, other, "missing", 60, &b, &n, &cached, &log, err, sizeof err);
  check(rc == KA_ECOMPILE && log && strstr(log, "does not define as @triton.jit"), "missing kernel",
        "rc=%s log=%s", ka_strerror(rc), log ? log : "");
  free(log), log = NULL;
  /* a compile that does not end: a static_range unrolled a billion times */
  const char *hang =
      "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
      "def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
      "    acc = tl.zeros([BLOCK], tl.float32)\n"
      "    for i in tl.static_range(1000000000):\n"
      "        acc += 1.0\n"
      "    offs = tl.arange(0, BLOCK)\n"
      "    tl.store(y_ptr + offs, acc, mask=offs < n)\n";
  double t0 = ka_now_s();
  rc = tc_build(gelu, tc_gelu_plan, hang, "hang", 4, &b, &n, &cached, &log, err, sizeof err);
  double took = ka_now_s() - t0;
  check(rc == KA_ECOMPILE && strstr(err, "deadline") && took < 8, "hanging compile",
        "rc=%s after %.1f s: %s", ka_strerror(rc), took, err);
  free(log), log = NULL;

  /* the cache: a miss, then a hit with the same bytes; another constexpr misses */
  char cache[PATH_MAX];
  snprintf(cache, sizeof cache, "%s/cache", tc_tmp);
  setenv("KA_TRITON_CACHE", cache, 1);
  setenv("KA_TRITON_VERSION", "3.6.0", 1);
  char *text = tc_baseline_file(gelu, gelu->source);
  void *b1 = NULL, *b2 = NULL, *b3 = NULL;
  size_t n1 = 0, n2 = 0, n3 = 0;
  int c1 = -1, c2 = -1, c3 = -1;
  rc = tc_build(gelu, tc_gelu_plan, text, "c1", 60, &b1, &n1, &c1, &log, err, sizeof err);
  check(rc == KA_OK && c1 == 0, "cache: first compile", "%s cached %d", rc ? err : "ok", c1);
  free(log), log = NULL;
  t0 = ka_now_s();
  rc = tc_build(gelu, tc_gelu_plan, text, "c2", 60, &b2, &n2, &c2, &log, err, sizeof err);
  took = ka_now_s() - t0;
  check(rc == KA_OK && c2 == 1 && n1 == n2 && b1 && b2 && !memcmp(b1, b2, n1) && took < 0.5 &&
            log && strstr(log, "triton compile cache"),
        "cache: hit", "%s cached %d in %.3f s, %zu vs %zu bytes", rc ? err : "ok", c2, took, n1,
        n2);
  free(log), log = NULL;
  char plan2[512];
  snprintf(plan2, sizeof plan2, "%s", tc_gelu_plan);
  char *blk = strstr(plan2, "1024}");
  if (blk) memcpy(blk, "2048}", 5);
  rc = tc_build(gelu, plan2, text, "c3", 60, &b3, &n3, &c3, &log, err, sizeof err);
  check(rc == KA_OK && c3 == 0, "cache: another constexpr misses", "%s cached %d", rc ? err : "ok",
        c3);
  free(log), log = NULL;
  /* a bundle that does not parse (truncated) is refused by the plan rewrite */
  ka_plan *p = tc_plan(gelu, tc_gelu_plan);
  rc = p && b1 ? ka_triton_plan_apply(gelu, p, b1, n1 - 1, err, sizeof err) : KA_EINVAL;
  check(rc == KA_EINVAL, "truncated bundle refused", "rc=%s %s", ka_strerror(rc), err);
  ka_plan_free(p);
  free(b1), free(b2), free(b3), free(text);
  unsetenv("KA_TRITON_CACHE");
}

/* Runs ka_triton_build with a stand-in driver (KA_TRITON_DRIVER) of the given Python
 * text, in workdir NAME; returns its code, the log in *log (caller frees). */
static int tc_standin(const ka_task *gelu, const char *name, const char *text, char **log) {
  char wd[PATH_MAX], drv[PATH_MAX + 16], err[1024];
  tc_workdir(name, wd, sizeof wd);
  snprintf(drv, sizeof drv, "%s/driver.py", wd);
  ka_write_file(drv, text, strlen(text));
  setenv("KA_TRITON_DRIVER", drv, 1);
  void *b = NULL;
  size_t n = 0;
  int cached = 0;
  char *src = tc_baseline_file(gelu, gelu->source);
  ka_plan *p = tc_plan(gelu, tc_gelu_plan);
  ka_source s0 = {.name = gelu->source, .text = src ? src : "", .len = src ? strlen(src) : 0};
  int rc = p ? ka_triton_build(gelu, p, &s0, "sm_90", wd, 60, &b, &n, &cached, log, err, sizeof err)
             : KA_EPARSE;
  ka_plan_free(p);
  unsetenv("KA_TRITON_DRIVER");
  free(src);
  free(b);
  return rc;
}

/* Whatever the process of the compile does, after it started it is the submission's:
 * the exit codes our own launch uses (125 sandbox, 127 exec) are a COMPILE_ERROR from
 * it, an exit 0 without the outputs too, and a process it leaves (fds closed, not in a
 * session of its own) is gone when the compile returns (review 2026-12-01). */
static void tc_exits(const ka_task *gelu) {
  char *log = NULL;
  int rc = tc_standin(gelu, "exit125", "import sys\nsys.exit(125)\n", &log);
  check(rc == KA_ECOMPILE, "driver exit 125: the submission's COMPILE_ERROR", "rc=%s",
        ka_strerror(rc));
  free(log), log = NULL;
  rc = tc_standin(gelu, "exit127", "import os\nos._exit(127)\n", &log);
  check(rc == KA_ECOMPILE, "driver exit 127: COMPILE_ERROR", "rc=%s", ka_strerror(rc));
  free(log), log = NULL;
  rc = tc_standin(gelu, "exit0", "import os\nos._exit(0)\n", &log);
  check(rc == KA_ECOMPILE, "driver exit 0 without outputs: COMPILE_ERROR", "rc=%s",
        ka_strerror(rc));
  free(log), log = NULL;
  /* (the compile's folder is the one it may write: tc_standin's workdir, its cwd) */
  char pidfile[PATH_MAX + 16];
  snprintf(pidfile, sizeof pidfile, "%s/leftover/left.pid", tc_tmp);
  const char *text =
      "import os, time\n"
      "if os.fork() == 0:\n"
      "    open('left.pid', 'w').write(str(os.getpid()))\n"
      "    os.close(1); os.close(2)\n"
      "    time.sleep(60)\n"
      "    os._exit(0)\n"
      "time.sleep(0.5)\n"
      "os._exit(0)\n";
  rc = tc_standin(gelu, "leftover", text, &log);
  char *pid_text = NULL;
  size_t plen = 0;
  long pid = ka_read_file(pidfile, 64, &pid_text, &plen) == KA_OK ? strtol(pid_text, NULL, 10) : 0;
  int alive = pid > 0 && kill((pid_t)pid, 0) == 0;
  /* a zombie waiting for its reaper counts as gone */
  char stat[64], state = 0;
  snprintf(stat, sizeof stat, "/proc/%ld/stat", pid);
  FILE *f = alive ? fopen(stat, "r") : NULL;
  if (f && fscanf(f, "%*d %*s %c", &state) == 1 && state == 'Z') alive = 0;
  if (f) fclose(f);
  check(rc == KA_ECOMPILE && pid > 0 && !alive, "a process the compile left is killed",
        "rc=%s pid %ld %s", ka_strerror(rc), pid, alive ? "STILL RUNS" : "gone");
  free(pid_text);
  free(log);
}

/* The compile process's sandbox, seen from inside: a stand-in driver (KA_TRITON_DRIVER)
 * that reports which descriptors it inherited (a descriptor of ours is open here, not
 * close-on-exec), whether it can open a TCP socket, read the task folder, or write
 * outside its folder, and exits 1 so that its words come back as the log. */
static void tc_sandbox(const ka_task *gelu) {
  char drv[PATH_MAX], probe_file[PATH_MAX], err[1024];
  char wd[PATH_MAX];
  tc_workdir("spy", wd, sizeof wd); /* the driver must be in the sandbox's reach: its folder */
  snprintf(drv, sizeof drv, "%s/spy_driver.py", wd);
  snprintf(probe_file, sizeof probe_file, "%s/outside.txt", tc_tmp);
  char text[2048];
  snprintf(
      text, sizeof text,
      "import os, socket, sys\n"
      "def ok(fd):\n"
      "    try:\n        os.fstat(fd)\n        return True\n"
      "    except OSError:\n        return False\n"
      "print('inherited', [fd for fd in range(3, 256) if ok(fd)])\n"
      "try:\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n    print('socket: opened')\n"
      "except OSError as e:\n    print('socket: refused')\n"
      "try:\n    open('%s/task.yaml').read()\n    print('task folder: read')\n"
      "except OSError:\n    print('task folder: refused')\n"
      "try:\n    open('%s', 'w').write('x')\n    print('outside: written')\n"
      "except OSError:\n    print('outside: refused')\n"
      "sys.exit(1)\n",
      gelu->dir, probe_file);
  ka_write_file(drv, text, strlen(text));
  int keep = dup(1); /* not close-on-exec */
  setenv("KA_TRITON_DRIVER", drv, 1);
  void *b = NULL;
  size_t n = 0;
  int cached = 0;
  char *log = NULL;
  char *src = tc_baseline_file(gelu, gelu->source);
  ka_plan *p = tc_plan(gelu, tc_gelu_plan);
  ka_source s0 = {.name = gelu->source, .text = src ? src : "", .len = src ? strlen(src) : 0};
  int rc =
      p ? ka_triton_build(gelu, p, &s0, "sm_90", wd, 60, &b, &n, &cached, &log, err, sizeof err)
        : KA_EPARSE;
  ka_plan_free(p);
  unsetenv("KA_TRITON_DRIVER");
  close(keep);
  const char *l = log ? log : "";
  check(rc == KA_ECOMPILE && strstr(l, "inherited []"), "compile process inherits no descriptor",
        "%s", l);
  check(strstr(l, "socket: refused") != NULL, "compile process: no network", "%s", l);
  check(strstr(l, "task folder: refused") && strstr(l, "outside: refused") &&
            access(probe_file, F_OK) != 0,
        "compile process: its folder only", "%s", l);
  free(log);
  free(src);
}

/* A bundle of one unit made by hand (triton_bundle.h's layout). */
static size_t tc_make_bundle(unsigned char *b, const char *name, const char *sym, uint32_t warps,
                             uint64_t scratch) {
  size_t off = 0;
  uint32_t ver = 1, cnt = 1, shared = 0, align = 8, nl = (uint32_t)strlen(name),
           sl = (uint32_t)strlen(sym);
  uint64_t clen = 4;
#define TC_PUT(p, n) (memcpy(b + off, (p), (n)), off += (n))
  TC_PUT(KA_TRITON_MAGIC, 8);
  TC_PUT(&ver, 4);
  TC_PUT(&cnt, 4);
  TC_PUT(&nl, 4);
  TC_PUT(name, nl);
  TC_PUT(&sl, 4);
  TC_PUT(sym, sl);
  TC_PUT(&shared, 4);
  TC_PUT(&warps, 4);
  TC_PUT(&scratch, 8);
  TC_PUT(&align, 4);
  TC_PUT(&clen, 8);
  TC_PUT("\177ELF", 4);
#undef TC_PUT
  return off;
}

/* Triton's global scratch: a unit that needs it sizes the plan's scratch buffer as
 * bytes per program x programs, for every case (no Python needed). */
static void tc_scratch(const ka_task *gelu) {
  unsigned char b[512];
  size_t n = tc_make_bundle(b, "gelu_kernel__ka0", "gelu_kernel", 8, 64);
  ka_plan *p = tc_plan(gelu, tc_gelu_plan);
  char err[512] = "";
  int rc = p ? ka_triton_plan_apply(gelu, p, b, n, err, sizeof err) : KA_EPARSE;
  int64_t got = -1, want = -1;
  if (rc == KA_OK) {
    ka_vars v = {0};
    ka_task_case_vars(gelu, &gelu->cases[0], &v);
    ka_expr_eval(p->scratch[p->nscratch - 1].count, &v, &got, err, sizeof err);
    want = (gelu->cases[0].values[0] + 1023) / 1024 * 64;
  }
  check(rc == KA_OK && got == want && !strcmp(p->launches[0].block[0], "256"),
        "global scratch sized per program", "rc=%s count '%s' = %lld (want %lld), block %s %s",
        ka_strerror(rc), rc == KA_OK ? p->scratch[p->nscratch - 1].count : "", (long long)got,
        (long long)want, rc == KA_OK ? p->launches[0].block[0] : "", err);
  ka_plan_free(p);
  /* a unit name that does not match the plan's launch is refused */
  n = tc_make_bundle(b, "other__ka0", "other", 4, 0);
  p = tc_plan(gelu, tc_gelu_plan);
  rc = p ? ka_triton_plan_apply(gelu, p, b, n, err, sizeof err) : KA_EPARSE;
  check(rc == KA_EINVAL, "bundle of another plan refused", "rc=%s %s", ka_strerror(rc), err);
  ka_plan_free(p);
}

/* The plan parser's triton fields (no Python needed). */
static void tc_plan_fields(const ka_task *gelu) {
  static const struct {
    const char *yaml, *want;
  } bad[] = {
      {"kernels: [gelu_kernel]\nlaunches:\n  - {kernel: gelu_kernel, grid: [1], block: [256], "
       "args: [x, y, n]}\n",
       "no block"},
      {"kernels: [gelu_kernel]\nlaunches:\n  - {kernel: gelu_kernel, grid: [1], num_warps: 3, "
       "args: [x, y, n]}\n",
       "power of 2"},
      {"kernels: [gelu_kernel]\nlaunches:\n  - {kernel: gelu_kernel, grid: [1], constexprs: "
       "{BLOCK: 1.5}, args: [x, y, n]}\n",
       "integer or true/false"},
      {"kernels: [gelu_kernel]\nlaunches:\n  - {kernel: gelu_kernel, grid: [1], constexprs: "
       "{\"a b\": 1}, args: [x, y, n]}\n",
       "not an identifier"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ka_plan *p = NULL;
    char err[512] = "";
    int rc = ka_plan_parse(gelu, bad[i].yaml, strlen(bad[i].yaml), &p, err, sizeof err);
    check(rc == KA_EPARSE && !p && strstr(err, bad[i].want), "plan refused", "want '%s': %s",
          bad[i].want, err);
    ka_plan_free(p);
  }
}

/* Every candidate folder CANDIDATES/FAMILY/NAME/ (tests/candidates/triton/) builds for
 * task FAMILY/NAME as its baseline does; at least 4 of them. */
static void tc_candidates(const ka_registry *reg, const char *root) {
  const ka_backend_ops *cuda = NULL;
  char err[512];
  cuda = ka_backend_load("cuda", err, sizeof err);
  check(cuda != NULL, "cuda backend module loads", "%s", cuda ? "ok" : err);
  int seen = 0;
  for (int i = 0; i < reg->ntasks; i++) {
    const ka_task *t = reg->tasks[i];
    char dir[PATH_MAX + 300];
    snprintf(dir, sizeof dir, "%s/%s", root, t->id);
    struct stat st;
    if (strcmp(t->language, "triton") || stat(dir, &st) || !S_ISDIR(st.st_mode)) continue;
    tc_build_files(t, cuda, dir, "candidate");
    seen++;
  }
  check(seen >= 4, "triton candidates", "%d in %s", seen, root);
}

/* text (malloc'd, taken) with every "@TASK_DIR@" replaced by the real path of t's
 * folder: an attack that knows where the tasks are installed (read_tasks.py). */
static char *tc_task_dir_subst(char *text, const ka_task *t) {
  char real[PATH_MAX];
  const char *mark = "@TASK_DIR@";
  if (!text || !t || !strstr(text, mark) || !realpath(t->dir, real)) return text;
  ka_sb sb = {0};
  const char *p = text, *q;
  while ((q = strstr(p, mark))) {
    ka_sb_append(&sb, p, (size_t)(q - p));
    ka_sb_puts(&sb, real);
    p = q + strlen(mark);
  }
  ka_sb_puts(&sb, p);
  free(text);
  return ka_sb_take(&sb);
}

/* The manifest's runs with harness triton_compile (tests/adversarial/manifest.yaml):
 * each file (with its plan, else the task's baseline plan) is refused before it runs, as
 * the expected COMPILE_ERROR, the run's text in the refusal (the plan parser's reason or
 * the compile log), and nothing it tried happened (/tmp/ka_triton_adv_system absent). */
static void tc_adversarial(const ka_registry *reg, const char *src_root) {
  char path[PATH_MAX], err[1024];
  snprintf(path, sizeof path, "%s/tests/adversarial/manifest.yaml", src_root);
  adv_manifest man;
  int rc = adv_manifest_load(path, &man, err, sizeof err);
  check(rc == 0, "manifest loads", "%s", rc ? err : path);
  if (rc) return;
  int seen = 0;
  for (int i = 0; i < man.n; i++) {
    const adv_run *r = &man.runs[i];
    if (strcmp(r->harness, "triton_compile")) continue;
    seen++;
    const ka_task *t = ka_registry_find(reg, r->task);
    char *text = tc_task_dir_subst(tc_read(src_root, r->file), t), *yaml = NULL;
    if (t && r->plan) yaml = tc_read(src_root, r->plan);
    if (t && !r->plan) {
      yaml = tc_baseline_file(t, t->launch_plan);
    }
    if (!t || !text || !yaml) {
      check(0, r->name, "task %s, file %s or plan missing", r->task, r->file);
      free(text), free(yaml);
      continue;
    }
    ka_plan *p = NULL;
    char perr[512] = "";
    const char *status = "OK", *said = "";
    char *log = NULL;
    void *b = NULL;
    size_t n = 0;
    int cached = 0;
    if (ka_plan_parse(t, yaml, strlen(yaml), &p, perr, sizeof perr) != KA_OK) {
      status = "COMPILE_ERROR"; /* a plan that does not parse (docs/tasks.md) */
      said = perr;
    } else {
      char wd[PATH_MAX];
      snprintf(wd, sizeof wd, "adv_%s", r->name);
      char dir[PATH_MAX];
      tc_workdir(wd, dir, sizeof dir);
      ka_source s0 = {.name = t->source, .text = text, .len = strlen(text)};
      unlink("/tmp/ka_triton_adv_system");
      rc = ka_triton_build(t, p, &s0, "sm_90", dir, 120, &b, &n, &cached, &log, err, sizeof err);
      if (rc == KA_ECOMPILE)
        status = "COMPILE_ERROR";
      else if (rc != KA_OK)
        status = "INFRA_ERROR";
      said = log ? log : err;
    }
    int want = 0;
    char ex[64];
    snprintf(ex, sizeof ex, "%s", r->expect);
    for (char *w = strtok(ex, "|"); w; w = strtok(NULL, "|")) want |= !strcmp(w, status);
    check(want && (!r->text || strstr(said, r->text)) &&
              access("/tmp/ka_triton_adv_system", F_OK) != 0,
          r->name, "expected %s%s%s, got %s: %.300s", r->expect, r->text ? " with " : "",
          r->text ? r->text : "", status, said);
    free(b), free(log), free(text), free(yaml);
    ka_plan_free(p);
  }
  check(seen >= 4, "triton_compile runs", "%d in the manifest", seen);
  adv_manifest_free(&man);
}

int main(int argc, char **argv) {
  if (!(argc == 3 && (!strcmp(argv[1], "baselines") || !strcmp(argv[1], "faults"))) &&
      !(argc == 4 && (!strcmp(argv[1], "candidates") || !strcmp(argv[1], "adversarial")))) {
    fprintf(stderr,
            "usage: triton_compile_test baselines|faults TASKS\n"
            "       triton_compile_test candidates TASKS CANDIDATES\n"
            "       triton_compile_test adversarial TASKS SOURCE_DIR\n");
    return 2;
  }
  const char *py = getenv("KA_TRITON_PYTHON");
  char ver[64], prefix[2 * PATH_MAX], exe[PATH_MAX], perr[512] = "";
  int prc = py ? ka_triton_probe(py, ver, sizeof ver, prefix, sizeof prefix, exe, sizeof exe, perr,
                                 sizeof perr)
               : KA_EUNAVAIL;
  check(prc == KA_OK, "triton present", "%s%s", prc ? perr : ver,
        prc ? ": run scripts/install-python-deps.sh" : "");
  if (prc) return 1;
  setenv("KA_TRITON_PREFIX", prefix, 1); /* as gpuexec sets them for its runners */
  setenv("KA_TRITON_PYTHON", exe, 1);
  snprintf(tc_tmp, sizeof tc_tmp, "%s/ka-triton-test-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(tc_tmp)) return 2;
  ka_registry *reg = NULL;
  char err[1024];
  int rc = ka_registry_load(argv[2], 0, &reg, err, sizeof err);
  check(rc == KA_OK, "tasks load", "%s", rc ? err : "ok");
  if (rc) return 1;
  if (!strcmp(argv[1], "baselines")) {
    const ka_backend_ops *cuda = ka_backend_load("cuda", err, sizeof err);
    check(cuda != NULL, "cuda backend module loads", "%s", cuda ? "ok" : err);
    int seen = 0, starters = 0;
    for (int i = 0; i < reg->ntasks; i++)
      if (!strcmp(reg->tasks[i]->language, "triton")) {
        const ka_task *t = reg->tasks[i];
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/baseline", t->dir);
        tc_build_files(t, cuda, dir, "baseline");
        seen++;
        if (t->has_starter) {
          snprintf(dir, sizeof dir, "%s/starter", t->dir);
          tc_build_files(t, cuda, dir, "starter");
          starters++;
        }
      }
    check(seen >= 24 && starters >= 8, "triton tasks", "%d, %d of them with a starter", seen,
          starters);
  } else if (!strcmp(argv[1], "candidates")) {
    tc_candidates(reg, argv[3]);
  } else if (!strcmp(argv[1], "adversarial")) {
    tc_adversarial(reg, argv[3]);
  } else {
    const ka_task *gelu = ka_registry_find(reg, "triton2triton/gelu");
    check(gelu != NULL, "triton2triton/gelu", "%s", gelu ? "found" : "missing");
    if (gelu) {
      tc_plan_fields(gelu);
      tc_scratch(gelu);
      tc_sandbox(gelu);
      tc_exits(gelu);
      tc_faults(gelu);
    }
  }
  ka_registry_free(reg);
  ka_rmtree(tc_tmp);
  printf("%d passed, %d failed\n", ka_check_pass, ka_check_fail);
  return ka_check_fail ? 1 : 0;
}
