/* Fault: host out of memory. Asks for a 64 TiB scratch buffer and uses it without
 * checking the result. The host backend's address-space limit (RLIMIT_AS, 8 GiB by
 * default) and the kernel's overcommit heuristic refuse it, malloc returns NULL and the
 * first store faults. The host backend cannot tell this from any other crash of the
 * module process (it sees a signal, not an allocation failure), so the verdict is
 * RUNTIME_ERROR, "signal 11"; the machine is not harmed (nothing was touched). */
#include <math.h>
#include <stdlib.h>

void gelu_forward(const float *x, float *y, long long n) {
  float *tmp = malloc((size_t)1 << 46);
  for (long long i = 0; i < n; i++) tmp[i] = x[i] * 0.70710678f;
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(tmp[i]));
  free(tmp);
}
