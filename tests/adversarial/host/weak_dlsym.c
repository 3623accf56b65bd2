/* Escape attempt: a weak reference to dlsym, used only if the loader resolves it, so
 * that the module still loads when the symbol is missing. Expected: COMPILE_ERROR naming
 * dlsym: weak imports are checked like any other. */
#include <math.h>

void *dlsym(void *handle, const char *name) __attribute__((weak));

void gelu_forward(const float *x, float *y, long long n) {
  static void *fn;
  if (dlsym && !fn) fn = dlsym((void *)0 /* RTLD_DEFAULT */, "system");
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
