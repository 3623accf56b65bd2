/* What starting a runner costs gpuexec's worker thread (gpuexec/daemon/worker.c,
 * wk_spawn) while the process maps GiB of memory (the reference cache, the outputs'
 * memfds): fork + execve against vfork + execve, side by side in one run, at each size
 * given (half shared, half private, every page touched). Per size and way, 5 starts
 * interleaved, the medians: "return" is how long the calling thread waits for
 * fork/vfork to return, "exec" until the child has called execve (a close-on-exec pipe
 * reaches EOF). Prints one row per size and way and the ratio of the medians. Not
 * measured: fork's copy-on-write faults in the process's other threads until the
 * child's execve, which vfork does not cause either.
 *   spawn_cost_bench [GIB...]              (build/bin/spawn_cost_bench; default 1 4) */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ka_common.h"

#define SC_RUNS 5

/* One start of /bin/true by fork (use_vfork 0) or vfork; both times in ms. */
static int sc_start(int use_vfork, double *ret_ms, double *exec_ms) {
  int p[2];
  if (pipe2(p, O_CLOEXEC)) return -1;
  char *argv[] = {"/bin/true", NULL}, *envp[] = {NULL};
  double t0 = ka_now_s();
  pid_t pid = use_vfork ? vfork() : fork();
  if (pid == 0) {
    execve(argv[0], argv, envp);
    _exit(127);
  }
  double t1 = ka_now_s();
  close(p[1]);
  char c;
  while (read(p[0], &c, 1) < 0 && errno == EINTR) {
  }
  double t2 = ka_now_s();
  close(p[0]);
  if (pid < 0) return -1;
  waitpid(pid, NULL, 0);
  *ret_ms = (t1 - t0) * 1e3, *exec_ms = (t2 - t0) * 1e3;
  return 0;
}

static int sc_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double sc_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, sc_cmp);
  return v[n / 2];
}

int main(int argc, char **argv) {
  const char *def[] = {"1", "4"};
  int nsizes = argc > 1 ? argc - 1 : 2;
  const char **sizes = argc > 1 ? (const char **)argv + 1 : def;
  printf("%-6s %-6s %10s %10s\n", "GiB", "way", "return_ms", "exec_ms");
  for (int s = 0; s < nsizes; s++) {
    size_t bytes = (size_t)(atof(sizes[s]) * (double)(1UL << 30));
    /* half shared (memfd-like), half private (malloc-like), every page touched */
    unsigned char *a =
        mmap(NULL, bytes / 2, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    unsigned char *b =
        mmap(NULL, bytes / 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED || b == MAP_FAILED) {
      fprintf(stderr, "spawn_cost_bench: cannot map %s GiB\n", sizes[s]);
      return 1;
    }
    memset(a, 1, bytes / 2);
    memset(b, 2, bytes / 2);
    double r[2][SC_RUNS], e[2][SC_RUNS];
    for (int i = 0; i < SC_RUNS; i++)
      for (int k = 0; k < 2; k++) /* interleaved: fork, vfork, fork, ... */
        if (sc_start(k, &r[k][i], &e[k][i])) {
          fprintf(stderr, "spawn_cost_bench: %s failed: %s\n", k ? "vfork" : "fork",
                  strerror(errno));
          return 1;
        }
    double med[2][2];
    for (int k = 0; k < 2; k++) {
      med[k][0] = sc_median(r[k], SC_RUNS), med[k][1] = sc_median(e[k], SC_RUNS);
      printf("%-6s %-6s %10.2f %10.2f\n", sizes[s], k ? "vfork" : "fork", med[k][0], med[k][1]);
    }
    printf("%-6s ratio  %9.1fx %9.1fx  (fork / vfork)\n", sizes[s], med[0][0] / med[1][0],
           med[0][1] / med[1][1]);
    munmap(a, bytes / 2);
    munmap(b, bytes / 2);
  }
  return 0;
}
