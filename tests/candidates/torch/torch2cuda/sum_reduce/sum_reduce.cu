// torch.sum(x, dim=1), faster: one warp per row (8 rows per block of 256 threads),
// float4 loads where a row starts 16-byte aligned (cols % 4 == 0), a shuffle reduction;
// no shared memory, no block barriers.
extern "C" __global__ void sum_rows_warp(const float* __restrict__ x, float* __restrict__ y,
                                         int rows, int cols) {
  int lane = threadIdx.x & 31;
  long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return;  // uniform per warp
  const float* xr = x + r * cols;
  float s = 0.0f;
  if ((cols & 3) == 0) {
    const float4* x4 = (const float4*)xr;
    int n4 = cols >> 2;
    for (int c = lane; c < n4; c += 32) {
      float4 v = x4[c];
      s += (v.x + v.y) + (v.z + v.w);
    }
  } else {
    for (int c = lane; c < cols; c += 32) s += xr[c];
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) y[r] = s;
}
