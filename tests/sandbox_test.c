/* Unit tests of the evaluation sandbox (gpuexec/sandbox/sandbox.c): the include allowlist, the
 * supervisor's report, the seccomp and Landlock layers applied in child processes (the
 * runner's, a module process's, the compiler's), the assembly check, and,
 * given the source tree, the import allow-list of module mode.
 * usage: sandbox_test [SOURCE_DIR] */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sched.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ka_common.h"
#include "sandbox.h"

static int failures;

#define CHECK(cond, ...) \
  do {                   \
    if (cond) {          \
      printf("ok   - "); \
    } else {             \
      printf("FAIL - "); \
      failures++;        \
    }                    \
    printf(__VA_ARGS__); \
    printf("\n");        \
  } while (0)

/* Runs the include check on one source named kernel.<ext> next to helper.h. */
static int inc(const char *lang, const char *text, char **log) {
  const char *names[] = {"kernel.src", "helper.h"};
  const char *texts[] = {text, "int helper;\n"};
  size_t lens[] = {strlen(text), 12};
  return ka_include_check(lang, names, texts, lens, 2, log);
}

static void test_includes(void) {
  struct {
    const char *lang, *text;
    int bad;
  } cases[] = {
      {"c", "#include <math.h>\n#include <stdint.h>\nint x;\n", 0},
      {"c", "#include \"helper.h\"\n", 0},
      {"c", "  #  include   <string.h>  // fine\n", 0},
      {"cuda", "#include <cuda_fp16.h>\n#include <cooperative_groups/reduce.h>\n", 0},
      {"hip", "#include <hip/hip_runtime.h>\n", 0},
      {"c", "const char *s = \"#define X 1\";\n#define Y 2\n#pragma once\n", 0},
      {"c", "#include \"/etc/passwd\"\n", 1},
      {"c", "#include </etc/passwd>\n", 1},
      {"cuda", "#include \"/etc/passwd\"\n", 1},
      {"c", "#include \"../reference.c\"\n", 1},
      {"c", "#include <sys/../../etc/passwd>\n", 1},
      {"c", "#include <unistd.h>\n", 1},
      {"c", "#define P \"/etc/passwd\"\n#include P\n", 1},
      {"c", "%:include </etc/passwd>\n", 1},
      {"c",
       "?"
       "?=include </etc/passwd>\n",
       1},
      {"c", "#inc\\\nlude </etc/passwd>\n", 1},
      {"c", "# /* hidden */ include /* x */ </etc/passwd>\n", 1},
      {"c", "#include_next <stdio.h>\n", 0},
      {"c", "#include_next </etc/passwd>\n", 1},
      {"c", "#embed \"/etc/passwd\"\n", 1},
      {"c", "#import \"/etc/passwd\"\n", 1},
      {"c", "#include <math.h\n", 1},
      {"c", "/* #include </etc/passwd> */\n", 1}, /* conservative: comments checked too */
      {"cuda", "#include \"helper.h\"\n#include <cuda/std/cstdint>\n", 0},
      {"cuda", "#include <cuda/../../../etc/passwd>\n", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *log = NULL;
    int bad = inc(cases[i].lang, cases[i].text, &log);
    int want = cases[i].bad;
    int ok = want ? bad >= 1 && log && strstr(log, "kernel.src:") : bad == 0 && !log;
    CHECK(ok, "include check %s %.*s -> %d refused", cases[i].lang,
          (int)strcspn(cases[i].text, "\n"), cases[i].text, bad);
    /* the refusal names the operand as written, never a file's content */
    if (log) CHECK(!strstr(log, "root:"), "log shows no file content");
    free(log);
  }
  char *log = NULL;
  int bad = inc("c", "#include <stdio.h>\n\n\n#include \"/etc/shadow\"\n", &log);
  CHECK(bad == 1 && log && strstr(log, "kernel.src:4:") && strstr(log, "/etc/shadow"),
        "refusal names file, line 4 and the operand: %s", log ? log : "(none)");
  free(log);
}

static void test_report(void) {
  ka_sandbox_report r;
  CHECK(ka_sandbox_parse_report("pid 42\nrunner 9 leftovers 3 deadline 1\n", &r) == 0 && r.valid &&
            r.wstatus == 9 && r.leftovers == 3 && r.at_deadline == 1,
        "supervisor report parsed");
  CHECK(ka_sandbox_parse_report("pid 42\n", &r) == -1 && !r.valid, "incomplete report refused");
  CHECK(ka_sandbox_parse_report(NULL, &r) == -1 && !r.valid, "missing report refused");
}

/* Runs fn in a child that first enters the sandbox; returns the child's wait status. */
static int in_child(const char *workdir, int external, int (*fn)(const char *), const char *arg) {
  pid_t pid = fork();
  if (pid == 0) {
    char err[512];
    if (ka_sandbox_enter(workdir, external, err, sizeof err) != KA_OK) {
      fprintf(stderr, "enter: %s\n", err);
      _exit(100);
    }
    _exit(fn(arg));
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

/* Prints (no assertion: timing is not tested) what entering the sandbox costs. */
static int do_time_enter(const char *workdir) {
  double t0 = ka_now_s();
  char err[512];
  int rc = ka_sandbox_enter(workdir, 0, err, sizeof err);
  printf("note - ka_sandbox_enter (Landlock + both seccomp stages) took %.2f ms\n",
         (ka_now_s() - t0) * 1e3);
  fflush(stdout);
  return rc == KA_OK ? 0 : 1;
}

static int do_fork(const char *arg) {
  pid_t p = fork();
  if (p == 0) _exit(0);
  if (p > 0) waitpid(p, NULL, 0);
  return p > 0 ? 0 : 1;
}

static int do_exec(const char *arg) {
  char *argv[] = {"/bin/true", NULL};
  execv(argv[0], argv);
  return 1;
}

static int do_socket(const char *arg) {
  int ok = socket(AF_INET, SOCK_STREAM, 0) < 0 && errno == EACCES;
  ok = ok && socket(AF_INET6, SOCK_DGRAM, 0) < 0 && errno == EACCES;
  ok = ok && socket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EACCES;
  int sv[2];
  ok = ok && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0; /* allowed: connects nothing */
  return ok ? 0 : 1;
}

static int do_signals(const char *arg) {
  /* the parent (this test) must be out of reach; ourselves not */
  int ok = kill(getppid(), 0) < 0 && errno == EPERM;
  ok = ok && kill(1, 0) < 0 && errno == EPERM;
  ok = ok && kill(getpid(), 0) == 0;
  ok = ok && setsid() < 0 && errno == EPERM;
  ok = ok && ptrace(PTRACE_ATTACH, getppid(), 0, 0) < 0 && errno == EPERM;
  return ok ? 0 : 1;
}

static int do_files(const char *workdir) {
  char p[512];
  snprintf(p, sizeof p, "%s/inside.txt", workdir);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int ok = fd >= 0;
  if (fd >= 0) close(fd);
  /* outside the workdir: neither readable nor writable */
  int r = open("/etc/passwd", O_RDONLY);
  ok = ok && r < 0 && errno == EACCES;
  if (r >= 0) close(r);
  snprintf(p, sizeof p, "%s/../escaped.txt", workdir);
  int w = open(p, O_WRONLY | O_CREAT, 0644);
  ok = ok && w < 0 && errno == EACCES;
  if (w >= 0) close(w);
  /* system libraries stay readable */
  int l = open("/usr/include/stdio.h", O_RDONLY);
  ok = ok && l >= 0;
  if (l >= 0) close(l);
  return ok ? 0 : 1;
}

static int do_deferred(const char *arg) {
  /* external compiler: process creation allowed until a started process locks itself */
  if (do_fork(NULL) != 0) return 1;
  pid_t p = fork();
  if (p == 0) {
    ka_sandbox_lock_inherited();
    pid_t q = fork(); /* SIGSYS */
    (void)q;
    _exit(3);
  }
  int st = 0;
  waitpid(p, &st, 0);
  return WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS ? 0 : 2;
}

static void test_layers(void) {
  char wd[] = "/tmp/ka-sandbox-test-XXXXXX";
  if (!mkdtemp(wd)) {
    CHECK(0, "mkdtemp");
    return;
  }
  char inner[600];
  snprintf(inner, sizeof inner, "%s/work", wd);
  mkdir(inner, 0700);
  pid_t tp = fork();
  if (tp == 0) _exit(do_time_enter(inner));
  int tst = 0;
  waitpid(tp, &tst, 0);
  CHECK(WIFEXITED(tst) && WEXITSTATUS(tst) == 0, "the sandbox can be entered");
  int st = in_child(inner, 0, do_fork, NULL);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS,
        "fork after the lock stops the process (SIGSYS)");
  st = in_child(inner, 0, do_exec, NULL);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS,
        "execve after the lock stops the process (SIGSYS)");
  st = in_child(inner, 0, do_socket, NULL);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sockets refused (EACCES), socketpair allowed");
  st = in_child(inner, 0, do_signals, NULL);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "signals to other processes, setsid and ptrace refused (EPERM)");
  st = in_child(inner, 1, do_deferred, NULL);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "external compiler: fork allowed; a started process locks itself (exit %d)",
        WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  if (ka_sandbox_landlock_abi() > 0) {
    st = in_child(inner, 0, do_files, inner);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "landlock ABI %d: workdir writable, /etc/passwd and the parent folder not",
          ka_sandbox_landlock_abi());
  } else {
    printf("note - this kernel has no Landlock: file access is not confined here\n");
  }
  /* the sandboxed children changed nothing of ours */
  CHECK(kill(getpid(), 0) == 0 && prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 0,
        "the test process itself is not sandboxed");
  ka_rmtree(wd);
}

/* In a child with no sandbox of its own (as the baseline's module process is started,
 * before the runner enters the sandbox): ka_sandbox_module, then fork must stop it. */
static int do_module_fork(const char *dir) {
  char err[512];
  if (ka_sandbox_module(dir, err, sizeof err) != KA_OK) return 100;
  pid_t p = fork(); /* SIGSYS */
  (void)p;
  return 3;
}

/* What a module process may no longer do to other processes, and its files. Returns 0,
 * or the number of the first check that failed. */
static int do_module_calls(const char *dir) {
  char err[512];
  pid_t parent = getppid();
  if (ka_sandbox_module(dir, err, sizeof err) != KA_OK) return 100;
  struct rlimit lim = {1, 1};
  if (!(prlimit(parent, RLIMIT_CPU, &lim, NULL) < 0 && errno == EPERM)) return 1;
  struct rlimit own;
  if (getrlimit(RLIMIT_NOFILE, &own) != 0 || setrlimit(RLIMIT_NOFILE, &own) != 0) return 2;
  if (!(setpriority(PRIO_PROCESS, (id_t)parent, 19) < 0 && errno == EPERM)) return 3;
  if (!(setpriority(PRIO_USER, 0, 19) < 0 && errno == EPERM)) return 4;
  errno = 0;
  int nice_now = getpriority(PRIO_PROCESS, 0);
  if (errno || setpriority(PRIO_PROCESS, 0, nice_now < 19 ? nice_now + 1 : 19) != 0)
    return 5; /* itself, lower priority: allowed (raising it needs CAP_SYS_NICE) */
  cpu_set_t cs;
  CPU_ZERO(&cs);
  CPU_SET(0, &cs);
  if (!(sched_setaffinity(parent, sizeof cs, &cs) < 0 && errno == EPERM)) return 6;
  if (!(shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600) < 0 && errno == EPERM)) return 7;
  if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) return 8;
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) return 9;
  if (ka_sandbox_landlock_abi() > 0) {
    char p[600];
    snprintf(p, sizeof p, "%s/own.txt", dir);
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    if (fd < 0) return 10;
    close(fd);
    snprintf(p, sizeof p, "%s/../sibling/x.txt", dir);
    if (!(open(p, O_WRONLY | O_CREAT, 0644) < 0 && errno == EACCES)) return 11;
    if (!(open("/dev/shm/ka-sandbox-test-probe", O_WRONLY | O_CREAT, 0644) < 0 && errno == EACCES))
      return 12;
    if (!(open("/etc/passwd", O_RDONLY) < 0 && errno == EACCES)) return 13;
    fd = open("/dev/null", O_WRONLY);
    if (fd < 0) return 14;
    close(fd);
  }
  return 0;
}

/* The compiler's sandbox: the system headers readable, its folder writable; /proc, /sys
 * and /etc/passwd not; the C compiler still builds in it. */
static int do_compiler(const char *dir) {
  char err[512];
  if (ka_sandbox_compiler(dir, err, sizeof err) != KA_OK) return 100;
  if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) return 1;
  if (ka_sandbox_landlock_abi() > 0) {
    if (!(open("/proc/self/status", O_RDONLY) < 0 && errno == EACCES)) return 2;
    if (!(open("/sys/kernel/mm", O_RDONLY) < 0 && errno == EACCES)) return 3;
    if (!(open("/etc/passwd", O_RDONLY) < 0 && errno == EACCES)) return 4;
    int fd = open("/usr/include/stdio.h", O_RDONLY);
    if (fd < 0) return 5;
    close(fd);
  }
  char src[600];
  snprintf(src, sizeof src, "%s/k.c", dir);
  const char *text = "#include <math.h>\nfloat f(float x) { return sqrtf(x); }\n";
  if (ka_write_file(src, text, strlen(text))) return 6;
  if (chdir(dir) != 0) return 7;
  char *argv[] = {"cc", "-O2", "-fPIC", "-shared", "-o", "k.so", "k.c", "-lm", NULL};
  pid_t p = fork();
  if (p == 0) {
    setenv("TMPDIR", dir, 1);
    execvp(argv[0], argv);
    _exit(127);
  }
  int st = 0;
  waitpid(p, &st, 0);
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
    fprintf(stderr, "cc in the compiler sandbox: status 0x%x\n", st);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 8;
}

static int run_plain(int (*fn)(const char *), const char *arg) {
  pid_t pid = fork();
  if (pid == 0) _exit(fn(arg));
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

static void test_module_and_compiler(void) {
  char wd[] = "/tmp/ka-sandbox-test-XXXXXX";
  if (!mkdtemp(wd)) {
    CHECK(0, "mkdtemp");
    return;
  }
  char mod[600], sib[600], cc[600];
  snprintf(mod, sizeof mod, "%s/baseline", wd);
  snprintf(sib, sizeof sib, "%s/sibling", wd);
  snprintf(cc, sizeof cc, "%s/cc", wd);
  mkdir(mod, 0700);
  mkdir(sib, 0700);
  mkdir(cc, 0700);
  int st = run_plain(do_module_fork, mod);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS,
        "a module process started outside the sandbox (the baseline's) locks itself: fork "
        "stops it (SIGSYS)");
  st = run_plain(do_module_calls, mod);
  CHECK(
      WIFEXITED(st) && WEXITSTATUS(st) == 0,
      "module process: other processes' limits, priority, CPUs refused; System V shm refused; "
      "not dumpable; only its own folder writable, no /dev/shm (first failed check: %d, 0 = none)",
      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  CHECK(access("/dev/shm/ka-sandbox-test-probe", F_OK) != 0, "nothing was written to /dev/shm");
  st = run_plain(do_compiler, cc);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "compiler sandbox: no /proc, /sys or /etc/passwd; headers readable; cc builds in it "
        "(first failed check: %d, 0 = none)",
        WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  ka_rmtree(wd);
}

static void test_asm(void) {
  struct {
    const char *text;
    int bad;
  } cases[] = {
      {"\t.text\n\t.globl f\nf:\n\tret\n\t.string \"incbin include\"\n", 0},
      {"\t.incbin \"/etc/passwd\"\n", 1},
      {"x: .INCBIN \"/etc/passwd\", 0, 64\n", 1},
      {"\t.include \"/etc/passwd\"\n", 1},
      {".macro m a\n .\\a \"f\"\n.endm\n", 1},
      {"\t.rept 1000000\n\tnop\n\t.endr\n", 1},
      {"\t.irpc c,ab\n\t.endr\n", 1},
      {"nop; .altmacro\n", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *log = NULL;
    int bad = ka_asm_check(cases[i].text, strlen(cases[i].text), &log);
    CHECK((bad > 0) == cases[i].bad &&
              (!bad || (log && strstr(log, "asm check: ") && !strstr(log, "root:"))),
          "asm check %zu -> %d refused", i, bad);
    free(log);
  }
}

/* Builds text into dir/name.so the way the host backend builds a candidate; 0 on success. */
static int build_so(const char *dir, const char *name, const char *text, char *so, size_t solen) {
  char c[4096], cmd[8192];
  snprintf(c, sizeof c, "%s/%s.c", dir, name);
  snprintf(so, solen, "%s/%s.so", dir, name);
  if (ka_write_file(c, text, strlen(text))) return -1;
  snprintf(cmd, sizeof cmd, "cc -std=gnu11 -O2 -shared -fPIC -o '%s' '%s' -lm -lpthread", so, c);
  return system(cmd);
}

/* The import allow-list of module mode (docs/integrity.md, item 12). */
static void test_imports(const char *src) {
  char dir[] = "/tmp/ka-imports-XXXXXX", so[4096], err[512], *log = NULL;
  if (!mkdtemp(dir)) {
    CHECK(0, "imports: temporary folder");
    return;
  }
  /* the default list: every host baseline passes with its own task's list */
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "ls -d %s/tasks/host/*/ > %s/tasks.txt", src, dir);
  char *tasks = NULL, path[4096];
  snprintf(path, sizeof path, "%s/tasks.txt", dir);
  int nb = 0;
  if (system(cmd) == 0 && ka_read_file(path, 1 << 20, &tasks, NULL) == KA_OK) {
    for (char *save = NULL, *d = strtok_r(tasks, "\n", &save); d; d = strtok_r(NULL, "\n", &save)) {
      ka_task *t = NULL;
      char *text = NULL, bpath[4096];
      if (ka_task_load(d, &t, err, sizeof err) != KA_OK) {
        CHECK(0, "imports: load %s: %s", d, err);
        continue;
      }
      snprintf(bpath, sizeof bpath, "%s/baseline/%s", d, t->source);
      int ok = ka_read_file(bpath, 1 << 20, &text, NULL) == KA_OK &&
               build_so(dir, "baseline", text, so, sizeof so) == 0;
      int bad = ok ? ka_import_check(so, t, &log) : -1;
      CHECK(ok && bad == 0, "imports: the baseline of %s imports only what the task allows %s",
            t->id, log ? log : "");
      free(log), log = NULL, free(text);
      ka_task_free(t);
      nb++;
    }
  }
  free(tasks);
  CHECK(nb >= 10, "imports: %d host baselines checked", nb);

  /* refused imports, each named in the log; weak ones too */
  static const char evil[] =
      "void *dlopen(const char *, int); void *dlsym(void *, const char *);\n"
      "long syscall(long, ...); int fork(void); int socket(int, int, int);\n"
      "extern int execve(const char *, char *const[], char *const[]) __attribute__((weak));\n"
      "void f(float *y) { y[0] = (float)(long)dlopen(0, 0) + (float)(long)dlsym(0, 0) +\n"
      "  (float)syscall(39) + (float)fork() + (float)socket(2, 1, 0) + (execve ? 1.0f : 0.0f); }\n";
  int bad = build_so(dir, "evil", evil, so, sizeof so) == 0 ? ka_import_check(so, NULL, &log) : -1;
  CHECK(bad == 6, "imports: six refused imports found (got %d)", bad);
  const char *names[] = {"imports dlopen,", "imports dlsym,",  "imports syscall,",
                         "imports fork,",   "imports socket,", "imports execve (weak),"};
  for (int i = 0; i < 6; i++)
    CHECK(log && strstr(log, names[i]), "imports: the log names \"%s\"", names[i]);
  free(log), log = NULL;

  /* the task's lists: denied_imports wins over the default list, allowed_imports adds */
  ka_task t;
  memset(&t, 0, sizeof t);
  t.id = "test/task";
  char *deny[] = {"memset", "cblas_*"}, *allow[] = {"dl*", "cblas_sgemm"};
  memcpy(t.denied_imports, deny, sizeof deny);
  memcpy(t.allowed_imports, allow, sizeof allow);
  t.ndenied_imports = 2;
  t.nallowed_imports = 2;
  CHECK(ka_import_allowed(NULL, "memset") && !ka_import_allowed(&t, "memset"),
        "imports: memset is on the default list, and denied_imports removes it");
  CHECK(!ka_import_allowed(NULL, "dlopen") && ka_import_allowed(&t, "dlopen"),
        "imports: allowed_imports adds dlopen");
  CHECK(!ka_import_allowed(&t, "cblas_sgemm"), "imports: denied_imports wins over allowed_imports");
  CHECK(ka_import_allowed(NULL, "expf") && ka_import_allowed(NULL, "pthread_mutex_lock") &&
            !ka_import_allowed(NULL, "execve") && !ka_import_allowed(NULL, "open") &&
            !ka_import_allowed(NULL, "memfd_create") && !ka_import_allowed(NULL, "login") &&
            !ka_import_allowed(NULL, "truncate") && ka_import_allowed(NULL, "truncf"),
        "imports: the default globs cover libm and threads, not exec, open, memfd_create, login, "
        "truncate");
  static const char blas[] =
      "void cblas_sgemm(int, int, int, int, int, int, float, const float *, int, const float *,\n"
      "  int, float, float *, int);\n"
      "void g(const float *a, float *c) { cblas_sgemm(101, 111, 111, 1, 1, 1, 1, a, 1, a, 1, 0,\n"
      "  c, 1); }\n";
  bad = build_so(dir, "blas", blas, so, sizeof so) == 0 ? ka_import_check(so, &t, &log) : -1;
  CHECK(bad == 1 && log && strstr(log, "cblas_sgemm") && strstr(log, "test/task"),
        "imports: a denied BLAS symbol is refused, naming the symbol and the task");
  free(log), log = NULL;

  /* task.yaml: the lists are parsed; bad patterns and rtc tasks are refused with the line */
  struct {
    const char *task, *lines, *err; /* err NULL: loads */
  } ty[] = {
      {"host/gelu", "allowed_imports: [\"dl*\", sqrtf]\ndenied_imports: memset\n", NULL},
      {"host/gelu", "allowed_imports: [\"dlopen; rm\"]\n", "patterns are symbol names"},
      {"host/gelu", "denied_imports: {a: b}\n", "must be a list"},
      {"cuda2cuda/gelu", "allowed_imports: [\"*\"]\n", "applies to mode module only"},
  };
  for (int i = 0; i < 4; i++) {
    ka_task *tt = NULL;
    snprintf(cmd, sizeof cmd,
             "rm -rf %s/t && cp -r %s/tasks/%s %s/t && printf '%%s' '%s' >> %s/t/task.yaml", dir,
             src, ty[i].task, dir, ty[i].lines, dir);
    snprintf(path, sizeof path, "%s/t", dir);
    int rc = system(cmd) == 0 ? ka_task_load(path, &tt, err, sizeof err) : -1;
    if (!ty[i].err)
      CHECK(rc == KA_OK && tt->nallowed_imports == 2 && !strcmp(tt->allowed_imports[1], "sqrtf") &&
                tt->ndenied_imports == 1 && !strcmp(tt->denied_imports[0], "memset") &&
                !ka_import_allowed(tt, "memset") && ka_import_allowed(tt, "dlclose"),
            "imports: task.yaml lists parsed (%s)", rc ? err : "");
    else
      CHECK(rc == KA_EPARSE && strstr(err, ty[i].err) && strstr(err, "task.yaml:"),
            "imports: task.yaml refused: %s", rc ? err : "(loaded)");
    ka_task_free(tt);
  }

  /* fail closed: a file that is no ELF object */
  snprintf(path, sizeof path, "%s/junk.so", dir);
  bad = ka_write_file(path, "not an ELF file", 15) == KA_OK ? ka_import_check(path, NULL, &log) : 0;
  CHECK(bad > 0 && log && strstr(log, "cannot read"), "imports: a file that is no ELF is refused");
  free(log), log = NULL;
  /* not armed (no ka_sandbox_candidate in this process): the baseline is not checked */
  snprintf(so, sizeof so, "%s/evil.so", dir);
  CHECK(ka_sandbox_module_imports(so, &log) == 0 && !log,
        "imports: the check is off until the runner arms it for the candidate");
  ka_rmtree(dir);
}

int main(int argc, char **argv) {
  test_includes();
  test_report();
  test_layers();
  test_module_and_compiler();
  test_asm();
  /* with the source tree (ctest passes it): the import allow-list, which builds modules
   * with the C compiler and reads the host tasks */
  if (argc > 1) test_imports(argv[1]);
  printf(failures ? "sandbox_test: %d FAILED\n" : "sandbox_test: all passed\n", failures);
  return failures ? 1 : 0;
}
