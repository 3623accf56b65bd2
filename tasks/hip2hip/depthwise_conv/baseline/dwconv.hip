// Depthwise 2-D convolution (cross-correlation), 3x3 kernel, padding 1 (zeros),
// stride 1, NCHW float32: every channel is filtered by its own 3x3 kernel,
//   y[n][c][h][w] = sum over i, j in [0, 3) of wt[c][i][j] * x[n][c][h + i - 1][w + j - 1]
// One thread per output element; neighbours come through the caches.
// HIP kernel code: hiprtc on AMD, NVRTC through kernelarena's HIP-to-CUDA header on NVIDIA.
#include <hip/hip_runtime.h>

extern "C" __global__ void dwconv3x3(const float* __restrict__ x, const float* __restrict__ wt,
                                     float* __restrict__ y, int N, int C, int H, int W) {
  long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  long long total = (long long)N * C * H * W;
  if (g >= total) return;
  int w = (int)(g % W);
  int h = (int)((g / W) % H);
  long long plane = g / ((long long)H * W);  // n * C + c
  int c = (int)(plane % C);
  const float* xp = x + plane * H * W;
  const float* wp = wt + (long long)c * 9;
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < 3; i++) {
    int ih = h + i - 1;
    if (ih < 0 || ih >= H) continue;
#pragma unroll
    for (int j = 0; j < 3; j++) {
      int iw = w + j - 1;
      if (iw < 0 || iw >= W) continue;
      acc += wp[i * 3 + j] * xp[(long long)ih * W + iw];
    }
  }
  y[g] = acc;
}
