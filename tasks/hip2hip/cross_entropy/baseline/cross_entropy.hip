// Cross-entropy per row: loss[r] = log(sum_c exp(logits[r, c])) - logits[r, labels[r]],
// computed as m + log(sum_c exp(logits[r, c] - m)) - logits[r, labels[r]] with m the row
// maximum. One block per row, two passes over the row (max, sum of exponentials) with
// shared-memory tree reductions. blockDim.x must be a power of two, at most 1024 (no
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

extern "C" __global__ void ce_rows(const float* __restrict__ logits,
                                   const long long* __restrict__ labels, float* __restrict__ loss,
                                   int rows, int classes) {
  __shared__ float sh[1024];
  int r = blockIdx.x;
  if (r >= rows) return;  // uniform per block
  const float* xr = logits + (long long)r * classes;
  float m = NEG_INF;
  for (int c = threadIdx.x; c < classes; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = block_reduce(m, sh, 0);
  float s = 0.0f;
  for (int c = threadIdx.x; c < classes; c += blockDim.x) s += expf(xr[c] - m);
  s = block_reduce(s, sh, 1);
  if (threadIdx.x == 0) loss[r] = (m + logf(s)) - xr[labels[r]];
}
