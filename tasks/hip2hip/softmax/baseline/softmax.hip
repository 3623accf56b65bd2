// Row-wise softmax: y[r, c] = exp(x[r, c] - m) / sum_k exp(x[r, k] - m), m = max_k x[r, k].
// One block per row, three passes over the row (max, sum of exponentials, output), each
// reduction through shared memory. blockDim.x must be a power of two, at most 1024 (no
// warp-width assumption).
// HIP kernel code. On AMD it is compiled with hiprtc; on NVIDIA the cuda backend
// compiles it with NVRTC through kernelarena's HIP-to-CUDA mapping header.
#include <hip/hip_runtime.h>

// -infinity, the identity of max (math.h's INFINITY is not defined under every runtime
// compiler, e.g. hiprtc)
#define NEG_INF (-__int_as_float(0x7f800000))

// Tree reduction of v over the block (op: 0 = max, 1 = sum); every thread gets the result.
__device__ float block_reduce(float v, float* sh, int op) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) {
      float o = sh[threadIdx.x + k];
      sh[threadIdx.x] = op == 0 ? fmaxf(sh[threadIdx.x], o) : sh[threadIdx.x] + o;
    }
    __syncthreads();
  }
  float res = sh[0];
  __syncthreads();  // sh is reused by the next reduction
  return res;
}

extern "C" __global__ void softmax_f32(const float* __restrict__ x, float* __restrict__ y, int rows,
                                       int cols) {
  __shared__ float sh[1024];
  int r = blockIdx.x;
  if (r >= rows) return;  // uniform per block
  const float* xr = x + (long long)r * cols;
  float* yr = y + (long long)r * cols;
  float m = NEG_INF;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = block_reduce(m, sh, 0);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
  s = block_reduce(s, sh, 1);
  float inv = 1.0f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}
