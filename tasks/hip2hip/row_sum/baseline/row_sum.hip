// Row sums: y[r] = sum_c x[r, c]. One block per row: each thread adds a strided slice of
// the row, then a shared-memory tree reduction combines the threads. blockDim.x must be
// a power of two, at most 1024 (no assumption about the warp or wavefront width).
// HIP kernel code. On AMD it is compiled with hiprtc; on NVIDIA the cuda backend
// compiles it with NVRTC through kernelarena's HIP-to-CUDA mapping header.
#include <hip/hip_runtime.h>

extern "C" __global__ void row_sum_f32(const float* __restrict__ x, float* __restrict__ y, int rows,
                                       int cols) {
  __shared__ float partial[1024];
  int r = blockIdx.x;
  if (r >= rows) return;  // uniform per block
  const float* xr = x + (long long)r * cols;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (unsigned int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[r] = partial[0];
}
