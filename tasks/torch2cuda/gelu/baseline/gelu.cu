// GELU, exact form: y = 0.5 * x * (1 + erf(x / sqrt(2))).
// One thread per element. Compiled with NVRTC; launched as launch.yaml says.
extern "C" __global__ void gelu_f32(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}
