// Single-head attention forward, no mask, float32:
//   P = softmax over j of (Q[i] . K[j] / sqrt(D)),  O[i] = sum over j of P[i][j] * V[j]
// Q, K, V, O are S x D, row-major. One block of 128 threads per query row i:
//   1. each warp takes keys j = warp, warp + nwarps, ...: its lanes split the dot product
//      over d and combine it with __shfl_xor (width warpSize: 32 on NVIDIA, 64 on AMD);
//      the S scores live in dynamic shared memory;
//   2. block-wide max and sum of exp (shared-memory tree reductions) turn them into P;
//   3. thread d accumulates O[i][d] over all j (coalesced reads of the rows of V).
// Dynamic shared memory: 4 * (S + D) bytes (the scores, then the query row).
// HIP kernel code: hiprtc on AMD, NVRTC through kernelarena's HIP-to-CUDA header on NVIDIA.
#include <hip/hip_runtime.h>

#define BLOCK 128

extern "C" __global__ void __launch_bounds__(BLOCK)
    attention_rows(const float* __restrict__ Q, const float* __restrict__ K,
                   const float* __restrict__ V, float* __restrict__ O, int S, int D) {
  HIP_DYNAMIC_SHARED(float, smem);
  __shared__ float red[BLOCK];
  float* sp = smem;      // S scores, then probabilities
  float* sq = smem + S;  // the query row
  int i = blockIdx.x, tid = threadIdx.x;
  if (i >= S) return;
  int lane = tid % warpSize, warp = tid / warpSize, nwarps = BLOCK / warpSize;
  float scale = 1.0f / sqrtf((float)D);
  for (int d = tid; d < D; d += BLOCK) sq[d] = Q[(long long)i * D + d];
  __syncthreads();

  // 1. scores
  for (int j = warp; j < S; j += nwarps) {
    const float* kr = K + (long long)j * D;
    float s = 0.0f;
    for (int d = lane; d < D; d += warpSize) s += sq[d] * kr[d];
    for (int o = warpSize / 2; o > 0; o >>= 1) s += __shfl_xor(s, o);
    if (lane == 0) sp[j] = s * scale;
  }
  __syncthreads();

  // 2. softmax: max, then exp and sum
  float m = -3.402823466e38f;
  for (int j = tid; j < S; j += BLOCK) m = fmaxf(m, sp[j]);
  red[tid] = m;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] = fmaxf(red[tid], red[tid + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float sum = 0.0f;
  for (int j = tid; j < S; j += BLOCK) {
    float p = expf(sp[j] - m);
    sp[j] = p;
    sum += p;
  }
  red[tid] = sum;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] += red[tid + s];
    __syncthreads();
  }
  float inv = 1.0f / red[0];

  // 3. O[i] = P V
  for (int d = tid; d < D; d += BLOCK) {
    float acc = 0.0f;
    for (int j = 0; j < S; j++) acc += sp[j] * V[(long long)j * D + d];
    O[(long long)i * D + d] = acc * inv;
  }
}
