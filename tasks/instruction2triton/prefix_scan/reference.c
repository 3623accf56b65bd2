/* Trusted reference for instruction2triton/prefix_scan.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x: int32 [n], y: double [n] holding int32 values: the inclusive sums with 32-bit
 * two's-complement wraparound (computed in uint32_t, whose overflow is defined).
 * Two passes over blocks so that OpenMP threads share the work: block sums, then each
 * block's scan from the sum of the blocks before it. */
#include <stdint.h>
#include <stdlib.h>

#define REF_BLOCKS 256

void prefix_scan_ref(void *const *tensors, const int64_t *params) {
  const int32_t *x = tensors[0];
  double *y = tensors[1];
  int64_t n = params[0];
  int64_t per = (n + REF_BLOCKS - 1) / REF_BLOCKS;
  uint32_t sums[REF_BLOCKS + 1];
  sums[0] = 0;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < REF_BLOCKS; b++) {
    uint32_t s = 0;
    for (int64_t i = b * per; i < (b + 1) * per && i < n; i++) s += (uint32_t)x[i];
    sums[b + 1] = s;
  }
  for (int b = 0; b < REF_BLOCKS; b++) sums[b + 1] += sums[b];
#pragma omp parallel for schedule(static)
  for (int b = 0; b < REF_BLOCKS; b++) {
    uint32_t s = sums[b];
    for (int64_t i = b * per; i < (b + 1) * per && i < n; i++) {
      s += (uint32_t)x[i];
      y[i] = (double)(int32_t)s;
    }
  }
}
