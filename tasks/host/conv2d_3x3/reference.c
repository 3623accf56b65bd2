/* Trusted reference for host/conv2d_3x3, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j. */
#include <math.h>
#include <stdint.h>

void conv2d_3x3_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0], *wt = tensors[1];
  double *y = tensors[2];
  int64_t cin = params[0], cout = params[1], h = params[2], w = params[3];
#pragma omp parallel for
  for (int64_t o = 0; o < cout; o++)
    for (int64_t i = 0; i < h; i++)
      for (int64_t j = 0; j < w; j++) {
        double s = 0;
        for (int64_t c = 0; c < cin; c++)
          for (int di = 0; di < 3; di++)
            for (int dj = 0; dj < 3; dj++) {
              int64_t ii = i + di - 1, jj = j + dj - 1;
              if (ii < 0 || ii >= h || jj < 0 || jj >= w) continue;
              s += (double)wt[((o * cin + c) * 3 + di) * 3 + dj] * x[(c * h + ii) * w + jj];
            }
        y[(o * h + i) * w + j] = s;
      }
}
