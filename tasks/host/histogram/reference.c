/* Trusted reference for host/histogram, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j. */
#include <math.h>
#include <stdint.h>

void histogram_ref(void *const *tensors, const int64_t *params) {
  const int32_t *x = tensors[0];
  double *counts = tensors[1];
  int64_t n = params[0], nbins = params[1];
  for (int64_t b = 0; b < nbins; b++) counts[b] = 0;
  for (int64_t i = 0; i < n; i++) counts[x[i] % nbins] += 1;
}
