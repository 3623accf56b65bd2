/* Command tasks (issue 19): loading config.yaml folders (common/task_command.c), the
 * harness check, and the performance report rules (gpuexec/daemon/command.c).
 * usage: command_task_test SOURCE_DIR */
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "command.h"
#include "devlock.h"
#include "ka_check.h"
#include "ka_common.h"
#include "sandbox.h"
#include "task.h"
#include "task_command.h"

static char g_tmp[PATH_MAX];

/* Writes text to g_tmp/rel (creating folders). */
static void put(const char *rel, const char *text) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", g_tmp, rel);
  char *slash = strrchr(path, '/');
  *slash = 0;
  ka_mkdirs(path);
  *slash = '/';
  ka_write_file(path, text, strlen(text));
}

#define GOOD_CONFIG                                                                        \
  "source_file_path: k.py\ncompile_command: [\"true\"]\ncorrectness_command: [\"true\"]\n" \
  "performance_command: [\"true\"]\nplatform_support: [cpu, nvidia]\n"

static void test_fixture(const char *src) {
  char root[PATH_MAX];
  snprintf(root, sizeof root, "%s/tests/fixtures/command/tasks", src);
  ka_registry *r = NULL;
  char err[512] = "";
  int rc = ka_registry_load(root, 0, &r, err, sizeof err);
  check(rc == KA_OK && r && r->ntasks == 2, "fixture loads", "rc %d, %d tasks, %s", rc,
        r ? r->ntasks : -1, err);
  const ka_task *t = r ? ka_registry_find(r, "suite/demo/sum_py") : NULL;
  check(t && t->command, "suite/demo/sum_py is a command task", "%p", (void *)t);
  if (!t || !t->command) {
    ka_registry_free(r);
    return;
  }
  const ka_command_spec *c = t->command;
  check(!strcmp(t->mode, "command") && !strcmp(t->type, "python2python") &&
            !strcmp(t->language, "python"),
        "mode, type, language", "%s %s %s", t->mode, t->type, t->language);
  check(
      t->neditable == 1 && !strcmp(t->editable[0], "kernel.py") && !strcmp(t->source, "kernel.py"),
      "editable set = source_file_path", "%d %s", t->neditable, t->editable[0]);
  check(ka_task_is_editable(t, "kernel.py") && !ka_task_is_editable(t, "scripts/check.py") &&
            !ka_task_is_editable(t, "config.yaml"),
        "a harness file is not editable (a step naming one is refused)", "%s", t->editable[0]);
  check(t->nbackends == 1 && !strcmp(t->backends[0], "host"), "platform_support [cpu] -> host",
        "%d", t->nbackends);
  check(c->ncommands[0] == 1 && c->ncommands[1] == 1 && c->ncommands[2] == 1 &&
            !strcmp(c->commands[2][0], "python3 scripts/bench.py"),
        "the three commands", "%d %d %d", c->ncommands[0], c->ncommands[1], c->ncommands[2]);
  check(
      c->timeout_s[0] == 30 && c->timeout_s[1] == 5 && c->timeout_s[2] == 30 && t->timeout_s == 65,
      "the *_timeout of each phase, their sum the task's", "%g %g %g %g", c->timeout_s[0],
      c->timeout_s[1], c->timeout_s[2], t->timeout_s);
  int has_kernel = 0, has_config = 0;
  for (int i = 0; i < c->nharness; i++) {
    has_kernel |= !strcmp(c->harness[i], "kernel.py");
    has_config |= !strcmp(c->harness[i], "config.yaml");
  }
  check(c->nharness == 5 && has_config && !has_kernel,
        "harness: config.yaml and the 4 scripts, not the editable file", "%d", c->nharness);
  check(t->version && strlen(t->version) == 16, "version: 16 hex digits", "%s", t->version);
  check(c->ntargets == 1 && !strcmp(c->targets[0], "row_sum") && strstr(t->prompt, "row_sum"),
        "target_kernel_functions, in the prompt", "%d", c->ntargets);
  check(c->instructions && strstr(t->prompt, "The sums must match to 1e-9."),
        "config.yaml prompt.instructions, in the prompt", "%s", t->prompt);
  char path[PATH_MAX], what[PATH_MAX] = "";
  check(!strcmp(ka_task_baseline_path(t, "kernel.py", path, sizeof path) + strlen(t->dir),
                "/kernel.py"),
        "the baseline file is the folder's own", "%s", path);
  check(ka_command_harness_changed(t, t->dir, what, sizeof what) == 0, "harness unchanged", "%s",
        what);
  const ka_task *g = ka_registry_find(r, "suite/demo/gpu_only");
  check(g && g->nbackends == 1 && !strcmp(g->backends[0], "cuda"),
        "platform_support [nvidia] -> cuda", "%d", g ? g->nbackends : -1);
  check(g && g->command->max_speedup == 50, "config.yaml max_speedup: 50 sets the cap", "%g",
        g ? g->command->max_speedup : -1);
  ka_registry_free(r);
}

static void test_bad_configs(void) {
  static const struct {
    const char *name, *config, *want;
  } bad[] = {
      {"not_yaml", "source_file_path: [k.py\n", "config.yaml:"},
      {"no_perf", "source_file_path: k.py\ncorrectness_command: [\"true\"]\n",
       "performance_command is missing"},
      {"no_source", "compile_command: [\"true\"]\nperformance_command: [\"true\"]\n",
       "source_file_path must name"},
      {"unsafe", "source_file_path: ../k.py\nperformance_command: [\"true\"]\n",
       "not a safe relative path"},
      {"bad_timeout", GOOD_CONFIG "performance_timeout: soon\n",
       "config.yaml: performance_timeout: 'soon' is not a number of seconds in (0, 86400]"},
      {"word_timeout", GOOD_CONFIG "correctness_timeout: abc\n",
       "config.yaml: correctness_timeout: 'abc' is not a number of seconds in (0, 86400]"},
      {"zero_timeout", GOOD_CONFIG "compile_timeout: 0\n",
       "compile_timeout: '0' is not a number of seconds"},
      {"long_timeout", GOOD_CONFIG "compile_timeout: 86401\n",
       "compile_timeout: '86401' is not a number of seconds"},
      {"missing_file", "source_file_path: other.py\nperformance_command: [\"true\"]\n",
       "source_file_path other.py is missing"},
      {"bad_command", "source_file_path: k.py\nperformance_command: {a: b}\n",
       "must be a string or a list"},
      {"cap_one", GOOD_CONFIG "max_speedup: 1\n", "max_speedup must be a number in (1, 1e6]"},
      {"cap_word", GOOD_CONFIG "max_speedup: high\n", "max_speedup must be a number"},
  };
  int n = (int)(sizeof bad / sizeof bad[0]);
  for (int i = 0; i < n; i++) {
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "bad/%s/config.yaml", bad[i].name);
    put(rel, bad[i].config);
    snprintf(rel, sizeof rel, "bad/%s/k.py", bad[i].name);
    put(rel, "x = 1\n");
    char dir[PATH_MAX], err[512] = "";
    snprintf(dir, sizeof dir, "%s/bad/%s", g_tmp, bad[i].name);
    ka_task *t = NULL;
    int rc = ka_command_task_load(dir, bad[i].name, &t, err, sizeof err);
    check(rc == KA_EPARSE && !t && strstr(err, bad[i].want), bad[i].name, "rc %d: %s", rc, err);
  }
  /* a good task beside them, with a stale report and a cache folder: skip_bad keeps the
   * good one (nothing lost), without skip_bad the registry refuses */
  put("bad/good/config.yaml", GOOD_CONFIG);
  put("bad/good/k.py", "x = 1\n");
  put("bad/good/build/performance_report.json", "[]");
  put("bad/good/__pycache__/k.cpython-311.pyc", "junk");
  char root[PATH_MAX], err[512] = "";
  snprintf(root, sizeof root, "%s/bad", g_tmp);
  ka_registry *r = NULL;
  int rc = ka_registry_load(root, 0, &r, err, sizeof err);
  check(rc == KA_EPARSE && !r, "registry with bad tasks: refused without skip_bad", "rc %d: %s", rc,
        err);
  rc = ka_registry_load(root, 1, &r, err, sizeof err);
  const ka_task *t = r ? ka_registry_find(r, "good") : NULL;
  check(rc == KA_OK && r->ntasks == 1 && t, "skip_bad: the good task is kept", "rc %d, %d", rc,
        r ? r->ntasks : -1);
  /* the skipped ones are kept with their reasons, under their folders' ids */
  const char *why = ka_registry_skipped(r, "no_perf");
  check(r && r->nskipped == n && why && strstr(why, "performance_command is missing"),
        "skip_bad: each skipped folder's reason is kept", "%d of %d: %s", r ? r->nskipped : -1, n,
        why ? why : "(none)");
  why = ka_registry_skipped(r, "word_timeout");
  check(why && strstr(why, "correctness_timeout: 'abc' is not a number"),
        "... the reason of word_timeout", "%s", why ? why : "(none)");
  check(!ka_registry_skipped(r, "good") && !ka_registry_skipped(r, "nope"),
        "a loaded or unknown id has no skip reason", "%s", "");
  if (t) {
    check(t->command->nharness == 1 && !strcmp(t->command->harness[0], "config.yaml"),
          "a stale report and __pycache__ are not harness", "%d", t->command->nharness);
    check(t->nbackends == 2, "platform_support [cpu, nvidia]: host and cuda", "%d", t->nbackends);
    check(t->command->max_speedup == KA_CMD_DEFAULT_MAX_SPEEDUP && KA_CMD_DEFAULT_MAX_SPEEDUP == 10,
          "the speedup cap defaults to 10x", "%g", t->command->max_speedup);
    char what[PATH_MAX] = "";
    put("bad/good/config.yaml", GOOD_CONFIG "# changed\n");
    check(ka_command_harness_changed(t, t->dir, what, sizeof what) == 1 &&
              !strcmp(what, "config.yaml"),
          "a changed harness file is named", "%s", what);
  }
  ka_registry_free(r);
}

static void test_perf_reports(void) {
  ka_cmd_case cs[8];
  char why[512] = "";
  const char *s =
      "[{\"name\":\"a\",\"execution_time_ms\":2},{\"name\":\"b\","
      "\"execution_time_ms\":\"4.5\"}]";
  int n = ka_cmd_parse_perf(s, strlen(s), cs, 8, why, sizeof why);
  check(n == 2 && cs[0].ms == 2 && cs[1].ms == 4.5 && !strcmp(cs[1].name, "b"),
        "list, execution_time_ms (number or numeric string)", "%d %s", n, why);
  s = "{\"results\":[{\"case\":\"x\",\"timing_ms\":{\"mean\":3,\"std\":1}}]}";
  n = ka_cmd_parse_perf(s, strlen(s), cs, 8, why, sizeof why);
  check(n == 1 && cs[0].ms == 3 && !strcmp(cs[0].name, "x"), "results, timing_ms.mean", "%d %s", n,
        why);
  s = "{\"cases\":[{\"shape\":[4,8],\"ori_time\":2,\"opt_time\":1}]}";
  n = ka_cmd_parse_perf(s, strlen(s), cs, 8, why, sizeof why);
  check(n == 1 && cs[0].ms == 1 && cs[0].base_ms == 2 && !strcmp(cs[0].name, "[4,8]"),
        "cases, ori_time/opt_time, a shape as the name", "%d %s %s", n, cs[0].name, why);
  s = "[{\"test_case_id\":\"perf1\",\"execution_time_ms\":2,\"params\":{\"n\":4}}]";
  n = ka_cmd_parse_perf(s, strlen(s), cs, 8, why, sizeof why);
  check(n == 1 && !strcmp(cs[0].name, "perf1"), "the seed's test_case_id names a case", "%d %s %s",
        n, cs[0].name, why);
  s = "{\"execution_time_ms\": 7, \"wall_time_ms\": 1}";
  n = ka_cmd_parse_perf(s, strlen(s), cs, 8, why, sizeof why);
  check(n == 1 && cs[0].ms == 7, "one object; device time preferred over a wall key", "%d %s", n,
        why);
  s = "[{\"name\":\"a\",\"wall_clock_ms\":1}]";
  n = ka_cmd_parse_perf(s, strlen(s), cs, 8, why, sizeof why);
  check(n == -1 && strstr(why, "wall-clock") && strstr(why, "wall_clock_ms"),
        "only a host wall-clock key: refused", "%s", why);
  static const char *const bad[] = {"",
                                    "{",
                                    "[]",
                                    "{\"cases\": 3}",
                                    "[{\"name\":\"a\"}]",
                                    "[{\"execution_time_ms\": -1}]",
                                    "[{\"execution_time_ms\": \"fast\"}]",
                                    "[1]",
                                    NULL};
  for (int i = 0; bad[i]; i++) {
    why[0] = 0;
    n = ka_cmd_parse_perf(bad[i], strlen(bad[i]), cs, 8, why, sizeof why);
    check(n == -1 && why[0], "malformed report refused", "'%s': %s", bad[i], why);
  }
  char big[2048] = "[";
  for (int i = 0; i < 9; i++) strcat(big, i ? ",{\"time_ms\":1}" : "{\"time_ms\":1}");
  strcat(big, "]");
  n = ka_cmd_parse_perf(big, strlen(big), cs, 8, why, sizeof why);
  check(n == -1 && strstr(why, "more than 8"), "more cases than room: refused", "%s", why);
}

/* 1 if the NULL-terminated list v holds s. */
static int has(char *const *v, const char *s) {
  for (int i = 0; v[i]; i++)
    if (!strcmp(v[i], s)) return 1;
  return 0;
}

/* The commands' environment and device nodes (issue 19 item 2): the job's device only. */
static void test_env(void) {
  put("gpus/0000:1b:00.0/information", "Model: NVIDIA H200\nDevice Minor: 5\n");
  put("gpus/0000:0a:00.0/information", "Model: NVIDIA H200\nDevice Minor: 2\n");
  char gpus[PATH_MAX];
  snprintf(gpus, sizeof gpus, "%s/gpus", g_tmp);
  ka_cmd_env *e = calloc(1, sizeof *e);
  int rc = ka_cmd_env_init(e, "cuda", 1, "/opt/torch/.venv/bin:rel", "/w/x", gpus);
  check(rc == KA_OK && has(e->envp, "CUDA_VISIBLE_DEVICES=1") &&
            has(e->envp, "PATH=/opt/torch/.venv/bin:rel:/usr/local/bin:/usr/bin:/bin") &&
            has(e->envp, "HOME=/w/x") && has(e->envp, "TMPDIR=/w/x"),
        "cuda: CUDA_VISIBLE_DEVICES is the job's index, PATH starts with --command-path", "%s",
        e->path);
  check(e->gpu && has((char *const *)e->nodes, "/dev/nvidia5") &&
            has((char *const *)e->nodes, "/dev/nvidiactl") &&
            has((char *const *)e->nodes, "/dev/nvidia-uvm") &&
            !has((char *const *)e->nodes, "/dev/nvidia2") &&
            !has((char *const *)e->nodes, "/dev/nvidia1"),
        "cuda index 1: /dev/nvidia5 (the 2nd GPU in PCI order, its minor) and no other GPU's node",
        "%s", e->note);
  check(e->ro[0] && !strcmp(e->ro[0], "/opt/torch/.venv/bin") && !e->ro[1],
        "the absolute folders of the PATH prefix are readable in the sandbox", "%s",
        e->ro[0] ? e->ro[0] : "(none)");
  /* a venv whose python3 links to an interpreter elsewhere (uv keeps them under /root) */
  put("base/bin/python3.12", "#!/bin/false\n");
  char venv[PATH_MAX], link[PATH_MAX], target[PATH_MAX], home[PATH_MAX];
  snprintf(venv, sizeof venv, "%s/venv/bin", g_tmp);
  snprintf(link, sizeof link, "%s/python3", venv);
  snprintf(target, sizeof target, "%s/base/bin/python3.12", g_tmp);
  snprintf(home, sizeof home, "%s/base", g_tmp);
  ka_mkdirs(venv);
  check(symlink(target, link) == 0, "a venv's python3 link", "%s", link);
  rc = ka_cmd_env_init(e, "cuda", 0, venv, "/w", gpus);
  char real[PATH_MAX];
  check(rc == KA_OK && e->ro[0] && !strcmp(e->ro[0], venv) && e->ro[1] && realpath(home, real) &&
            !strcmp(e->ro[1], real) && !e->ro[2],
        "the installation a venv's python3 links to is readable too", "%s",
        e->ro[1] ? e->ro[1] : "(none)");
  /* the same venv with its pyvenv.cfg: its root (lib/, site-packages) is readable too */
  put("venv/pyvenv.cfg", "home = /x\n");
  char vroot[PATH_MAX], vreal[PATH_MAX];
  snprintf(vroot, sizeof vroot, "%s/venv", g_tmp);
  rc = ka_cmd_env_init(e, "cuda", 0, venv, "/w", gpus);
  check(rc == KA_OK && realpath(vroot, vreal) && e->ro[1] && !strcmp(e->ro[1], vreal) && e->ro[2] &&
            !strcmp(e->ro[2], real) && !e->ro[3],
        "a venv's root (pyvenv.cfg beside its bin) is readable too", "%s",
        e->ro[1] ? e->ro[1] : "(none)");
  rc = ka_cmd_env_init(e, "cuda", 3, NULL, "/w", gpus);
  check(
      rc == KA_OK && has((char *const *)e->nodes, "/dev/nvidia3") && strstr(e->note, "CUDA index"),
      "cuda index without driver information: /dev/nvidia<index>, said in the note", "%s", e->note);
  rc = ka_cmd_env_init(e, "hip", 1, "", "/w", gpus);
  check(rc == KA_OK && has(e->envp, "HIP_VISIBLE_DEVICES=1") &&
            has((char *const *)e->nodes, "/dev/dri/renderD129") &&
            has((char *const *)e->nodes, "/dev/kfd"),
        "hip index 1: HIP_VISIBLE_DEVICES=1, /dev/kfd, /dev/dri/renderD129", "%s", e->note);
  rc = ka_cmd_env_init(e, "host", 0, NULL, "/w", gpus);
  int visible = 0;
  for (int i = 0; e->envp[i]; i++) visible |= strstr(e->envp[i], "VISIBLE_DEVICES") != NULL;
  check(rc == KA_OK && !e->gpu && !e->nodes[0] && !visible &&
            has(e->envp, "PATH=/usr/local/bin:/usr/bin:/bin"),
        "host: no device variable, no device node, the system PATH", "%s", e->path);
  char big[2048];
  memset(big, 'a', sizeof big - 1);
  big[0] = '/', big[sizeof big - 1] = 0;
  check(ka_cmd_env_init(e, "host", 0, big, "/w", gpus) == KA_EINVAL,
        "a --command-path too long is refused", "%s", "");
  free(e);
}

/* 1 if path opens with flags (then closed). */
static int opens(const char *path, int flags) {
  int fd = open(path, flags | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

/* The GPU commands' sandbox (ka_sandbox_command) in a child: /proc and /sys readable, the
 * listed device node (here /dev/ptmx, standing for /dev/nvidiaN) and /dev/null open,
 * another device node (/dev/fuse, standing for another GPU's), /dev/shm, /etc/passwd
 * and files outside the workdir refused. Exit code: a bit per failed expectation. */
static void test_gpu_sandbox(void) {
  check(ka_sandbox_landlock_abi() > 0, "Landlock is offered (the GPU commands' sandbox needs it)",
        "abi %d", ka_sandbox_landlock_abi());
  char wd[PATH_MAX], inside[PATH_MAX + 8], outside[PATH_MAX + 8];
  snprintf(wd, sizeof wd, "%s/gpu-wd", g_tmp);
  ka_mkdirs(wd);
  snprintf(inside, sizeof inside, "%s/ok", wd);
  snprintf(outside, sizeof outside, "%s/escape", g_tmp);
  pid_t pid = fork();
  if (pid == 0) {
    static const char *const nodes[] = {"/dev/ptmx", NULL};
    static const char *const ro[] = {NULL};
    char err[256];
    if (ka_sandbox_command(wd, nodes, ro, err, sizeof err) != KA_OK) _exit(255);
    int bad = 0;
    bad |= !opens("/proc/self/status", O_RDONLY) << 0;
    bad |= !opens("/sys/devices/system/cpu/online", O_RDONLY) << 1;
    bad |= !opens("/dev/ptmx", O_RDWR) << 2;
    bad |= !opens("/dev/null", O_RDWR) << 3;
    bad |= opens("/dev/fuse", O_RDWR) << 4;
    bad |= opens("/etc/passwd", O_RDONLY) << 5;
    bad |= opens(outside, O_WRONLY | O_CREAT) << 6;
    bad |= !opens(inside, O_WRONLY | O_CREAT) << 7;
    _exit(bad);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  struct stat sb;
  check(code == 0 && stat(outside, &sb) != 0,
        "GPU sandbox: /proc, /sys, the job's node and /dev/null open; another node, /etc/passwd "
        "and a file outside the folder do not",
        "exit %d (bits: 0 /proc, 1 /sys, 2 node, 3 null, 4 other node, 5 passwd, 6 outside, 7 "
        "inside)",
        code);
}

/* Writes its name into the calling thread's /proc comm file, as CUDA's initialisation does
 * for each thread it starts (pthread_setname_np on another thread). 1 if that worked. */
static int names_thread(void) {
  int fd = open("/proc/thread-self/comm", O_RDWR | O_CLOEXEC);
  if (fd < 0) return 0;
  int ok = write(fd, "ka-test", 7) == 7;
  close(fd);
  return ok;
}

/* The GPU command's own /proc (ka_sandbox_command_pidns; H200, 2026-12-02: every seed task's
 * torch failed in the command sandbox with "cudaGetDeviceCount ... Error 304: OS call failed",
 * since CUDA names its threads through /proc/PID/task/TID/comm and /proc was read-only).
 * Without the PID namespace that write is still refused (the fault, reproduced); in it,
 * the command is PID 1, writes its threads' names and a private /dev/shm, and sees no
 * process outside, while machine-wide /proc files (sysctl, sysrq-trigger, the drivers')
 * do not open for writing. Needs root (as gpuexec on the GPU machine and CI). */
static void test_gpu_own_proc(void) {
  check(geteuid() == 0, "the GPU commands' own /proc is tested as root (gpuexec runs so)",
        "euid %d", (int)geteuid());
  char wd[PATH_MAX], shm[64], outer[64];
  snprintf(wd, sizeof wd, "%s/gpu-proc", g_tmp);
  ka_mkdirs(wd);
  snprintf(shm, sizeof shm, "/dev/shm/ka-cmd-test-%d", (int)getpid());
  snprintf(outer, sizeof outer, "/proc/%d", (int)getpid());
  static const char *const nodes[] = {"/dev/ptmx", NULL};
  static const char *const ro[] = {NULL};
  for (int pidns = 0; pidns < 2; pidns++) {
    pid_t pid = fork();
    if (pid == 0) {
      if (pidns && ka_sandbox_command_pidns() != KA_OK) _exit(254);
      pid_t g = fork();
      if (g == 0) {
        char err[256];
        if (ka_sandbox_command(wd, nodes, ro, err, sizeof err) != KA_OK) _exit(255);
        int bad = 0;
        bad |= (names_thread() != pidns) << 0;
        bad |= ((getpid() == 1) != pidns) << 1;
        bad |= opens("/proc/sys/kernel/hostname", O_WRONLY) << 2;
        bad |= opens("/proc/sysrq-trigger", O_WRONLY) << 3;
        bad |= (pidns && access(outer, F_OK) == 0) << 4;
        bad |= (opens(shm, O_WRONLY | O_CREAT) != pidns) << 5;
        bad |= !opens("/proc/self/status", O_RDONLY) << 6;
        _exit(bad);
      }
      int st = 0;
      waitpid(g, &st, 0);
      _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 253);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    check(code == 0 && access(shm, F_OK) != 0,
          pidns ? "GPU command in its PID namespace: PID 1, its threads' names and a private "
                  "/dev/shm written, no outside process seen, sysctl and sysrq-trigger not "
                  "writable"
                : "GPU command without a PID namespace: /proc read-only (no thread names), no "
                  "/dev/shm",
          "exit %d (bits: 0 thread name, 1 pid 1, 2 sysctl, 3 sysrq, 4 outside pid, 5 shm, 6 "
          "/proc readable; 254 unshare, 255 sandbox)",
          code);
    unlink(shm);
  }
}

/* A GPU command's sockets (sb_seccomp_gpu_unix; H200, 2026-12-02: cuInit failed with error
 * 304 in the command sandbox because socket(AF_UNIX, SOCK_SEQPACKET) was refused): it can
 * make AF_UNIX stream and seqpacket sockets and socketpairs, but no other family or type,
 * and it reaches no socket outside it: connect() (to a path or an abstract name) and
 * sendto() with an address fail, and the test's own listening stream, abstract seqpacket
 * and datagram sockets (standing for envserver's and gpuexec's ipc endpoints and the
 * system's) receive nothing. A host command still gets no socket; in
 * no domain is a datagram socketpair made (its sendto to an address reached the test's
 * datagram socket from a host command: found by this test).
 * Exit code of the child: a bit per failed expectation. */
static int socket_checks(const char *wd, int gpu, int ns, const char *lpath, const char *dpath,
                         const char *apath);
static int socket_child(const char *wd, int gpu, int ns, const char *lpath, const char *dpath,
                        const char *apath) {
  pid_t pid = fork();
  if (pid == 0) {
    /* ns: as the supervisor starts a GPU command, PID 1 of a PID namespace of its own
     * (ka_sandbox_command_pidns), which then gets its network namespace */
    if (ns && ka_sandbox_command_pidns() != KA_OK) _exit(254);
    pid_t g = ns ? fork() : 0;
    if (g == 0) _exit(socket_checks(wd, gpu, ns, lpath, dpath, apath));
    int st = 0;
    waitpid(g, &st, 0);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 253);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The checks of socket_child, in the sandboxed process; returns its bits. */
static int socket_checks(const char *wd, int gpu, int ns, const char *lpath, const char *dpath,
                         const char *apath) {
  {
    static const char *const nodes[] = {"/dev/ptmx", NULL};
    static const char *const ro[] = {NULL};
    char err[256];
    if (ka_sandbox_command(wd, gpu ? nodes : NULL, ro, err, sizeof err) != KA_OK) return 255;
    /* sockets only for a GPU command in its own network namespace (fail closed) */
    int allow = gpu && ns;
    int bad = 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bad |= ((fd >= 0) != allow) << 0;
    struct sockaddr_un la = {.sun_family = AF_UNIX}, da = {.sun_family = AF_UNIX};
    snprintf(la.sun_path, sizeof la.sun_path, "%s", lpath);
    snprintf(da.sun_path, sizeof da.sun_path, "%s", dpath);
    bad |= (fd >= 0 && (connect(fd, (struct sockaddr *)&la, sizeof la) == 0 || errno != ENOENT))
           << 1;
    bad |= (socket(AF_UNIX, SOCK_DGRAM, 0) >= 0) << 2;
    bad |= (socket(AF_INET, SOCK_STREAM, 0) >= 0) << 3;
    int sp[2], dp[2];
    bad |= (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) << 4;
    /* an address given to sendto: the GPU rule's ENOENT (the kernel alone would answer a
     * stream pair EISCONN, so only the errno shows the rule) */
    errno = 0;
    long sent = sendto(sp[0], "x", 1, 0, (struct sockaddr *)&da, sizeof da);
    bad |= (sent >= 0 || (allow && errno != ENOENT)) << 5;
    /* seqpacket (what CUDA makes): a GPU command's, and its connect to an abstract name
     * listening outside fails too (ENOENT) */
    int sq = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un aa = {.sun_family = AF_UNIX};
    memcpy(aa.sun_path + 1, apath, strlen(apath));
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(apath));
    bad |= ((sq >= 0) != allow ||
            (sq >= 0 && (connect(sq, (struct sockaddr *)&aa, alen) == 0 || errno != ENOENT)))
           << 6;
    /* a datagram pair sends to any address given (unix_dgram_sendmsg): refused everywhere */
    bad |= (socketpair(AF_UNIX, SOCK_DGRAM, 0, dp) == 0) << 7;
    /* no new namespaces by clone (a user namespace has every capability inside it) and
     * no detached mounts (red team 2026-12-02) */
    long c = syscall(SYS_clone, (long)(CLONE_NEWUSER | SIGCHLD), 0L, 0L, 0L, 0L);
    if (c == 0) _exit(0);
    if (c > 0) waitpid((pid_t)c, NULL, 0);
    bad |= (c >= 0 || errno != EPERM) << 8;
    /* (the mount API rule has no check here: with its capabilities dropped the kernel
     * refuses fsopen with the same EPERM, so no test of this process could tell) */
    /* another process's limits (here the test's: a host command set gpuexec's
     * RLIMIT_NOFILE to 16, red team 2026-12-02) */
    /* (in its own PID namespace the test is not there to be named: test_gpu_command_pid) */
    struct rlimit lim = {12345, 12345};
    bad |= (!ns && (prlimit(getppid(), RLIMIT_MSGQUEUE, &lim, NULL) == 0 || errno != EPERM)) << 10;
    return bad;
  }
}

static void test_gpu_sockets(void) {
  char wd[PATH_MAX], lpath[96], dpath[96];
  snprintf(wd, sizeof wd, "%s/gpu-sock", g_tmp);
  ka_mkdirs(wd);
  snprintf(lpath, sizeof lpath, "%s/listen.sock", g_tmp);
  snprintf(dpath, sizeof dpath, "%s/dgram.sock", g_tmp);
  int l = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int d = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  /* an abstract seqpacket listener (no file: Landlock cannot stand in the way of it) */
  char apath[64];
  snprintf(apath, sizeof apath, "ka-command-task-%d", (int)getpid());
  int q = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
  struct sockaddr_un qa = {.sun_family = AF_UNIX};
  memcpy(qa.sun_path + 1, apath, strlen(apath));
  socklen_t qlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(apath));
  int qready = q >= 0 && bind(q, (struct sockaddr *)&qa, qlen) == 0 && listen(q, 4) == 0;
  check(qready, "the outside abstract seqpacket socket is listening", "@%s", apath);
  struct sockaddr_un la = {.sun_family = AF_UNIX}, da = {.sun_family = AF_UNIX};
  snprintf(la.sun_path, sizeof la.sun_path, "%s", lpath);
  snprintf(da.sun_path, sizeof da.sun_path, "%s", dpath);
  int ready = l >= 0 && d >= 0 && bind(l, (struct sockaddr *)&la, sizeof la) == 0 &&
              listen(l, 4) == 0 && bind(d, (struct sockaddr *)&da, sizeof da) == 0;
  check(ready, "the outside sockets are listening", "%s and %s", lpath, dpath);
  struct rlimit before;
  getrlimit(RLIMIT_MSGQUEUE, &before);
  int gpu = socket_child(wd, 1, 1, lpath, dpath, apath),
      gpu_no_ns = socket_child(wd, 1, 0, lpath, dpath, apath),
      host = socket_child(wd, 0, 0, lpath, dpath, apath);
  struct rlimit after;
  getrlimit(RLIMIT_MSGQUEUE, &after);
  check(after.rlim_cur == before.rlim_cur && after.rlim_max == before.rlim_max,
        "the commands left the test's own limits as they were", "RLIMIT_MSGQUEUE %llu -> %llu",
        (unsigned long long)before.rlim_cur, (unsigned long long)after.rlim_cur);
  char buf[8];
  int reached =
      accept(l, NULL, NULL) >= 0 || recv(d, buf, sizeof buf, 0) >= 0 || accept(q, NULL, NULL) >= 0;
  check(gpu == 0 && !reached,
        "GPU command: AF_UNIX stream and seqpacket sockets and socketpairs, no other family "
        "or type, no outside socket reached (connect to a path or an abstract name, sendto)",
        "exit %d (bits: 0 stream socket, 1 connect refused with ENOENT, 2 dgram, 3 inet, 4 "
        "stream socketpair, 5 sendto, 6 seqpacket or its connect, 7 dgram socketpair, 8 clone into "
        "a user "
        "namespace, 10 another process's limits), outside reached %d",
        gpu, reached);
  check(gpu_no_ns == 0,
        "GPU command without its own network namespace: no socket at all (fail closed: an "
        "abstract name would be the machine's)",
        "exit %d (bits as above; 0: a socket where none may be made)", gpu_no_ns);
  check(host == 0,
        "host command: no socket, a stream socketpair but no datagram pair, no namespace",
        "exit %d (bits as above; 0: a socket where none may be made)", host);
  close(l), close(d), close(q);
  unlink(lpath), unlink(dpath);
}

/* An installed layout: the wheel installed into the venv of --command-path (the tasks in
 * its site-packages), or `cmake --install` under /usr or /opt (a readable system folder,
 * stood for here by LD_LIBRARY_PATH, which every domain may read too). gpuexec hides
 * the tasks folder (ka_sandbox_hide): a command, on a GPU (ka_sandbox_command's
 * domain) and on the host (the compiler's), can read the rest of the venv and of the
 * library folder but neither another task's hidden baseline nor its task.yaml, nor list
 * the tasks folder. Exit code: a bit per failed expectation. Review 2026-12-01. */
static int hidden_child(const char *wd, const char *readable, int gpu) {
  char site[PATH_MAX], tasks[PATH_MAX + 64], file[PATH_MAX + 128];
  snprintf(site, sizeof site, "%s/venv/lib/python3.11/site-packages", g_tmp);
  snprintf(tasks, sizeof tasks, "%s/kernelarena/share/kernelarena/tasks", site);
  pid_t pid = fork();
  if (pid == 0) {
    if (ka_sandbox_hide(tasks) != KA_OK) _exit(254);
    char lib[PATH_MAX];
    snprintf(lib, sizeof lib, "%s/venv", g_tmp);
    setenv("LD_LIBRARY_PATH", lib, 1); /* a system folder that holds the tasks */
    static const char *const nodes[] = {"/dev/ptmx", NULL};
    const char *ro[] = {readable, NULL};
    char err[256];
    if (ka_sandbox_command(wd, gpu ? nodes : NULL, ro, err, sizeof err) != KA_OK) _exit(255);
    int bad = 0;
    snprintf(file, sizeof file, "%s/instruction2triton/gelu/baseline/kernel.py", tasks);
    bad |= opens(file, O_RDONLY) << 0;
    snprintf(file, sizeof file, "%s/instruction2triton/gelu/task.yaml", tasks);
    bad |= opens(file, O_RDONLY) << 1;
    bad |= opens(tasks, O_RDONLY | O_DIRECTORY) << 2;
    snprintf(file, sizeof file, "%s/kernelarena/__init__.py", site);
    bad |= !opens(file, O_RDONLY) << 3; /* the rest of the package */
    snprintf(file, sizeof file, "%s/torch.py", site);
    bad |= !opens(file, O_RDONLY) << 4; /* the venv's other packages */
    snprintf(file, sizeof file, "%s/venv/bin/tool", g_tmp);
    bad |= !opens(file, O_RDONLY) << 5;
    bad |= !opens("/usr/bin/env", O_RDONLY) << 6;
    _exit(bad);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_hidden_tasks(void) {
  const char *pkg = "venv/lib/python3.11/site-packages/kernelarena";
  char rel[PATH_MAX];
  snprintf(rel, sizeof rel, "%s/share/kernelarena/tasks/instruction2triton/gelu/baseline/kernel.py",
           pkg);
  put(rel, "SECRET = 1\n");
  snprintf(rel, sizeof rel, "%s/share/kernelarena/tasks/instruction2triton/gelu/task.yaml", pkg);
  put(rel, "id: instruction2triton/gelu\n");
  snprintf(rel, sizeof rel, "%s/__init__.py", pkg);
  put(rel, "\n");
  put("venv/lib/python3.11/site-packages/torch.py", "\n");
  put("venv/bin/tool", "#!/bin/false\n");
  put("venv/pyvenv.cfg", "home = /usr/bin\n");
  char wd[PATH_MAX], vbin[PATH_MAX], gpus[PATH_MAX];
  snprintf(wd, sizeof wd, "%s/hidden-wd", g_tmp);
  ka_mkdirs(wd);
  snprintf(vbin, sizeof vbin, "%s/venv/bin", g_tmp);
  snprintf(gpus, sizeof gpus, "%s/gpus", g_tmp);
  /* the venv's root is readable (ka_cmd_env_init), so its site-packages too */
  ka_cmd_env *e = calloc(1, sizeof *e);
  int rc = ka_cmd_env_init(e, "cuda", 0, vbin, wd, gpus);
  check(rc == KA_OK && e->ro[1] && strstr(e->ro[1], "/venv") && !strstr(e->ro[1], "/bin"),
        "a venv of --command-path: its root is readable (where the wheel puts the tasks)", "%s",
        e->ro[1] ? e->ro[1] : "(none)");
  const char *bits =
      "bits: 0 hidden baseline, 1 task.yaml, 2 tasks folder listed, 3 package, "
      "4 other package, 5 venv bin, 6 /usr/bin/env";
  int code = hidden_child(wd, e->ro[1] ? e->ro[1] : vbin, 1);
  check(code == 0,
        "GPU command sandbox: the installed tasks folder is hidden, the rest of the venv is not",
        "exit %d (%s)", code, bits);
  code = hidden_child(wd, vbin, 0);
  check(code == 0,
        "host command (compiler) sandbox: the tasks folder under a readable system folder is "
        "hidden, the rest is not",
        "exit %d (%s)", code, bits);
  free(e);
}

typedef struct lock_job {
  const ka_task *t;
  ka_devlock *lock;
  Kernelarena__V1__Result res;
} lock_job;

static void *lock_eval(void *arg) {
  lock_job *j = arg;
  ka_exec_config cfg = {.tmp_dir = g_tmp};
  Kernelarena__V1__Device dev = KERNELARENA__V1__DEVICE__INIT;
  dev.backend = "host";
  Kernelarena__V1__Job job = KERNELARENA__V1__JOB__INIT;
  job.task_id = j->t->id;
  job.task_version = j->t->version;
  job.timeout_s = 60;
  kernelarena__v1__result__init(&j->res);
  ka_command_evaluate(&cfg, &dev, &job, j->t, j->lock, &j->res);
  return NULL;
}

/* The number after tag ("\nTAG ": a line of a command's output) in log, or 0. */
static double stamp(const char *log, const char *tag) {
  const char *p = log ? strstr(log, tag) : NULL;
  return p ? atof(p + strlen(tag)) : 0;
}

/* The performance command holds the device lock exclusive, the others shared (devlock.h),
 * as a runner's timed section and its untimed work do: while another process holds the
 * device shared, the compile and correctness commands run and the performance command
 * waits for it. */
static void test_lock(void) {
  put("locktask/k.py", "x = 1\n");
  put("locktask/config.yaml",
      "source_file_path: k.py\nplatform_support: [cpu]\n"
      "compile_command: ['echo COMPILE $(date +%s.%N)']\n"
      "correctness_command: ['echo CHECK $(date +%s.%N)']\n"
      "performance_command:\n"
      "  - echo PERF $(date +%s.%N); mkdir -p build; echo "
      "'[{\"name\":\"a\",\"execution_time_ms\":1}]'"
      " > build/performance_report.json\n");
  char dir[PATH_MAX], err[512] = "";
  snprintf(dir, sizeof dir, "%s/locktask", g_tmp);
  ka_task *t = NULL;
  int rc = ka_command_task_load(dir, "locktask", &t, err, sizeof err);
  check(rc == KA_OK, "the lock task loads", "%s", err);
  int m, tt;
  if (rc || ka_devlock_create(&m, &tt, err, sizeof err) != KA_OK) {
    ka_task_free(t);
    return;
  }
  ka_devlock mine = {.m = -1, .t = -1}, theirs = {.m = -1, .t = -1};
  ka_devlock_reopen(m, tt, &mine.m, &mine.t, err, sizeof err);
  ka_devlock_reopen(m, tt, &theirs.m, &theirs.t, err, sizeof err);
  lock_job j = {.t = t, .lock = &theirs};
  lock_eval(&j); /* the baseline, measured with the device free */
  check(j.res.status == KERNELARENA__V1__STATUS__OK, "the lock task's first step: OK", "%s",
        j.res.message ? j.res.message : "");
  ka_result_clear(&j.res);
  ka_devlock_shared(&mine); /* another evaluation's untimed device work */
  pthread_t th;
  pthread_create(&th, NULL, lock_eval, &j);
  usleep(1500 * 1000);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now); /* the clock of date(1) */
  double released = (double)now.tv_sec + now.tv_nsec * 1e-9;
  ka_devlock_release(&mine);
  pthread_join(th, NULL);
  const char *log = j.res.runtime_log;
  double c0 = stamp(log, "\nCOMPILE "), c1 = stamp(log, "\nCHECK "), p0 = stamp(log, "\nPERF ");
  check(j.res.status == KERNELARENA__V1__STATUS__OK && c0 > 0 && c1 > 0 && c0 < released &&
            c1 < released,
        "compile and correctness ran while another holder had the device shared",
        "compile %.3f, check %.3f, released %.3f: %s", c0, c1, released, log ? log : "");
  check(p0 >= released && strstr(log, "device lock exclusive, waited 1.") != NULL,
        "the performance command waited for the exclusive hold (1.5 s)", "perf %.3f, released %.3f",
        p0, released);
  check(theirs.held == KA_DEVLOCK_NONE, "the evaluation left the lock released", "%d", theirs.held);
  ka_result_clear(&j.res);
  close(mine.m), close(mine.t), close(theirs.m), close(theirs.t), close(m), close(tt);
  ka_task_free(t);
}

/* Evaluates task t's unchanged folder as a step on a "cuda" device of this CPU machine
 * (no such nodes here: skipped), so that its commands run in the GPU commands' sandbox
 * and PID namespace (as root). res is the caller's to clear. */
static void gpu_eval(const ka_task *t, Kernelarena__V1__Result *res) {
  ka_exec_config cfg = {.tmp_dir = g_tmp};
  Kernelarena__V1__Device dev = KERNELARENA__V1__DEVICE__INIT;
  dev.backend = "cuda";
  Kernelarena__V1__Job job = KERNELARENA__V1__JOB__INIT;
  job.task_id = t->id;
  job.task_version = t->version;
  job.timeout_s = 60;
  kernelarena__v1__result__init(res);
  ka_devlock none = {.m = -1, .t = -1};
  ka_command_evaluate(&cfg, &dev, &job, t, &none, res);
}

/* A GPU command runs as PID 2 of its namespace under a minimal init (cmd_init), so that
 * the default signal actions hold for it: as PID 1 a command's SIGTERM to itself was
 * ignored (the kernel gives PID 1 none; review 2026-12-02). */
static void test_gpu_command_pid(void) {
  put("pidtask/k.py", "x = 1\n");
  put("pidtask/config.yaml",
      "source_file_path: k.py\n"
      "compile_command: ['echo PID $$; echo OOM $(cat /proc/self/oom_score_adj)']\n"
      "correctness_command: ['echo CHECK']\n"
      "performance_command:\n"
      "  - mkdir -p build; echo '[{\"name\":\"a\",\"execution_time_ms\":1}]'"
      " > build/performance_report.json\n");
  put("termtask/k.py", "x = 1\n");
  put("termtask/config.yaml",
      "source_file_path: k.py\n"
      "compile_command: ['echo COMPILED']\n"
      "correctness_command: ['kill -TERM $$; echo STILL_$((1 + 1))_ALIVE']\n"
      "performance_command: ['echo PERF']\n");
  char dir[PATH_MAX], err[512] = "";
  ka_task *t = NULL;
  snprintf(dir, sizeof dir, "%s/pidtask", g_tmp);
  int rc = ka_command_task_load(dir, "pidtask", &t, err, sizeof err);
  check(rc == KA_OK, "the pid task loads", "%s", err);
  if (rc == KA_OK) {
    Kernelarena__V1__Result res;
    gpu_eval(t, &res);
    const char *log = res.runtime_log ? res.runtime_log : "";
    check(res.status == KERNELARENA__V1__STATUS__OK && strstr(log, "\nPID 2\n") &&
              strstr(log, "\nOOM 1000\n"),
          "a GPU command is PID 2 of its namespace (an init is PID 1), first for the OOM killer",
          "status %d: %s", (int)res.status, log);
    ka_result_clear(&res);
    ka_task_free(t);
  }
  t = NULL;
  snprintf(dir, sizeof dir, "%s/termtask", g_tmp);
  rc = ka_command_task_load(dir, "termtask", &t, err, sizeof err);
  check(rc == KA_OK, "the term task loads", "%s", err);
  if (rc == KA_OK) {
    Kernelarena__V1__Result res;
    gpu_eval(t, &res);
    const char *log = res.runtime_log ? res.runtime_log : "";
    const char *msg = res.message ? res.message : "";
    /* the log shows the command's text too: the marker is what only its echo prints */
    check(!strstr(log, "STILL_2_ALIVE") && strstr(msg, "was killed by signal 15"),
          "a GPU command's SIGTERM to itself ends it (signal 15), as outside a namespace",
          "message %s; log %s", msg, log);
    ka_result_clear(&res);
    ka_task_free(t);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: command_task_test SOURCE_DIR\n");
    return 2;
  }
  snprintf(g_tmp, sizeof g_tmp, "/tmp/ka-command-task-XXXXXX");
  if (!mkdtemp(g_tmp)) return 2;
  test_fixture(argv[1]);
  test_bad_configs();
  test_perf_reports();
  test_env();
  test_gpu_sandbox();
  test_gpu_own_proc();
  test_gpu_sockets();
  test_gpu_command_pid();
  test_hidden_tasks();
  test_lock();
  ka_rmtree(g_tmp);
  printf("%d passed, %d failed\n", ka_check_pass, ka_check_fail);
  return ka_check_fail ? 1 : 0;
}
