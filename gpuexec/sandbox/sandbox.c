/* The sandbox of an evaluation (sandbox.h describes the layers; docs/sandbox.md what
 * each covers and what it does not). Linked into ka-runner only. */
#include "sandbox.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <linux/landlock.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ka_common.h"

/* ------------------------------------------------------------------------------------
 * Supervisor: `ka-runner --supervise RUNNER` */

static volatile sig_atomic_t sb_stop;

static int sb_private_shm(void);

static void sb_on_term(int sig) {
  (void)sig;
  sb_stop = 1;
}

/* Our direct children that are alive (not zombies), from /proc/<pid>/stat: field 4 is
 * the parent pid, field 3 the state; the command name before them may hold spaces and
 * parentheses, so they are parsed after the last ')' (proc(5)). Returns the count
 * stored in out[0..max). */
static int sb_live_children(pid_t self, pid_t *out, int max) {
  DIR *d = opendir("/proc");
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < max) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    char p[64], buf[512];
    snprintf(p, sizeof p, "/proc/%s/stat", e->d_name);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0) continue;
    buf[r] = 0;
    char *rp = strrchr(buf, ')');
    char state;
    int ppid;
    if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2) continue;
    if (ppid == self && state != 'Z' && state != 'X') out[n++] = (pid_t)atoi(e->d_name);
  }
  closedir(d);
  return n;
}

/* Reaps every child that has ended; returns -1 once there are no children at all. */
static int sb_reap(void) {
  int s;
  pid_t w;
  while ((w = waitpid(-1, &s, WNOHANG)) > 0) {
  }
  return w < 0 && errno == ECHILD ? -1 : 0;
}

int ka_sandbox_supervise(const char *runner_path) {
  /* Orphans of the runner's descendants are re-parented to us, not to init, so that
   * setsid() or a double fork cannot escape the cleanup (prctl(2)). */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    dprintf(2, "ka-runner --supervise: PR_SET_CHILD_SUBREAPER: %s\n", strerror(errno));
    return 1;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0); /* gpuexec gone: so are we */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = sb_on_term; /* no SA_RESTART: waitpid returns EINTR */
  sigaction(SIGTERM, &sa, NULL);
  fcntl(KA_SANDBOX_STATUS_FD, F_SETFD, FD_CLOEXEC);
  pid_t self = getpid();
  pid_t r = fork();
  if (r < 0) {
    dprintf(2, "ka-runner --supervise: fork: %s\n", strerror(errno));
    return 1;
  }
  if (r == 0) {
    setpgid(0, 0);
    signal(SIGTERM, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != self) _exit(126);
    sb_private_shm();
    char *argv[] = {(char *)runner_path, NULL};
    execv(runner_path, argv);
    _exit(127);
  }
  setpgid(r, r);
  dprintf(KA_SANDBOX_STATUS_FD, "pid %d\n", (int)r);
  /* Keep nothing of the runner's channel open: when the runner and what it left
   * behind are gone, gpuexec sees the pipes close. */
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 4; fd++) {
    if (devnull >= 0)
      dup2(devnull, fd);
    else
      close(fd);
  }
  DIR *fds = opendir("/proc/self/fd");
  if (fds) {
    int keep = dirfd(fds);
    struct dirent *e;
    while ((e = readdir(fds)))
      if (isdigit((unsigned char)e->d_name[0])) {
        int fd = atoi(e->d_name);
        if (fd > KA_SANDBOX_STATUS_FD && fd != keep && fd != devnull) close(fd);
      }
    closedir(fds);
  }

  int st = 0, have = 0, leftovers = 0, killed = 0;
  while (!have) {
    int s;
    pid_t w = waitpid(-1, &s, 0);
    if (w == r) {
      st = s, have = 1;
    } else if (w < 0 && errno == EINTR) {
      if (sb_stop && !killed) {
        kill(r, SIGKILL);
        killed = 1;
      }
    } else if (w < 0) {
      break; /* ECHILD: cannot happen while the runner lives */
    }
    /* w > 0: an orphan re-parented to us ended by itself */
  }
  /* What the runner started and meant to end with it (module processes with a
   * parent-death signal) ends within moments; let it, so that it is not counted. */
  double t0 = ka_now_s();
  pid_t kids[1024];
  while (ka_now_s() - t0 < 0.25) {
    if (sb_reap() < 0) break;
    if (sb_live_children(self, kids, 1024) == 0) {
      if (sb_reap() < 0) break;
    }
    usleep(2000);
  }
  /* Whatever still lives was left behind: kill it, generation by generation as
   * orphans come to us (setsid or setpgid do not take a process out of this). */
  pid_t counted[4096];
  int ncounted = 0;
  for (int round = 0; round < 100000; round++) {
    if (sb_reap() < 0) break;
    int n = sb_live_children(self, kids, 1024);
    for (int i = 0; i < n; i++) {
      kill(kids[i], SIGKILL);
      int seen = 0;
      for (int k = 0; k < ncounted && !seen; k++) seen = counted[k] == kids[i];
      if (!seen) {
        leftovers++;
        if (ncounted < 4096) counted[ncounted++] = kids[i];
      }
    }
    if (!n) usleep(1000);
  }
  dprintf(KA_SANDBOX_STATUS_FD, "runner %d leftovers %d deadline %d\n", st, leftovers,
          (int)sb_stop);
  return 0;
}

/* ------------------------------------------------------------------------------------
 * Include allowlist */

static const char *const sb_inc_c[] = {
    "assert.h",    "complex.h",       "ctype.h",     "errno.h",       "fenv.h",      "float.h",
    "inttypes.h",  "iso646.h",        "limits.h",    "locale.h",      "math.h",      "setjmp.h",
    "signal.h",    "stdalign.h",      "stdarg.h",    "stdatomic.h",   "stdbool.h",   "stddef.h",
    "stdint.h",    "stdio.h",         "stdlib.h",    "stdnoreturn.h", "string.h",    "tgmath.h",
    "threads.h",   "time.h",          "uchar.h",     "wchar.h",       "wctype.h",    "pthread.h",
    "omp.h",       "immintrin.h",     "x86intrin.h", "xmmintrin.h",   "emmintrin.h", "pmmintrin.h",
    "tmmintrin.h", "smmintrin.h",     "nmmintrin.h", "wmmintrin.h",   "avxintrin.h", "avx2intrin.h",
    "fmaintrin.h", "avx512fintrin.h", "arm_neon.h",  "arm_sve.h",     NULL};
/* NVRTC's built-in headers (CUDA 13 NVRTC guide, "Supported headers") and the C/C++
 * headers it provides; entries ending in '/' allow a folder of them. */
static const char *const sb_inc_cuda[] = {"cuda_fp16.h",
                                          "cuda_fp16.hpp",
                                          "cuda_bf16.h",
                                          "cuda_bf16.hpp",
                                          "cuda_fp8.h",
                                          "cuda_fp8.hpp",
                                          "cuda_fp6.h",
                                          "cuda_fp6.hpp",
                                          "cuda_fp4.h",
                                          "cuda_fp4.hpp",
                                          "mma.h",
                                          "cuda_pipeline.h",
                                          "cuda_pipeline_primitives.h",
                                          "cuda_awbarrier.h",
                                          "cuda_awbarrier_primitives.h",
                                          "cooperative_groups.h",
                                          "cooperative_groups/",
                                          "cuda/",
                                          "stdint.h",
                                          "stddef.h",
                                          "limits.h",
                                          "float.h",
                                          "math.h",
                                          "cstdint",
                                          "cstddef",
                                          "climits",
                                          "cfloat",
                                          "cmath",
                                          "type_traits",
                                          "utility",
                                          "limits",
                                          NULL};
static const char *const sb_inc_hip[] = {"hip/",   "stdint.h",    "stddef.h", "limits.h", "float.h",
                                         "math.h", "cstdint",     "cstddef",  "climits",  "cfloat",
                                         "cmath",  "type_traits", "utility",  "limits",   NULL};

static int sb_name_ok_chars(const char *s, size_t n) {
  if (!n || s[0] == '/' || s[0] == '.') return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!(isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-' || c == '+')) return 0;
    if (c == '.' && i + 1 < n && s[i + 1] == '.') return 0;
    if (c == '/' && i + 1 < n && (s[i + 1] == '.' || s[i + 1] == '/')) return 0;
  }
  return 1;
}

static int sb_in_list(const char *const *list, const char *s, size_t n) {
  for (int i = 0; list && list[i]; i++) {
    size_t l = strlen(list[i]);
    if (l && list[i][l - 1] == '/') {
      if (n > l && !strncmp(s, list[i], l)) return 1;
    } else if (l == n && !strncmp(s, list[i], n)) {
      return 1;
    }
  }
  return 0;
}

/* Skips blanks and block comments from p (within a spliced line). */
static const char *sb_skip(const char *p, const char *end) {
  for (;;) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\v' || *p == '\f' || *p == '\r')) p++;
    if (p + 1 < end && p[0] == '/' && p[1] == '*') {
      const char *q = p + 2;
      while (q + 1 < end && !(q[0] == '*' && q[1] == '/')) q++;
      p = q + 1 < end ? q + 2 : end;
      continue;
    }
    return p;
  }
}

int ka_include_check(const char *language, const char *const *names, const char *const *texts,
                     const size_t *lens, int n, char **log) {
  const char *const *list = !strcmp(language, "c")      ? sb_inc_c
                            : !strcmp(language, "cuda") ? sb_inc_cuda
                            : !strcmp(language, "hip")  ? sb_inc_hip
                                                        : NULL;
  ka_sb out = {0};
  int bad = 0;
  if (log) *log = NULL;
  for (int f = 0; f < n; f++) {
    /* undo backslash-newline splices (translation phase 2), keeping original lines */
    size_t len = lens[f];
    char *s = malloc(len + 1);
    int *line = malloc(sizeof(int) * (len + 1));
    if (!s || !line) {
      free(s), free(line);
      ka_sb_printf(&out, "%s: out of memory while checking includes\n", names[f]);
      bad++;
      continue;
    }
    size_t m = 0;
    int ln = 1;
    for (size_t i = 0; i < len; i++) {
      const char *t = texts[f];
      if (t[i] == '\\' && i + 1 < len && t[i + 1] == '\n') {
        i++, ln++;
        continue;
      }
      if (t[i] == '\\' && i + 2 < len && t[i + 1] == '\r' && t[i + 2] == '\n') {
        i += 2, ln++;
        continue;
      }
      s[m] = t[i];
      line[m++] = ln;
      if (t[i] == '\n') ln++;
    }
    s[m] = 0;
    const char *end = s + m;
    for (const char *p = s; p < end; p++) {
      const char *q;
      if (*p == '#')
        q = p + 1;
      else if (p[0] == '%' && p + 1 < end && p[1] == ':')
        q = p + 2;
      else if (p[0] == '?' && p + 2 < end && p[1] == '?' && p[2] == '=')
        q = p + 3;
      else
        continue;
      q = sb_skip(q, end);
      const char *id = q;
      while (q < end && (isalnum((unsigned char)*q) || *q == '_')) q++;
      size_t idn = (size_t)(q - id);
      int is_inc = (idn == 7 && !strncmp(id, "include", 7)) ||
                   (idn == 12 && !strncmp(id, "include_next", 12)) ||
                   (idn == 6 && !strncmp(id, "import", 6)) ||
                   (idn == 5 && !strncmp(id, "embed", 5));
      if (!is_inc) continue;
      int at = line[p - s];
      q = sb_skip(q, end);
      char close = q < end && *q == '<' ? '>' : q < end && *q == '"' ? '"' : 0;
      if (!close) {
        ka_sb_printf(&out,
                     "%s:%d: error: #%.*s must name a header as <name> or \"name\" "
                     "(computed includes are not allowed)\n",
                     names[f], at, (int)idn, id);
        bad++;
        continue;
      }
      const char *nm = q + 1, *e = nm;
      while (e < end && *e != close && *e != '\n') e++;
      size_t nn = (size_t)(e - nm);
      int ok = e < end && *e == close && sb_name_ok_chars(nm, nn);
      int local = 0;
      if (ok && close == '"')
        for (int k = 0; k < n; k++)
          if (strlen(names[k]) == nn && !strncmp(names[k], nm, nn)) local = 1;
      if (ok && !local && !sb_in_list(list, nm, nn)) ok = 0;
      if (!ok) {
        int shown = nn > 200 ? 200 : (int)nn;
        ka_sb_printf(&out,
                     "%s:%d: error: #%.*s %c%.*s%c is not allowed: a submission may include only "
                     "the task's editable files and the %s headers of the allowlist "
                     "(docs/sandbox.md)\n",
                     names[f], at, (int)idn, id, close == '>' ? '<' : '"', shown, nm, close,
                     language);
        bad++;
      }
      p = e < end ? e : end - 1;
    }
    free(s);
    free(line);
  }
  if (bad && log)
    *log = ka_sb_take(&out);
  else
    ka_sb_free(&out);
  return bad;
}

/* ------------------------------------------------------------------------------------
 * Landlock (Documentation/userspace-api/landlock.rst). Constants of later ABIs than
 * the installed headers know are defined here with the kernel's values. */

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#define SB_LL_TCP_BIND (1ULL << 0)     /* LANDLOCK_ACCESS_NET_BIND_TCP, ABI 4 */
#define SB_LL_TCP_CONNECT (1ULL << 1)  /* LANDLOCK_ACCESS_NET_CONNECT_TCP, ABI 4 */
#define SB_LL_SCOPE_UNIX (1ULL << 0)   /* LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, ABI 6 */
#define SB_LL_SCOPE_SIGNAL (1ULL << 1) /* LANDLOCK_SCOPE_SIGNAL, ABI 6 */

typedef struct sb_ll_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net; /* ABI 4 */
  uint64_t scoped;             /* ABI 6 */
} sb_ll_attr;

typedef struct __attribute__((packed)) sb_ll_path {
  uint64_t allowed_access;
  int32_t parent_fd;
} sb_ll_path;

int ka_sandbox_landlock_abi(void) {
  long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v > 0 ? (int)v : 0;
}

#define SB_FILE_RIGHTS \
  (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE)

/* Adds a rule for path (skipped quietly if it does not exist). */
static int sb_ll_allow(int rs, const char *path, uint64_t access, uint64_t handled) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat stt;
  if (fstat(fd, &stt) == 0 && !S_ISDIR(stt.st_mode))
    access &= SB_FILE_RIGHTS | LANDLOCK_ACCESS_FS_TRUNCATE;
  sb_ll_path pb = {.allowed_access = access & handled, .parent_fd = fd};
  int rc = pb.allowed_access
               ? (int)syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0)
               : 0;
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

/* Who a Landlock domain is for (sb_landlock). */
enum {
  SB_LL_RUNNER = 0,   /* the runner: system folders, /proc, /sys, /dev, /dev/shm, workdir */
  SB_LL_MODULE = 1,   /* a module process: the same without /dev/shm (only its own folder) */
  SB_LL_COMPILER = 2, /* the C compiler: system folders and its folder only, no /proc or /sys */
  SB_LL_COMMAND = 3,  /* a command task's command on a GPU: system folders, /proc, /sys,
                         its device's nodes (sb_cmd_nodes), its folder */
};

/* ka_sandbox_command's device nodes and extra read-only folders (NULL-terminated lists;
 * set in the single-threaded child that sandboxes itself, read by sb_landlock). */
static const char *const *sb_cmd_nodes, *const *sb_cmd_ro;
/* ka_sandbox_command_pidns ran in the parent (inherited by its child); the command's own
 * /proc and /dev/shm are mounted (sb_cmd_own_proc): sb_landlock opens them for writing */
static int sb_cmd_pidns, sb_cmd_proc_rw, sb_cmd_shm_rw;

/* Rules for /dev: read and write of the device nodes (no new ones). Module processes and
 * the compiler get each entry of /dev but shm and mqueue, so that nothing there can hold
 * files another evaluation sees (the runner has its own /dev/shm, see sb_private_shm). */
static int sb_ll_dev(int rs, int who, int abi, uint64_t fs) {
  uint64_t dev = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                 LANDLOCK_ACCESS_FS_READ_DIR | (abi >= 3 ? LANDLOCK_ACCESS_FS_TRUNCATE : 0);
  if (who == SB_LL_RUNNER) return sb_ll_allow(rs, "/dev", dev, fs);
  if (who == SB_LL_COMPILER) return sb_ll_allow(rs, "/dev/null", dev, fs);
  if (who == SB_LL_COMMAND) {
    static const char *const plain[] = {"/dev/null",   "/dev/zero",    "/dev/full",
                                        "/dev/random", "/dev/urandom", NULL};
    int rc = 0;
    for (int i = 0; plain[i] && !rc; i++) rc = sb_ll_allow(rs, plain[i], dev, fs);
    for (int i = 0; sb_cmd_nodes && sb_cmd_nodes[i] && !rc; i++)
      rc = sb_ll_allow(rs, sb_cmd_nodes[i], dev, fs);
    return rc;
  }
  DIR *d = opendir("/dev");
  if (!d) return 0;
  int rc = 0;
  struct dirent *e;
  while (!rc && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "shm") ||
        !strcmp(e->d_name, "mqueue") || e->d_type == DT_LNK)
      continue; /* links (/dev/fd, /dev/stdin) lead to /proc or to sockets */
    char p[PATH_MAX];
    snprintf(p, sizeof p, "/dev/%s", e->d_name);
    rc = sb_ll_allow(rs, p, dev, fs);
    if (rc && errno == EBADFD) rc = 0; /* not a file of a filesystem (a socket): skipped */
  }
  closedir(d);
  return rc;
}

/* ---- hidden folders (ka_sandbox_hide) */

#define SB_MAX_HIDDEN 16

int ka_sandbox_hide(const char *path) {
  char real[PATH_MAX];
  if (!path || !realpath(path, real)) return KA_ENOENT;
  if (strchr(real, ':')) return KA_EINVAL; /* the list's separator */
  const char *old = getenv(KA_SANDBOX_HIDE_ENV);
  size_t n = (old ? strlen(old) + 1 : 0) + strlen(real) + 1;
  char *v = malloc(n);
  if (!v) return KA_ENOMEM;
  snprintf(v, n, "%s%s%s", old && *old ? old : "", old && *old ? ":" : "", real);
  int rc = setenv(KA_SANDBOX_HIDE_ENV, v, 1) == 0 ? KA_OK : KA_ENOMEM;
  free(v);
  return rc;
}

/* The absolute folders of KA_SANDBOX_HIDE: pointers into *buf (malloc'd, the caller frees
 * it; NULL when there are none), at most SB_MAX_HIDDEN. Returns how many, or -1 when the
 * list holds a relative entry or more than SB_MAX_HIDDEN (the sandbox then refuses to
 * start rather than leave one readable). */
static int sb_hidden_list(char **buf, char **hid) {
  const char *v = getenv(KA_SANDBOX_HIDE_ENV);
  *buf = v && *v ? strdup(v) : NULL;
  int n = 0;
  char *save = NULL;
  for (char *tok = *buf ? strtok_r(*buf, ":", &save) : NULL; tok && n < SB_MAX_HIDDEN;
       tok = strtok_r(NULL, ":", &save))
    if (tok[0] == '/')
      hid[n++] = tok;
    else
      n = SB_MAX_HIDDEN + 1; /* ends the loop: refused below */
  return n > SB_MAX_HIDDEN || (save && *save) ? -1 : n;
}

/* 1 if the absolute, resolved path p is dir or lies beneath it. */
static int sb_beneath(const char *p, const char *dir) {
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  if (n == 1 && dir[0] == '/') return 1;
  return !strncmp(p, dir, n) && (p[n] == '\0' || p[n] == '/');
}

/* sb_ll_allow(path), but never for a hidden folder (hid[0..nhid)) or anything beneath
 * one: where a hidden folder lies beneath path, every entry of path gets a rule of its
 * own instead, recursively on the way down, and the hidden folder none (Landlock only
 * adds access, so a rule on any folder above it would open it). Symbolic links get no
 * rule: Landlock checks the file a link leads to, which a rule of its own must allow,
 * as with a rule on the folder the link lies in. */
static int sb_ll_allow_visible(int rs, const char *path, uint64_t access, uint64_t fs,
                               char *const *hid, int nhid, int depth) {
  char real[PATH_MAX];
  if (!realpath(path, real)) return 0; /* does not exist: skipped, as in sb_ll_allow */
  int above = 0;
  for (int i = 0; i < nhid; i++) {
    if (sb_beneath(real, hid[i])) return 0;
    above |= sb_beneath(hid[i], real);
  }
  if (!above) return sb_ll_allow(rs, real, access, fs);
  DIR *d = depth < 64 ? opendir(real) : NULL;
  if (!d) return 0;
  int rc = 0;
  struct dirent *e;
  while (!rc && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[PATH_MAX];
    struct stat st;
    if (snprintf(p, sizeof p, "%s/%s", strcmp(real, "/") ? real : "", e->d_name) >= (int)sizeof p ||
        lstat(p, &st) != 0 || S_ISLNK(st.st_mode))
      continue;
    rc = sb_ll_allow_visible(rs, p, access, fs, hid, nhid, depth + 1);
    if (rc && errno == EBADFD) rc = 0; /* not a file of a filesystem (a socket): skipped */
  }
  closedir(d);
  return rc;
}

/* Restricts the calling thread and what it starts to the file access of `who`, with
 * read-write access to workdir (and only there). */
static int sb_landlock(const char *workdir, int who, char *err, size_t errlen) {
  int abi = ka_sandbox_landlock_abi();
  if (abi <= 0) return KA_OK; /* not offered by this kernel: documented fallback */
  uint64_t fs =
      LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
      LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
      LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
      LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
      LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) fs |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
  sb_ll_attr attr = {.handled_access_fs = fs};
  size_t asz = sizeof(uint64_t);
  if (abi >= 4) attr.handled_access_net = SB_LL_TCP_BIND | SB_LL_TCP_CONNECT, asz += 8;
  if (abi >= 6) attr.scoped = SB_LL_SCOPE_UNIX | SB_LL_SCOPE_SIGNAL, asz += 8;
  int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, asz, 0);
  if (rs < 0)
    return ka_seterr(err, errlen, KA_ESYS, "landlock_create_ruleset: %s", strerror(errno));
  uint64_t rx =
      LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_EXECUTE;
  uint64_t rw = fs & ~(LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK);
  /* system files: programs, libraries, compiler headers; /proc and /sys for drivers
   * (other processes' /proc entries stay closed: Landlock denies ptrace access to
   * processes outside the domain, which /proc/PID/mem and environ check). The compiler
   * gets neither /proc nor /sys: an `.incbin` of them must find nothing. */
  static const char *const ro[] = {"/usr",
                                   "/lib",
                                   "/lib64",
                                   "/lib32",
                                   "/libx32",
                                   "/bin",
                                   "/sbin",
                                   "/opt",
                                   "/etc/ld.so.cache",
                                   "/etc/ld.so.conf",
                                   "/etc/ld.so.conf.d",
                                   "/etc/alternatives",
                                   "/etc/nvidia",
                                   "/proc",
                                   "/sys",
                                   NULL};
  /* the hidden folders (ka_sandbox_hide) stay closed to every domain that runs submitted
   * code, wherever they lie; the runner (trusted: it reads the baseline) keeps them */
  char *hbuf = NULL, *hid[SB_MAX_HIDDEN];
  int nhid = who == SB_LL_RUNNER ? 0 : sb_hidden_list(&hbuf, hid);
  if (nhid < 0) {
    free(hbuf);
    close(rs);
    return ka_seterr(err, errlen, KA_EINVAL,
                     "%s lists a relative folder or more than %d folders: refused",
                     KA_SANDBOX_HIDE_ENV, SB_MAX_HIDDEN);
  }
#define SB_RX(p) sb_ll_allow_visible(rs, (p), rx, fs, hid, nhid, 0)
  int rc = 0;
  for (int i = 0; ro[i] && !rc; i++) {
    if (who == SB_LL_COMPILER && (!strcmp(ro[i], "/proc") || !strcmp(ro[i], "/sys"))) continue;
    rc = SB_RX(ro[i]);
  }
  /* ka-runner's folder (the backend modules), the library path, the CUDA toolkit */
  char dir[PATH_MAX];
  if (!rc && ka_exe_dir(dir, sizeof dir) == KA_OK) rc = SB_RX(dir);
  for (int i = 0; who == SB_LL_COMMAND && sb_cmd_ro && sb_cmd_ro[i] && !rc; i++)
    if (sb_cmd_ro[i][0] == '/') rc = SB_RX(sb_cmd_ro[i]);
  /* KA_TRITON_PREFIX: the installation of the Python that has triton (a venv: its
   * packages and ptxas), for the triton compiler (gpuexec/backends/triton.h) */
  const char *envs[] = {"LD_LIBRARY_PATH", "CUDA_HOME", "KA_BACKEND_PATH", "KA_TRITON_PREFIX",
                        NULL};
  for (int i = 0; envs[i] && !rc; i++) {
    const char *v = getenv(envs[i]);
    if (!v) continue;
    char *copy = strdup(v), *save = NULL;
    for (char *tok = copy ? strtok_r(copy, ":", &save) : NULL; tok && !rc;
         tok = strtok_r(NULL, ":", &save))
      if (tok[0] == '/') rc = SB_RX(tok);
    free(copy);
  }
#undef SB_RX
  free(hbuf);
  /* devices (the GPU's, /dev/null, /dev/urandom; /dev/shm for the runner only) and the
   * private workdir */
  if (!rc) rc = sb_ll_dev(rs, who, abi, fs);
  if (!rc && who == SB_LL_RUNNER) rc = sb_ll_allow(rs, "/dev/shm", rw, fs);
  /* a GPU command's own /proc (sb_cmd_own_proc: only its processes, the rest read-only
   * mounts) and /dev/shm */
  if (!rc && who == SB_LL_COMMAND && sb_cmd_proc_rw)
    rc = sb_ll_allow(rs, "/proc",
                     rx | (rw & (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE)), fs);
  if (!rc && who == SB_LL_COMMAND && sb_cmd_shm_rw) rc = sb_ll_allow(rs, "/dev/shm", rw, fs);
  /* the triton compile cache: written by the runner (trusted code; no submitted code runs
   * on its CPU), out of the compiler's reach (its own domain lacks it) */
  const char *tc = getenv("KA_TRITON_CACHE");
  if (!rc && who == SB_LL_RUNNER && tc && tc[0] == '/') {
    ka_mkdirs(tc);
    rc = sb_ll_allow(rs, tc, rw, fs);
  }
  if (!rc) rc = sb_ll_allow(rs, workdir, rw, fs);
  if (rc) {
    int e = errno;
    close(rs);
    return ka_seterr(err, errlen, KA_ESYS, "landlock_add_rule: %s", strerror(e));
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      syscall(SYS_landlock_restrict_self, rs, 0) != 0) {
    int e = errno;
    close(rs);
    return ka_seterr(err, errlen, KA_ESYS, "landlock_restrict_self: %s", strerror(e));
  }
  close(rs);
  return KA_OK;
}

/* ------------------------------------------------------------------------------------
 * seccomp-BPF through libseccomp (seccomp_rule_add(3)). Default action: allow; the
 * filter names what is refused, so that driver threads keep working. */

static void sb_sigsys(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  const char *name = "?";
  switch (si->si_syscall) {
    case SYS_fork:
      name = "fork";
      break;
    case SYS_vfork:
      name = "vfork";
      break;
    case SYS_clone:
      name = "clone (new process)";
      break;
    case SYS_execve:
      name = "execve";
      break;
    case SYS_execveat:
      name = "execveat";
      break;
    default:
      break;
  }
  char msg[200];
  int n = snprintf(msg, sizeof msg,
                   "\n[kernelarena] sandbox: forbidden system call %s (%d): submitted code may "
                   "not start processes or programs; the evaluation was stopped\n",
                   name, si->si_syscall);
  if (n > 0) (void)!write(2, msg, (size_t)n);
  signal(sig, SIG_DFL);
  raise(sig);
  _exit(128 + sig);
}

static int sb_env_off(const char *name) {
  const char *v = getenv(name);
  return v && !strcmp(v, "0");
}

/* Calls that act on another process named by its pid (0 is the caller) refused (EPERM):
 * its resource limits (prlimit64 is what setrlimit and getrlimit use, with pid 0), its
 * priority, CPUs, scheduling or memory placement. The baseline's module process, the
 * runner and gpuexec are processes of the same user (root): lowering their limits ended
 * the baseline (an unscored INFRA_ERROR), a lower priority would slow the baseline's timed
 * calls, and a host command set gpuexec's RLIMIT_NOFILE to 16 (red team 2026-12-02). In
 * the lock filter and in the command and compiler domains' base filter. 0 or libseccomp's
 * negative error. */
static int sb_seccomp_self_only(scmp_filter_ctx f) {
  int rc = 0;
  static const int self_only[] = {SCMP_SYS(prlimit64),          SCMP_SYS(sched_setaffinity),
                                  SCMP_SYS(sched_setscheduler), SCMP_SYS(sched_setparam),
                                  SCMP_SYS(sched_setattr),      SCMP_SYS(migrate_pages),
                                  SCMP_SYS(move_pages)};
  for (size_t i = 0; i < sizeof self_only / sizeof self_only[0] && !rc; i++)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), self_only[i], 1, SCMP_A0(SCMP_CMP_NE, 0));
  /* setpriority(which, who, prio) / ioprio_set(which, who, prio): only the caller
   * (PRIO_PROCESS = IOPRIO_WHO_PROCESS - 1 = 0, who 0); a process group or a user
   * would reach the baseline too */
  if (!rc)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setpriority), 1,
                          SCMP_A0(SCMP_CMP_NE, 0));
  if (!rc)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setpriority), 1,
                          SCMP_A1(SCMP_CMP_NE, 0));
  if (!rc)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioprio_set), 1,
                          SCMP_A0(SCMP_CMP_NE, 1));
  if (!rc)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioprio_set), 1,
                          SCMP_A1(SCMP_CMP_NE, 0));
  return rc;
}

/* Set by ka_sandbox_command and ka_sandbox_compiler: sb_seccomp_base applies
 * sb_seccomp_self_only (they get no lock filter, which has it). */
static int sb_base_self_only;

/* Set by ka_sandbox_command for a GPU command: sb_seccomp_base applies sb_seccomp_gpu_unix. */
static int sb_cmd_gpu_unix;

/* A GPU command's sockets. CUDA's initialisation makes two AF_UNIX SOCK_SEQPACKET sockets
 * (traced on the H200, 2026-12-02, tests/device/cuda_sockets_h200.sh): one it connects to
 * /tmp/nvidia-mps/control (an MPS server; ENOENT: none), one it binds to an abstract name
 * (@cuda-uvmfd-NETNS-N); cuInit fails with error 304 when socket() does. So
 * socket(AF_UNIX) of type SOCK_STREAM or SOCK_SEQPACKET is allowed (bind and listen too:
 * in the command's own network namespace an abstract name is its own), and nothing else:
 * no other family or type, no connect() (ENOENT, which CUDA reads as "no MPS server") and
 * no sendto() to an address (a seqpacket or stream socket ignores or refuses one anyway),
 * so that no socket outside the command (envserver's or gpuexec's ipc endpoints, the
 * system's, abstract or not) can be reached; socketpair(AF_UNIX) as for every domain. 0
 * or libseccomp's negative error. */
static int sb_seccomp_gpu_unix(scmp_filter_ctx f) {
  int rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1,
                            SCMP_A0(SCMP_CMP_NE, AF_UNIX));
  /* the type's low bits (SOCK_CLOEXEC and SOCK_NONBLOCK are flags above them) */
  static const int types[] = {SOCK_DGRAM, SOCK_RAW, SOCK_RDM, SOCK_DCCP, SOCK_PACKET};
  for (size_t i = 0; i < sizeof types / sizeof types[0] && !rc; i++)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1,
                          SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, (scmp_datum_t)types[i]));
  if (!rc) rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOENT), SCMP_SYS(connect), 0);
  if (!rc)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOENT), SCMP_SYS(sendto), 1, SCMP_A4(SCMP_CMP_NE, 0));
  if (!rc)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socketpair), 1,
                          SCMP_A0(SCMP_CMP_NE, AF_UNIX));
  return rc;
}

/* The base filter's socket rules: no socket() (AF_UNIX only with KA_SANDBOX_UNIX=1; a
 * GPU command's own rule, sb_seccomp_gpu_unix), socketpair() only AF_UNIX and never of
 * type SOCK_DGRAM. 0 or libseccomp's negative error. */
static int sb_seccomp_sockets(scmp_filter_ctx f) {
  int rc = 0;
  const char *unix_ok = getenv("KA_SANDBOX_UNIX");
  /* KA_SANDBOX_UNIX=1 (every AF_UNIX socket, connect() included: a debugging override)
   * goes before a GPU command's narrower rule */
  if (unix_ok && !strcmp(unix_ok, "1")) {
    if (!rc)
      rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1,
                            SCMP_A0(SCMP_CMP_NE, AF_UNIX));
    if (!rc)
      rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socketpair), 1,
                            SCMP_A0(SCMP_CMP_NE, AF_UNIX));
  } else if (sb_cmd_gpu_unix) {
    if (!rc) rc = sb_seccomp_gpu_unix(f);
  } else {
    if (!rc) rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 0);
    /* socketpair(AF_UNIX) connects nothing outside: the host backend talks to its
     * module processes through one */
    if (!rc)
      rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socketpair), 1,
                            SCMP_A0(SCMP_CMP_NE, AF_UNIX));
  }
  /* a datagram socketpair sends to any address it is given (unix_dgram_sendmsg takes
   * msg_name even when connected): a way to any pathname datagram socket of the machine
   * (/dev/log, systemd's); stream and seqpacket pairs ignore or refuse addresses */
  if (!rc)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socketpair), 1,
                          SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_DGRAM));
  return rc;
}

/* The base filter's namespace and mount rules beyond mount(2) and unshare(2): the mount
 * API and clone(2) into new namespaces (EPERM). 0 or libseccomp's negative error. */
static int sb_seccomp_ns_mount(scmp_filter_ctx f) {
  int rc = 0;
  /* the mount API of Linux 5.2 (a detached mount needs no mount(2)) */
  static const int mount_api[] = {SCMP_SYS(open_tree),    SCMP_SYS(move_mount), SCMP_SYS(fsopen),
                                  SCMP_SYS(fsconfig),     SCMP_SYS(fsmount),    SCMP_SYS(fspick),
                                  SCMP_SYS(mount_setattr)};
  for (size_t i = 0; i < sizeof mount_api / sizeof mount_api[0] && !rc; i++)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), mount_api[i], 0);
  /* clone(2) into new namespaces (unshare is refused above): a user namespace gives its
   * creator every capability inside it, and namespaces held open by descriptors count
   * against the machine's per-user limits that other evaluations' sandboxes need (red
   * team 2026-12-02) */
  static const unsigned long ns_flags[] = {CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
                                           CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
                                           CLONE_NEWCGROUP};
  for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0] && !rc; i++)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
  return rc;
}

/* First stage: no network, no tracing, no privileged calls. */
static int sb_seccomp_base(char *err, size_t errlen) {
  scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
  if (!f) return ka_seterr(err, errlen, KA_ESYS, "seccomp_init failed");
  int rc = seccomp_attr_set(f, SCMP_FLTATR_CTL_TSYNC, 1);
  if (!rc && sb_base_self_only) rc = sb_seccomp_self_only(f);
  if (!rc) rc = sb_seccomp_sockets(f);
  static const int eperm[] = {SCMP_SYS(ptrace),
                              SCMP_SYS(process_vm_readv),
                              SCMP_SYS(process_vm_writev),
                              SCMP_SYS(kcmp),
                              SCMP_SYS(pidfd_getfd),
                              SCMP_SYS(mount),
                              SCMP_SYS(umount2),
                              SCMP_SYS(pivot_root),
                              SCMP_SYS(chroot),
                              SCMP_SYS(setns),
                              SCMP_SYS(unshare),
                              SCMP_SYS(reboot),
                              SCMP_SYS(kexec_load),
                              SCMP_SYS(kexec_file_load),
                              SCMP_SYS(init_module),
                              SCMP_SYS(finit_module),
                              SCMP_SYS(delete_module),
                              SCMP_SYS(swapon),
                              SCMP_SYS(swapoff),
                              SCMP_SYS(bpf),
                              SCMP_SYS(userfaultfd),
                              SCMP_SYS(keyctl),
                              SCMP_SYS(add_key),
                              SCMP_SYS(request_key),
                              SCMP_SYS(acct),
                              SCMP_SYS(settimeofday),
                              SCMP_SYS(clock_settime),
                              SCMP_SYS(clock_adjtime),
                              SCMP_SYS(adjtimex),
                              SCMP_SYS(sethostname),
                              SCMP_SYS(setdomainname),
                              SCMP_SYS(iopl),
                              SCMP_SYS(ioperm),
                              SCMP_SYS(quotactl),
                              SCMP_SYS(open_by_handle_at),
                              SCMP_SYS(name_to_handle_at),
                              SCMP_SYS(syslog),
                              SCMP_SYS(fanotify_init),
                              SCMP_SYS(mknod),
                              SCMP_SYS(mknodat)};
  for (size_t i = 0; i < sizeof eperm / sizeof eperm[0] && !rc; i++)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), eperm[i], 0);
  if (!rc) rc = sb_seccomp_ns_mount(f);
  static const int enosys[] = {SCMP_SYS(io_uring_setup), SCMP_SYS(io_uring_enter),
                               SCMP_SYS(io_uring_register), SCMP_SYS(clone3)};
  /* clone3 passes its flags in memory, which a filter cannot read; ENOSYS makes glibc
   * fall back to clone, whose flags it can (glibc 2.34+ pthread_create does so). */
  for (size_t i = 0; i < sizeof enosys / sizeof enosys[0] && !rc; i++)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), enosys[i], 0);
  if (!rc) rc = seccomp_load(f);
  seccomp_release(f);
  if (rc) return ka_seterr(err, errlen, KA_ESYS, "seccomp (base filter): %s", strerror(-rc));
  return KA_OK;
}

/* Second stage: no new processes, no programs, no escape from the process group,
 * signals only to ourselves. */
static int sb_seccomp_lock(char *err, size_t errlen) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = sb_sigsys;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESETHAND; /* raise() in it kills */
  sigaction(SIGSYS, &sa, NULL);
  scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
  if (!f) return ka_seterr(err, errlen, KA_ESYS, "seccomp_init failed");
  int rc = seccomp_attr_set(f, SCMP_FLTATR_CTL_TSYNC, 1);
  scmp_datum_t self = (scmp_datum_t)getpid();
  if (!rc) rc = seccomp_rule_add(f, SCMP_ACT_TRAP, SCMP_SYS(fork), 0);
  if (!rc) rc = seccomp_rule_add(f, SCMP_ACT_TRAP, SCMP_SYS(vfork), 0);
  if (!rc)
    rc = seccomp_rule_add(f, SCMP_ACT_TRAP, SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
  if (!rc) rc = seccomp_rule_add(f, SCMP_ACT_TRAP, SCMP_SYS(execve), 0);
  if (!rc) rc = seccomp_rule_add(f, SCMP_ACT_TRAP, SCMP_SYS(execveat), 0);
  if (!rc) rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setsid), 0);
  if (!rc) rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setpgid), 0);
  if (!rc)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_NE, self));
  if (!rc)
    rc =
        seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_NE, self));
  if (!rc)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(rt_sigqueueinfo), 1,
                          SCMP_A0(SCMP_CMP_NE, self));
  if (!rc)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(rt_tgsigqueueinfo), 1,
                          SCMP_A0(SCMP_CMP_NE, self));
  if (!rc) rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(tkill), 0);
  if (!rc) rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(pidfd_send_signal), 0);
  if (!rc) rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(pidfd_open), 0);
  if (!rc) rc = sb_seccomp_self_only(f);
  /* another process's memory or performance counters, System V IPC and POSIX message
   * queues, which outlive the evaluation and are shared by every process of the machine
   * (no file path, so Landlock does not see them), and timers */
  static const int eperm[] = {
      SCMP_SYS(process_madvise), SCMP_SYS(process_mrelease), SCMP_SYS(perf_event_open),
      SCMP_SYS(shmget), SCMP_SYS(shmat), SCMP_SYS(shmctl), SCMP_SYS(msgget), SCMP_SYS(msgsnd),
      SCMP_SYS(msgrcv), SCMP_SYS(msgctl), SCMP_SYS(semget), SCMP_SYS(semop), SCMP_SYS(semtimedop),
      SCMP_SYS(semctl), SCMP_SYS(mq_open), SCMP_SYS(mq_unlink),
      /* timers and queued signals: expiries in interrupt time
       * during the baseline's calls, charged to no process's CPU
       * (a storm of them over 12k sleeping threads slowed the
       * baseline by a third: red team 2026-12-01) */
      SCMP_SYS(timer_create), SCMP_SYS(timer_settime), SCMP_SYS(timerfd_create),
      SCMP_SYS(timerfd_settime), SCMP_SYS(setitimer), SCMP_SYS(alarm), SCMP_SYS(rt_sigqueueinfo),
      SCMP_SYS(rt_tgsigqueueinfo)};
  for (size_t i = 0; i < sizeof eperm / sizeof eperm[0] && !rc; i++)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), eperm[i], 0);
  if (!rc) rc = seccomp_load(f);
  seccomp_release(f);
  if (rc) return ka_seterr(err, errlen, KA_ESYS, "seccomp (lock filter): %s", strerror(-rc));
  return KA_OK;
}

int ka_sandbox_enter(const char *workdir, int external_compiler, char *err, size_t errlen) {
  int rc = KA_OK;
  if (!sb_env_off("KA_SANDBOX_LANDLOCK")) rc = sb_landlock(workdir, SB_LL_RUNNER, err, errlen);
  if (rc == KA_OK && !sb_env_off("KA_SANDBOX_SECCOMP")) {
    rc = sb_seccomp_base(err, errlen);
    if (rc == KA_OK && !external_compiler) rc = sb_seccomp_lock(err, errlen);
  }
  return rc;
}

/* Drops every capability of the calling process (capget(2)): submitted CPU code needs
 * none, and without CAP_SYS_PTRACE, CAP_KILL and CAP_DAC_OVERRIDE a root-owned process
 * cannot read another's memory, signal it, or bypass file modes. */
static int sb_drop_caps(void) {
  struct {
    uint32_t version;
    int pid;
  } hdr = {0x20080522 /* _LINUX_CAPABILITY_VERSION_3 */, 0};
  struct {
    uint32_t effective, permitted, inheritable;
  } data[2];
  memset(data, 0, sizeof data);
  return (int)syscall(SYS_capset, &hdr, data);
}

/* A nested Landlock domain that only adds "no device nodes": Landlock lets a process
 * ptrace only processes of its own or a nested domain, so a process in it cannot reach
 * the runner that started it, even as root (used where the full domain is off). */
static int sb_landlock_nest(void) {
  sb_ll_attr attr = {.handled_access_fs =
                         LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK};
  int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(uint64_t), 0);
  if (rs < 0) return -1;
  int rc =
      prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && syscall(SYS_landlock_restrict_self, rs, 0) == 0
          ? 0
          : -1;
  int e = errno;
  close(rs);
  errno = e;
  return rc;
}

int ka_sandbox_module(const char *workdir, char *err, size_t errlen) {
  /* not dumpable: no other process of this user (another module process) can open its
   * /proc/PID/mem, fd/ or map_files/, nor ptrace it, even without Landlock */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  int rc = KA_OK;
  if (ka_sandbox_landlock_abi() > 0) {
    if (!sb_env_off("KA_SANDBOX_LANDLOCK"))
      rc = sb_landlock(workdir, SB_LL_MODULE, err, errlen);
    else if (sb_landlock_nest() != 0)
      rc = ka_seterr(err, errlen, KA_ESYS, "nested landlock domain: %s", strerror(errno));
  }
  if (rc == KA_OK && sb_drop_caps() != 0)
    rc = ka_seterr(err, errlen, KA_ESYS, "capset: %s", strerror(errno));
  if (rc == KA_OK && !sb_env_off("KA_SANDBOX_SECCOMP")) {
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 2) rc = sb_seccomp_base(err, errlen); /* 2: FILTER */
    if (rc == KA_OK) rc = sb_seccomp_lock(err, errlen);
  }
  return rc;
}

void ka_sandbox_lock_inherited(void) {
  char wd[PATH_MAX], err[256];
  if (!getcwd(wd, sizeof wd)) {
    dprintf(2, "[kernelarena] sandbox: getcwd: %s\n", strerror(errno));
    _exit(125);
  }
  if (ka_sandbox_module(wd, err, sizeof err) != KA_OK) {
    dprintf(2, "[kernelarena] sandbox: %s\n", err);
    _exit(125);
  }
}

int ka_sandbox_compiler(const char *workdir, char *err, size_t errlen) {
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  sb_base_self_only = 1;
  int rc = KA_OK;
  if (!sb_env_off("KA_SANDBOX_LANDLOCK")) rc = sb_landlock(workdir, SB_LL_COMPILER, err, errlen);
  if (rc == KA_OK && sb_drop_caps() != 0)
    rc = ka_seterr(err, errlen, KA_ESYS, "capset: %s", strerror(errno));
  if (rc == KA_OK && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    rc = ka_seterr(err, errlen, KA_ESYS, "no_new_privs: %s", strerror(errno));
  if (rc == KA_OK && !sb_env_off("KA_SANDBOX_SECCOMP") && prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 2)
    rc = sb_seccomp_base(err, errlen);
  return rc;
}

int ka_sandbox_command_pidns(void) {
  if (unshare(CLONE_NEWPID) != 0) return KA_ESYS;
  sb_cmd_pidns = 1;
  return KA_OK;
}

/* Binds the entry p of the fresh /proc over itself read-only. 0, or -1 (errno). */
static int sb_proc_ro(const char *p) {
  if (mount(p, p, NULL, MS_BIND | MS_REC, NULL) != 0) return -1;
  return mount(NULL, p, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
               NULL);
}

/* PID 1 of the command's PID namespace (ka_sandbox_command_pidns): a mount namespace of
 * its own (the supervisor keeps the machine's /proc), a procfs of this PID namespace on
 * /proc (the command's processes alone), every entry of it that is not a process's folder
 * bound read-only (sys, sysrq-trigger, irq, bus, driver, ...: nothing of the machine's
 * can be written through it), and a private tmpfs on /dev/shm. Sets sb_cmd_proc_rw and
 * sb_cmd_shm_rw. 0, or -1 with errno (then neither is set). */
static int sb_cmd_own_proc(void) {
  /* a network namespace of its own too: only a loopback that is down, and abstract
   * AF_UNIX names of its own (sb_seccomp_gpu_unix) */
  if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET) != 0) return -1;
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -1;
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) return -1;
  DIR *d = opendir("/proc");
  if (!d) return -1;
  int rc = 0;
  struct dirent *e;
  while (!rc && (e = readdir(d))) {
    const char *n = e->d_name;
    size_t digits = strspn(n, "0123456789");
    if (!strcmp(n, ".") || !strcmp(n, "..") || (digits && !n[digits])) continue;
    char p[PATH_MAX];
    struct stat st;
    snprintf(p, sizeof p, "/proc/%s", n);
    /* links (self, thread-self, mounts, net) lead into a process's folder */
    if (lstat(p, &st) != 0 || S_ISLNK(st.st_mode)) continue;
    rc = sb_proc_ro(p);
  }
  closedir(d);
  if (rc) return -1;
  sb_cmd_proc_rw = 1;
  sb_cmd_shm_rw = mount("ka-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                        "mode=1777,size=256m") == 0;
  return 0;
}

/* A host command's System V IPC and POSIX message queues, which outlive their process
 * and reach every later command of the machine (red team 2026-12-02: a SysV segment and
 * semaphore set a candidate made outlived every run of the pairs and every step): an
 * IPC namespace of its own, which ends with the command's last process and its objects
 * with it; where unshare is not allowed (no CAP_SYS_ADMIN), those calls refused (EPERM)
 * by a seccomp filter of their own, stacked on the others. Before the capabilities are
 * dropped. KA_OK or KA_ESYS with err. */
static int sb_cmd_host_ipc(int unshared, char *err, size_t errlen) {
  if (unshared || sb_env_off("KA_SANDBOX_SECCOMP")) return KA_OK;
  scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
  if (!f) return ka_seterr(err, errlen, KA_ESYS, "seccomp_init failed");
  static const int ipc[] = {SCMP_SYS(shmget), SCMP_SYS(shmat),   SCMP_SYS(shmctl),
                            SCMP_SYS(msgget), SCMP_SYS(msgsnd),  SCMP_SYS(msgrcv),
                            SCMP_SYS(msgctl), SCMP_SYS(semget),  SCMP_SYS(semop),
                            SCMP_SYS(semctl), SCMP_SYS(mq_open), SCMP_SYS(mq_unlink)};
  int rc = 0;
  for (size_t i = 0; i < sizeof ipc / sizeof ipc[0] && !rc; i++)
    rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), ipc[i], 0);
  if (!rc) rc = seccomp_load(f);
  seccomp_release(f);
  return rc ? ka_seterr(err, errlen, KA_ESYS, "seccomp (System V IPC): %s", strerror(-rc)) : KA_OK;
}

int ka_sandbox_command(const char *workdir, const char *const *nodes, const char *const *ro,
                       char *err, size_t errlen) {
  if (!nodes) {
    int unshared = unshare(CLONE_NEWIPC) == 0;
    int rc = ka_sandbox_compiler(workdir, err, errlen);
    return rc == KA_OK ? sb_cmd_host_ipc(unshared, err, errlen) : rc;
  }
  sb_cmd_nodes = nodes, sb_cmd_ro = ro;
  sb_base_self_only = 1;
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  int rc = KA_OK;
  if (sb_cmd_pidns && getpid() == 1 && sb_cmd_own_proc() != 0)
    return ka_seterr(err, errlen, KA_ESYS, "the command's own /proc: %s", strerror(errno));
  /* in its own PID namespace no other process can be named (ESRCH): the calls on
   * other threads of its own, which CUDA or OpenMP may make, stay allowed */
  if (sb_cmd_proc_rw) sb_base_self_only = 0;
  /* the AF_UNIX sockets CUDA needs only in a network namespace of its own: outside one,
   * an abstract name it binds is the machine's, where any process can connect in and
   * take descriptors out, and the names other evaluations' CUDA binds can be squatted
   * (red team 2026-12-02); without it no socket at all (fail closed: CUDA's
   * initialisation fails, the task's baseline with it, an INFRA_ERROR that says so) */
  sb_cmd_gpu_unix = sb_cmd_proc_rw;
  if (!sb_env_off("KA_SANDBOX_LANDLOCK")) rc = sb_landlock(workdir, SB_LL_COMMAND, err, errlen);
  if (rc == KA_OK && sb_drop_caps() != 0)
    rc = ka_seterr(err, errlen, KA_ESYS, "capset: %s", strerror(errno));
  if (rc == KA_OK && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    rc = ka_seterr(err, errlen, KA_ESYS, "no_new_privs: %s", strerror(errno));
  if (rc == KA_OK && !sb_env_off("KA_SANDBOX_SECCOMP") && prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 2)
    rc = sb_seccomp_base(err, errlen);
  return rc;
}

/* ------------------------------------------------------------------------------------
 * Assembly check of module mode: directives that read files or build others */

int ka_asm_check(const char *text, size_t len, char **log) {
  /* .incbin and .include read a file; .macro, .rept, .irp(c), .altmacro can assemble
   * a directive name from pieces (and repeat without end). GCC emits none of them for
   * C. Matched case-insensitively anywhere in the text, strings and comments included
   * (conservative, like the include check). */
  static const char *const bad[] = {".incbin", ".include",  ".macro",  ".rept",
                                    ".irp",    ".altmacro", ".purgem", NULL};
  ka_sb sb = {0};
  int refused = 0;
  *log = NULL;
  for (int k = 0; bad[k]; k++) {
    size_t n = strlen(bad[k]);
    int line = 1;
    for (size_t i = 0; i + n <= len; i++) {
      if (text[i] == '\n') line++;
      if (strncasecmp(text + i, bad[k], n)) continue;
      if (refused++ < 8)
        ka_sb_printf(&sb,
                     "asm check: the compiled assembly uses the directive %s (line %d of the "
                     "generated assembly): directives that read files or build other directives "
                     "are not allowed in submissions (docs/sandbox.md)\n",
                     bad[k], line);
      break;
    }
  }
  if (refused)
    *log = ka_sb_take(&sb);
  else
    ka_sb_free(&sb);
  return refused;
}

/* ------------------------------------------------------------------------------------
 * Private shared memory of one evaluation */

/* In the supervisor's child, before it becomes the runner: a mount namespace of its own
 * with a fresh tmpfs on /dev/shm, and an IPC namespace of its own (System V IPC, POSIX
 * message queues). Both end with the last process of the evaluation, and what was
 * written there with them. Needs CAP_SYS_ADMIN (gpuexec runs as root on CI and the GPU
 * machine); without it, nothing changes here and module processes are kept out of
 * /dev/shm by Landlock and out of System V IPC by seccomp. Returns 1 if in place. */
static int sb_private_shm(void) {
  if (unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0) return 0;
  /* our mounts must not propagate back to the machine's namespace */
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return 0;
  return mount("ka-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
               "mode=1777,size=256m") == 0;
}

/* ------------------------------------------------------------------------------------
 * Import allow-list of module mode (docs/integrity.md, item 12) */

/* What each group is for; the baselines of tasks/host and the candidates of tests/
 * import only from these groups (besides the adversarial ones). Patterns are fnmatch
 * globs; a prefix glob is used only where no libc function outside the group shares the
 * prefix (checked with fnmatch against every symbol glibc 2.36's libc.so.6 defines: only
 * `exp*` matches one outside its group, explicit_bzero, a memset; `trunc` is spelled out
 * because `trunc*` would match truncate). */
const char *const ka_import_defaults[] = {
    /* added by the compiler and glibc's startup files to every shared object */
    "__cxa_finalize", "__gmon_start__", "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable",
    "__stack_chk_fail", "__assert_fail", "__errno_location",
    /* _FORTIFY_SOURCE variants of the memory, string and output functions below */
    "__memcpy_chk", "__memmove_chk", "__memset_chk", "__strcpy_chk", "__strncpy_chk",
    "__strcat_chk", "__sprintf_chk", "__snprintf_chk", "__vsprintf_chk", "__vsnprintf_chk",
    "__printf_chk", "__fprintf_chk", "__vprintf_chk", "__vfprintf_chk",
    /* libm (C11 7.12) and glibc's classification helpers */
    "acos*", "asin*", "atan*", "cos*", "sin*", "tan*", "exp*", "log", "logf", "logl", "log1p*",
    "log2*", "log10*", "logb*", "pow*", "sqrt*", "cbrt*", "hypot*", "erf*", "tgamma*", "lgamma*",
    "ceil*", "floor*", "trunc", "truncf", "truncl", "round*", "lround*", "llround*", "rint*",
    "lrint*", "llrint*", "nearbyint*", "fabs*", "fmod*", "remainder*", "remquo*", "fma*", "fmin*",
    "fdim*", "copysign*", "nan", "nanf", "nanl", "frexp*", "ldexp*", "modf*", "scalbn*", "scalbln*",
    "ilogb*", "nextafter*", "nexttoward*", "__fpclassify*", "__isnan*", "__isinf*", "__finite*",
    "__signbit*", "__*_finite",
    /* memory and strings */
    "malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign", "memalign", "memcpy",
    "memmove", "memset", "memcmp", "memchr", "strlen", "strcmp", "strncmp", "strcpy", "strncpy",
    "strchr", "strrchr", "strstr", "strtol", "strtoll", "strtod", "strtof", "atoi", "atof", "qsort",
    "bsearch", "abs", "labs", "llabs", "div", "ldiv",
    /* threads: a host kernel may use every core */
    "pthread_create", "pthread_join", "pthread_detach", "pthread_self", "pthread_once",
    "pthread_mutex_*", "pthread_cond_*", "pthread_barrier_*", "pthread_spin_*", "pthread_rwlock_*",
    "pthread_attr_*", "sched_yield", "sched_getcpu", "nanosleep", "usleep", "sysconf", "get_nprocs",
    "get_nprocs_conf",
    /* debug output (the runtime log) and time */
    "printf", "fprintf", "vprintf", "vfprintf", "puts", "fputs", "putchar", "fputc", "putc",
    "fwrite", "fflush", "perror", "sprintf", "snprintf", "vsprintf", "vsnprintf", "stdout",
    "stderr", "clock_gettime", "clock", "gettimeofday", "time",
    /* ending with an error */
    "abort", NULL};

static const ka_task *sb_import_task; /* armed by ka_sandbox_candidate */

static int sb_match_any(const char *const *pats, int n, const char *name) {
  for (int i = 0; n < 0 ? pats[i] != NULL : i < n; i++)
    if (fnmatch(pats[i], name, 0) == 0) return 1;
  return 0;
}

int ka_import_allowed(const ka_task *t, const char *name) {
  if (t && sb_match_any((const char *const *)t->denied_imports, t->ndenied_imports, name)) return 0;
  if (sb_match_any(ka_import_defaults, -1, name)) return 1;
  return t && sb_match_any((const char *const *)t->allowed_imports, t->nallowed_imports, name);
}

int ka_import_check(const char *so_path, const ka_task *t, char **log) {
  ka_sb sb = {0};
  int refused = 0, seen_dynsym = 0;
  const char *tid = t && t->id ? t->id : "this task";
  *log = NULL;
  int fd = open(so_path, O_RDONLY | O_CLOEXEC);
  Elf *e = NULL;
  if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE || !(e = elf_begin(fd, ELF_C_READ, NULL)) ||
      elf_kind(e) != ELF_K_ELF) {
    ka_sb_printf(&sb, "import check: cannot read the compiled module as ELF: %s\n",
                 fd < 0 ? strerror(errno) : elf_errmsg(-1));
    refused = 1;
  }
  for (Elf_Scn *scn = NULL; !refused && e && (scn = elf_nextscn(e, scn)) != NULL;) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM) continue;
    seen_dynsym = 1;
    Elf_Data *data = elf_getdata(scn, NULL);
    size_t n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
    for (size_t i = 1; data && i < n; i++) { /* entry 0 is the null symbol */
      GElf_Sym sym;
      if (!gelf_getsym(data, (int)i, &sym)) break;
      if (sym.st_shndx != SHN_UNDEF) continue; /* defined here: not an import */
      const char *name = elf_strptr(e, sh.sh_link, sym.st_name);
      if (!name || !*name) continue;
      if (ka_import_allowed(t, name)) continue;
      if (refused++ < 16)
        ka_sb_printf(&sb,
                     "import check: the compiled module imports %s%s, which %s does not allow "
                     "(allowed: the default list of C kernels and the task's allowed_imports; "
                     "docs/integrity.md)\n",
                     name, GELF_ST_BIND(sym.st_info) == STB_WEAK ? " (weak)" : "", tid);
    }
  }
  if (!refused && e && !seen_dynsym) {
    ka_sb_printf(&sb, "import check: the compiled module has no dynamic symbol table\n");
    refused = 1;
  }
  if (refused > 16) ka_sb_printf(&sb, "import check: %d more refused imports\n", refused - 16);
  if (e) elf_end(e);
  if (fd >= 0) close(fd);
  if (refused)
    *log = ka_sb_take(&sb);
  else
    ka_sb_free(&sb);
  return refused;
}

int ka_sandbox_module_imports(const char *so_path, char **log) {
  *log = NULL;
  return sb_import_task ? ka_import_check(so_path, sb_import_task, log) : 0;
}

int ka_sandbox_candidate(const ka_task *t, const Kernelarena__V1__RunnerJob *job, char **log,
                         char *err, size_t errlen) {
  const char *names[KA_MAX_EDITABLE], *texts[KA_MAX_EDITABLE];
  size_t lens[KA_MAX_EDITABLE];
  int n = 0;
  if (log) *log = NULL;
  for (int i = 0; i < t->neditable && n < KA_MAX_EDITABLE; i++) {
    if (t->launch_plan && !strcmp(t->editable[i], t->launch_plan)) continue;
    for (size_t f = 0; f < job->n_candidate; f++)
      if (!strcmp(job->candidate[f]->path, t->editable[i])) {
        names[n] = t->editable[i];
        texts[n] = (const char *)job->candidate[f]->content.data;
        lens[n] = job->candidate[f]->content.len;
        n++;
      }
  }
  /* triton: Python has no includes; its compiler is a process of its own (triton.h), so
   * the runner locks itself after that compile (ka_sandbox_lock_runner) */
  int triton = !strcmp(t->language, "triton");
  if (!triton && ka_include_check(t->language, names, texts, lens, n, log)) return KA_ECOMPILE;
  if (t->mode && !strcmp(t->mode, "module")) sb_import_task = t;
  return ka_sandbox_enter(job->workdir, triton || (t->mode && !strcmp(t->mode, "module")), err,
                          errlen);
}

int ka_sandbox_lock_runner(char *err, size_t errlen) {
  if (sb_env_off("KA_SANDBOX_SECCOMP")) return KA_OK;
  return sb_seccomp_lock(err, errlen);
}
