// Scatter-add of rows (index_add): out = table, then out[idx[i]][d] += src[i][d] for
// i in [0, n), d in [0, dim). table and out are vocab x dim, src is n x dim, all
// float32 row-major; idx is int32 in [0, vocab). Rows of src may share an index.
// Two kernels: copy_rows copies table into out (grid-stride loop), then add_rows uses
// one block per source row, each thread adding its elements with float atomics.
// HIP kernel code: hiprtc on AMD, NVRTC through kernelarena's HIP-to-CUDA header on NVIDIA.
#include <hip/hip_runtime.h>

extern "C" __global__ void copy_rows(const float* __restrict__ table, float* __restrict__ out,
                                     int vocab, int dim) {
  long long count = (long long)vocab * dim;
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = table[i];
}

extern "C" __global__ void add_rows(const int* __restrict__ idx, const float* __restrict__ src,
                                    float* __restrict__ out, int n, int dim) {
  int i = blockIdx.x;
  if (i >= n) return;
  const float* s = src + (long long)i * dim;
  float* o = out + (long long)idx[i] * dim;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) atomicAdd(&o[d], s[d]);
}
