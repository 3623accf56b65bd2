/* Trusted reference for instruction2triton/histogram.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x: int32 [n] with values in [0, 65536), counts: double [bins] holding the counts.
 * A key outside [0, 65536) (never generated) is not counted. OpenMP threads count into
 * private histograms that are summed at the end (array-section reduction, OpenMP 4.5). */
#include <stdint.h>
#include <stdlib.h>

void histogram_ref(void *const *tensors, const int64_t *params) {
  const int32_t *x = tensors[0];
  double *counts = tensors[1];
  int64_t n = params[0], bins = params[1];
  int64_t *c = calloc((size_t)bins, sizeof *c);
  if (!c) {
    for (int64_t b = 0; b < bins; b++) counts[b] = -1; /* cannot match any output */
    return;
  }
#pragma omp parallel for schedule(static) reduction(+ : c[:bins])
  for (int64_t i = 0; i < n; i++)
    if (x[i] >= 0 && x[i] < 65536) c[((int64_t)x[i] * bins) >> 16]++;
  for (int64_t b = 0; b < bins; b++) counts[b] = (double)c[b];
  free(c);
}
