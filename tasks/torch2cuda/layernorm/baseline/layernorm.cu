// LayerNorm per row: mean = sum_c x[r, c] / hidden, var = sum_c (x[r, c] - mean)^2 / hidden
// (biased, as torch.nn.LayerNorm), y[r, c] = (x[r, c] - mean) / sqrt(var + 1e-5) * weight[c]
// + bias[c]. One block per row, three passes over the row (mean, variance, output) with
// shared-memory tree reductions. blockDim.x must be a power of two, at most 1024 (no
// warp-width assumption).
// Compiled with NVRTC; launched as launch.yaml says.

#define LN_EPS 1e-5f

// Tree sum of v over the block; every thread gets the result.
__device__ float block_sum(float v, float* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
    __syncthreads();
  }
  float res = sh[0];
  __syncthreads();  // sh is reused by the next reduction
  return res;
}

extern "C" __global__ void layernorm_f32(const float* __restrict__ x,
                                         const float* __restrict__ weight,
                                         const float* __restrict__ bias, float* __restrict__ y,
                                         int rows, int hidden) {
  __shared__ float sh[1024];
  int r = blockIdx.x;
  if (r >= rows) return;  // uniform per block
  const float* xr = x + (long long)r * hidden;
  float* yr = y + (long long)r * hidden;
  float s = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) s += xr[c];
  float mean = block_sum(s, sh) / (float)hidden;
  float q = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    float d = xr[c] - mean;
    q += d * d;
  }
  float var = block_sum(q, sh) / (float)hidden;
  float rstd = 1.0f / sqrtf(var + LN_EPS);
  for (int c = threadIdx.x; c < hidden; c += blockDim.x)
    yr[c] = (xr[c] - mean) * rstd * weight[c] + bias[c];
}
