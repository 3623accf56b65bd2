/* Work outside the timed calls (the host analogue of a private stream): computes
 * honestly, but keeps a background thread busy between calls. Expected: FLAGGED, "work
 * outside the timed calls" (the kernel's CPU accounting of the module process, read by
 * the runner, shows CPU time while no call was in flight). */
#include <math.h>
#include <pthread.h>

static volatile unsigned long long sink;
static void *spin(void *arg) {
  for (;;) sink++;
  return arg;
}

void gelu_forward(const float *x, float *y, long long n) {
  static int started;
  if (!started) {
    pthread_t th;
    started = pthread_create(&th, NULL, spin, NULL) == 0;
  }
  for (long long i = 0; i < n; i++) {
    double v = x[i];
    y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
}
