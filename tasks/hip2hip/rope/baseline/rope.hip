// Rotary position embedding, rotate-half (GPT-NeoX / Llama) convention. With
// half = hdim / 2, for token t, head h, i in [0, half):
//   theta = pos[t] * 10000^(-2i / hdim)
//   y[t][h][i]        = x[t][h][i] * cos(theta) - x[t][h][i + half] * sin(theta)
//   y[t][h][i + half] = x[t][h][i + half] * cos(theta) + x[t][h][i] * sin(theta)
// x and y are tokens x heads x hdim float32, packed; pos is int32. One thread per (t, h, i).
// HIP kernel code: hiprtc on AMD, NVRTC through kernelarena's HIP-to-CUDA header on NVIDIA.
#include <hip/hip_runtime.h>

extern "C" __global__ void rope_f32(const float* __restrict__ x, const int* __restrict__ pos,
                                    float* __restrict__ y, int tokens, int heads, int hdim) {
  int half = hdim / 2;
  long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  long long total = (long long)tokens * heads * half;
  if (g >= total) return;
  int i = (int)(g % half);
  long long th = g / half;  // t * heads + h
  int t = (int)(th / heads);
  float inv_freq = powf(10000.0f, -(float)(2 * i) / (float)hdim);
  float s, c;
  sincosf((float)pos[t] * inv_freq, &s, &c);
  const float* xr = x + th * hdim;
  float* yr = y + th * hdim;
  float a = xr[i], b = xr[i + half];
  yr[i] = a * c - b * s;
  yr[i + half] = b * c + a * s;
}
