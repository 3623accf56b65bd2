// Embedding lookup: out[t][d] = table[idx[t]][d] for t in [0, tokens), d in [0, dim).
// table is vocab x dim, out is tokens x dim, both float32 row-major; idx is int32 in
// [0, vocab). One block per token; its threads copy the row, one float each per step.
// HIP kernel code: hiprtc on AMD, NVRTC through kernelarena's HIP-to-CUDA header on NVIDIA.
#include <hip/hip_runtime.h>

extern "C" __global__ void embedding_gather(const float* __restrict__ table,
                                            const int* __restrict__ idx, float* __restrict__ out,
                                            int tokens, int dim) {
  int t = blockIdx.x;
  if (t >= tokens) return;
  const float* src = table + (long long)idx[t] * dim;
  float* dst = out + (long long)t * dim;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) dst[d] = src[d];
}
