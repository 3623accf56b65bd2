// 2-D convolution (cross-correlation, as in deep-learning frameworks), 3x3 kernel,
// padding 1 (zeros), stride 1, NCHW float32:
//   y[n][k][h][w] = sum over c in [0, C), i, j in [0, 3) of
//                   wt[k][c][i][j] * x[n][c][h + i - 1][w + j - 1]
// Block (16, 16) computes a 16x16 spatial tile of one output plane (n, k) = blockIdx.z;
// for each input channel it stages the 18x18 input tile (with halo) in shared memory.
// HIP kernel code: hiprtc on AMD, NVRTC through kernelarena's HIP-to-CUDA header on NVIDIA.
#include <hip/hip_runtime.h>

#define TILE 16
#define HALO (TILE + 2)

extern "C" __global__ void __launch_bounds__(TILE * TILE)
    conv3x3_tiled(const float* __restrict__ x, const float* __restrict__ wt,
                  float* __restrict__ y, int N, int C, int K, int H, int W) {
  __shared__ float tile[HALO][HALO];
  int nk = blockIdx.z, n = nk / K, k = nk % K;
  if (n >= N) return;
  int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TILE + tx;
  int w0 = blockIdx.x * TILE, h0 = blockIdx.y * TILE;
  int ow = w0 + tx, oh = h0 + ty;
  float acc = 0.0f;
  for (int c = 0; c < C; c++) {
    const float* xp = x + ((long long)n * C + c) * H * W;
    for (int e = tid; e < HALO * HALO; e += TILE * TILE) {
      int ih = h0 - 1 + e / HALO, iw = w0 - 1 + e % HALO;
      tile[e / HALO][e % HALO] =
          (ih >= 0 && ih < H && iw >= 0 && iw < W) ? xp[(long long)ih * W + iw] : 0.0f;
    }
    __syncthreads();
    const float* wp = wt + ((long long)k * C + c) * 9;
#pragma unroll
    for (int i = 0; i < 3; i++)
#pragma unroll
      for (int j = 0; j < 3; j++) acc += wp[i * 3 + j] * tile[ty + i][tx + j];
    __syncthreads();
  }
  if (oh < H && ow < W) y[((long long)n * K + k) * H * W + (long long)oh * W + ow] = acc;
}
