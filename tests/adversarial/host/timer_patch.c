/* Reward hack (reference-kernels #162): interposes the clocks the evaluator might use
 * (clock_gettime, ka_now_s, cuEventElapsedTime) with frozen ones, then sleeps 30 ms in
 * every call. Expected: OK with a candidate time of at least 30 ms per call: the timer
 * runs in another process. */
#include <math.h>
#include <time.h>

int usleep(unsigned usec); /* <unistd.h> is not allowed */

int clock_gettime(clockid_t id, struct timespec *ts) {
  ts->tv_sec = 1;
  ts->tv_nsec = 0;
  return 0;
}
double ka_now_s(void) { return 1.0; }
int cuEventElapsedTime(float *ms, void *a, void *b) {
  *ms = 0.001f;
  return 0;
}

void gelu_forward(const float *x, float *y, long long n) {
  usleep(30000);
  for (long long i = 0; i < n; i++) {
    double v = x[i];
    y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
}
