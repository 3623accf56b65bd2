// Fault: NVRTC would resolve an absolute include and show the file in its log; the
// include allowlist refuses it before NVRTC runs.
#include "/etc/passwd"
extern "C" __global__ void gelu_f32(const float* x, float* y, long long n) {}
