/* Fault: asks for memory until malloc fails (1 GiB at a time, never touched, so the
 * machine is not harmed), reports how much it got, frees it and computes a correct
 * result. The host backend's address-space limit must stop it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void gelu_forward(const float *x, float *y, long long n) {
  static int done;
  if (!done++) {
    void *p[4096];
    int k = 0;
    while (k < 4096 && (p[k] = malloc((size_t)1 << 30))) k++;
    fprintf(stderr, "memhog: malloc failed after %d GiB\n", k);
    while (k > 0) free(p[--k]);
  }
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
