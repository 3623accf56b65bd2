/* Trusted reference for triton2triton/cross_entropy, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * logits: float [rows, classes], labels: int64 [rows] in [0, classes),
 * loss: double [rows]. */
#include <math.h>
#include <stdint.h>

void cross_entropy_ref(void *const *tensors, const int64_t *params) {
  const float *logits = tensors[0];
  const int64_t *labels = tensors[1];
  double *loss = tensors[2];
  int64_t rows = params[0], classes = params[1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = logits + r * classes;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < classes; c++)
      if (xr[c] > m) m = xr[c];
    for (int64_t c = 0; c < classes; c++) s += exp((double)xr[c] - m);
    int64_t label = labels[r];
    /* labels come from the task's generator; an out-of-range one gives NaN, never a read */
    loss[r] = label >= 0 && label < classes ? m + log(s) - (double)xr[label] : NAN;
  }
}
