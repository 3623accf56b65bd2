/* bench/copy, correct, but its first call spins for 6 s of wall-clock time: a long job
 * for tests/heartbeat_test.sh (the worker must keep the server's heartbeat deadline). */
#include <time.h>

void copy_forward(const float *x, float *y, long long n) {
  static int first = 1;
  if (first) {
    first = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 < 6.0);
  }
  for (long long i = 0; i < n; i++) y[i] = x[i];
}
