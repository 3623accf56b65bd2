// Never finishes: the evaluation's deadline must kill it. (clock64() is a volatile
// read, so the compiler cannot remove the loop, unlike a spin on a local variable.)
extern "C" __global__ void gelu_f32(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
  for (;;) {
    if (clock64() < 0) break;
  }
}
