// Reward hack (KernelBench PR #25/#82): computes, then zeroes its input in place.
// Expected: INCORRECT, "changed its input x" (inputs are read back after every call).
extern "C" __global__ void gelu_f32(float* __restrict__ x, float* __restrict__ y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    x[i] = 0.0f;
  }
}
