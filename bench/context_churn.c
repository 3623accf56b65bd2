/* Context churn beside timed calls (issue 15; docs/benchmarks/2026-12-02-session18-h200.md):
 * what a runner's CUDA context creation and teardown do to another process's timed calls.
 * The pool opens the next runner's context, and the leaving runner destroys its own, under
 * the device lock, so that neither overlaps a timed call; that costs each step ~200 ms of
 * device time in which no timed call may run. Whether the lock is needed there is a
 * question of measurement: tests/device/churn_h200.sh runs the baseline against itself
 * (bench/step_latency.sh's fidelity) with this program beside it and without.
 *
 *   context_churn SECONDS [MIB]   for SECONDS, one child process after another, each of
 *                                 which does what a runner's life does to the driver:
 *                                 cuInit, the primary context retained, MIB MiB (default
 *                                 1024) allocated and freed, the context released, exit
 *   context_churn --once MIB      one such child (the loop's)
 * Prints the number of contexts made and their mean life, last (also when stopped by
 * SIGINT or SIGTERM). Loads libcuda.so.1 at run
 * time (dlopen), so it builds without a driver. Exit status 0, or 1 if the driver failed. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int (*cu_init_t)(unsigned);
typedef int (*cu_dev_get_t)(int *, int);
typedef int (*cu_retain_t)(void **, int);
typedef int (*cu_release_t)(int);
typedef int (*cu_set_t)(void *);
typedef int (*cu_alloc_t)(unsigned long long *, size_t);
typedef int (*cu_free_t)(unsigned long long);

/* Set by SIGINT or SIGTERM: the loop ends after the current child and prints. */
static volatile sig_atomic_t stop;
static void on_stop(int sig) {
  (void)sig;
  stop = 1;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One runner's life as the driver sees it. Returns 0, or the failing step's number. */
static int churn_once(size_t mib) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) return 1;
  cu_init_t init = (cu_init_t)dlsym(h, "cuInit");
  cu_dev_get_t dev_get = (cu_dev_get_t)dlsym(h, "cuDeviceGet");
  cu_retain_t retain = (cu_retain_t)dlsym(h, "cuDevicePrimaryCtxRetain");
  cu_release_t release = (cu_release_t)dlsym(h, "cuDevicePrimaryCtxRelease_v2");
  cu_set_t set = (cu_set_t)dlsym(h, "cuCtxSetCurrent");
  cu_alloc_t alloc = (cu_alloc_t)dlsym(h, "cuMemAlloc_v2");
  cu_free_t mfree = (cu_free_t)dlsym(h, "cuMemFree_v2");
  if (!init || !dev_get || !retain || !release || !set || !alloc || !mfree) return 2;
  int dev = 0;
  void *ctx = NULL;
  unsigned long long p = 0;
  if (init(0) || dev_get(&dev, 0) || retain(&ctx, dev) || set(ctx)) return 3;
  if (mib && alloc(&p, mib << 20) == 0) mfree(p);
  set(NULL);
  return release(dev) ? 4 : 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--once")) return churn_once((size_t)atoll(argv[2]));
  if (argc < 2) {
    fprintf(stderr, "usage: context_churn SECONDS [MIB]\n");
    return 2;
  }
  double secs = atof(argv[1]), t0 = now_s();
  const char *mib = argc > 2 ? argv[2] : "1024";
  int n = 0, failed = 0;
  signal(SIGINT, on_stop);
  signal(SIGTERM, on_stop);
  while (!stop && now_s() - t0 < secs) {
    pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], "--once", mib, (char *)NULL);
      _exit(127);
    }
    int st = 0;
    if (pid < 0) return 1;
    while (waitpid(pid, &st, 0) < 0)
      if (errno != EINTR) return 1; /* EINTR (the stop signal): wait for the child still */
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
    n++;
  }
  double dt = now_s() - t0;
  printf("context_churn: %d contexts in %.1f s (%.1f ms each), %d failed\n", n, dt,
         n ? dt * 1e3 / n : 0.0, failed);
  return failed ? 1 : 0;
}
