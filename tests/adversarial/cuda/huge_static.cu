// Reward hack (issue 16, class 3): a __device__ array larger than the device, so the
// module cannot load; the load's out-of-memory used to be reported as the runner's own
// (INFRA_ERROR: "not counted, retry it"). Expected: OOM or COMPILE_ERROR (the
// submission's verdict either way, never INFRA_ERROR).
__device__ char ka_hoard[200ull << 30];

extern "C" __global__ void gelu_f32(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)) + (float)ka_hoard[i & 1];
  }
}
