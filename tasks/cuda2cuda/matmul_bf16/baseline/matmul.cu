// C[m,n] = A[m,k] * B[k,n]: A and B bfloat16, C float32, all row-major; products and
// sums in float32. NVRTC has no <cuda_bf16.h> here, so bf16 values are raw 16-bit
// patterns (unsigned short): the upper half of a float32.
// Shared-memory tiled on the CUDA cores (no tensor cores): each 16x16 block computes a
// 16x16 tile of C, stepping through k in 16-wide slabs converted to float32 in shared
// memory; edges are zero-padded. Compiled with NVRTC; launched as launch.yaml says.

#define TILE 16

__device__ __forceinline__ float bf16_to_float(unsigned short h) {
  return __uint_as_float((unsigned)h << 16);
}

extern "C" __global__ void matmul_bf16_tiled(const unsigned short* __restrict__ A,
                                             const unsigned short* __restrict__ B,
                                             float* __restrict__ C, int m, int n, int k) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty;
  int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += TILE) {
    int ka = k0 + tx, kb = k0 + ty;
    As[ty][tx] = (row < m && ka < k) ? bf16_to_float(A[(long long)row * k + ka]) : 0.0f;
    Bs[ty][tx] = (kb < k && col < n) ? bf16_to_float(B[(long long)kb * n + col]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < TILE; i++) acc += As[ty][i] * Bs[i][tx];
    __syncthreads();
  }
  if (row < m && col < n) C[(long long)row * n + col] = acc;
}
