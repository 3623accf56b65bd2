// Tries to keep its data resident in L2 across the flush: prefetches with an
// evict_last cache policy (createpolicy.fractional.L2::evict_last, PTX ISA 7.4) before
// computing. The flush (twice the L2, written outside the timer), the persisting-L2
// reset and a zero persisting set-aside leave nothing to reuse. Expected: OK, and a
// speedup no better than the baseline's (within noise).
extern "C" __global__ void gelu_f32(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned long long pol;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    float v;
    asm volatile("ld.global.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(x + i), "l"(pol));
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}
