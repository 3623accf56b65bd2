/* Work after the last call (issue 16, class 1, second part): an honest GELU that, after
 * its last call of the last case (n = 131075 in the integrity harness: 1 trial, 1 warm-up
 * and 6 timed calls per case), leaves a thread spinning. The module process's CPU time
 * was read only at its next call, which never comes after the last case, so that work
 * was never charged. Expected now: FLAGGED ("work outside the timed calls"): the runner
 * reads every module process's CPU time at the end of each case. */
#include <math.h>
#include <pthread.h>

static void *spin(void *arg) {
  volatile unsigned long long k = 0;
  for (;;) k++;
  return arg;
}

void gelu_forward(const float *x, float *y, long long n) {
  static long long calls_at_n, last_n;
  if (n != last_n) last_n = n, calls_at_n = 0;
  for (long long i = 0; i < n; i++) {
    double v = x[i];
    y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
  if (n == 131075 && ++calls_at_n == 8) {
    pthread_t th;
    pthread_create(&th, NULL, spin, NULL);
  }
}
