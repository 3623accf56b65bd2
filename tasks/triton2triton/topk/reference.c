/* Trusted reference for triton2triton/topk.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * For each row: the k largest values in descending order and their column indices,
 * equal values ordered by smaller index (a total order, so the answer is unique). A
 * sorted list of the best k so far, updated by insertion, scanning columns in order. */
#include <stdint.h>

#define KMAX 64

void topk_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0];
  double *values = tensors[1], *indices = tensors[2];
  int64_t rows = params[0], n = params[1], k = params[2];
  if (k > KMAX || k > n) return; /* outside the task's shapes; leaves the outputs alone */
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *row = x + r * n;
    float bv[KMAX];
    int64_t bi[KMAX];
    int64_t cnt = 0;
    for (int64_t c = 0; c < n; c++) {
      float v = row[c];
      /* columns arrive in increasing order, so an equal value ranks after the held ones */
      if (cnt == k && !(v > bv[k - 1])) continue;
      int64_t p = cnt < k ? cnt++ : k - 1;
      while (p > 0 && v > bv[p - 1]) {
        bv[p] = bv[p - 1];
        bi[p] = bi[p - 1];
        p--;
      }
      bv[p] = v;
      bi[p] = c;
    }
    for (int64_t j = 0; j < k; j++) {
      values[r * k + j] = bv[j];
      indices[r * k + j] = (double)bi[j];
    }
  }
}
