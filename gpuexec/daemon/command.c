/* Command tasks in the executor: copy the task folder into a private workdir, write the
 * candidate's files, run the compile, correctness and performance commands in order in
 * the sandbox, parse their reports and score them (command.h, docs/tasks.md). */
#include "command.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ka_common.h"
#include "sandbox.h"
#include "task_command.h"

#define CMD_LOG_PER_COMMAND (16u << 10) /* output of one command kept in the log */
#define CMD_SCAN_MAX (1u << 20)         /* output of one command scanned for failure */
#define CMD_MAX_CASES 64
#define CMD_GRACE_S 5.0
#define CMD_FSIZE_BYTES ((rlim_t)1 << 30)
#define CMD_NOFILE 8192 /* RLIMIT_NOFILE of a command */
#define CMD_REPORT_MAX (16u << 20)

typedef Kernelarena__V1__Status cmd_status;
#define CMD_OK KERNELARENA__V1__STATUS__OK

/* What one pass (the baseline's or the candidate's) came to. */
typedef struct cmd_pass {
  cmd_status status;
  char message[1024];
  ka_cmd_case cases[CMD_MAX_CASES];
  int ncases;
  ka_sb log;
} cmd_pass;

static void cmd_set(cmd_pass *p, cmd_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void cmd_set(cmd_pass *p, cmd_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->message, sizeof p->message, fmt, ap);
  va_end(ap);
  p->status = st;
}

/* ---- the workdir */

/* Copies the regular files and folders under src into dst (symlinks, __pycache__ and the
 * report outputs build/ *_report.json, perf/benchmark_results.json are not copied). */
static int cmd_copy_tree(const char *src, const char *dst, const char *rel) {
  char s[PATH_MAX], d[PATH_MAX];
  snprintf(s, sizeof s, "%s%s%s", src, *rel ? "/" : "", rel);
  snprintf(d, sizeof d, "%s%s%s", dst, *rel ? "/" : "", rel);
  if (*rel && mkdir(d, 0700) != 0 && errno != EEXIST) return KA_EIO;
  DIR *dir = opendir(s);
  if (!dir) return KA_EIO;
  int rc = KA_OK;
  struct dirent *e;
  while (rc == KA_OK && (e = readdir(dir))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "__pycache__"))
      continue;
    char sub[PATH_MAX], full[PATH_MAX];
    snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
    snprintf(full, sizeof full, "%s/%s", src, sub);
    struct stat st;
    if (lstat(full, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      rc = cmd_copy_tree(src, dst, sub);
    } else if (S_ISREG(st.st_mode) && !ka_command_is_output(sub)) {
      char *buf;
      size_t len;
      char out[PATH_MAX];
      snprintf(out, sizeof out, "%s/%s", dst, sub);
      rc = ka_read_file(full, (size_t)1 << 30, &buf, &len);
      if (rc == KA_OK) {
        rc = ka_write_file(out, buf, len);
        free(buf);
        if (rc == KA_OK && (st.st_mode & 0111)) chmod(out, 0700);
      }
    }
  }
  closedir(dir);
  return rc;
}

/* Writes the job's files (the candidate's editable set) into workdir. */
static int cmd_write_files(const char *workdir, const Kernelarena__V1__Job *job) {
  for (size_t i = 0; job && i < job->n_files; i++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", workdir, job->files[i]->path);
    char *slash = strrchr(path, '/');
    if (slash) {
      *slash = 0;
      int rc = ka_mkdirs(path);
      *slash = '/';
      if (rc) return rc;
    }
    int rc = ka_write_file(path, job->files[i]->content.data, job->files[i]->content.len);
    if (rc) return rc;
  }
  return KA_OK;
}

/* ---- one command in the sandbox */

static volatile sig_atomic_t cmd_stop;
static void cmd_on_term(int sig) {
  (void)sig;
  cmd_stop = 1;
}

/* Kills every child of the calling process (the supervisor) until none is left. */
static void cmd_kill_children(void) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
  for (int round = 0; round < 10000; round++) {
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    FILE *f = fopen(path, "r");
    int n = 0, pid;
    while (f && fscanf(f, "%d", &pid) == 1) {
      kill(pid, SIGKILL);
      n++;
    }
    if (f) fclose(f);
    if (!n) {
      if (waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD) return;
      if (!f) return;
    }
    usleep(1000);
  }
}

/* The minor number of the index-th NVIDIA GPU under gpus_dir (its sub-folders sorted by
 * name: PCI order), from its information file's "Device Minor:" line; -1 if none. */
static int cmd_nvidia_minor(const char *gpus_dir, int index) {
  struct dirent **names = NULL;
  int n = scandir(gpus_dir, &names, NULL, alphasort), k = 0, minor = -1;
  for (int i = 0; i < n; i++) {
    if (names[i]->d_name[0] != '.' && k++ == index) {
      char path[PATH_MAX], line[256];
      snprintf(path, sizeof path, "%s/%s/information", gpus_dir, names[i]->d_name);
      FILE *f = fopen(path, "r");
      while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Device Minor: %d", &minor) == 1) break;
      if (f) fclose(f);
    }
    free(names[i]);
  }
  free(names);
  return minor;
}

/* The physical index of the device gpuexec calls `index`: the index-th entry of its own
 * mask variable var (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES) when that is set, else
 * index. -1 (the reason in e->note) when the mask names devices otherwise than by number
 * (UUIDs, MIG instances) or has no such entry: the commands would then see another device
 * than the job's (review 2026-12-01). */
static int cmd_physical_index(ka_cmd_env *e, const char *var, int index) {
  const char *mask = getenv(var);
  if (!mask || !*mask) return index;
  const char *p = mask;
  for (int k = 0; k < index && p; k++) {
    p = strchr(p, ',');
    if (p) p++;
  }
  char *end = NULL;
  long v = p ? strtol(p, &end, 10) : -1;
  if (!p || end == p || (*end && *end != ',') || v < 0 || v > 4096) {
    snprintf(e->note, sizeof e->note,
             "gpuexec's %s=%s names no device %d by number: command tasks need a mask of "
             "device numbers (or none)",
             var, mask, index);
    return -1;
  }
  return (int)v;
}

/* Sets the device part of e (the VISIBLE_DEVICES variable and the nodes) for backend.
 * KA_OK, or KA_EUNAVAIL (gpuexec's own device mask cannot be followed; e->note says why). */
static int cmd_env_device(ka_cmd_env *e, const char *backend, int index, const char *gpus_dir) {
  int n = 0;
  if (!strcmp(backend, "cuda")) {
    int phys = cmd_physical_index(e, "CUDA_VISIBLE_DEVICES", index);
    if (phys < 0) return KA_EUNAVAIL;
    int minor = cmd_nvidia_minor(gpus_dir ? gpus_dir : KA_NVIDIA_GPUS_DIR, phys);
    snprintf(e->note, sizeof e->note, "device node /dev/nvidia%d (%s)", minor < 0 ? phys : minor,
             minor < 0 ? "no driver information: the CUDA index" : "the driver's minor");
    if (minor < 0) minor = phys;
    snprintf(e->visible, sizeof e->visible, "CUDA_VISIBLE_DEVICES=%d", phys);
    snprintf(e->node_buf[n++], 64, "/dev/nvidiactl");
    snprintf(e->node_buf[n++], 64, "/dev/nvidia-uvm");
    snprintf(e->node_buf[n++], 64, "/dev/nvidia%d", minor);
  } else if (!strcmp(backend, "hip")) {
    int phys = cmd_physical_index(e, "HIP_VISIBLE_DEVICES", index);
    if (phys < 0) return KA_EUNAVAIL;
    snprintf(e->visible, sizeof e->visible, "HIP_VISIBLE_DEVICES=%d", phys);
    snprintf(e->node_buf[n++], 64, "/dev/kfd");
    snprintf(e->node_buf[n++], 64, "/dev/dri/renderD%d", 128 + phys);
    snprintf(e->note, sizeof e->note, "device node /dev/dri/renderD%d", 128 + phys);
  }
  for (int i = 0; i < n; i++) e->nodes[i] = e->node_buf[i];
  e->nodes[n] = NULL;
  e->gpu = n > 0;
  return KA_OK;
}

/* Adds to e->ro the installation of the first python3 of e's PATH prefix folders (the
 * folder two levels above the program its links lead to: a venv's base interpreter, e.g.
 * one that uv keeps under /root), so that the sandboxed command can run it. */
static void cmd_env_python(ka_cmd_env *e, int nro) {
  /* the venv a prefix folder is the bin of (pyvenv.cfg beside it): its site-packages are
   * outside bin/ and must be readable too (review 2026-12-01) */
  for (int i = 0; i < nro && nro < KA_CMD_MAX_RO; i++) {
    char cfg[PATH_MAX + 16], root[PATH_MAX];
    snprintf(root, sizeof root, "%s", e->ro[i]);
    char *slash = strrchr(root, '/');
    if (!slash || slash == root) continue;
    *slash = 0;
    snprintf(cfg, sizeof cfg, "%s/pyvenv.cfg", root);
    if (access(cfg, R_OK) != 0 || !realpath(root, e->venv_root)) continue;
    e->ro[nro++] = e->venv_root;
    break;
  }
  for (int i = 0; i < nro && nro < KA_CMD_MAX_RO; i++) {
    char py[PATH_MAX];
    snprintf(py, sizeof py, "%s/python3", e->ro[i]);
    if (!realpath(py, e->python_home)) continue;
    for (int up = 0; up < 2; up++) {
      char *slash = strrchr(e->python_home, '/');
      if (slash && slash != e->python_home) *slash = 0;
    }
    e->ro[nro++] = e->python_home;
    break;
  }
}

int ka_cmd_env_init(ka_cmd_env *e, const char *backend, int index, const char *path_prefix,
                    const char *workdir, const char *gpus_dir) {
  memset(e, 0, sizeof *e);
  const char *pre = path_prefix ? path_prefix : "";
  if (strlen(workdir) >= sizeof e->workdir || strlen(pre) >= sizeof e->ro_buf) return KA_EINVAL;
  if (snprintf(e->path, sizeof e->path, "PATH=%s%s/usr/local/bin:/usr/bin:/bin", pre,
               *pre ? ":" : "") >= (int)sizeof e->path)
    return KA_EINVAL;
  snprintf(e->workdir, sizeof e->workdir, "%s", workdir);
  snprintf(e->home, sizeof e->home, "HOME=%s", workdir);
  snprintf(e->tmp, sizeof e->tmp, "TMPDIR=%s", workdir);
  snprintf(e->ro_buf, sizeof e->ro_buf, "%s", pre);
  int nro = 0;
  char *save = NULL;
  for (char *tok = strtok_r(e->ro_buf, ":", &save); tok && nro < KA_CMD_MAX_RO;
       tok = strtok_r(NULL, ":", &save))
    if (tok[0] == '/') e->ro[nro++] = tok;
  cmd_env_python(e, nro);
  int rc = cmd_env_device(e, backend, index, gpus_dir);
  if (rc) return rc;
  /* USER and LOGNAME: getpass.getuser() (torch's caches) needs no /etc/passwd then */
  static char *const fixed[] = {"LANG=C.UTF-8",       "PYTHONDONTWRITEBYTECODE=1",
                                "PYTHONNOUSERSITE=1", "PYTHONUNBUFFERED=1",
                                "USER=kernelarena",   "LOGNAME=kernelarena"};
  int k = 0;
  e->envp[k++] = e->path;
  e->envp[k++] = e->home;
  e->envp[k++] = e->tmp;
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) e->envp[k++] = fixed[i];
  if (e->visible[0]) e->envp[k++] = e->visible;
  e->envp[k] = NULL;
  return KA_OK;
}

/* The init of a GPU command's PID namespace: forks, the child returns (and execs the
 * command), this process reaps every child until the command's ends and exits with its
 * status (128 + N for a signal N). When it ends, the kernel ends all else in the
 * namespace. */
static void cmd_init(void) {
  pid_t c = fork();
  if (c < 0) _exit(126);
  if (c == 0) return;
  for (;;) {
    int st;
    pid_t w = waitpid(-1, &st, 0);
    if (w == c) _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    if (w < 0 && errno != EINTR) _exit(126);
  }
}

/* The command's process: sandboxed (ka_sandbox_command: read-only system folders,
 * read-write only the workdir and the job's device nodes, no sockets but a GPU
 * command's AF_UNIX stream sockets that reach nothing: sandbox.c), limits, the
 * environment of e, /bin/sh -c. */
static void cmd_exec(const ka_cmd_env *e, const char *cmdline) {
  if (chdir(e->workdir) != 0) _exit(126);
  struct rlimit fs = {CMD_FSIZE_BYTES, CMD_FSIZE_BYTES};
  setrlimit(RLIMIT_FSIZE, &fs);
  struct rlimit core = {0, 0};
  setrlimit(RLIMIT_CORE, &core);
  /* descriptors: enough for torch and triton; a bound on what one command can hold open
   * (not on the machine's 128 inotify instances per user, which it could still take while
   * it runs: docs/sandbox.md) */
  struct rlimit nofile = {CMD_NOFILE, CMD_NOFILE};
  setrlimit(RLIMIT_NOFILE, &nofile);
  /* first for the OOM killer, as module processes are (runner.c): memory a command takes
   * ends the command, not another evaluation's process (red team 2026-12-02) */
  int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (oom >= 0) (void)!write(oom, "1000", 4), close(oom);
  char err[256];
  if (ka_sandbox_command(e->workdir, e->gpu ? e->nodes : NULL, e->ro, err, sizeof err) != KA_OK) {
    dprintf(2, "[kernelarena] sandbox of the command: %s\n", err);
    (void)!write(3, "S", 1); /* the status pipe (cmd_run): ours, not the command's */
    _exit(125);
  }
  close_range(3, ~0U, 0); /* only stdin (/dev/null), stdout and stderr (the pipe) */
  /* PID 1 of the command's namespace: the kernel gives PID 1 no default signal actions
   * (a self-sent SIGTERM, an alarm, abort's SIGABRT would not end it), so the command
   * runs as PID 2 under this minimal init, which only waits */
  if (getpid() == 1) cmd_init();
  char *argv[] = {"/bin/sh", "-c", (char *)cmdline, NULL};
  execve("/bin/sh", argv, (char *const *)e->envp);
  _exit(127);
}

/* The supervisor (a child subreaper): runs the command, then kills whatever it left
 * behind (setsid does not escape a subreaper). Exit code: the command's exit code,
 * 128 + signal, or 124 when told to stop (SIGTERM: the deadline). */
static void cmd_supervise(const ka_cmd_env *e, const char *cmdline) {
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = cmd_on_term;
  sigaction(SIGTERM, &sa, NULL);
  /* a GPU command gets a PID namespace, its own /proc and its own network namespace
   * (ka_sandbox_command_pidns; CUDA's AF_UNIX sockets are allowed only there). Without
   * one (not root) the command runs with /proc read-only and no socket at all, so CUDA
   * does not initialise: the task's own baseline fails first in the same sandbox, an
   * INFRA_ERROR that says why, never a step's verdict */
  /* a host command gets the PID namespace too: when its first process ends, the kernel
   * ends every process left in it, however deep a chain of them (red team 2026-12-02:
   * a chain of 10,400 setsid'd processes outlasted cmd_kill_children's rounds and slowed
   * the baseline's paired runs); without one (not root) cmd_kill_children alone */
  if (ka_sandbox_command_pidns() != KA_OK && e->gpu)
    dprintf(2,
            "[kernelarena] no PID namespace for the command (%s): no network namespace "
            "either, so no AF_UNIX socket and CUDA will not initialise (run gpuexec as root "
            "for GPU commands)\n",
            strerror(errno));
  pid_t g = fork();
  if (g < 0) _exit(126);
  if (g == 0) {
    signal(SIGTERM, SIG_DFL);
    cmd_exec(e, cmdline);
  }
  int devnull = open("/dev/null", O_RDWR); /* the pipe's end stays with the command alone */
  if (devnull >= 0) dup2(devnull, 1), dup2(devnull, 2);
  int st = 0, have = 0;
  while (!have) {
    int s;
    pid_t w = waitpid(-1, &s, 0);
    if (w == g) {
      st = s, have = 1;
    } else if (w < 0 && errno == EINTR && cmd_stop) {
      cmd_kill_children();
      _exit(124);
    } else if (w < 0 && errno != EINTR) {
      break;
    }
  }
  cmd_kill_children();
  _exit(cmd_stop ? 124 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* How one command ended. */
typedef struct cmd_outcome {
  int exit_code; /* 0 success; 128 + N: killed by signal N */
  int timed_out;
  int sandbox_failed; /* the sandbox could not be set up (before the command started) */
  char *output;       /* its stdout and stderr (at most CMD_SCAN_MAX bytes), malloc'd */
} cmd_outcome;

/* Runs cmdline as e says with deadline timeout_s. KA_OK (see *o) or KA_ESYS. */
static int cmd_run(const ka_cmd_env *e, const char *cmdline, double timeout_s, cmd_outcome *o) {
  memset(o, 0, sizeof *o);
  /* pfd: the command's output; sfd: a status pipe, close-on-exec, on which only our code
   * before the command's execve says that the sandbox failed (an exit code cannot say
   * it: the command chooses its own, red team 2026-12-01: a candidate's os._exit(125)
   * was read as "the sandbox failed", an unscored INFRA_ERROR) */
  int pfd[2], sfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) return KA_ESYS;
  if (pipe2(sfd, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(pfd[0]), close(pfd[1]);
    return KA_ESYS;
  }
  pid_t m = fork();
  if (m < 0) {
    close(pfd[0]), close(pfd[1]), close(sfd[0]), close(sfd[1]);
    return KA_ESYS;
  }
  if (m == 0) {
    setpgid(0, 0);
    /* stdout and stderr the pipe, stdin /dev/null; no other descriptor of gpuexec
     * (another evaluation's pipe, a socket) stays open here or in the command */
    dup2(pfd[1], 1);
    dup2(pfd[1], 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    if (sfd[1] == 3 ? fcntl(3, F_SETFD, FD_CLOEXEC) != 0 : dup3(sfd[1], 3, O_CLOEXEC) != 3)
      _exit(126);
    close_range(4, ~0U, 0);
    cmd_supervise(e, cmdline);
  }
  setpgid(m, m);
  close(pfd[1]);
  close(sfd[1]);
  ka_sb sb = {0};
  double deadline = ka_now_s() + timeout_s, hard = 0;
  for (;;) {
    double now = ka_now_s();
    if (!o->timed_out && now >= deadline) {
      o->timed_out = 1;
      kill(m, SIGTERM);
      hard = now + CMD_GRACE_S;
    }
    if (o->timed_out && now >= hard) {
      kill(-m, SIGKILL);
      break;
    }
    double until = o->timed_out ? hard : deadline;
    struct pollfd p = {pfd[0], POLLIN, 0};
    int r = poll(&p, 1, (int)((until - now) * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[8192];
    ssize_t n = read(pfd[0], buf, sizeof buf);
    if (n <= 0) break;
    if (sb.len < CMD_SCAN_MAX) ka_sb_append(&sb, buf, (size_t)n);
  }
  close(pfd[0]);
  /* the deadline holds here too: a command that closed its output (pointed it at
   * /dev/null) and runs on is ended at it (red team 2026-12-01: `exec` in a command, or a
   * shell that execs, left a waitpid without limit) */
  int st = 0;
  for (;;) {
    pid_t w = waitpid(m, &st, WNOHANG);
    if (w == m || (w < 0 && errno != EINTR)) break;
    double now = ka_now_s();
    if (!o->timed_out && now >= deadline) {
      o->timed_out = 1;
      kill(m, SIGTERM);
      hard = now + CMD_GRACE_S;
    }
    if (o->timed_out && now >= hard) kill(-m, SIGKILL);
    usleep(10000);
  }
  o->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (o->exit_code == 124 && o->timed_out) o->exit_code = 128 + SIGKILL;
  char why = 0;
  o->sandbox_failed = read(sfd[0], &why, 1) == 1 && why == 'S';
  close(sfd[0]);
  /* the output is scanned for FAIL and logged as a C string: a NUL byte the submission
   * writes must not end it there and hide what follows (red team 2026-12-02: a wrong
   * kernel scored OK on a task whose harness reports failure only in its output) */
  for (size_t i = 0; i < sb.len; i++)
    if (sb.s[i] == '\0') sb.s[i] = '?';
  o->output = ka_sb_take(&sb);
  return KA_OK;
}

/* ---- reports */

static const char *const cmd_phase_name[KA_CMD_NPHASES] = {"compile", "correctness", "performance"};

/* 1 if the output reports a failure: the upper-case word FAIL or FAILED anywhere. */
static int cmd_output_fails(const char *out) {
  static const char *const words[] = {"FAILED", "FAIL", NULL};
  for (int k = 0; words[k]; k++) {
    size_t n = strlen(words[k]);
    for (const char *p = strstr(out, words[k]); p; p = strstr(p + 1, words[k])) {
      int before = p == out || !(p[-1] == '_' || (p[-1] >= 'A' && p[-1] <= 'Z') ||
                                 (p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= '0' && p[-1] <= '9'));
      char c = p[n];
      int after =
          !(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'));
      if (before && after) return 1;
    }
  }
  return 0;
}

/* The report files the commands may write, relative to the workdir. */
static const char *const cmd_reports[] = {
    "build/compile_report.json", "build/correctness_report.json", "build/performance_report.json",
    "perf/benchmark_results.json", NULL};

/* Removes every report from workdir before a phase (red team 2026-12-01: a report the
 * submitted code wrote in an earlier phase, or a link or folder in its place, must not
 * be read as the phase's own): build/ *_report.json and perf/benchmark_results.json; a
 * build or perf that is not a folder (a link) is removed itself. Nothing outside the
 * workdir is touched: links are removed, never followed. */
static void cmd_clear_reports(const char *workdir) {
  static const char *const dirs[] = {"build", "perf", NULL};
  for (int k = 0; dirs[k]; k++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", workdir, dirs[k]);
    struct stat st;
    if (lstat(path, &st) != 0) continue;
    if (!S_ISDIR(st.st_mode)) {
      unlink(path);
      continue;
    }
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) continue;
    DIR *d = fdopendir(dfd);
    if (!d) {
      close(dfd);
      continue;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
      char rel[PATH_MAX];
      snprintf(rel, sizeof rel, "%s/%s", dirs[k], e->d_name);
      if (e->d_name[0] == '.' || !ka_command_is_output(rel)) continue;
      if (unlinkat(dfd, e->d_name, 0) != 0 && (errno == EISDIR || errno == EPERM)) {
        snprintf(path, sizeof path, "%s/%s", workdir, rel);
        ka_rmtree(path);
      }
    }
    closedir(d);
  }
}

/* Reads the report workdir/rel (at most CMD_REPORT_MAX bytes) only as a regular file
 * reached without links (neither it nor its folder a link), never blocking (a FIFO).
 * Returns 0 with *text (malloc'd, NUL-terminated) and *len, -1 when there is none,
 * -2 with the reason in why when it is not a regular file or cannot be read. */
static int cmd_read_report(const char *workdir, const char *rel, char **text, size_t *len,
                           char *why, size_t whylen) {
  *text = NULL, *len = 0;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/%s", workdir, rel);
  char *slash = strrchr(dir, '/');
  *slash = 0;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0 && errno == ENOENT) return -1;
  int fd = dfd < 0 ? -1 : openat(dfd, slash + 1, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  int e = errno;
  if (dfd >= 0) close(dfd);
  if (dfd >= 0 && fd < 0 && e == ENOENT) return -1;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) close(fd);
    snprintf(why, whylen, "%s is not a regular file (a link, a folder or a device)", rel);
    return -2;
  }
  ka_sb sb = {0};
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 && sb.len <= CMD_REPORT_MAX)
    ka_sb_append(&sb, buf, (size_t)n);
  close(fd);
  if (n < 0 || sb.len > CMD_REPORT_MAX || sb.oom) {
    ka_sb_free(&sb);
    snprintf(why, whylen, "%s cannot be read (or is over %u bytes)", rel, CMD_REPORT_MAX);
    return -2;
  }
  *len = sb.len;
  *text = sb.s ? ka_sb_take(&sb) : strdup("");
  return *text ? 0 : -2;
}

/* Reads workdir/rel as JSON: NULL with *present 0 when there is no such file, NULL with
 * *present 1 and why when it is not a regular file or does not parse. */
static json_t *cmd_read_json(const char *workdir, const char *rel, int *present, char *why,
                             size_t whylen) {
  char *text;
  size_t len;
  int r = cmd_read_report(workdir, rel, &text, &len, why, whylen);
  *present = r != -1;
  if (r) return NULL;
  json_error_t je;
  json_t *j = json_loadb(text, len, 0, &je);
  free(text);
  if (!j) snprintf(why, whylen, "%s is not JSON (line %d: %s)", rel, je.line, je.text);
  return j;
}

/* A compile or correctness report: a JSON object; it reports failure when one of
 * success/passed/correct/pass is false, `status` is a string other than
 * ok/pass/passed/success/succeeded, or `failed` is a number > 0. Returns 0 (passed),
 * 1 (reports failure) or -1 (malformed), with the reason in why. */
static int cmd_status_report(json_t *j, const char *rel, char *why, size_t whylen) {
  if (!json_is_object(j)) {
    snprintf(why, whylen, "%s is not a JSON object", rel);
    return -1;
  }
  static const char *const flags[] = {"success", "passed", "correct", "pass", NULL};
  for (int k = 0; flags[k]; k++) {
    json_t *v = json_object_get(j, flags[k]);
    if (!v) continue;
    if (!json_is_boolean(v)) {
      snprintf(why, whylen, "%s: \"%s\" is not true or false", rel, flags[k]);
      return -1;
    }
    if (json_is_false(v)) {
      snprintf(why, whylen, "%s reports failure (\"%s\": false)", rel, flags[k]);
      return 1;
    }
  }
  json_t *s = json_object_get(j, "status");
  if (s && !json_is_string(s)) {
    snprintf(why, whylen, "%s: \"status\" is not a string", rel);
    return -1;
  }
  if (s) {
    static const char *const ok[] = {"ok", "pass", "passed", "success", "succeeded", NULL};
    int good = 0;
    for (int k = 0; ok[k] && !good; k++) good = !strcasecmp(json_string_value(s), ok[k]);
    if (!good) {
      snprintf(why, whylen, "%s reports status \"%.100s\"", rel, json_string_value(s));
      return 1;
    }
  }
  json_t *f = json_object_get(j, "failed");
  if (f && json_is_number(f) && json_number_value(f) > 0) {
    snprintf(why, whylen, "%s reports %g failed", rel, json_number_value(f));
    return 1;
  }
  return 0;
}

/* A positive finite number under key of o (a JSON number, or a string holding one). */
static int cmd_num(json_t *o, const char *key, double *v) {
  json_t *x = json_object_get(o, key);
  if (json_is_number(x))
    *v = json_number_value(x);
  else if (json_is_string(x)) {
    char *end;
    *v = strtod(json_string_value(x), &end);
    if (*end) return 0;
  } else
    return 0;
  return isfinite(*v) && *v > 0;
}

/* 1 if key is a host wall-clock time the seed's rules refuse. */
static int cmd_wall_key(const char *key) {
  return strstr(key, "wall") || !strcmp(key, "host_time_ms") || !strcmp(key, "elapsed_s") ||
         !strcmp(key, "elapsed");
}

static int cmd_parse_case(json_t *c, int i, ka_cmd_case *out, char *why, size_t whylen) {
  memset(out, 0, sizeof *out);
  if (!json_is_object(c)) {
    snprintf(why, whylen, "case %d is not a JSON object", i);
    return -1;
  }
  static const char *const names[] = {"name",   "test_case_id", "case", "shape",
                                      "config", "id",           NULL};
  for (int k = 0; names[k] && !out->name[0]; k++) {
    json_t *n = json_object_get(c, names[k]);
    if (json_is_string(n))
      snprintf(out->name, sizeof out->name, "%s", json_string_value(n));
    else if (n) {
      char *d = json_dumps(n, JSON_COMPACT);
      if (d) snprintf(out->name, sizeof out->name, "%s", d);
      free(d);
    }
  }
  if (!out->name[0]) snprintf(out->name, sizeof out->name, "case%d", i);
  double v;
  if (cmd_num(c, "execution_time_ms", &v)) {
    out->ms = v;
  } else if (json_is_object(json_object_get(c, "timing_ms")) &&
             cmd_num(json_object_get(c, "timing_ms"), "mean", &v)) {
    out->ms = v;
  } else if (cmd_num(c, "opt_time", &v)) {
    out->ms = v;
    double b;
    if (cmd_num(c, "ori_time", &b)) out->base_ms = b;
  } else if (cmd_num(c, "time_ms", &v) || cmd_num(c, "mean_ms", &v) ||
             cmd_num(c, "latency_ms", &v)) {
    out->ms = v;
  } else {
    const char *key;
    json_t *val;
    json_object_foreach(c, key, val) {
      if (cmd_wall_key(key)) {
        snprintf(why, whylen,
                 "case %s gives only a host wall-clock time (\"%s\"), which is refused: report "
                 "device time as execution_time_ms or timing_ms.mean",
                 out->name, key);
        return -1;
      }
    }
    snprintf(why, whylen,
             "case %s has no time (execution_time_ms, timing_ms.mean, opt_time, time_ms, "
             "mean_ms or latency_ms, a positive number)",
             out->name);
    return -1;
  }
  return 0;
}

int ka_cmd_parse_perf(const char *text, size_t len, ka_cmd_case *out, int max, char *why,
                      size_t whylen) {
  json_error_t je;
  json_t *j = json_loadb(text, len, 0, &je);
  if (!j) {
    snprintf(why, whylen, "not JSON (line %d: %s)", je.line, je.text);
    return -1;
  }
  json_t *list = j;
  if (json_is_object(j)) {
    json_t *c = json_object_get(j, "cases");
    if (!c) c = json_object_get(j, "results");
    list = c ? c : NULL;
  }
  int n = 0, rc = 0;
  if (!list) {
    rc = cmd_parse_case(j, 0, &out[0], why, whylen);
    n = 1;
  } else if (!json_is_array(list) || json_array_size(list) == 0) {
    snprintf(why, whylen, "the list of cases is empty or not a list");
    rc = -1;
  } else if ((int)json_array_size(list) > max) {
    snprintf(why, whylen, "more than %d cases", max);
    rc = -1;
  } else {
    for (size_t i = 0; i < json_array_size(list) && rc == 0; i++, n++)
      rc = cmd_parse_case(json_array_get(list, i), (int)i, &out[i], why, whylen);
  }
  json_decref(j);
  return rc ? -1 : n;
}

/* ---- one pass */

/* Status of a command that did not succeed in phase p. */
static cmd_status cmd_phase_failure(int p) {
  return p == KA_CMD_COMPILE       ? KERNELARENA__V1__STATUS__COMPILE_ERROR
         : p == KA_CMD_CORRECTNESS ? KERNELARENA__V1__STATUS__INCORRECT
                                   : KERNELARENA__V1__STATUS__RUNTIME_ERROR;
}

/* What the commands of one pass run with. */
typedef struct cmd_ctx {
  const ka_task *t;
  const ka_cmd_env *env;
  ka_devlock *lock; /* the device's lock (m < 0: none) */
  double end;       /* the pass's deadline (ka_now_s), moved on by the time spent waiting
                       for the lock: other evaluations' timed work is not this one's */
} cmd_ctx;

/* Takes the device lock for a command of phase p, as a runner does (devlock.h): shared
 * for compile and correctness (device work that must not overlap a timed call),
 * exclusive for performance (the timed section, alone on the device). Returns the
 * seconds waited, or -1 if flock failed. */
static double cmd_lock(cmd_ctx *x, int p) {
  double t0 = ka_now_s();
  int rc = p == KA_CMD_PERFORMANCE ? ka_devlock_exclusive(x->lock) : ka_devlock_shared(x->lock);
  if (rc != KA_OK) return -1;
  double w = ka_now_s() - t0;
  x->end += w;
  return w;
}

/* Runs the commands of phase p; 0 if all succeeded, else 1 with the verdict in *ps. */
static int cmd_phase(cmd_ctx *x, int p, cmd_pass *ps) {
  const ka_task *t = x->t;
  const char *workdir = x->env->workdir;
  const ka_command_spec *c = t->command;
  for (int i = 0; i < c->ncommands[p]; i++) {
    double waited = cmd_lock(x, p);
    if (waited < 0) {
      cmd_set(ps, KERNELARENA__V1__STATUS__INFRA_ERROR, "the device lock: %s", strerror(errno));
      return 1;
    }
    double left = x->end - ka_now_s(), to = c->timeout_s[p] < left ? c->timeout_s[p] : left;
    if (to < 0.1) to = 0.1;
    cmd_outcome o;
    double t0 = ka_now_s();
    int rc = cmd_run(x->env, c->commands[p][i], to, &o);
    ka_devlock_release(x->lock); /* the command and all it started are gone (cmd_run) */
    if (rc != KA_OK) {
      cmd_set(ps, KERNELARENA__V1__STATUS__INFRA_ERROR, "cannot start a command: %s",
              strerror(errno));
      return 1;
    }
    ka_sb_printf(&ps->log, "[kernelarena] %s: $ %s  (exit %d, %.2f s", cmd_phase_name[p],
                 c->commands[p][i], o.exit_code, ka_now_s() - t0);
    if (x->lock->m >= 0)
      ka_sb_printf(&ps->log, "; device lock %s, waited %.2f s",
                   p == KA_CMD_PERFORMANCE ? "exclusive" : "shared", waited);
    ka_sb_puts(&ps->log, ")\n");
    size_t olen = strlen(o.output);
    ka_sb_append(&ps->log, o.output, olen < CMD_LOG_PER_COMMAND ? olen : CMD_LOG_PER_COMMAND);
    if (olen && o.output[olen - 1] != '\n') ka_sb_puts(&ps->log, "\n");
    int fails = cmd_output_fails(o.output);
    free(o.output);
    char what[PATH_MAX];
    if (ka_command_harness_changed(t, workdir, what, sizeof what)) {
      cmd_set(ps, KERNELARENA__V1__STATUS__FLAGGED,
              "the harness file %s was changed or removed during the %s command: only the "
              "editable files may change",
              what, cmd_phase_name[p]);
      return 1;
    }
    if (o.timed_out) {
      cmd_set(ps, KERNELARENA__V1__STATUS__TIMEOUT,
              "the %s command `%s` did not finish within its deadline (%.3g s%s) and was killed",
              cmd_phase_name[p], c->commands[p][i], to,
              to < c->timeout_s[p] ? ": what was left of the evaluation's time" : "");
      return 1;
    }
    if (o.sandbox_failed) {
      cmd_set(ps, KERNELARENA__V1__STATUS__INFRA_ERROR, "the sandbox of a command failed");
      return 1;
    }
    if (o.exit_code != 0) {
      cmd_set(ps,
              o.exit_code > 128 && p != KA_CMD_COMPILE ? KERNELARENA__V1__STATUS__RUNTIME_ERROR
                                                       : cmd_phase_failure(p),
              o.exit_code > 128 ? "the %s command `%s` was killed by signal %d (%s)"
                                : "the %s command `%s` exited with code %d%s",
              cmd_phase_name[p], c->commands[p][i],
              o.exit_code > 128 ? o.exit_code - 128 : o.exit_code,
              o.exit_code > 128 ? strsignal(o.exit_code - 128) : "");
      return 1;
    }
    if (fails) {
      cmd_set(ps,
              p == KA_CMD_COMPILE ? KERNELARENA__V1__STATUS__COMPILE_ERROR
                                  : KERNELARENA__V1__STATUS__INCORRECT,
              "the output of the %s command `%s` reports a failure (FAIL/FAILED)",
              cmd_phase_name[p], c->commands[p][i]);
      return 1;
    }
  }
  return 0;
}

/* Checks build/<phase>_report.json of a compile or correctness phase when present. */
static int cmd_check_status_report(const char *workdir, int p, cmd_pass *ps) {
  char rel[64], why[512] = "";
  snprintf(rel, sizeof rel, "build/%s_report.json", cmd_phase_name[p]);
  int present;
  json_t *j = cmd_read_json(workdir, rel, &present, why, sizeof why);
  if (!present) return 0;
  int r = j ? cmd_status_report(j, rel, why, sizeof why) : -1;
  json_decref(j);
  if (r == 0) return 0;
  cmd_set(ps, cmd_phase_failure(p == KA_CMD_COMPILE ? p : KA_CMD_CORRECTNESS), "%s%s", why,
          r < 0 ? " (malformed report)" : "");
  return 1;
}

/* Reads the performance report: build/performance_report.json, else
 * perf/benchmark_results.json. */
static int cmd_check_perf(const char *workdir, cmd_pass *ps) {
  for (int k = 2; cmd_reports[k]; k++) {
    char *text, why[512] = "";
    size_t len;
    int r = cmd_read_report(workdir, cmd_reports[k], &text, &len, why, sizeof why);
    if (r == -1) continue;
    if (r == -2) {
      cmd_set(ps, KERNELARENA__V1__STATUS__RUNTIME_ERROR, "%s", why);
      return 1;
    }
    int n = ka_cmd_parse_perf(text, len, ps->cases, CMD_MAX_CASES, why, sizeof why);
    free(text);
    if (n < 0) {
      cmd_set(ps, KERNELARENA__V1__STATUS__RUNTIME_ERROR, "malformed performance report %s: %s",
              cmd_reports[k], why);
      return 1;
    }
    ps->ncases = n;
    return 0;
  }
  cmd_set(ps, KERNELARENA__V1__STATUS__RUNTIME_ERROR,
          "the performance commands wrote no report (build/performance_report.json or "
          "perf/benchmark_results.json)");
  return 1;
}

/* A pass's private copy of the task folder and its commands' environment. */
typedef struct cmd_work {
  char dir[PATH_MAX];
  ka_cmd_env *env; /* NULL until cmd_work_open succeeded */
} cmd_work;

/* Makes a fresh workdir under cfg->tmp_dir: the task folder, then the job's files (NULL:
 * the baseline's, the folder as it is). 0, or 1 with the verdict in ps (INFRA_ERROR:
 * none of this is the submission's doing) and nothing left to close. */
static int cmd_work_open(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                         const ka_task *t, const Kernelarena__V1__Job *files, cmd_work *w,
                         cmd_pass *ps) {
  w->env = NULL;
  snprintf(w->dir, sizeof w->dir, "%s/ka-cmd-XXXXXX", cfg->tmp_dir);
  if (!mkdtemp(w->dir)) {
    cmd_set(ps, KERNELARENA__V1__STATUS__INFRA_ERROR, "mkdtemp %s: %s", w->dir, strerror(errno));
    return 1;
  }
  ka_cmd_env *env = calloc(1, sizeof *env);
  int erc =
      env ? ka_cmd_env_init(env, dev->backend, (int)dev->index, cfg->command_path, w->dir, NULL)
          : KA_ENOMEM;
  if (erc == KA_EUNAVAIL) {
    cmd_set(ps, KERNELARENA__V1__STATUS__INFRA_ERROR, "the commands' device: %s", env->note);
  } else if (erc) {
    cmd_set(ps, KERNELARENA__V1__STATUS__INFRA_ERROR,
            "the commands' environment (out of memory, or --command-path too long)");
  } else if (cmd_copy_tree(t->dir, w->dir, "") != KA_OK ||
             cmd_write_files(w->dir, files) != KA_OK) {
    cmd_set(ps, KERNELARENA__V1__STATUS__INFRA_ERROR, "cannot copy the task folder into %s",
            w->dir);
  } else {
    if (env->note[0])
      ka_sb_printf(&ps->log, "[kernelarena] %s:%d: %s\n", dev->backend, (int)dev->index, env->note);
    w->env = env;
    return 0;
  }
  free(env);
  ka_rmtree(w->dir);
  return 1;
}

/* Removes w's folder (and all its commands left there) and frees its environment. */
static void cmd_work_close(cmd_work *w) {
  if (!w->env) return;
  free(w->env);
  w->env = NULL;
  ka_rmtree(w->dir);
}

/* Runs phases first..last (KA_CMD_COMPILE..KA_CMD_PERFORMANCE) in w until the deadline
 * *end, each after clearing the reports (a phase's reports are its own commands'), then
 * checks their reports; with the performance phase, its cases go into ps->cases. *end
 * comes back moved on by the time spent waiting for the device lock (cmd_lock), so that
 * runs that share one budget keep that credit. 0 if all passed, else 1 with the verdict
 * in ps. */
static int cmd_work_phases(const ka_task *t, cmd_work *w, ka_devlock *lock, double *end, int first,
                           int last, cmd_pass *ps) {
  cmd_ctx x = {t, w->env, lock, *end};
  int rc = 0;
  for (int p = first; p <= last && !rc; p++) {
    cmd_clear_reports(w->dir);
    rc =
        cmd_phase(&x, p, ps) || (p != KA_CMD_PERFORMANCE && cmd_check_status_report(w->dir, p, ps));
  }
  *end = x.end;
  return rc ? 1 : last == KA_CMD_PERFORMANCE ? cmd_check_perf(w->dir, ps) : 0;
}

/* One pass in a fresh workdir: the folder, the job's files (NULL: the baseline's), the
 * three phases and their reports. ps->status is OK when all passed. */
static void cmd_run_pass(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                         const ka_task *t, const Kernelarena__V1__Job *files, double end,
                         ka_devlock *lock, cmd_pass *ps) {
  ps->status = CMD_OK;
  cmd_work w;
  if (cmd_work_open(cfg, dev, t, files, &w, ps)) return;
  cmd_work_phases(t, &w, lock, &end, KA_CMD_COMPILE, KA_CMD_PERFORMANCE, ps);
  cmd_work_close(&w);
}

/* ---- the baseline, once per (task version, device) */

typedef struct cmd_base {
  char key[128];
  ka_cmd_case cases[CMD_MAX_CASES];
  int ncases;
} cmd_base;
#define CMD_BASE_MAX 256
static cmd_base cmd_bases[CMD_BASE_MAX];
static int cmd_nbases;
static pthread_mutex_t cmd_bases_mu = PTHREAD_MUTEX_INITIALIZER;

static int cmd_base_find(const char *key, cmd_base *out) {
  pthread_mutex_lock(&cmd_bases_mu);
  int found = 0;
  for (int i = 0; i < cmd_nbases && !found; i++)
    if (!strcmp(cmd_bases[i].key, key)) *out = cmd_bases[i], found = 1;
  pthread_mutex_unlock(&cmd_bases_mu);
  return found;
}

static void cmd_base_put(const cmd_base *b) {
  pthread_mutex_lock(&cmd_bases_mu);
  int found = 0;
  for (int i = 0; i < cmd_nbases && !found; i++) found = !strcmp(cmd_bases[i].key, b->key);
  if (!found && cmd_nbases < CMD_BASE_MAX) cmd_bases[cmd_nbases++] = *b;
  pthread_mutex_unlock(&cmd_bases_mu);
}

/* The baseline's times for t on dev: cached, or measured now. 0, or 1 with res set. */
static int cmd_baseline(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                        const ka_task *t, double end, ka_devlock *lock, cmd_base *b, ka_sb *log,
                        Kernelarena__V1__Result *res) {
  memset(b, 0, sizeof *b);
  snprintf(b->key, sizeof b->key, "%s|%s:%d", t->version, dev->backend, (int)dev->index);
  if (cmd_base_find(b->key, b)) {
    ka_sb_printf(log, "[kernelarena] baseline: cached for task version %s on %s:%d\n", t->version,
                 dev->backend, (int)dev->index);
    return 0;
  }
  cmd_pass *ps = calloc(1, sizeof *ps);
  if (!ps) return res->status = KERNELARENA__V1__STATUS__INFRA_ERROR, 1;
  cmd_run_pass(cfg, dev, t, NULL, end, lock, ps);
  if (ps->status != CMD_OK) {
    char msg[1400];
    snprintf(msg, sizeof msg, "the task's own baseline failed on this executor: %s", ps->message);
    res->status = KERNELARENA__V1__STATUS__INFRA_ERROR;
    res->message = strdup(msg);
    ka_sb_puts(log, "[kernelarena] baseline pass:\n");
    if (ps->log.s) ka_sb_puts(log, ps->log.s);
    ka_sb_free(&ps->log);
    free(ps);
    return 1;
  }
  b->ncases = ps->ncases;
  memcpy(b->cases, ps->cases, sizeof ps->cases);
  ka_sb_printf(log,
               "[kernelarena] baseline: measured now (%d case%s), kept for this task version\n",
               b->ncases, b->ncases == 1 ? "" : "s");
  ka_sb_free(&ps->log);
  free(ps);
  cmd_base_put(b);
  return 0;
}

/* ---- the result */

/* Matches cases c[0..nc) to b[0..nb) by name, each of b exactly once (base[i] = b's
 * time of c[i]). NULL, or the first name of c that names no case of b left: a report
 * that names every case after the slowest baseline case would otherwise raise the
 * speedup without any work (red team 2026-12-01). The caller checks nc == nb. */
static const char *cmd_match(const ka_cmd_case *c, int nc, const ka_cmd_case *b, int nb,
                             double *base) {
  unsigned char used[CMD_MAX_CASES] = {0};
  for (int i = 0; i < nc; i++) {
    int k = 0;
    while (k < nb && (used[k] || strcmp(b[k].name, c[i].name))) k++;
    if (k == nb) return c[i].name;
    used[k] = 1, base[i] = b[k].ms;
  }
  return NULL;
}

/* The candidate's cases against the baseline's (cmd_match). */
static const char *cmd_match_cases(const cmd_pass *ps, const cmd_base *b, double *base) {
  return cmd_match(ps->cases, ps->ncases, b->cases, b->ncases, base);
}

/* Fills res's cases from the candidate's pass against the executor's own cached
 * baseline (never the report's ori_time: the submitted code can write the report, red
 * team 2026-12-01). 0, or 1 with the verdict set: RUNTIME_ERROR for a count of cases
 * other than the baseline's, FLAGGED for a case faster than the task's cap. */
static int cmd_score(const ka_task *t, const cmd_pass *ps, const cmd_base *b, ka_sb *log,
                     Kernelarena__V1__Result *res) {
  if (ps->ncases != b->ncases) { /* the mean must be over the cases the baseline has */
    char msg[200];
    snprintf(msg, sizeof msg, "the performance report has %d case%s, the baseline's %d", ps->ncases,
             ps->ncases == 1 ? "" : "s", b->ncases);
    res->status = KERNELARENA__V1__STATUS__RUNTIME_ERROR;
    res->message = strdup(msg);
    return 1;
  }
  double base_of[CMD_MAX_CASES];
  const char *unmatched = cmd_match_cases(ps, b, base_of);
  if (unmatched) {
    char msg[300];
    snprintf(msg, sizeof msg,
             "the performance report's case '%.120s' names no case of the baseline's run that "
             "is left (each of its cases once, by the same names)",
             unmatched);
    res->status = KERNELARENA__V1__STATUS__RUNTIME_ERROR;
    res->message = strdup(msg);
    return 1;
  }
  if (ps->ncases < 0 || ps->ncases > CMD_MAX_CASES) /* a pass holds at most that many */
    return res->status = KERNELARENA__V1__STATUS__INFRA_ERROR, 1;
  res->cases = calloc((size_t)ps->ncases + 1, sizeof *res->cases);
  if (!res->cases) return res->status = KERNELARENA__V1__STATUS__INFRA_ERROR, 1;
  double sum = 0, cap = t->command->max_speedup;
  char msg[400] = "";
  for (int i = 0; i < ps->ncases; i++) {
    const ka_cmd_case *c = &ps->cases[i];
    double base = base_of[i];
    Kernelarena__V1__CaseResult *cr = malloc(sizeof *cr);
    if (!cr) return res->status = KERNELARENA__V1__STATUS__INFRA_ERROR, 1;
    kernelarena__v1__case_result__init(cr);
    res->cases[res->n_cases++] = cr;
    cr->name = strdup(c->name);
    cr->candidate_ms = c->ms;
    cr->baseline_ms = base;
    cr->correct = 1;
    cr->speedup = base / c->ms;
    sum += cr->speedup;
    if (c->base_ms > 0)
      ka_sb_printf(log,
                   "[kernelarena] case %s: the report's own ori_time %.4g ms is not used; the "
                   "baseline is the executor's run of the unchanged folder, %.4g ms\n",
                   c->name, c->base_ms, base);
    if (!msg[0] && cr->speedup > cap)
      snprintf(msg, sizeof msg,
               "the speedup of case %s is %.1fx, above the cap of %gx for a task-harness task "
               "(its own scripts time code that can write their report: docs/integrity.md; "
               "config.yaml max_speedup raises the cap)",
               c->name, cr->speedup, cap);
  }
  /* the seed's score: 120 + 100 x the arithmetic mean of the per-case speedups, carried
   * in geomean_speedup so that the reward is the same function for every task */
  res->geomean_speedup = ps->ncases ? sum / ps->ncases : 0;
  res->status = msg[0] ? KERNELARENA__V1__STATUS__FLAGGED : CMD_OK;
  if (msg[0]) res->message = strdup(msg);
  return msg[0] != 0;
}

/* ---- paired repeats (gpuexec --command-pairs N >= 2; docs/tasks.md "Paired repeats") */

/* The per-case times of one side's performance runs: ms[k][i] is run k's time of the
 * case ref->cases[i] (ref: the side's first report; the others are matched by name). */
typedef struct cmd_series {
  const cmd_pass *ref;
  int n;
  double ms[KA_CMD_PAIRS_MAX][CMD_MAX_CASES];
} cmd_series;

/* Adds sample's times to s, by the names of s->ref's cases (the first sample is s->ref
 * itself). NULL, or why the sample's report does not match the first (in why). */
static const char *cmd_series_add(cmd_series *s, const cmd_pass *sample, char *why, size_t whylen) {
  if (s->n >= KA_CMD_PAIRS_MAX) return snprintf(why, whylen, "too many runs"), why;
  if (sample->ncases != s->ref->ncases) {
    snprintf(why, whylen, "its report has %d case%s, the first run's %d", sample->ncases,
             sample->ncases == 1 ? "" : "s", s->ref->ncases);
    return why;
  }
  const char *bad =
      cmd_match(s->ref->cases, s->ref->ncases, sample->cases, sample->ncases, s->ms[s->n]);
  if (bad) {
    snprintf(why, whylen, "its report does not have the first run's case '%.120s' once", bad);
    return why;
  }
  s->n++;
  return NULL;
}

static int cmd_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of case i's times in s (the mean of the middle two for an even count), and
 * the times in run order into the log line buf. */
static double cmd_series_median(const cmd_series *s, int i, char *buf, size_t len) {
  double v[KA_CMD_PAIRS_MAX];
  size_t at = 0;
  buf[0] = 0;
  for (int k = 0; k < s->n; k++) {
    v[k] = s->ms[k][i];
    if (at < len) at += (size_t)snprintf(buf + at, len - at, "%s%.4g", k ? " " : "", v[k]);
  }
  qsort(v, (size_t)s->n, sizeof *v, cmd_cmp_double);
  return s->n % 2 ? v[s->n / 2] : (v[s->n / 2 - 1] + v[s->n / 2]) / 2;
}

/* The deadline of phase p run on its own: each of its commands its *_timeout (cmd_phase;
 * the time spent waiting for the device lock moves it on, cmd_lock), so that no run of
 * the candidate's eats into a run of the baseline's. */
static double cmd_phase_end(const ka_task *t, int p) {
  return ka_now_s() + t->command->ncommands[p] * t->command->timeout_s[p];
}

/* One performance run in w (its reports cleared first) into a fresh pass *out (the
 * caller frees it and its log; NULL when memory ran out), until *end (NULL: a deadline
 * of its own, cmd_phase_end). 0, or 1 with its verdict. */
static int cmd_perf_run(const ka_task *t, cmd_work *w, ka_devlock *lock, double *end,
                        cmd_pass **out) {
  cmd_pass *p = calloc(1, sizeof *p);
  *out = p;
  if (!p) return 1;
  p->status = CMD_OK;
  double own = cmd_phase_end(t, KA_CMD_PERFORMANCE);
  return cmd_work_phases(t, w, lock, end ? end : &own, KA_CMD_PERFORMANCE, KA_CMD_PERFORMANCE, p);
}

static void cmd_pass_free(cmd_pass *p) {
  if (!p) return;
  ka_sb_free(&p->log);
  free(p);
}

enum { CMD_PAIRED_SCORED, CMD_PAIRED_VERDICT, CMD_PAIRED_FALLBACK };

/* The medians of the pairs into cand's and bmed's cases (bmed: bs->ref's cases, each its
 * median), one log line per case of cand with its baseline case's times. */
static void cmd_paired_medians(const cmd_series *cs, const cmd_series *bs, cmd_pass *cand,
                               cmd_base *bmed, ka_sb *log) {
  memset(bmed, 0, sizeof *bmed);
  bmed->ncases = bs->ref->ncases;
  memcpy(bmed->cases, bs->ref->cases, sizeof bmed->cases);
  char cl[KA_CMD_PAIRS_MAX * 16], bl[KA_CMD_PAIRS_MAX * 16];
  for (int k = 0; k < bmed->ncases; k++)
    bmed->cases[k].ms = cmd_series_median(bs, k, bl, sizeof bl);
  unsigned char used[CMD_MAX_CASES] = {0};
  for (int i = 0; i < cand->ncases; i++) {
    cand->cases[i].ms = cmd_series_median(cs, i, cl, sizeof cl);
    int k = 0; /* its baseline case, each once (as cmd_match) */
    while (k < bmed->ncases && (used[k] || strcmp(bmed->cases[k].name, cand->cases[i].name))) k++;
    if (k == bmed->ncases) { /* cmd_score refuses it, naming the case */
      ka_sb_printf(log,
                   "[kernelarena] case %s: candidate ms %s (median %.4g), no baseline case of "
                   "that name left\n",
                   cand->cases[i].name, cl, cand->cases[i].ms);
      continue;
    }
    used[k] = 1;
    cmd_series_median(bs, k, bl, sizeof bl);
    ka_sb_printf(log,
                 "[kernelarena] case %s: candidate ms %s (median %.4g), baseline ms %s (median "
                 "%.4g)\n",
                 cand->cases[i].name, cl, cand->cases[i].ms, bl, bmed->cases[k].ms);
  }
}

/* The fallback when a run of the baseline failed: cand's cases become the medians of its
 * runs so far (so that making the baseline fail does not choose the candidate's luckiest
 * run), to be scored against the kept baseline times. */
static void cmd_paired_fallback(const cmd_series *cs, cmd_pass *cand, ka_sb *log,
                                const char *what) {
  char cl[KA_CMD_PAIRS_MAX * 16];
  for (int i = 0; i < cand->ncases; i++)
    cand->cases[i].ms = cmd_series_median(cs, i, cl, sizeof cl);
  ka_sb_printf(log,
               "[kernelarena] pairs: %s; scored against the cached baseline, with the median "
               "of the candidate's %d run%s so far\n",
               what, cs->n, cs->n == 1 ? "" : "s");
}

/* The baseline's folder for the pairs: a fresh copy of the unchanged folder, taken
 * through its compile and correctness commands as the candidate's was (so that what
 * those leave in a folder, a JIT cache say, both sides have). 0, or 1 (logged; w has
 * nothing open when cmd_work_open failed, else the caller closes it). */
static int cmd_paired_baseline(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                               const ka_task *t, ka_devlock *lock, cmd_work *w, ka_sb *log,
                               char *why, size_t whylen) {
  cmd_pass *bp = calloc(1, sizeof *bp);
  if (!bp) return snprintf(why, whylen, "out of memory"), 1;
  bp->status = CMD_OK;
  ka_sb_puts(log, "[kernelarena] pairs: the baseline's folder, compiled and checked:\n");
  int bad = cmd_work_open(cfg, dev, t, NULL, w, bp);
  for (int p = KA_CMD_COMPILE; !bad && p <= KA_CMD_CORRECTNESS; p++) {
    double end = cmd_phase_end(t, p);
    bad = cmd_work_phases(t, w, lock, &end, p, p, bp);
  }
  if (bp->log.s) ka_sb_puts(log, bp->log.s);
  if (bad) snprintf(why, whylen, "the baseline's folder failed (%s)", bp->message);
  cmd_pass_free(bp);
  return bad;
}

/* Times the baseline (cmd_paired_baseline) against the candidate (cw, whose pass wrote
 * cand's first report) with cfg->command_pairs pairs of performance runs in ABBA order
 * (C B, B C, C B, ...: a drift of the device or the machine over the pairs weighs on
 * both sides alike). The candidate's runs go on within what is left of its pass's
 * budget (*cand_end), so that its commands in all take no longer than without pairs (a
 * candidate that stalls cannot push the step past a client's deadline: red team
 * 2026-12-02); each baseline run has a deadline of its own (cmd_phase_end), which no
 * candidate run can eat into.
 * CMD_PAIRED_SCORED: each case's median into cand->cases and bmed;
 * CMD_PAIRED_VERDICT: a run of the candidate failed, its verdict in cand;
 * CMD_PAIRED_FALLBACK: the baseline's folder or one of its runs failed (or memory ran
 * out), logged: cand->cases hold the candidate's medians so far, to be scored against
 * the kept baseline times (none of this is the candidate's verdict or an unscored step). */
static int cmd_paired(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                      const ka_task *t, cmd_work *cw, cmd_pass *cand, double *cand_end,
                      ka_devlock *lock, ka_sb *log, cmd_base *bmed) {
  int n = cfg->command_pairs < KA_CMD_PAIRS_MAX ? cfg->command_pairs : KA_CMD_PAIRS_MAX;
  cmd_series *cs = calloc(1, sizeof *cs), *bs = calloc(1, sizeof *bs);
  cmd_pass *bref = NULL;
  cmd_work bw = {.env = NULL};
  char why[300], what[400] = "out of memory";
  if (!cs || !bs) {
    ka_sb_printf(log, "[kernelarena] pairs: %s; scored against the cached baseline\n", what);
    free(cs);
    free(bs);
    return CMD_PAIRED_FALLBACK;
  }
  ka_sb_printf(log,
               "[kernelarena] pairs: %d pairs of performance runs, candidate and baseline "
               "alternated (ABBA); each case's median is scored\n",
               n);
  cs->ref = cand;
  cmd_series_add(cs, cand, why, sizeof why); /* the pass's own run: C of pair 1 */
  int rc = CMD_PAIRED_FALLBACK;
  double t0 = ka_now_s();
  int bad_folder = cmd_paired_baseline(cfg, dev, t, lock, &bw, log, what, sizeof what);
  *cand_end += ka_now_s() - t0;
  if (bad_folder) goto out;
  for (int k = 0; k < n; k++) {
    for (int j = 0; j < 2; j++) {
      int base = k % 2 == 0 ? j == 1 : j == 0; /* even pairs C B, odd pairs B C */
      if (!base && k == 0) continue;
      ka_sb_printf(log, "[kernelarena] pair %d of %d, %s:\n", k + 1, n,
                   base ? "baseline" : "candidate");
      cmd_pass *sp;
      double r0 = ka_now_s();
      int f = cmd_perf_run(t, base ? &bw : cw, lock, base ? NULL : cand_end, &sp);
      if (base) *cand_end += ka_now_s() - r0; /* the baseline's time is not the candidate's */
      if (!sp) goto out;                      /* what: out of memory */
      if (sp->log.s) ka_sb_puts(log, sp->log.s);
      if (base && !f && !bs->ref) bs->ref = bref = sp;
      const char *bad = f ? sp->message : cmd_series_add(base ? bs : cs, sp, why, sizeof why);
      if (bad && base) {
        snprintf(what, sizeof what, "the baseline's run %d failed (%s)", k + 1, bad);
      } else if (bad) { /* the candidate's code ran: its verdict, as in its pass */
        cand->status = f ? sp->status : KERNELARENA__V1__STATUS__RUNTIME_ERROR;
        snprintf(cand->message, sizeof cand->message, "pair %d of %d: %s", k + 1, n, bad);
        rc = CMD_PAIRED_VERDICT;
      }
      if (sp != bref) cmd_pass_free(sp);
      if (bad) goto out;
    }
  }
  cmd_paired_medians(cs, bs, cand, bmed, log);
  rc = CMD_PAIRED_SCORED;
out:
  if (rc == CMD_PAIRED_FALLBACK) cmd_paired_fallback(cs, cand, log, what);
  cmd_work_close(&bw);
  cmd_pass_free(bref);
  free(cs);
  free(bs);
  return rc;
}

/* 1 when the candidate's pass can be scored against b at all (its cases are b's, each
 * once, by name): only then are the pairs worth their runs (cmd_score says why not). */
static int cmd_scorable(const cmd_pass *ps, const cmd_base *b) {
  double base_of[CMD_MAX_CASES];
  return ps->ncases == b->ncases && !cmd_match_cases(ps, b, base_of);
}

/* The candidate's pass in its own workdir, and with cfg->command_pairs >= 2 the pairs
 * (cmd_paired) in the same workdir; then its verdict or its score into res: against the
 * pairs' baseline medians when they ran, else against the kept baseline b. */
static void cmd_candidate(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                          const Kernelarena__V1__Job *job, const ka_task *t, ka_devlock *lock,
                          double budget, const cmd_base *b, ka_sb *log,
                          Kernelarena__V1__Result *res) {
  cmd_pass *ps = calloc(1, sizeof *ps);
  cmd_base *bmed = calloc(1, sizeof *bmed);
  if (!ps || !bmed) {
    res->status = KERNELARENA__V1__STATUS__INFRA_ERROR;
    free(ps);
    free(bmed);
    return;
  }
  ps->status = CMD_OK;
  cmd_work w;
  int paired = CMD_PAIRED_FALLBACK;
  if (!cmd_work_open(cfg, dev, t, job, &w, ps)) {
    double end = ka_now_s() + budget; /* the candidate's commands', pass and pairs */
    cmd_work_phases(t, &w, lock, &end, KA_CMD_COMPILE, KA_CMD_PERFORMANCE, ps);
    if (ps->log.s) ka_sb_puts(log, ps->log.s);
    ka_sb_free(&ps->log);
    if (ps->status == CMD_OK && cfg->command_pairs >= 2 && cmd_scorable(ps, b))
      paired = cmd_paired(cfg, dev, t, &w, ps, &end, lock, log, bmed);
    cmd_work_close(&w);
  } else if (ps->log.s) {
    ka_sb_puts(log, ps->log.s);
  }
  if (ps->status == CMD_OK) {
    cmd_score(t, ps, paired == CMD_PAIRED_SCORED ? bmed : b, log, res);
  } else {
    res->status = ps->status;
    res->message = strdup(ps->message);
  }
  cmd_pass_free(ps);
  free(bmed);
}

void ka_command_evaluate(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                         const Kernelarena__V1__Job *job, const ka_task *t, ka_devlock *lock,
                         Kernelarena__V1__Result *res) {
  double t0 = ka_now_s();
  ka_devlock none = {.m = -1, .t = -1};
  if (!lock) lock = &none;
  ka_sb log = {0};
  ka_sb_printf(&log,
               "[kernelarena] integrity: %s (the task's own scripts compile, check and time the "
               "submitted code, which runs beside them: docs/integrity.md)\n",
               KA_INTEGRITY_TASK_HARNESS);
  if (strcmp(t->version, job->task_version)) {
    char msg[256];
    snprintf(msg, sizeof msg, "task %s differs between server (%s) and executor (%s)", t->id,
             job->task_version, t->version);
    res->status = KERNELARENA__V1__STATUS__INFRA_ERROR;
    res->message = strdup(msg);
  } else {
    double budget = job->timeout_s > 0 ? job->timeout_s : t->timeout_s;
    cmd_base b;
    if (!cmd_baseline(cfg, dev, t, ka_now_s() + budget, lock, &b, &log, res)) {
      cmd_candidate(cfg, dev, job, t, lock, budget, &b, &log, res);
    }
  }
  if (res->message && *res->message)
    ka_sb_printf(&log, "[kernelarena] verdict: %s\n", res->message);
  res->runtime_log = ka_sb_take(&log);
  res->wall_s = ka_now_s() - t0;
}
