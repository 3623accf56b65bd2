// Per-row argmax: idx[r] = the smallest c with x[r, c] equal to the row's maximum.
// One block per row: each thread scans a strided slice (keeping its first maximum),
// then a shared-memory tree reduction picks the larger value, or the smaller index on
// a tie. blockDim.x must be a power of two, at most 1024 (no warp-width assumption).
// HIP kernel code. On AMD it is compiled with hiprtc; on NVIDIA the cuda backend
// compiles it with NVRTC through kernelarena's HIP-to-CUDA mapping header.
#include <hip/hip_runtime.h>

// -infinity, the identity of max (math.h's INFINITY is not defined under every runtime
// compiler, e.g. hiprtc)
#define NEG_INF (-__int_as_float(0x7f800000))

extern "C" __global__ void argmax_f32(const float* __restrict__ x, long long* __restrict__ idx,
                                      int rows, int cols) {
  __shared__ float best_v[1024];
  __shared__ int best_i[1024];
  int r = blockIdx.x;
  if (r >= rows) return;  // uniform per block
  const float* xr = x + (long long)r * cols;
  float v = NEG_INF;
  int i = cols;  // larger than any real index: loses every tie
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float e = xr[c];
    if (e > v || i == cols) {  // strict: the first maximum of this thread's slice stays
      v = e;
      i = c;
    }
  }
  best_v[threadIdx.x] = v;
  best_i[threadIdx.x] = i;
  __syncthreads();
  for (unsigned int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) {
      float ov = best_v[threadIdx.x + k];
      int oi = best_i[threadIdx.x + k];
      float mv = best_v[threadIdx.x];
      int mi = best_i[threadIdx.x];
      if (ov > mv || (ov == mv && oi < mi)) {
        best_v[threadIdx.x] = ov;
        best_i[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) idx[r] = best_i[0];
}
