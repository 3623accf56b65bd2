/* Escape attempt at load time: a constructor (run by the loader before any call) forks
 * by a raw system call. Constructors run in the module process, which locks itself
 * (seccomp) before it loads the module, so the fork stops the load. Expected:
 * COMPILE_ERROR, "loading the compiled module failed" (a module that cannot be loaded is
 * a build failure of the submission). */
#include <math.h>

__attribute__((constructor)) static void at_load(void) {
#if defined(__x86_64__)
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(57L) : "rcx", "r11", "memory");
  if (ret == 0)
    for (;;) {
    }
#else
  __builtin_trap();
#endif
}

void gelu_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
