// A CPU emulation of the CUDA subset the torch2cuda kernels use, for tests/torch_cuda_emu.sh
// (no GPU here): one std::thread per CUDA thread, blocks one after another, __shared__
// as static (one block runs at a time), __syncthreads as a block barrier, warp shuffles
// through a per-warp barrier (every lane of a warp must reach them, as in our kernels).
// It runs the kernels' own source as C++: their indexing and algorithms, not the
// device's floating-point or memory model (the H200 run, tests/device/torch_h200.sh, does).
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
#include <memory>
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
struct float4 {
  float x, y, z, w;
};
thread_local dim3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
static std::barrier<> *g_block_bar;
static std::vector<std::unique_ptr<std::barrier<>>> g_warp_bar;
static float g_warp_x[1024];
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(n)
#define __shared__ static
inline void __syncthreads() {
  g_block_bar->arrive_and_wait();
}
inline float __int_as_float(int v) {
  float f;
  memcpy(&f, &v, 4);
  return f;
}
inline float __int_as_float(unsigned v) {
  float f;
  memcpy(&f, &v, 4);
  return f;
}
inline int __float_as_int(float f) {
  int v;
  memcpy(&v, &f, 4);
  return v;
}
inline float __expf(float x) {
  return expf(x);
}
inline float __shfl_xor_sync(unsigned, float v, int o) {
  int t = threadIdx.x + threadIdx.y * blockDim.x;
  int w = t / 32, lane = t % 32;
  auto &b = *g_warp_bar[w];
  g_warp_x[t] = v;
  b.arrive_and_wait();
  float r = g_warp_x[w * 32 + (lane ^ o)];
  b.arrive_and_wait();
  return r;
}
template <class F>
void launch(dim3 grid, dim3 block, F f) {
  blockDim = block;
  gridDim = grid;
  int nt = block.x * block.y * block.z;
  for (unsigned by = 0; by < grid.y; by++)
    for (unsigned bx = 0; bx < grid.x; bx++) {
      std::barrier<> bar(nt);
      g_block_bar = &bar;
      g_warp_bar.clear();
      for (int w = 0; w < (nt + 31) / 32; w++) g_warp_bar.emplace_back(new std::barrier<>(32));
      std::vector<std::thread> ts;
      for (unsigned ty = 0; ty < block.y; ty++)
        for (unsigned tx = 0; tx < block.x; tx++)
          ts.emplace_back([=] {
            blockIdx = {bx, by, 0};
            threadIdx = {tx, ty, 0};
            f();
          });
      for (auto &t : ts) t.join();
    }
}
