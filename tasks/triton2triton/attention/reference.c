/* Trusted reference for triton2triton/attention, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * Scaled dot-product attention (Vaswani et al., "Attention Is All You Need", 2017,
 * eq. 1), one head, no mask: O = softmax(Q K^T / sqrt(D)) V, the softmax over keys with
 * the row maximum subtracted before exp. Parallel over query rows. Q, K and V are
 * bfloat16 bit patterns (the upper 16 bits of a float32), widened to double once. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static double bf16_to_double(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

void attention_bf16_ref(void *const *tensors, const int64_t *params) {
  const uint16_t *Q = tensors[0], *K = tensors[1], *V = tensors[2];
  double *O = tensors[3];
  int64_t S = params[0], D = params[1];
  double scale = 1.0 / sqrt((double)D);
  double *Kd = malloc(sizeof(double) * (size_t)(S * D)), *Vd = malloc(sizeof(double) * (size_t)(S * D));
  if (!Kd || !Vd) {
    for (int64_t i = 0; i < S * D; i++) O[i] = NAN; /* out of memory: fail loudly */
    free(Kd);
    free(Vd);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < S * D; i++) {
    Kd[i] = bf16_to_double(K[i]);
    Vd[i] = bf16_to_double(V[i]);
  }
#pragma omp parallel
  {
    double *p = malloc(sizeof(double) * (size_t)(S + D));
#pragma omp for schedule(dynamic, 16)
    for (int64_t i = 0; i < S; i++) {
      if (!p) {
        for (int64_t d = 0; d < D; d++) O[i * D + d] = NAN; /* out of memory: fail loudly */
        continue;
      }
      double *q = p + S;
      for (int64_t d = 0; d < D; d++) q[d] = bf16_to_double(Q[i * D + d]);
      double mx = -INFINITY;
      for (int64_t j = 0; j < S; j++) {
        const double *kr = Kd + j * D;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* four chains: latency, not precision */
        int64_t d = 0;
        for (; d + 4 <= D; d += 4) {
          s0 += q[d] * kr[d];
          s1 += q[d + 1] * kr[d + 1];
          s2 += q[d + 2] * kr[d + 2];
          s3 += q[d + 3] * kr[d + 3];
        }
        for (; d < D; d++) s0 += q[d] * kr[d];
        p[j] = (s0 + s1 + s2 + s3) * scale;
        if (p[j] > mx) mx = p[j];
      }
      double sum = 0;
      for (int64_t j = 0; j < S; j++) sum += (p[j] = exp(p[j] - mx));
      double *o = O + i * D;
      memset(o, 0, sizeof(double) * (size_t)D);
      for (int64_t j = 0; j < S; j++) {
        const double *vr = Vd + j * D;
        double w = p[j] / sum;
        for (int64_t d = 0; d < D; d++) o[d] += w * vr[d];
      }
    }
    free(p);
  }
  free(Kd);
  free(Vd);
}
