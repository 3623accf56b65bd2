/* Escape attempt: the generic syscall() wrapper reaches any system call by number
 * (here it asks for the parent's id, the first step to signalling it). Expected:
 * COMPILE_ERROR naming syscall (not on the default allow-list). */
#include <math.h>

long syscall(long number, ...);

void gelu_forward(const float *x, float *y, long long n) {
  static long parent;
  if (!parent) parent = syscall(110 /* x86-64 getppid */);
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
