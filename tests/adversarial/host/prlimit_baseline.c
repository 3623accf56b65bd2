/* Unscored step (issue 16, class 3): the candidate ends the baseline's module process by
 * lowering its address-space limit to 1 MiB (prlimit64 on another process of the same
 * user), so the baseline cannot map its next buffer and its next call fails, which was reported as
 * INFRA_ERROR ("not counted, retry it") instead of scoring the step. No import: raw system calls
 * (x86-64) find the baseline (a child of the candidate's parent, the runner, read from
 * /proc/PID/stat) and call prlimit64. Expected now: OK (the seccomp lock refuses prlimit64 on any
 * process but the caller, EPERM; it then computes honestly), and it says what the call returned. */
#include <math.h>
#include <stdio.h>

static long rs(long n, long a, long b, long c, long d) {
#if defined(__x86_64__)
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return ret;
#else
  (void)n, (void)a, (void)b, (void)c, (void)d;
  return -38;
#endif
}

/* parent pid of process pid from /proc/PID/stat (field 4, after the last ')'), or -1 */
static long ppid_of(long pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  long fd = rs(2 /* open */, (long)path, 0, 0, 0);
  if (fd < 0) return -1;
  long n = rs(0 /* read */, fd, (long)buf, sizeof buf - 1, 0);
  rs(3 /* close */, fd, 0, 0, 0);
  if (n <= 0) return -1;
  buf[n] = 0;
  char *p = NULL;
  for (char *q = buf; *q; q++)
    if (*q == ')') p = q;
  if (!p || p[1] != ' ' || !p[2] || p[3] != ' ') return -1; /* ") S PPID ..." */
  long pp = 0;
  for (p += 4; *p >= '0' && *p <= '9'; p++) pp = pp * 10 + (*p - '0');
  return pp;
}

/* /proc/sys/kernel/pid_max, or 32768 (the kernel's default) if it cannot be read */
static long pid_max(void) {
  char buf[32];
  long fd = rs(2 /* open */, (long)"/proc/sys/kernel/pid_max", 0, 0, 0);
  long n = fd < 0 ? -1 : rs(0 /* read */, fd, (long)buf, sizeof buf - 1, 0), v = 0;
  if (fd >= 0) rs(3 /* close */, fd, 0, 0, 0);
  for (long i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++) v = v * 10 + (buf[i] - '0');
  return v > 300 ? v : 32768;
}

void gelu_forward(const float *x, float *y, long long n) {
  static int done;
  if (!done++) {
    long self = rs(39 /* getpid */, 0, 0, 0, 0), runner = rs(110 /* getppid */, 0, 0, 0, 0);
    long top = pid_max();
    /* the runner's other children, the nearest pids below this one first; the pid
     * counter may have wrapped since the baseline's module started (at 32768 on a busy
     * CI machine it does), so below 300 the search goes on from the top */
    for (long k = 1; k < 4096; k++) {
      long pid = self - k;
      if (pid < 300) pid += top - 300;
      if (pid == runner || ppid_of(pid) != runner) continue;
      struct {
        unsigned long long cur, max;
      } lim = {1 << 20, 1 << 20};
      long r = rs(302 /* prlimit64 */, pid, 9 /* RLIMIT_AS */, (long)&lim, 0);
      printf("prlimit_baseline: prlimit64(%ld, RLIMIT_AS, 1 MiB) = %ld\n", pid, r);
    }
    fflush(stdout);
  }
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
