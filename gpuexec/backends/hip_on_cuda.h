/* hip_on_cuda.h: kernelarena's HIP kernel language on CUDA, for NVRTC.
 *
 * What: the cuda backend (gpuexec/backends/backend_cuda.c) hands this text to NVRTC as the
 * in-memory header "hip/hip_runtime.h" when it compiles a hip-language task, with
 * -D__HIP_PLATFORM_NVIDIA__=1. It maps the HIP kernel-language subset that kernels use
 * onto CUDA, the way HIP itself works on NVIDIA (HIP's nvidia_detail headers).
 *
 * Why: the distribution's HIP 5.2 NVIDIA headers do not compile against CUDA 13
 * (cudaDeviceProp lost clockRate and computeMode; cudaMemPrefetchAsync changed its
 * signature), and they pull in the CUDA runtime's host headers, which NVRTC lacks.
 * This header is device code only: no host API, no CUDA runtime headers, no includes.
 * NVRTC itself provides threadIdx, blockIdx, blockDim, gridDim, warpSize, __syncthreads,
 * the atomics and the math library.
 *
 * Names follow the HIP programming guide, "HIP C++ language extensions"
 * (https://rocm.docs.amd.com/projects/HIP/en/latest/how-to/hip_cpp_language_extensions.html)
 * and its "Warp cross-lane functions" section.
 *
 * Supported subset:
 *   - hipThreadIdx_{x,y,z}, hipBlockIdx_*, hipBlockDim_*, hipGridDim_*
 *   - __global__ __device__ __shared__ __host__ __constant__ __forceinline__
 *     __restrict__ (CUDA's own), HIP_DYNAMIC_SHARED(type, var),
 *     HIP_DYNAMIC_SHARED_ATTRIBUTE, __launch_bounds__ (CUDA's: the second argument means
 *     minimum blocks per multiprocessor, not HIP's minimum waves per execution unit)
 *   - warpSize (32 on NVIDIA: a HIP wavefront is a CUDA warp of 32 lanes, never 64),
 *     __syncthreads, __syncwarp, __threadfence, __threadfence_block,
 *     __threadfence_system, clock64, atomics (CUDA names: atomicAdd, atomicCAS, ...),
 *     unsafeAtomicAdd / safeAtomicAdd (-> atomicAdd)
 *   - maskless warp functions, mapped to the _sync forms with the full mask 0xffffffff:
 *     __shfl, __shfl_up, __shfl_down, __shfl_xor (optional width, default warpSize),
 *     __ballot, __any, __all. As with CUDA's full mask, all 32 lanes of the warp must
 *     reach the call; HIP's "active lanes" semantics under divergence is not emulated.
 *     __ballot returns unsigned long long as in HIP (64-bit for wave64); on NVIDIA the
 *     upper 32 bits are always zero. __activemask is CUDA's (32-bit unsigned).
 *   - __lane_id() (lane in the warp, 0..31)
 *   - __HIPCC__, __HIP_DEVICE_COMPILE__, __HIP_PLATFORM_NVIDIA__ are defined;
 *     __HIP_PLATFORM_AMD__ and __HIP__ are not.
 *
 * Not supported: half and bfloat16 types (__half, half, hip_bfloat16, __hip_bfloat16).
 * NVRTC 13.0 does not bundle cuda_fp16.h / cuda_bf16.h as built-in headers (a test
 * compile of `#include <cuda_fp16.h>` fails with "could not open source file"); they
 * need the toolkit's include folder, which the GPU machine does not have. Also not
 * supported: any host API (hipMalloc, hipLaunchKernelGGL, ...), AMD builtins
 * (__builtin_amdgcn_*), wave64 assumptions. */
#ifndef KA_HIP_ON_CUDA_H
#define KA_HIP_ON_CUDA_H

#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
#ifndef __HIPCC__
#define __HIPCC__ 1
#endif
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define __HIP_DEVICE_COMPILE__ 1
#endif

/* ---- thread and block coordinates */
#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)

/* ---- dynamic shared memory: `HIP_DYNAMIC_SHARED(float, buf)` declares float buf[]
 * sized by the launch's dynamic shared bytes. */
#define HIP_DYNAMIC_SHARED_ATTRIBUTE
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];

/* ---- maskless warp shuffles (HIP) -> CUDA _sync forms with the full mask. Templates,
 * so every type CUDA's __shfl*_sync overloads accept works (int, unsigned, long,
 * long long and their unsigned forms, float, double). CUDA 13 declares no maskless
 * __shfl* for compute_70 and above, so these names are free. */
#define KA_HIP_FULL_MASK 0xffffffffu

template <typename T>
__device__ __forceinline__ T __shfl(T var, int src_lane, int width = warpSize) {
  return __shfl_sync(KA_HIP_FULL_MASK, var, src_lane, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_up(T var, unsigned int delta, int width = warpSize) {
  return __shfl_up_sync(KA_HIP_FULL_MASK, var, delta, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_down(T var, unsigned int delta, int width = warpSize) {
  return __shfl_down_sync(KA_HIP_FULL_MASK, var, delta, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_xor(T var, int lane_mask, int width = warpSize) {
  return __shfl_xor_sync(KA_HIP_FULL_MASK, var, lane_mask, width);
}

/* ---- votes. CUDA still declares extern "C" __ballot/__any/__all (not valid on
 * compute_70+), so the HIP names are macros onto project functions rather than
 * overloads. */
__device__ __forceinline__ unsigned long long ka_hip_ballot(int predicate) {
  return (unsigned long long)__ballot_sync(KA_HIP_FULL_MASK, predicate);
}
__device__ __forceinline__ int ka_hip_any(int predicate) {
  return __any_sync(KA_HIP_FULL_MASK, predicate);
}
__device__ __forceinline__ int ka_hip_all(int predicate) {
  return __all_sync(KA_HIP_FULL_MASK, predicate);
}
#define __ballot ka_hip_ballot
#define __any ka_hip_any
#define __all ka_hip_all

/* Lane index within the warp (0..31). */
__device__ __forceinline__ unsigned int __lane_id(void) {
  unsigned int lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

/* ---- HIP's named atomic variants: on NVIDIA both are plain atomicAdd. */
template <typename T>
__device__ __forceinline__ T unsafeAtomicAdd(T *address, T value) {
  return atomicAdd(address, value);
}
template <typename T>
__device__ __forceinline__ T safeAtomicAdd(T *address, T value) {
  return atomicAdd(address, value);
}

#endif /* KA_HIP_ON_CUDA_H */
