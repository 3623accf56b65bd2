/* The cuda backend module (ka_backend_cuda.so): NVRTC compile, CUDA driver API run,
 * NVML telemetry.
 *
 * Links no vendor library. cuda.h and nvrtc.h are used for types and for checking our
 * function-pointer types against the real prototypes (__typeof__); the functions come
 * from dlopen'd libraries, each loaded once (pthread_once) on first use:
 *   libcuda.so.1        driver API (never the toolkit's lib64/stubs/libcuda.so)
 *   libnvrtc            "libnvrtc.so.13", "libnvrtc.so", $CUDA_HOME/lib64/libnvrtc.so.13,
 *                       /usr/local/cuda/lib64/libnvrtc.so.13
 *   libnvidia-ml.so.1   optional, telemetry and the driver version only
 * Versioned symbols are resolved by the names cuda.h's macros map to (cuMemAlloc_v2,
 * cuMemcpyHtoD_v2, ...), legacy default stream (no _ptds / _ptsz variants).
 *
 * Error mapping (cuda_code): CUDA_ERROR_OUT_OF_MEMORY -> KA_EOOM; sticky device faults
 * of a kernel (ILLEGAL_ADDRESS, LAUNCH_FAILED, ILLEGAL_INSTRUCTION, MISALIGNED_ADDRESS,
 * HARDWARE_STACK_ERROR, ASSERT, LAUNCH_TIMEOUT, ...) -> KA_EDEVICE; launch-configuration
 * errors (INVALID_VALUE, INVALID_HANDLE, LAUNCH_OUT_OF_RESOURCES, ...) -> KA_ELAUNCH in
 * launch, KA_EINVAL elsewhere; driver or device absent -> KA_EUNAVAIL. Every error
 * text names the operation and the CUresult's name and string, and goes into the
 * context's last_error.
 *
 * Threading: the loaders are thread safe; a context is used by one thread at a time,
 * and every op makes the calling thread's current context the context's own
 * (cuCtxSetCurrent), so a context may move between threads between calls. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <nvrtc.h>

#include "backend.h"
#include "hip_on_cuda_embed.h"
#include "ka_common.h"
#include "triton_bundle.h"
#include "trusted_kernels.h"

_Static_assert(KA_FILL_FAST_NORMAL == KA_TRUSTED_FAST_NORMAL, "fast normal codes differ");
_Static_assert(KA_FILL_POISON == KA_TRUSTED_POISON && KA_GEN_POISON == KA_TRUSTED_POISON,
               "backend.h, data.h and trusted_kernels.h agree on the poison code");

#define CUDA_ERRLEN 1024
#define CUDA_CMP_AREA 64 /* bytes of the trusted kernels' result area (cmp_flag) */
#define CUDA_MAX_ARGS 64
#define CUDA_DEFAULT_SMEM (48u * 1024u) /* dynamic shared bytes allowed without opt-in */
#define CUDA_FLUSH_FALLBACK ((size_t)64 << 20)

/* ---- driver API table. X(field, exported symbol, required) */
#define CUDA_DRIVER_FNS(X)                                     \
  X(Init, cuInit, 1)                                           \
  X(DriverGetVersion, cuDriverGetVersion, 1)                   \
  X(GetErrorName, cuGetErrorName, 1)                           \
  X(GetErrorString, cuGetErrorString, 1)                       \
  X(DeviceGetCount, cuDeviceGetCount, 1)                       \
  X(DeviceGet, cuDeviceGet, 1)                                 \
  X(DeviceGetName, cuDeviceGetName, 1)                         \
  X(DeviceGetAttribute, cuDeviceGetAttribute, 1)               \
  X(DeviceTotalMem, cuDeviceTotalMem_v2, 1)                    \
  X(DeviceGetPCIBusId, cuDeviceGetPCIBusId, 1)                 \
  X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 1)       \
  X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 1)  \
  X(CtxSetCurrent, cuCtxSetCurrent, 1)                         \
  X(CtxSynchronize, cuCtxSynchronize, 1)                       \
  X(CtxResetPersistingL2Cache, cuCtxResetPersistingL2Cache, 0) \
  X(CtxSetLimit, cuCtxSetLimit, 0)                             \
  X(StreamCreate, cuStreamCreate, 1)                           \
  X(StreamDestroy, cuStreamDestroy_v2, 1)                      \
  X(StreamSynchronize, cuStreamSynchronize, 1)                 \
  X(EventCreate, cuEventCreate, 1)                             \
  X(EventDestroy, cuEventDestroy_v2, 1)                        \
  X(EventRecord, cuEventRecord, 1)                             \
  X(EventSynchronize, cuEventSynchronize, 1)                   \
  X(EventElapsedTime, cuEventElapsedTime_v2, 0)                \
  X(MemAlloc, cuMemAlloc_v2, 1)                                \
  X(MemAllocHost, cuMemAllocHost_v2, 0)                        \
  X(MemFreeHost, cuMemFreeHost, 0)                             \
  X(MemHostAlloc, cuMemHostAlloc, 0)                           \
  X(MemHostGetDevicePointer, cuMemHostGetDevicePointer_v2, 0)  \
  X(StreamWaitValue32, cuStreamWaitValue32_v2, 0)              \
  X(MemFree, cuMemFree_v2, 1)                                  \
  X(MemcpyHtoD, cuMemcpyHtoD_v2, 1)                            \
  X(MemcpyDtoH, cuMemcpyDtoH_v2, 1)                            \
  X(MemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, 1)                  \
  X(MemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, 1)                  \
  X(MemsetD32Async, cuMemsetD32Async, 1)                       \
  X(MemsetD8, cuMemsetD8_v2, 1)                                \
  X(MemsetD8Async, cuMemsetD8Async, 1)                         \
  X(ModuleLoadData, cuModuleLoadData, 1)                       \
  X(ModuleUnload, cuModuleUnload, 1)                           \
  X(ModuleGetFunction, cuModuleGetFunction, 1)                 \
  X(FuncSetAttribute, cuFuncSetAttribute, 1)                   \
  X(LaunchKernel, cuLaunchKernel, 1)

#define CUDA_NVRTC_FNS(X)                         \
  X(Version, nvrtcVersion, 1)                     \
  X(GetErrorString, nvrtcGetErrorString, 1)       \
  X(CreateProgram, nvrtcCreateProgram, 1)         \
  X(DestroyProgram, nvrtcDestroyProgram, 1)       \
  X(CompileProgram, nvrtcCompileProgram, 1)       \
  X(GetProgramLogSize, nvrtcGetProgramLogSize, 1) \
  X(GetProgramLog, nvrtcGetProgramLog, 1)         \
  X(GetCUBINSize, nvrtcGetCUBINSize, 1)           \
  X(GetCUBIN, nvrtcGetCUBIN, 1)

#define CUDA_FIELD(field, sym, req) __typeof__(sym) *field;
static struct {
  int ok;        /* library loaded, symbols resolved, cuInit succeeded */
  char why[512]; /* reason when !ok */
  struct {
    CUDA_DRIVER_FNS(CUDA_FIELD)
  } f;
} cuda_drv;
static struct {
  int ok, major, minor;
  char why[1024];
  struct {
    CUDA_NVRTC_FNS(CUDA_FIELD)
  } f;
} cuda_rtc;
#undef CUDA_FIELD

/* ---- NVML: no nvml.h in the toolkit, so the few declarations we use are written out
 * from the NVML API reference (https://docs.nvidia.com/deploy/nvml-api/):
 * nvmlReturn_t (NVML_SUCCESS = 0), nvmlDevice_t (opaque handle), nvmlClockType_t
 * (NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2), nvmlTemperatureSensors_t
 * (NVML_TEMPERATURE_GPU = 0); nvmlDeviceGetPowerUsage reports milliwatts. */
typedef int cuda_nvmlReturn_t;
typedef struct cuda_nvmlDevice_st *cuda_nvmlDevice_t;
enum {
  CUDA_NVML_SUCCESS = 0,
  CUDA_NVML_CLOCK_SM = 1,
  CUDA_NVML_CLOCK_MEM = 2,
  CUDA_NVML_TEMPERATURE_GPU = 0
};
#define CUDA_NVML_FNS(X)                                                                  \
  X(Init_v2, cuda_nvmlReturn_t, (void))                                                   \
  X(ErrorString, const char *, (cuda_nvmlReturn_t))                                       \
  X(SystemGetDriverVersion, cuda_nvmlReturn_t, (char *, unsigned))                        \
  X(DeviceGetHandleByPciBusId_v2, cuda_nvmlReturn_t, (const char *, cuda_nvmlDevice_t *)) \
  X(DeviceGetName, cuda_nvmlReturn_t, (cuda_nvmlDevice_t, char *, unsigned))              \
  X(DeviceGetClockInfo, cuda_nvmlReturn_t, (cuda_nvmlDevice_t, int, unsigned *))          \
  X(DeviceGetTemperature, cuda_nvmlReturn_t, (cuda_nvmlDevice_t, int, unsigned *))        \
  X(DeviceGetPowerUsage, cuda_nvmlReturn_t, (cuda_nvmlDevice_t, unsigned *))
#define CUDA_NVML_FIELD(name, ret, args) ret(*name) args;
static struct {
  int ok;
  char why[512];
  char driver[80]; /* nvmlSystemGetDriverVersion, "" if unknown */
  CUDA_NVML_FNS(CUDA_NVML_FIELD)
} cuda_nvml;
#undef CUDA_NVML_FIELD

static pthread_once_t cuda_drv_once = PTHREAD_ONCE_INIT;
static pthread_once_t cuda_rtc_once = PTHREAD_ONCE_INIT;
static pthread_once_t cuda_nvml_once = PTHREAD_ONCE_INIT;

struct ka_backend_ctx {
  int index;
  CUdevice dev;
  CUcontext cu; /* the device's primary context, retained */
  CUstream stream;
  CUevent ev_start, ev_stop;
  CUdeviceptr flush;
  size_t flush_bytes;
  unsigned flush_seq;
  int timer_running;
  /* The timer's gate (cuda_timer_start): a word of page-locked host memory the stream
   * waits on before the start event, so that every launch of a timed call is queued
   * before the device reaches the start event. NULL when the driver lacks stream memory
   * operations or the allocation failed; the timer then runs ungated. */
  volatile uint32_t *gate_host;
  CUdeviceptr gate_dev;
  uint32_t gate_seq;
  int gate_armed; /* the stream waits for gate_seq: released by cuda_gate_release */
  int gate_off;   /* the driver refused a wait: ungated from then on */
  char arch[32];
  char pci_bus_id[32];
  int nvml_state; /* 0 not tried, 1 handle valid, -1 unavailable */
  cuda_nvmlDevice_t nvml_dev;
  /* trusted compare kernels (trusted_kernels.h), built at the first compare_device */
  int cmp_state;         /* 0 not built, 1 ready, -1 failed (cmp_why) */
  int cmp_rc;            /* the failure's ka_err */
  struct ka_module *cmp; /* loaded module */
  void *cmp_host;        /* CUDA_CMP_AREA bytes of page-locked host memory the result area
                            is read back through, or NULL (pageable then). Device kernels
                            could reach it, but each read-back overwrites what it reads,
                            no submitted code runs before it is read, and it is cleared
                            after (as the device's area is) */
  CUdeviceptr cmp_flag;  /* CUDA_CMP_AREA bytes: [0,4) 1 if a compare or fill check saw a
                            difference, [8,16) the checksum of checksum_device, [16,24)
                            close_device's largest magnitude, [24,40) its count and first
                            index */
  unsigned cmp_grid_max; /* blocks per compare launch: 8 per multiprocessor */
  char cmp_why[CUDA_ERRLEN];
  char err[CUDA_ERRLEN];
};

typedef struct cuda_fn {
  char *name;
  CUfunction fn;
  unsigned dyn_smem; /* MAX_DYNAMIC_SHARED_SIZE_BYTES set so far */
  int launched;      /* launched at least once in this context (cuda_launch's gate rule) */
} cuda_fn;

struct ka_module {
  CUmodule mod;
  CUmodule *units; /* language triton: one module per compiled unit (triton_bundle.h) */
  int nunits;
  int nfns;
  cuda_fn fns[];
};

/* ---- loaders */

/* The CUresult's name and text from the driver (cuGetErrorName / cuGetErrorString),
 * with fallbacks when the driver cannot say (the toolkit stub answers nothing). */
static void cuda_names(CUresult rc, const char **name, const char **str) {
  *name = *str = NULL;
  if (cuda_drv.f.GetErrorName && cuda_drv.f.GetErrorName(rc, name) != CUDA_SUCCESS) *name = NULL;
  if (cuda_drv.f.GetErrorString && cuda_drv.f.GetErrorString(rc, str) != CUDA_SUCCESS) *str = NULL;
  if (!*name && rc == CUDA_ERROR_STUB_LIBRARY) {
    *name = "CUDA_ERROR_STUB_LIBRARY";
    *str = "libcuda.so.1 is the toolkit's link stub, not the NVIDIA driver";
  }
  if (!*name) *name = "CUDA_ERROR_?";
  if (!*str) *str = "unrecognized error code";
}

static void cuda_drv_load(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(cuda_drv.why, sizeof cuda_drv.why, "NVIDIA driver not found (libcuda.so.1): %s",
             dlerror());
    return;
  }
  /* The toolkit's stub (lib64/stubs) only links; it fails every call. Refuse it by
   * path should LD_LIBRARY_PATH ever point there. */
  struct link_map *lm = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name) {
    char *real = realpath(lm->l_name, NULL);
    int stub = strstr(lm->l_name, "/stubs/") || (real && strstr(real, "/stubs/"));
    if (stub)
      snprintf(cuda_drv.why, sizeof cuda_drv.why,
               "NVIDIA driver not found: libcuda.so.1 resolved to the toolkit stub %s",
               real ? real : lm->l_name);
    free(real);
    if (stub) {
      dlclose(h);
      return;
    }
  }
#define CUDA_RESOLVE(field, sym, req)                                      \
  cuda_drv.f.field = (__typeof__(sym) *)dlsym(h, #sym);                    \
  if (!cuda_drv.f.field && req) {                                          \
    snprintf(cuda_drv.why, sizeof cuda_drv.why,                            \
             "libcuda.so.1 lacks %s: the NVIDIA driver is too old", #sym); \
    dlclose(h);                                                            \
    memset(&cuda_drv.f, 0, sizeof cuda_drv.f);                             \
    return;                                                                \
  }
  CUDA_DRIVER_FNS(CUDA_RESOLVE)
#undef CUDA_RESOLVE
  if (!cuda_drv.f.EventElapsedTime) /* drivers before CUDA 12.8: same signature */
    cuda_drv.f.EventElapsedTime =
        (__typeof__(cuEventElapsedTime_v2) *)dlsym(h, "cuEventElapsedTime");
  if (!cuda_drv.f.EventElapsedTime) {
    snprintf(cuda_drv.why, sizeof cuda_drv.why, "libcuda.so.1 lacks cuEventElapsedTime");
    dlclose(h);
    memset(&cuda_drv.f, 0, sizeof cuda_drv.f);
    return;
  }
  CUresult rc = cuda_drv.f.Init(0);
  if (rc != CUDA_SUCCESS) {
    const char *name = NULL, *str = NULL;
    cuda_names(rc, &name, &str);
    snprintf(cuda_drv.why, sizeof cuda_drv.why, "cuInit failed: %s (%d): %s", name, (int)rc, str);
    return; /* the library stays loaded; every op reports why */
  }
  cuda_drv.ok = 1;
}

static void cuda_rtc_load(void) {
  char paths[4][512];
  int n = 0;
  snprintf(paths[n++], sizeof paths[0], "libnvrtc.so.13");
  snprintf(paths[n++], sizeof paths[0], "libnvrtc.so");
  const char *home = getenv("CUDA_HOME");
  if (home && *home) snprintf(paths[n++], sizeof paths[0], "%s/lib64/libnvrtc.so.13", home);
  snprintf(paths[n++], sizeof paths[0], "/usr/local/cuda/lib64/libnvrtc.so.13");
  ka_sb why = {0};
  void *h = NULL;
  for (int i = 0; i < n && !h; i++) {
    h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) ka_sb_printf(&why, "%s%s", why.len ? "; " : "", dlerror());
  }
  if (!h) {
    snprintf(cuda_rtc.why, sizeof cuda_rtc.why, "NVRTC not found (libnvrtc.so.13): %s",
             why.s ? why.s : "");
    ka_sb_free(&why);
    return;
  }
  ka_sb_free(&why);
#define CUDA_RESOLVE(field, sym, req)                                            \
  cuda_rtc.f.field = (__typeof__(sym) *)dlsym(h, #sym);                          \
  if (!cuda_rtc.f.field && req) {                                                \
    snprintf(cuda_rtc.why, sizeof cuda_rtc.why, "NVRTC library lacks %s", #sym); \
    dlclose(h);                                                                  \
    memset(&cuda_rtc.f, 0, sizeof cuda_rtc.f);                                   \
    return;                                                                      \
  }
  CUDA_NVRTC_FNS(CUDA_RESOLVE)
#undef CUDA_RESOLVE
  if (cuda_rtc.f.Version(&cuda_rtc.major, &cuda_rtc.minor) != NVRTC_SUCCESS)
    cuda_rtc.major = cuda_rtc.minor = 0;
  cuda_rtc.ok = 1;
}

static void cuda_nvml_load(void) {
  void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(cuda_nvml.why, sizeof cuda_nvml.why, "NVML not found (libnvidia-ml.so.1): %s",
             dlerror());
    return;
  }
#define CUDA_RESOLVE(name, ret, args)                                                       \
  cuda_nvml.name = (ret(*) args)dlsym(h, "nvml" #name);                                     \
  if (!cuda_nvml.name) {                                                                    \
    snprintf(cuda_nvml.why, sizeof cuda_nvml.why, "libnvidia-ml.so.1 lacks nvml%s", #name); \
    dlclose(h);                                                                             \
    return;                                                                                 \
  }
  CUDA_NVML_FNS(CUDA_RESOLVE)
#undef CUDA_RESOLVE
  cuda_nvmlReturn_t rc = cuda_nvml.Init_v2();
  if (rc != CUDA_NVML_SUCCESS) {
    snprintf(cuda_nvml.why, sizeof cuda_nvml.why, "nvmlInit_v2 failed: %s (%d)",
             cuda_nvml.ErrorString(rc), rc);
    return; /* NVML is never shut down: it lives as long as the process */
  }
  if (cuda_nvml.SystemGetDriverVersion(cuda_nvml.driver, sizeof cuda_nvml.driver) !=
      CUDA_NVML_SUCCESS)
    cuda_nvml.driver[0] = '\0';
  cuda_nvml.ok = 1;
}

/* Loads the driver once; returns KA_OK or KA_EUNAVAIL with the reason in err. */
static int cuda_driver(char *err, size_t errlen) {
  pthread_once(&cuda_drv_once, cuda_drv_load);
  if (!cuda_drv.ok) return ka_seterr(err, errlen, KA_EUNAVAIL, "%s", cuda_drv.why);
  return KA_OK;
}

/* ---- errors */

/* The ka_err for a CUresult; cfg is the code for configuration errors (bad launch
 * parameters or handles): KA_ELAUNCH in launch, KA_EINVAL elsewhere. */
static int cuda_code(CUresult rc, int cfg) {
  switch (rc) {
    case CUDA_SUCCESS:
      return KA_OK;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return KA_EOOM;
    /* sticky: the context is unusable after these (a faulting kernel) */
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_UNKNOWN:
      return KA_EDEVICE;
    /* launch configuration and handles */
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_NOT_FOUND:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING:
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
    case CUDA_ERROR_INVALID_CLUSTER_SIZE:
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_FUNCTION_NOT_LOADED:
      return cfg;
    /* driver or device absent or unusable */
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_DEVICE_NOT_LICENSED:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
      return KA_EUNAVAIL;
    default:
      return KA_EDEVICE;
  }
}

/* Formats "<op>: <CUDA_ERROR_NAME> (<n>): <string>" into ctx->err (if ctx) and err (if
 * non-NULL) and returns cuda_code(rc, cfg). */
static int cuda_fail(ka_backend_ctx *ctx, char *err, size_t errlen, CUresult rc, int cfg,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int cuda_fail(ka_backend_ctx *ctx, char *err, size_t errlen, CUresult rc, int cfg,
                     const char *fmt, ...) {
  char op[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(op, sizeof op, fmt, ap);
  va_end(ap);
  const char *name, *str;
  cuda_names(rc, &name, &str);
  int code = cuda_code(rc, cfg);
  char msg[CUDA_ERRLEN];
  snprintf(msg, sizeof msg, "%s: %s (%d): %s", op, name, (int)rc, str);
  if (ctx) snprintf(ctx->err, sizeof ctx->err, "%s", msg);
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return code;
}

/* Records a non-CUDA error in ctx->err and returns code. */
static int cuda_seterr(ka_backend_ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int cuda_seterr(ka_backend_ctx *ctx, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
  va_end(ap);
  return code;
}

/* Makes ctx current on the calling thread, leaving an armed timer gate closed (for the
 * ops that queue behind it: launch, timer_stop). KA_OK or KA_EINVAL. */
static int cuda_enter_queued(ka_backend_ctx *ctx, const char *op) {
  if (!ctx) return KA_EINVAL;
  CUresult rc = cuda_drv.f.CtxSetCurrent(ctx->cu);
  if (rc != CUDA_SUCCESS) return cuda_fail(ctx, NULL, 0, rc, KA_EINVAL, "%s: cuCtxSetCurrent", op);
  return KA_OK;
}

/* Opens the timer's gate if it is armed: the stream's wait (cuda_timer_start) ends and
 * the device runs what was queued behind it. The store is ordered after every earlier
 * write of this thread (release), and the device reads the word over the bus. */
static void cuda_gate_release(ka_backend_ctx *ctx) {
  if (!ctx->gate_armed) return;
  __atomic_store_n(ctx->gate_host, ctx->gate_seq, __ATOMIC_RELEASE);
  ctx->gate_armed = 0;
}

/* Makes ctx's context current for op and opens the timer's gate if it is armed: every
 * op but launch and timer_stop may wait for the stream, which must not wait on the gate
 * then (a launch failed between timer_start and timer_stop, say). KA_OK or KA_EINVAL. */
static int cuda_enter(ka_backend_ctx *ctx, const char *op) {
  if (ctx) cuda_gate_release(ctx);
  return cuda_enter_queued(ctx, op);
}

/* ---- ops */

/* Number of CUDA devices into *count. With no driver (libcuda.so.1 missing, stub,
 * too old) or when cuInit fails (e.g. CUDA_ERROR_NO_DEVICE), *count is 0, the reason
 * goes into err and KA_OK is returned: absence is a fact, not a fault. Thread safe. */
static int cuda_device_count(int *count, char *err, size_t errlen) {
  *count = 0;
  if (cuda_driver(err, errlen) != KA_OK) return KA_OK;
  int n = 0;
  CUresult rc = cuda_drv.f.DeviceGetCount(&n);
  if (rc != CUDA_SUCCESS) {
    cuda_fail(NULL, err, errlen, rc, KA_EINVAL, "cuDeviceGetCount");
    return KA_OK;
  }
  *count = n;
  if (n == 0) ka_seterr(err, errlen, KA_OK, "the NVIDIA driver reports no CUDA device");
  return KA_OK;
}

static void cuda_close(ka_backend_ctx *ctx);
static void cuda_module_free(ka_backend_ctx *ctx, ka_module *m);

/* Allocates the timer's gate (ctx->gate_host, one word of page-locked host memory the
 * device can read) when the driver has stream memory operations (cuStreamWaitValue32,
 * every device of CUDA 12 and later) and a wait on the word works (one already satisfied
 * is queued and the stream synchronized); otherwise the timer stays ungated. Call with
 * ctx's context current and its stream idle. */
static void cuda_gate_open(ka_backend_ctx *ctx) {
  if (!cuda_drv.f.StreamWaitValue32 || !cuda_drv.f.MemHostAlloc ||
      !cuda_drv.f.MemHostGetDevicePointer || !cuda_drv.f.MemFreeHost)
    return;
  void *p = NULL;
  if (cuda_drv.f.MemHostAlloc(&p, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) !=
      CUDA_SUCCESS)
    return;
  CUdeviceptr d = 0;
  if (cuda_drv.f.MemHostGetDevicePointer(&d, p, 0) != CUDA_SUCCESS) {
    cuda_drv.f.MemFreeHost(p);
    return;
  }
  *(volatile uint32_t *)p = 0;
  if (cuda_drv.f.StreamWaitValue32(ctx->stream, d, 0, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS ||
      cuda_drv.f.StreamSynchronize(ctx->stream) != CUDA_SUCCESS) {
    cuda_drv.f.MemFreeHost(p);
    return;
  }
  ctx->gate_host = p;
  ctx->gate_dev = d;
  ctx->gate_seq = 0;
}

/* Opens device index: retains its primary context, makes it current, creates one
 * stream (blocking with respect to the legacy default stream, so synchronous copies
 * order after queued kernels), two timing events and a flush buffer of twice the L2
 * size. On success the caller owns *ctx (cuda_close). On failure everything made so far
 * is released, *ctx is NULL and err says why: KA_EUNAVAIL (no driver / device),
 * KA_EINVAL (bad index), KA_EOOM, KA_ENOMEM. Thread safe (each call its own context). */
static int cuda_open(int index, ka_backend_ctx **out, char *err, size_t errlen) {
  *out = NULL;
  int rc = cuda_driver(err, errlen);
  if (rc != KA_OK) return rc;
  int n = 0;
  CUresult cr = cuda_drv.f.DeviceGetCount(&n);
  if (cr != CUDA_SUCCESS) return cuda_fail(NULL, err, errlen, cr, KA_EINVAL, "cuDeviceGetCount");
  if (index < 0 || index >= n)
    return ka_seterr(err, errlen, KA_EINVAL, "cuda device %d does not exist (%d devices)", index,
                     n);
  /* NVRTC is loaded now, not at the first compile: a runner opened ahead of its job
   * (gpuexec's pool) has it ready; a missing NVRTC is still reported by compile */
  pthread_once(&cuda_rtc_once, cuda_rtc_load);
  ka_backend_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return ka_seterr(err, errlen, KA_ENOMEM, "out of host memory");
  ctx->index = index;
  if ((cr = cuda_drv.f.DeviceGet(&ctx->dev, index)) != CUDA_SUCCESS) {
    rc = cuda_fail(NULL, err, errlen, cr, KA_EINVAL, "cuDeviceGet(%d)", index);
    free(ctx);
    return rc;
  }
  if ((cr = cuda_drv.f.DevicePrimaryCtxRetain(&ctx->cu, ctx->dev)) != CUDA_SUCCESS) {
    rc = cuda_fail(NULL, err, errlen, cr, KA_EINVAL, "cuDevicePrimaryCtxRetain(%d)", index);
    free(ctx);
    return rc;
  }
  /* From here cuda_close unwinds whatever is non-zero. */
  const char *op = "cuCtxSetCurrent";
  if ((cr = cuda_drv.f.CtxSetCurrent(ctx->cu)) != CUDA_SUCCESS) goto fail;
  op = "cuStreamCreate";
  if ((cr = cuda_drv.f.StreamCreate(&ctx->stream, CU_STREAM_DEFAULT)) != CUDA_SUCCESS) goto fail;
  op = "cuEventCreate";
  if ((cr = cuda_drv.f.EventCreate(&ctx->ev_start, CU_EVENT_DEFAULT)) != CUDA_SUCCESS) goto fail;
  if ((cr = cuda_drv.f.EventCreate(&ctx->ev_stop, CU_EVENT_DEFAULT)) != CUDA_SUCCESS) goto fail;
  int major = 0, minor = 0, l2 = 0;
  op = "cuDeviceGetAttribute(COMPUTE_CAPABILITY)";
  if ((cr = cuda_drv.f.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                          ctx->dev)) != CUDA_SUCCESS)
    goto fail;
  if ((cr = cuda_drv.f.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                          ctx->dev)) != CUDA_SUCCESS)
    goto fail;
  snprintf(ctx->arch, sizeof ctx->arch, "sm_%d%d", major, minor);
  if (cuda_drv.f.DeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, ctx->dev) !=
          CUDA_SUCCESS ||
      l2 <= 0)
    l2 = 0;
  ctx->flush_bytes = l2 > 0 ? 2 * (size_t)l2 : CUDA_FLUSH_FALLBACK;
  /* No L2 set-aside for persisting accesses: no access-policy window can keep lines
   * resident across the flush (docs/integrity.md). Unsupported before sm_80. */
  if (cuda_drv.f.CtxSetLimit) cuda_drv.f.CtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0);
  op = "cuMemAlloc(flush buffer)";
  if ((cr = cuda_drv.f.MemAlloc(&ctx->flush, ctx->flush_bytes)) != CUDA_SUCCESS) goto fail;
  cuda_gate_open(ctx);
  if (cuda_drv.f.DeviceGetPCIBusId(ctx->pci_bus_id, (int)sizeof ctx->pci_bus_id, ctx->dev) !=
      CUDA_SUCCESS)
    ctx->pci_bus_id[0] = '\0';
  *out = ctx;
  return KA_OK;
fail:
  rc = cuda_fail(NULL, err, errlen, cr, KA_EINVAL, "open cuda device %d: %s", index, op);
  cuda_close(ctx);
  return rc;
}

/* Releases everything open made (events, stream, flush buffer, the primary-context
 * reference); modules and allocations of the caller should be freed first. NULL is a
 * no-op. Errors are ignored (after a sticky fault every call fails). */
static void cuda_close(ka_backend_ctx *ctx) {
  if (!ctx) return;
  if (ctx->cu) {
    cuda_drv.f.CtxSetCurrent(ctx->cu);
    cuda_gate_release(ctx);
    if (ctx->stream) cuda_drv.f.StreamSynchronize(ctx->stream); /* nothing reads the gate */
    if (ctx->cmp) cuda_module_free(ctx, ctx->cmp);
    if (ctx->cmp_flag) cuda_drv.f.MemFree(ctx->cmp_flag);
    if (ctx->cmp_host && cuda_drv.f.MemFreeHost) cuda_drv.f.MemFreeHost(ctx->cmp_host);
    if (ctx->flush) cuda_drv.f.MemFree(ctx->flush);
    if (ctx->ev_stop) cuda_drv.f.EventDestroy(ctx->ev_stop);
    if (ctx->ev_start) cuda_drv.f.EventDestroy(ctx->ev_start);
    if (ctx->stream) cuda_drv.f.StreamDestroy(ctx->stream);
    if (ctx->gate_host) cuda_drv.f.MemFreeHost((void *)ctx->gate_host);
    cuda_drv.f.CtxSetCurrent(NULL);
    cuda_drv.f.DevicePrimaryCtxRelease(ctx->dev);
  }
  free(ctx);
}

/* The text of the context's last error ("" if none). Valid until the next op on ctx. */
static const char *cuda_last_error(ka_backend_ctx *ctx) {
  return ctx ? ctx->err : "";
}

/* Fills *out with the device's properties (see ka_device_info). Bandwidth is the
 * theoretical DRAM bandwidth in GB/s, 2 (double data rate) x memory clock x bus width,
 * from CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE (kHz) and GLOBAL_MEMORY_BUS_WIDTH (bits),
 * which CUDA 13's cuda.h still has (the runtime's cudaDeviceProp lost them); 0 when the
 * driver does not report them. Returns KA_OK, or the mapped CUresult. */
static int cuda_device_info(ka_backend_ctx *ctx, ka_device_info *out) {
  memset(out, 0, sizeof *out);
  int rc = cuda_enter(ctx, "device_info");
  if (rc != KA_OK) return rc;
  snprintf(out->backend, sizeof out->backend, "cuda");
  out->index = ctx->index;
  snprintf(out->arch, sizeof out->arch, "%s", ctx->arch);
  CUresult cr = cuda_drv.f.DeviceGetName(out->name, (int)sizeof out->name, ctx->dev);
  if (cr != CUDA_SUCCESS) return cuda_fail(ctx, NULL, 0, cr, KA_EINVAL, "cuDeviceGetName");
  size_t mem = 0;
  cr = cuda_drv.f.DeviceTotalMem(&mem, ctx->dev);
  if (cr != CUDA_SUCCESS) return cuda_fail(ctx, NULL, 0, cr, KA_EINVAL, "cuDeviceTotalMem");
  out->memory_bytes = (int64_t)mem;
  struct {
    CUdevice_attribute attr;
    int v;
  } a[] = {
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 0},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0},
      {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0},              /* kHz */
      {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 0},       /* kHz */
      {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 0}, /* bits */
  };
  for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
    cr = cuda_drv.f.DeviceGetAttribute(&a[i].v, a[i].attr, ctx->dev);
    if (cr != CUDA_SUCCESS) {
      if (i < 5)
        return cuda_fail(ctx, NULL, 0, cr, KA_EINVAL, "cuDeviceGetAttribute(%d)", (int)a[i].attr);
      a[i].v = 0; /* clocks: optional */
    }
  }
  out->multiprocessors = a[0].v;
  out->warp_size = a[1].v;
  out->l2_bytes = a[2].v;
  out->shared_bytes_per_block = a[3].v;
  out->max_threads_per_block = a[4].v;
  out->clock_mhz = a[5].v / 1000;
  if (a[6].v > 0 && a[7].v > 0)
    out->mem_bandwidth_gbps = 2.0 * (double)a[6].v * 1e3 * ((double)a[7].v / 8.0) / 1e9;
  int ver = 0;
  if (cuda_drv.f.DriverGetVersion(&ver) != CUDA_SUCCESS) ver = 0;
  pthread_once(&cuda_nvml_once, cuda_nvml_load);
  if (cuda_nvml.ok && cuda_nvml.driver[0])
    snprintf(out->driver, sizeof out->driver, "NVIDIA %.40s, CUDA %d.%d", cuda_nvml.driver,
             ver / 1000, (ver % 1000) / 10);
  else
    snprintf(out->driver, sizeof out->driver, "CUDA %d.%d", ver / 1000, (ver % 1000) / 10);
  snprintf(out->timer, sizeof out->timer, "%s",
           ctx->gate_host && !ctx->gate_off ? "device events, gated" : "device events");
  return KA_OK;
}

/* Telemetry from NVML: device name, SM and memory clocks (MHz), temperature (C), power
 * (W). KA_OK except for a NULL ctx (KA_EINVAL): with no NVML or no handle out->valid is 0; a field
 * NVML cannot read stays 0. Never fails an evaluation. */
static int cuda_telemetry(ka_backend_ctx *ctx, ka_telemetry *out) {
  memset(out, 0, sizeof *out);
  if (!ctx) return KA_EINVAL;
  pthread_once(&cuda_nvml_once, cuda_nvml_load);
  if (!cuda_nvml.ok) return KA_OK;
  if (ctx->nvml_state == 0) {
    ctx->nvml_state = -1;
    if (ctx->pci_bus_id[0] && cuda_nvml.DeviceGetHandleByPciBusId_v2(
                                  ctx->pci_bus_id, &ctx->nvml_dev) == CUDA_NVML_SUCCESS)
      ctx->nvml_state = 1;
  }
  if (ctx->nvml_state != 1) return KA_OK;
  unsigned v = 0;
  if (cuda_nvml.DeviceGetName(ctx->nvml_dev, out->device_name, sizeof out->device_name) !=
      CUDA_NVML_SUCCESS)
    out->device_name[0] = '\0';
  if (cuda_nvml.DeviceGetClockInfo(ctx->nvml_dev, CUDA_NVML_CLOCK_SM, &v) == CUDA_NVML_SUCCESS)
    out->sm_clock_mhz = (int)v;
  if (cuda_nvml.DeviceGetClockInfo(ctx->nvml_dev, CUDA_NVML_CLOCK_MEM, &v) == CUDA_NVML_SUCCESS)
    out->mem_clock_mhz = (int)v;
  if (cuda_nvml.DeviceGetTemperature(ctx->nvml_dev, CUDA_NVML_TEMPERATURE_GPU, &v) ==
      CUDA_NVML_SUCCESS)
    out->temperature_c = (int)v;
  if (cuda_nvml.DeviceGetPowerUsage(ctx->nvml_dev, &v) == CUDA_NVML_SUCCESS)
    out->power_w = v / 1000.0; /* mW -> W */
  out->valid = 1;
  return KA_OK;
}

/* ---- compile */

/* 1 if arch is "sm_" + 2-3 digits + an optional letter suffix (sm_90, sm_90a, sm_100f). */
static int cuda_arch_ok(const char *arch) {
  if (!arch || strncmp(arch, "sm_", 3)) return 0;
  const char *p = arch + 3;
  int digits = 0;
  while (*p >= '0' && *p <= '9') p++, digits++;
  if (digits < 2 || digits > 3) return 0;
  if (*p >= 'a' && *p <= 'z') p++;
  return *p == '\0';
}

/* Looks for kernel `name` in a CUBIN's ELF symbol table: a global function symbol with
 * the CUDA entry flag (st_other 0x10). Returns 1 found, 0 not found, -1 unreadable
 * image. If not found and a C++-mangled kernel embeds the name, copies that symbol to
 * mangled (for the log). */
static int cuda_cubin_has_kernel(const unsigned char *img, size_t size, const char *name,
                                 char *mangled, size_t mlen) {
  mangled[0] = '\0';
  if (size < sizeof(Elf64_Ehdr) || memcmp(img, ELFMAG, SELFMAG) || img[EI_CLASS] != ELFCLASS64)
    return -1;
  Elf64_Ehdr eh;
  memcpy(&eh, img, sizeof eh);
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > size ||
      (size - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum)
    return -1;
  char needle[300];
  snprintf(needle, sizeof needle, "%zu%s", strlen(name), name); /* Itanium <len><name> */
  for (unsigned s = 0; s < eh.e_shnum; s++) {
    Elf64_Shdr sh, strh;
    memcpy(&sh, img + eh.e_shoff + s * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_SYMTAB || sh.sh_link >= eh.e_shnum) continue;
    memcpy(&strh, img + eh.e_shoff + sh.sh_link * sizeof strh, sizeof strh);
    if (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset || strh.sh_offset > size ||
        strh.sh_size > size - strh.sh_offset || sh.sh_entsize != sizeof(Elf64_Sym))
      return -1;
    const char *strtab = (const char *)img + strh.sh_offset;
    for (size_t i = 0; i < sh.sh_size / sizeof(Elf64_Sym); i++) {
      Elf64_Sym sym;
      memcpy(&sym, img + sh.sh_offset + i * sizeof sym, sizeof sym);
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || ELF64_ST_BIND(sym.st_info) != STB_GLOBAL ||
          !(sym.st_other & 0x10) || sym.st_name >= strh.sh_size)
        continue;
      const char *sn = strtab + sym.st_name;
      if (!memchr(sn, '\0', strh.sh_size - sym.st_name)) continue;
      if (!strcmp(sn, name)) return 1;
      if (!strncmp(sn, "_Z", 2) && strstr(sn, needle)) snprintf(mangled, mlen, "%s", sn);
    }
  }
  return 0;
}

/* Copies the first line of log that mentions "error" into dst (for err). */
static void cuda_first_error(const char *log, char *dst, size_t dlen) {
  dst[0] = '\0';
  const char *p = log ? strstr(log, "error") : NULL;
  if (!p) return;
  const char *b = p;
  while (b > log && b[-1] != '\n') b--;
  const char *e = strchr(p, '\n');
  size_t n = e ? (size_t)(e - b) : strlen(b);
  if (n >= dlen) n = dlen - 1;
  memcpy(dst, b, n);
  dst[n] = '\0';
}

static char *cuda_strndup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    if (n) memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

/* NVRTC's part of cuda_compile: req's sources compiled for arch (hip: through the HIP
 * header on CUDA) into a CUBIN, *cubin (malloc'd, the caller frees) of *csz bytes;
 * NVRTC's log appended to lg. KA_OK, or an error with its message in e. */
static int cuda_nvrtc_build(const ka_compile_req *req, const char *arch, int hip, ka_sb *lg,
                            char **cubin_out, size_t *csz_out, char *e, size_t elen) {
  int rc = KA_OK;
  nvrtcProgram prog = NULL;
  char **texts = NULL, *cubin = NULL;
  const char **hdr = NULL, **hdr_names = NULL;
  int nhdr = 0;
  *cubin_out = NULL;
  *csz_out = 0;
  /* NUL-terminated copies: ka_source text is (pointer, length). */
  texts = calloc((size_t)req->nsources, sizeof *texts);
  hdr = calloc((size_t)req->nsources + 1, sizeof *hdr);
  hdr_names = calloc((size_t)req->nsources + 1, sizeof *hdr_names);
  if (!texts || !hdr || !hdr_names) {
    rc = ka_seterr(e, elen, KA_ENOMEM, "compile: out of host memory");
    goto out;
  }
  for (int i = 0; i < req->nsources; i++) {
    const ka_source *s = &req->sources[i];
    if (!s->text || (i > 0 && !s->name)) continue;
    texts[i] = cuda_strndup(s->text, s->len);
    if (!texts[i]) {
      rc = ka_seterr(e, elen, KA_ENOMEM, "compile: out of host memory");
      goto out;
    }
    if (i > 0) {
      hdr[nhdr] = texts[i];
      hdr_names[nhdr++] = s->name;
    }
  }
  if (hip) {
    hdr[nhdr] = ka_hip_on_cuda_h;
    hdr_names[nhdr++] = "hip/hip_runtime.h";
  }
  const char *pname = req->sources[0].name ? req->sources[0].name
                      : hip                ? "kernel.hip"
                                           : "kernel.cu";
  nvrtcResult nr = cuda_rtc.f.CreateProgram(&prog, texts[0], pname, nhdr, hdr, hdr_names);
  if (nr != NVRTC_SUCCESS) {
    prog = NULL;
    rc = ka_seterr(e, elen, nr == NVRTC_ERROR_OUT_OF_MEMORY ? KA_ENOMEM : KA_EINTERNAL,
                   "nvrtcCreateProgram: %s", cuda_rtc.f.GetErrorString(nr));
    goto out;
  }
  char archopt[64];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
  const char *opts[8];
  int nopts = 0;
  opts[nopts++] = archopt;
  opts[nopts++] = "-std=c++17";
  opts[nopts++] = "-lineinfo";
  if (hip) opts[nopts++] = "-D__HIP_PLATFORM_NVIDIA__=1";
  nvrtcResult cr = cuda_rtc.f.CompileProgram(prog, nopts, opts);
  size_t lsz = 0;
  if (cuda_rtc.f.GetProgramLogSize(prog, &lsz) == NVRTC_SUCCESS && lsz > 1) {
    char *buf = malloc(lsz);
    if (buf && cuda_rtc.f.GetProgramLog(prog, buf) == NVRTC_SUCCESS) {
      buf[lsz - 1] = '\0';
      ka_sb_puts(lg, buf);
    }
    free(buf);
  }
  if (cr != NVRTC_SUCCESS) {
    char first[512];
    cuda_first_error(lg->s, first, sizeof first);
    if (cr == NVRTC_ERROR_COMPILATION)
      rc = ka_seterr(e, elen, KA_ECOMPILE, "NVRTC: %s failed to compile for %s%s%s", pname, arch,
                     first[0] ? ": " : "", first);
    else
      rc = ka_seterr(e, elen,
                     cr == NVRTC_ERROR_INVALID_OPTION  ? KA_EINVAL
                     : cr == NVRTC_ERROR_OUT_OF_MEMORY ? KA_ENOMEM
                                                       : KA_EINTERNAL,
                     "nvrtcCompileProgram(%s, %s): %s%s%s", pname, arch,
                     cuda_rtc.f.GetErrorString(cr), first[0] ? ": " : "", first);
    goto out;
  }
  size_t csz = 0;
  if ((nr = cuda_rtc.f.GetCUBINSize(prog, &csz)) != NVRTC_SUCCESS || csz == 0) {
    rc = ka_seterr(e, elen, KA_EINTERNAL, "nvrtcGetCUBINSize: %s", cuda_rtc.f.GetErrorString(nr));
    goto out;
  }
  cubin = malloc(csz);
  if (!cubin) {
    rc = ka_seterr(e, elen, KA_ENOMEM, "compile: out of host memory");
    goto out;
  }
  if ((nr = cuda_rtc.f.GetCUBIN(prog, cubin)) != NVRTC_SUCCESS) {
    rc = ka_seterr(e, elen, KA_EINTERNAL, "nvrtcGetCUBIN: %s", cuda_rtc.f.GetErrorString(nr));
    goto out;
  }
  *cubin_out = cubin;
  *csz_out = csz;
  cubin = NULL;
out:
  free(cubin);
  if (prog) cuda_rtc.f.DestroyProgram(&prog);
  if (texts)
    for (int i = 0; i < req->nsources; i++) free(texts[i]);
  free(texts);
  free((void *)hdr);
  free((void *)hdr_names);
  return rc;
}

/* Compiles req->sources[0] with NVRTC to a CUBIN for req->arch (or the context's
 * device), options --gpu-architecture=<arch> -std=c++17 -lineinfo (no fast math).
 * sources[1..] are in-memory headers under their names; language "hip" adds the
 * embedded hip_on_cuda.h as "hip/hip_runtime.h" and -D__HIP_PLATFORM_NVIDIA__=1.
 * Every name in req->kernels must be an extern "C" __global__ function of the CUBIN.
 * With ctx the CUBIN is loaded (cuModuleLoadData) and *out receives the module (caller
 * frees with module_free); with ctx NULL nothing is loaded and *out stays NULL.
 * *log (if non-NULL) always receives a malloc'd, NUL-terminated log (NVRTC's log plus
 * our notes), owned by the caller, also on failure.
 * Returns KA_ECOMPILE (compile error, missing kernel, CUBIN the driver rejects),
 * KA_EUNAVAIL (no NVRTC / driver), KA_EINVAL (bad request or arch), KA_EOOM,
 * KA_ENOMEM, KA_EINTERNAL (NVRTC fault). Thread safe for distinct contexts. */
/* Language triton: req->image is a bundle of cubins (triton_bundle.h) that the runner's
 * triton compile made (gpuexec/backends/triton.h); each unit is loaded as a module of its
 * own and req->kernels name units. Without ctx only the bundle and its kernels are
 * checked. KA_OK, KA_ECOMPILE (a kernel missing, the driver refuses a cubin) or another
 * code (e, lg). */
static int cuda_triton_load(ka_backend_ctx *ctx, const ka_compile_req *req, ka_module **out,
                            ka_sb *lg, char *e, size_t elen) {
  ka_triton_unit u[KA_TRITON_MAX_UNITS];
  int n = 0;
  if (!req->image || ka_triton_bundle_parse(req->image, req->image_len, u, &n))
    return ka_seterr(e, elen, KA_EINVAL,
                     "compile: language triton needs the image of its triton compile");
  int idx[KA_TRITON_MAX_UNITS];
  if (req->nkernels > KA_TRITON_MAX_UNITS)
    return ka_seterr(e, elen, KA_EINVAL, "compile: too many kernels");
  for (int i = 0; i < req->nkernels; i++) {
    idx[i] = -1;
    for (int k = 0; k < n && idx[i] < 0; k++)
      if (req->kernels[i] && !strcmp(u[k].name, req->kernels[i])) idx[i] = k;
    char mangled[256];
    if (idx[i] < 0 || cuda_cubin_has_kernel(u[idx[i]].cubin, u[idx[i]].cubin_len, u[idx[i]].sym,
                                            mangled, sizeof mangled) != 1) {
      ka_sb_printf(lg, "error: kernel '%s' is not in the triton image\n", req->kernels[i]);
      return ka_seterr(e, elen, KA_ECOMPILE, "kernel '%s' is not in the triton image",
                       req->kernels[i]);
    }
  }
  ka_sb_printf(lg, "note: %d triton kernel(s) loaded\n", n);
  if (!ctx) return KA_OK;
  int rc = cuda_enter(ctx, "compile");
  if (rc != KA_OK) return ka_seterr(e, elen, rc, "%s", ctx->err);
  ka_module *m = calloc(1, sizeof *m + (size_t)req->nkernels * sizeof m->fns[0]);
  if (m) m->units = calloc((size_t)n, sizeof *m->units);
  if (!m || !m->units) {
    if (m) free(m);
    return ka_seterr(e, elen, KA_ENOMEM, "compile: out of host memory");
  }
  for (int k = 0; k < n && rc == KA_OK; k++) {
    /* cuModuleLoadData reads an ELF from memory: give it an aligned copy */
    void *copy = malloc(u[k].cubin_len);
    if (!copy) {
      rc = ka_seterr(e, elen, KA_ENOMEM, "compile: out of host memory");
      break;
    }
    memcpy(copy, u[k].cubin, u[k].cubin_len);
    CUresult lr = cuda_drv.f.ModuleLoadData(&m->units[k], copy);
    free(copy);
    if (lr != CUDA_SUCCESS) {
      m->units[k] = NULL;
      rc = cuda_fail(NULL, e, elen, lr, KA_ECOMPILE, "cuModuleLoadData(%s)", u[k].name);
      if (lr != CUDA_ERROR_OUT_OF_MEMORY) rc = KA_ECOMPILE;
      ka_sb_printf(lg, "error: %s\n", e);
    }
    m->nunits = k + 1;
  }
  for (int i = 0; i < req->nkernels && rc == KA_OK; i++) {
    cuda_fn *f = &m->fns[m->nfns];
    CUresult lr = cuda_drv.f.ModuleGetFunction(&f->fn, m->units[idx[i]], u[idx[i]].sym);
    if (lr != CUDA_SUCCESS) {
      rc = cuda_fail(NULL, e, elen, lr, KA_ECOMPILE, "cuModuleGetFunction(%s)", u[idx[i]].sym);
      break;
    }
    if (!(f->name = strdup(req->kernels[i]))) {
      rc = ka_seterr(e, elen, KA_ENOMEM, "compile: out of host memory");
      break;
    }
    m->nfns++;
  }
  if (rc != KA_OK || !out) {
    cuda_module_free(ctx, m);
    return rc;
  }
  *out = m;
  return KA_OK;
}

static int cuda_compile(ka_backend_ctx *ctx, const ka_compile_req *req, ka_module **out, char **log,
                        char *err, size_t errlen) {
  char e[CUDA_ERRLEN] = "";
  ka_sb lg = {0};
  int rc = KA_OK;
  char *cubin = NULL;
  ka_module *m = NULL;
  if (out) *out = NULL;
  if (log) *log = NULL;

  if (!req || !req->language || !req->sources || req->nsources < 1 || !req->sources[0].text ||
      req->nkernels < 0 || (req->nkernels > 0 && !req->kernels)) {
    rc = ka_seterr(e, sizeof e, KA_EINVAL, "compile: incomplete request");
    goto done;
  }
  int hip = !strcmp(req->language, "hip");
  if (!strcmp(req->language, "triton")) {
    rc = cuda_triton_load(ctx, req, out, &lg, e, sizeof e);
    goto done;
  }
  if (!hip && strcmp(req->language, "cuda")) {
    rc = ka_seterr(e, sizeof e, KA_EINVAL,
                   "compile: the cuda backend compiles languages cuda and hip, not '%s'",
                   req->language);
    goto done;
  }
  const char *arch = req->arch ? req->arch : ctx ? ctx->arch : NULL;
  if (!cuda_arch_ok(arch)) {
    rc = ka_seterr(e, sizeof e, KA_EINVAL,
                   "compile: %s architecture '%s' (want sm_<major><minor>, e.g. sm_90)",
                   arch ? "bad" : "no", arch ? arch : "");
    goto done;
  }
  pthread_once(&cuda_rtc_once, cuda_rtc_load);
  if (!cuda_rtc.ok) {
    rc = ka_seterr(e, sizeof e, KA_EUNAVAIL, "%s", cuda_rtc.why);
    goto done;
  }
  if (ctx && (rc = cuda_driver(e, sizeof e)) != KA_OK) goto done;

  const char *pname = req->sources[0].name ? req->sources[0].name
                      : hip                ? "kernel.hip"
                                           : "kernel.cu";
  size_t csz = 0;
  if (req->image && req->image_len > 0) { /* built before (backend.h: image) */
    if (!(cubin = malloc(req->image_len))) {
      rc = ka_seterr(e, sizeof e, KA_ENOMEM, "compile: out of host memory");
      goto done;
    }
    memcpy(cubin, req->image, req->image_len);
    csz = req->image_len;
    ka_sb_printf(&lg, "note: %s loaded from the build cache\n", pname);
  } else if ((rc = cuda_nvrtc_build(req, arch, hip, &lg, &cubin, &csz, e, sizeof e)) != KA_OK) {
    goto done;
  }
  if (req->image_out && req->image_out_len && !(req->image && req->image_len > 0)) {
    if ((*req->image_out = malloc(csz))) {
      memcpy(*req->image_out, cubin, csz);
      *req->image_out_len = csz;
    }
  }
  /* Every kernel must be in the image, with or without a device to load it on. */
  int missing = 0;
  for (int i = 0; i < req->nkernels; i++) {
    const char *k = req->kernels[i] ? req->kernels[i] : "";
    char mangled[256];
    int has = cuda_cubin_has_kernel((const unsigned char *)cubin, csz, k, mangled, sizeof mangled);
    if (has == 1) continue;
    if (has < 0) {
      ka_sb_printf(&lg, "note: cannot read the CUBIN's symbol table; kernel '%s' not checked\n", k);
      continue;
    }
    ka_sb_printf(&lg,
                 "error: kernel '%s' was not found in the compiled module: kernels must be "
                 "declared extern \"C\" __global__%s%s%s\n",
                 k, mangled[0] ? " (found the C++-mangled kernel " : "", mangled,
                 mangled[0] ? ")" : "");
    if (!missing++)
      rc =
          ka_seterr(e, sizeof e, KA_ECOMPILE,
                    "kernel '%s' not found in %s: kernels must be declared extern \"C\" __global__",
                    k, pname);
  }
  if (missing || !ctx) goto done;

  /* Load on the device and resolve the kernels. */
  if ((rc = cuda_enter(ctx, "compile")) != KA_OK) {
    snprintf(e, sizeof e, "%s", ctx->err);
    goto done;
  }
  m = calloc(1, sizeof *m + (size_t)req->nkernels * sizeof m->fns[0]);
  if (!m) {
    rc = ka_seterr(e, sizeof e, KA_ENOMEM, "compile: out of host memory");
    goto done;
  }
  CUresult lr = cuda_drv.f.ModuleLoadData(&m->mod, cubin);
  if (lr != CUDA_SUCCESS) {
    m->mod = NULL;
    rc = cuda_fail(NULL, e, sizeof e, lr, KA_ECOMPILE, "cuModuleLoadData(%s, %s)", pname, arch);
    if (lr == CUDA_ERROR_INVALID_IMAGE || lr == CUDA_ERROR_INVALID_PTX ||
        lr == CUDA_ERROR_NO_BINARY_FOR_GPU || lr == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
        lr == CUDA_ERROR_INVALID_SOURCE || lr == CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND ||
        lr == CUDA_ERROR_SHARED_OBJECT_INIT_FAILED)
      rc = KA_ECOMPILE; /* the driver rejects the image: a result for the submission */
    ka_sb_printf(&lg, "error: %s\n", e);
    goto done;
  }
  for (int i = 0; i < req->nkernels; i++) {
    cuda_fn *f = &m->fns[m->nfns];
    lr = cuda_drv.f.ModuleGetFunction(&f->fn, m->mod, req->kernels[i]);
    if (lr != CUDA_SUCCESS) {
      rc =
          cuda_fail(NULL, e, sizeof e, lr, KA_ECOMPILE, "cuModuleGetFunction(%s)", req->kernels[i]);
      if (lr == CUDA_ERROR_NOT_FOUND) rc = KA_ECOMPILE;
      ka_sb_printf(&lg,
                   "error: kernel '%s' was not found in the compiled module: kernels must be "
                   "declared extern \"C\" __global__ (%s)\n",
                   req->kernels[i], e);
      goto done;
    }
    if (!(f->name = strdup(req->kernels[i]))) {
      rc = ka_seterr(e, sizeof e, KA_ENOMEM, "compile: out of host memory");
      goto done;
    }
    m->nfns++;
  }
  if (out) {
    *out = m;
    m = NULL;
  }

done:
  if (m) cuda_module_free(ctx, m);
  free(cubin);
  if (rc != KA_OK) {
    if (err && errlen) snprintf(err, errlen, "%s", e);
    if (ctx) snprintf(ctx->err, sizeof ctx->err, "%s", e);
  }
  if (log) {
    if (lg.oom) {
      ka_sb_free(&lg);
      *log = strdup("(log lost: out of host memory)\n");
    } else {
      *log = ka_sb_take(&lg);
    }
  } else {
    ka_sb_free(&lg);
  }
  return rc;
}

/* Unloads the module and frees it. NULL m is a no-op. */
static void cuda_module_free(ka_backend_ctx *ctx, ka_module *m) {
  if (!m) return;
  if (ctx) cuda_gate_release(ctx); /* unloading may wait for the stream */
  int cur = ctx && cuda_drv.f.CtxSetCurrent(ctx->cu) == CUDA_SUCCESS;
  if (m->mod && cur) cuda_drv.f.ModuleUnload(m->mod);
  for (int i = 0; i < m->nunits; i++)
    if (m->units[i] && cur) cuda_drv.f.ModuleUnload(m->units[i]);
  free(m->units);
  for (int i = 0; i < m->nfns; i++) free(m->fns[i].name);
  free(m);
}

/* ---- memory */

/* Allocates bytes (> 0) of device memory into *out. KA_EOOM when the device is full. */
static int cuda_mem_alloc(ka_backend_ctx *ctx, size_t bytes, ka_devptr *out) {
  *out = 0;
  int rc = cuda_enter(ctx, "mem_alloc");
  if (rc != KA_OK) return rc;
  if (bytes == 0) return cuda_seterr(ctx, KA_EINVAL, "mem_alloc: zero bytes");
  CUdeviceptr p = 0;
  CUresult cr = cuda_drv.f.MemAlloc(&p, bytes);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_EINVAL, "cuMemAlloc(%zu bytes)", bytes);
  *out = (ka_devptr)p;
  return KA_OK;
}

/* Frees device memory from mem_alloc; 0 is a no-op. Errors go to last_error only. */
static void cuda_mem_free(ka_backend_ctx *ctx, ka_devptr p) {
  if (!p || cuda_enter(ctx, "mem_free") != KA_OK) return;
  CUresult cr = cuda_drv.f.MemFree((CUdeviceptr)p);
  if (cr != CUDA_SUCCESS) cuda_fail(ctx, NULL, 0, cr, KA_EINVAL, "cuMemFree");
}

/* Copies bytes host -> device; returns when src may be reused. */
static int cuda_copy_to_device(ka_backend_ctx *ctx, ka_devptr dst, const void *src, size_t bytes) {
  int rc = cuda_enter(ctx, "copy_to_device");
  if (rc != KA_OK || bytes == 0) return rc;
  CUresult cr = cuda_drv.f.MemcpyHtoD((CUdeviceptr)dst, src, bytes);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_EINVAL, "cuMemcpyHtoD(%zu bytes)", bytes);
  return KA_OK;
}

/* Copies bytes device -> host after the work queued before it (a kernel's fault
 * surfaces here as KA_EDEVICE). */
static int cuda_copy_to_host(ka_backend_ctx *ctx, void *dst, ka_devptr src, size_t bytes) {
  int rc = cuda_enter(ctx, "copy_to_host");
  if (rc != KA_OK || bytes == 0) return rc;
  CUresult cr = cuda_drv.f.MemcpyDtoH(dst, (CUdeviceptr)src, bytes);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_EINVAL, "cuMemcpyDtoH(%zu bytes)", bytes);
  return KA_OK;
}

/* Sets bytes of device memory to value (cuMemsetD8, ordered with the stream). */
static int cuda_memset8(ka_backend_ctx *ctx, ka_devptr dst, uint8_t value, size_t bytes) {
  int rc = cuda_enter(ctx, "memset8");
  if (rc != KA_OK || bytes == 0) return rc;
  CUresult cr = cuda_drv.f.MemsetD8((CUdeviceptr)dst, value, bytes);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_EINVAL, "cuMemsetD8(%zu bytes)", bytes);
  return KA_OK;
}

/* ---- launch and timing */

/* Enqueues l on the context's stream (asynchronous). Arguments are passed by value:
 * KA_ARG_PTR as CUdeviceptr, I32, I64. Dynamic shared memory above 48 KiB is opted in
 * first (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES). Returns KA_ELAUNCH for an
 * unknown kernel or a bad configuration, KA_EDEVICE for a sticky fault of earlier
 * work, KA_EOOM. */
static int cuda_launch(ka_backend_ctx *ctx, ka_module *m, const ka_launch *l) {
  int rc = cuda_enter_queued(ctx, "launch"); /* behind the timer's gate, if armed */
  if (rc != KA_OK) return rc;
  if (!m || !l || !l->kernel) return cuda_seterr(ctx, KA_ELAUNCH, "launch: no module or kernel");
  if (l->nargs < 0 || l->nargs > CUDA_MAX_ARGS || (l->nargs > 0 && !l->args))
    return cuda_seterr(ctx, KA_ELAUNCH, "launch %s: %d arguments (at most %d)", l->kernel, l->nargs,
                       CUDA_MAX_ARGS);
  cuda_fn *f = NULL, tmp = {0};
  for (int i = 0; i < m->nfns && !f; i++)
    if (!strcmp(m->fns[i].name, l->kernel)) f = &m->fns[i];
  if (!f) { /* not in the compile request: look it up, without caching (ungated: the
             * lookup may load the kernel, which may wait for the stream) */
    cuda_gate_release(ctx);
    if (!m->mod)
      return cuda_seterr(ctx, KA_ELAUNCH, "launch: kernel '%s' is not in the module", l->kernel);
    CUresult cr = cuda_drv.f.ModuleGetFunction(&tmp.fn, m->mod, l->kernel);
    if (cr == CUDA_ERROR_NOT_FOUND)
      return cuda_seterr(ctx, KA_ELAUNCH,
                         "launch: kernel '%s' is not in the module (kernels must be extern "
                         "\"C\" __global__)",
                         l->kernel);
    if (cr != CUDA_SUCCESS)
      return cuda_fail(ctx, NULL, 0, cr, KA_ELAUNCH, "cuModuleGetFunction(%s)", l->kernel);
    f = &tmp;
  }
  /* A kernel's first launch in the context may make the driver load it or grow local
   * memory, and wait for the stream to do so: never behind the timer's gate (the stream
   * would wait for the gate and the gate for the launch). Such a call runs ungated. */
  int grow_smem = l->shared_bytes > CUDA_DEFAULT_SMEM && l->shared_bytes > f->dyn_smem;
  if (!f->launched || grow_smem) cuda_gate_release(ctx);
  if (grow_smem) {
    CUresult cr = cuda_drv.f.FuncSetAttribute(
        f->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)l->shared_bytes);
    if (cr != CUDA_SUCCESS)
      return cuda_fail(ctx, NULL, 0, cr, KA_ELAUNCH,
                       "cuFuncSetAttribute(%s, MAX_DYNAMIC_SHARED_SIZE_BYTES=%u)", l->kernel,
                       l->shared_bytes);
    f->dyn_smem = l->shared_bytes;
  }
  union {
    CUdeviceptr p;
    int32_t i32;
    int64_t i64;
    double f64;
  } vals[CUDA_MAX_ARGS];
  void *params[CUDA_MAX_ARGS + 1];
  for (int i = 0; i < l->nargs; i++) {
    switch (l->args[i].kind) {
      case KA_ARG_PTR:
        vals[i].p = (CUdeviceptr)l->args[i].v.ptr;
        break;
      case KA_ARG_I32:
        vals[i].i32 = l->args[i].v.i32;
        break;
      case KA_ARG_I64:
        vals[i].i64 = l->args[i].v.i64;
        break;
      case KA_ARG_F64:
        vals[i].f64 = l->args[i].v.f64;
        break;
      default:
        return cuda_seterr(ctx, KA_ELAUNCH, "launch %s: argument %d has unknown kind %d", l->kernel,
                           i, (int)l->args[i].kind);
    }
    params[i] = &vals[i];
  }
  params[l->nargs] = NULL;
  CUresult cr =
      cuda_drv.f.LaunchKernel(f->fn, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                              l->block[2], l->shared_bytes, ctx->stream, params, NULL);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_ELAUNCH,
                     "cuLaunchKernel(%s, grid %ux%ux%u, block %ux%ux%u, shared %u)", l->kernel,
                     l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                     l->shared_bytes);
  f->launched = 1;
  return KA_OK;
}

/* Waits for all work of the context, every stream (cuCtxSynchronize). A fault of a
 * kernel launched earlier is reported here as KA_EDEVICE. */
static int cuda_synchronize(ka_backend_ctx *ctx) {
  int rc = cuda_enter(ctx, "synchronize");
  if (rc != KA_OK) return rc;
  CUresult cr = cuda_drv.f.CtxSynchronize();
  if (cr != CUDA_SUCCESS) return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuCtxSynchronize");
  return KA_OK;
}

/* Evicts L2: resets persisting-L2 lines (where supported), writes the whole flush
 * buffer (2x L2) with a byte that differs from the previous call, and waits. */
static int cuda_flush_cache(ka_backend_ctx *ctx) {
  int rc = cuda_enter(ctx, "flush_cache");
  if (rc != KA_OK) return rc;
  CUresult cr;
  if (cuda_drv.f.CtxResetPersistingL2Cache) {
    cr = cuda_drv.f.CtxResetPersistingL2Cache();
    if (cr != CUDA_SUCCESS && cr != CUDA_ERROR_NOT_SUPPORTED)
      return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuCtxResetPersistingL2Cache");
  }
  unsigned char v = (unsigned char)(++ctx->flush_seq);
  cr = cuda_drv.f.MemsetD8Async(ctx->flush, v, ctx->flush_bytes, ctx->stream);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuMemsetD8Async(flush, %zu bytes)",
                     ctx->flush_bytes);
  cr = cuda_drv.f.StreamSynchronize(ctx->stream);
  if (cr != CUDA_SUCCESS) return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuStreamSynchronize");
  return KA_OK;
}

/* Bytes flush_cache writes (twice the L2 size, or CUDA_FLUSH_FALLBACK when the driver
 * does not report the L2 size), for the runner's check. */
static int cuda_flush_bytes(ka_backend_ctx *ctx, size_t *out) {
  *out = ctx->flush_bytes;
  return KA_OK;
}

/* ---- device-resident staging (backend.h: copy_device, compare_device) */

/* Copies bytes from src + src_off to dst + dst_off (byte offsets) with
 * cuMemcpyDtoDAsync on the context's stream: ordered before later work of the stream
 * (and, the stream being blocking, of the legacy default stream); the host does not
 * wait. 0 bytes is a no-op. */
static int cuda_copy_device(ka_backend_ctx *ctx, ka_devptr dst, size_t dst_off, ka_devptr src,
                            size_t src_off, size_t bytes) {
  int rc = cuda_enter(ctx, "copy_device");
  if (rc != KA_OK || bytes == 0) return rc;
  CUresult cr = cuda_drv.f.MemcpyDtoDAsync((CUdeviceptr)(dst + dst_off),
                                           (CUdeviceptr)(src + src_off), bytes, ctx->stream);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_EINVAL, "cuMemcpyDtoDAsync(%zu bytes)", bytes);
  return KA_OK;
}

/* Loads the trusted kernels' fatbinary (built by nvcc, trusted_kernels_embed.h) into the
 * context and resolves every kernel of ka_trusted_kernel_names into *out. KA_OK, or a
 * code with the reason in err (the image has no code for this device: KA_ECOMPILE). */
static int cuda_load_trusted_image(ka_backend_ctx *ctx, ka_module **out, char *err, size_t errlen) {
  *out = NULL;
  ka_module *m = calloc(1, sizeof *m + (size_t)KA_TRUSTED_NKERNELS * sizeof m->fns[0]);
  if (!m) return ka_seterr(err, errlen, KA_ENOMEM, "out of host memory");
  CUresult lr = cuda_drv.f.ModuleLoadData(&m->mod, ka_trusted_fatbin);
  if (lr != CUDA_SUCCESS) {
    m->mod = NULL;
    free(m);
    return cuda_fail(NULL, err, errlen, lr, KA_ECOMPILE, "cuModuleLoadData(trusted kernels, %s)",
                     ctx->arch);
  }
  for (int i = 0; i < KA_TRUSTED_NKERNELS; i++) {
    cuda_fn *f = &m->fns[m->nfns];
    lr = cuda_drv.f.ModuleGetFunction(&f->fn, m->mod, ka_trusted_kernel_names[i]);
    if (lr != CUDA_SUCCESS || !(f->name = strdup(ka_trusted_kernel_names[i]))) {
      int rc = lr != CUDA_SUCCESS ? cuda_fail(NULL, err, errlen, lr, KA_ECOMPILE,
                                              "cuModuleGetFunction(%s)", ka_trusted_kernel_names[i])
                                  : ka_seterr(err, errlen, KA_ENOMEM, "out of host memory");
      cuda_module_free(ctx, m);
      return rc;
    }
    m->nfns++;
  }
  *out = m;
  return KA_OK;
}

/* Builds the trusted kernels for the context's device once per context: from the
 * embedded fatbinary where nvcc built one (no compile at run time), else from their
 * text with cuda_compile (NVRTC); and the 64-byte result area. A failure is kept
 * (cmp_state -1) and reported by every later call. */
static int cuda_cmp_ready(ka_backend_ctx *ctx) {
  if (ctx->cmp_state == 1) return KA_OK;
  if (ctx->cmp_state < 0) return cuda_seterr(ctx, ctx->cmp_rc, "%s", ctx->cmp_why);
  char e[CUDA_ERRLEN] = "";
  int rc = cuda_enter(ctx, "trusted kernels");
  int from_text = KA_TRUSTED_FATBIN_SIZE == 0;
  if (rc == KA_OK && !from_text && cuda_load_trusted_image(ctx, &ctx->cmp, e, sizeof e) != KA_OK)
    from_text = 1; /* no code in the fatbinary for this device (e.g. sm_75): NVRTC */
  if (rc == KA_OK && from_text) {
    ctx->cmp = NULL;
    e[0] = '\0';
    ka_source src = {.name = "ka_trusted_kernels.cu",
                     .text = ka_trusted_kernels_src,
                     .len = sizeof ka_trusted_kernels_src - 1};
    ka_compile_req req = {.language = "cuda",
                          .sources = &src,
                          .nsources = 1,
                          .kernels = ka_trusted_kernel_names,
                          .nkernels = KA_TRUSTED_NKERNELS,
                          .arch = NULL,
                          .workdir = "/",
                          .timeout_s = 60};
    char *log = NULL;
    rc = cuda_compile(ctx, &req, &ctx->cmp, &log, e, sizeof e);
    free(log);
  }
  if (rc != KA_OK) {
    ctx->cmp = NULL;
    ctx->cmp_rc = rc == KA_EOOM || rc == KA_ENOMEM ? rc : KA_EUNAVAIL;
    snprintf(ctx->cmp_why, sizeof ctx->cmp_why, "building the trusted kernels: %s",
             e[0] ? e : ctx->err);
  } else if ((rc = cuda_enter(ctx, "compare_device")) == KA_OK) {
    int sms = 0;
    CUresult cr =
        cuda_drv.f.DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ctx->dev);
    ctx->cmp_grid_max = cr == CUDA_SUCCESS && sms > 0 ? 8u * (unsigned)sms : 1024u;
    if (cuda_drv.f.MemAllocHost &&
        cuda_drv.f.MemAllocHost(&ctx->cmp_host, CUDA_CMP_AREA) != CUDA_SUCCESS)
      ctx->cmp_host = NULL;
    cr = cuda_drv.f.MemAlloc(&ctx->cmp_flag, CUDA_CMP_AREA);
    if (cr != CUDA_SUCCESS) {
      ctx->cmp_flag = 0;
      rc = cuda_fail(ctx, NULL, 0, cr, KA_EINVAL, "cuMemAlloc(trusted result area, %d bytes)",
                     CUDA_CMP_AREA);
      ctx->cmp_rc = rc;
      snprintf(ctx->cmp_why, sizeof ctx->cmp_why, "%s", ctx->err);
    }
  } else {
    ctx->cmp_rc = rc;
    snprintf(ctx->cmp_why, sizeof ctx->cmp_why, "%s", ctx->err);
  }
  if (rc != KA_OK) {
    ctx->cmp_state = -1;
    return cuda_seterr(ctx, ctx->cmp_rc, "%s", ctx->cmp_why);
  }
  ctx->cmp_state = 1;
  return KA_OK;
}

/* Blocks of 256 threads for a grid-stride pass over n items: at most cmp_grid_max. */
static unsigned cuda_trusted_grid(const ka_backend_ctx *ctx, uint64_t n) {
  uint64_t blocks = (n + 255) / 256;
  if (blocks == 0) blocks = 1;
  return (unsigned)(blocks < ctx->cmp_grid_max ? blocks : ctx->cmp_grid_max);
}

/* Launches trusted kernel `name` with args over n items (256 threads per block). */
static int cuda_trusted_launch(ka_backend_ctx *ctx, const char *name, uint64_t n, ka_arg *args,
                               int nargs) {
  ka_launch l = {.kernel = name,
                 .grid = {cuda_trusted_grid(ctx, n), 1, 1},
                 .block = {256, 1, 1},
                 .shared_bytes = 0,
                 .args = args,
                 .nargs = nargs};
  return cuda_launch(ctx, ctx->cmp, &l);
}

/* Copies bytes of the result area at off back to dst and waits for the stream. */
static int cuda_trusted_result(ka_backend_ctx *ctx, size_t off, void *dst, size_t bytes,
                               const char *what) {
  void *via = ctx->cmp_host ? (char *)ctx->cmp_host + off : dst;
  CUresult cr = cuda_drv.f.MemcpyDtoHAsync(via, ctx->cmp_flag + off, bytes, ctx->stream);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuMemcpyDtoHAsync(%s)", what);
  cr = cuda_drv.f.StreamSynchronize(ctx->stream);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuStreamSynchronize(%s)", what);
  if (via != dst) memcpy(dst, via, bytes), memset(via, 0, bytes);
  /* nothing of a result stays where a later kernel of the candidate could read it (a
   * staged input's checksum, say): cleared on the stream, before anything after it */
  cr = cuda_drv.f.MemsetD32Async(ctx->cmp_flag + off, 0, (bytes + 3) / 4, ctx->stream);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuMemsetD32Async(%s)", what);
  return KA_OK;
}

/* Sets the result area's bytes [off, off + 4 words) to `words` 32-bit values v. */
static int cuda_trusted_zero(ka_backend_ctx *ctx, size_t off, unsigned value, size_t words,
                             const char *what) {
  CUresult cr = cuda_drv.f.MemsetD32Async(ctx->cmp_flag + off, value, words, ctx->stream);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuMemsetD32Async(%s)", what);
  return KA_OK;
}

/* fill_device (backend.h): ka_trusted_fill over elems elements at p; check 1 reads the
 * difference flag back (result area [0, 4)). */
static int cuda_fill_device(ka_backend_ctx *ctx, ka_devptr p, const ka_fill *f, int64_t elems,
                            int check, int *differs) {
  if (differs) *differs = 0;
  int rc = cuda_enter(ctx, "fill_device");
  if (rc != KA_OK) return rc;
  if (!f || elems < 0 || f->dtype < 0 || f->dtype > 7 || f->dist < 0 ||
      f->dist > KA_TRUSTED_FAST_NORMAL || (check && !differs) ||
      (f->dist == KA_TRUSTED_FAST_NORMAL && f->dtype != 0 && f->dtype != 2 && f->dtype != 3))
    return cuda_seterr(ctx, KA_EINVAL, "fill_device: bad request");
  if (elems == 0) return KA_OK;
  if ((rc = cuda_cmp_ready(ctx)) != KA_OK) return rc;
  if (check && (rc = cuda_trusted_zero(ctx, 0, 0, 1, "fill check flag")) != KA_OK) return rc;
  ka_arg args[9] = {{.kind = KA_ARG_PTR, .v.ptr = p},
                    {.kind = KA_ARG_I64, .v.i64 = elems},
                    {.kind = KA_ARG_I32, .v.i32 = f->dtype},
                    {.kind = KA_ARG_I32, .v.i32 = f->dist},
                    {.kind = KA_ARG_F64, .v.f64 = f->a},
                    {.kind = KA_ARG_F64, .v.f64 = f->b},
                    {.kind = KA_ARG_I64, .v.i64 = (int64_t)f->key},
                    {.kind = KA_ARG_I32, .v.i32 = check},
                    {.kind = KA_ARG_PTR, .v.ptr = (ka_devptr)ctx->cmp_flag}};
  if ((rc = cuda_trusted_launch(ctx, KA_TRUSTED_FILL_NAME, (uint64_t)elems, args, 9)) != KA_OK)
    return rc;
  if (!check) return KA_OK;
  unsigned flag = 1;
  if ((rc = cuda_trusted_result(ctx, 0, &flag, sizeof flag, "fill check")) != KA_OK) return rc;
  *differs = flag != 0;
  return KA_OK;
}

/* close_device (backend.h): ka_trusted_absmax of want into [16, 24) of the result area,
 * then ka_trusted_close, which scales atol by it on the device, into [24, 40): one round
 * trip to the host, after both. */
static int cuda_close_device(ka_backend_ctx *ctx, ka_devptr want, ka_devptr got, int dtype,
                             int64_t elems, double atol, double rtol, const ka_fill *poison,
                             int64_t *bad, int64_t *first) {
  *bad = 0, *first = -1;
  int rc = cuda_enter(ctx, "close_device");
  if (rc != KA_OK) return rc;
  if (elems < 0 || dtype < 0 || dtype > 7)
    return cuda_seterr(ctx, KA_EINVAL, "close_device: bad request");
  if (elems == 0) return KA_OK;
  if ((rc = cuda_cmp_ready(ctx)) != KA_OK) return rc;
  if ((rc = cuda_trusted_zero(ctx, 16, 0, 2, "absmax")) != KA_OK ||
      (rc = cuda_trusted_zero(ctx, 24, 0, 2, "close count")) != KA_OK ||
      (rc = cuda_trusted_zero(ctx, 32, 0xffffffffu, 2, "close first")) != KA_OK)
    return rc;
  ka_devptr scale = (ka_devptr)ctx->cmp_flag + 16;
  ka_arg margs[4] = {{.kind = KA_ARG_PTR, .v.ptr = want},
                     {.kind = KA_ARG_I64, .v.i64 = elems},
                     {.kind = KA_ARG_I32, .v.i32 = dtype},
                     {.kind = KA_ARG_PTR, .v.ptr = scale}};
  if ((rc = cuda_trusted_launch(ctx, KA_TRUSTED_ABSMAX_NAME, (uint64_t)elems, margs, 4)) != KA_OK)
    return rc;
  ka_arg cargs[10] = {{.kind = KA_ARG_PTR, .v.ptr = want},
                      {.kind = KA_ARG_PTR, .v.ptr = got},
                      {.kind = KA_ARG_I64, .v.i64 = elems},
                      {.kind = KA_ARG_I32, .v.i32 = dtype},
                      {.kind = KA_ARG_F64, .v.f64 = atol},
                      {.kind = KA_ARG_F64, .v.f64 = rtol},
                      {.kind = KA_ARG_I32, .v.i32 = poison != NULL},
                      {.kind = KA_ARG_I64, .v.i64 = poison ? (int64_t)poison->key : 0},
                      {.kind = KA_ARG_PTR, .v.ptr = scale},
                      {.kind = KA_ARG_PTR, .v.ptr = (ka_devptr)ctx->cmp_flag + 24}};
  if ((rc = cuda_trusted_launch(ctx, KA_TRUSTED_CLOSE_NAME, (uint64_t)elems, cargs, 10)) != KA_OK)
    return rc;
  uint64_t out[3] = {0, 0, 0}; /* [16, 40): the scale (cleared with the rest), count, first */
  if ((rc = cuda_trusted_result(ctx, 16, out, sizeof out, "close")) != KA_OK) return rc;
  *bad = (int64_t)out[1];
  *first = out[1] ? (int64_t)out[2] : -1;
  return KA_OK;
}

/* Compares bytes at a + a_off and b + b_off: zeroes the flag (cuMemsetD32Async), launches
 * the widest trusted compare kernel whose word size divides both addresses and the length
 * (16, 8, 4, 2 or 1 bytes; 256 threads per block, at most 8 blocks per multiprocessor,
 * grid-stride), copies the flag back (cuMemcpyDtoHAsync) and waits for the stream, all on
 * the context's stream after the work queued before. *equal = 1 if identical. */
static int cuda_compare_device(ka_backend_ctx *ctx, ka_devptr a, size_t a_off, ka_devptr b,
                               size_t b_off, size_t bytes, int *equal) {
  *equal = 0;
  int rc = cuda_enter(ctx, "compare_device");
  if (rc != KA_OK) return rc;
  if (bytes == 0) {
    *equal = 1;
    return KA_OK;
  }
  if ((rc = cuda_cmp_ready(ctx)) != KA_OK) return rc;
  ka_devptr pa = a + a_off, pb = b + b_off;
  int w = KA_TRUSTED_CMP_WIDTHS - 1; /* log2 of the word size */
  while (w > 0 && ((pa | pb | (ka_devptr)bytes) & (((ka_devptr)1 << w) - 1))) w--;
  unsigned long long words = (unsigned long long)(bytes >> w);
  unsigned long long blocks = (words + 255) / 256;
  CUresult cr = cuda_drv.f.MemsetD32Async(ctx->cmp_flag, 0, 1, ctx->stream);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuMemsetD32Async(compare flag)");
  ka_arg args[4] = {{.kind = KA_ARG_PTR, .v.ptr = pa},
                    {.kind = KA_ARG_PTR, .v.ptr = pb},
                    {.kind = KA_ARG_I64, .v.i64 = (int64_t)words},
                    {.kind = KA_ARG_PTR, .v.ptr = (ka_devptr)ctx->cmp_flag}};
  ka_launch l = {
      .kernel = ka_trusted_cmp_names[w],
      .grid = {(unsigned)(blocks < ctx->cmp_grid_max ? blocks : ctx->cmp_grid_max), 1, 1},
      .block = {256, 1, 1},
      .shared_bytes = 0,
      .args = args,
      .nargs = 4};
  if ((rc = cuda_launch(ctx, ctx->cmp, &l)) != KA_OK) return rc;
  unsigned flag = 1;
  if ((rc = cuda_trusted_result(ctx, 0, &flag, sizeof flag, "compare")) != KA_OK) return rc;
  *equal = flag == 0;
  return KA_OK;
}

/* Keyed checksum of bytes at p + off (trusted_kernels.h, ka_trusted_sum): zeroes the sum
 * (cuMemsetD32Async), launches the trusted kernel (256 threads per block, at most 8
 * blocks per multiprocessor, grid-stride), copies the sum back and waits for the stream,
 * after the work queued before. p + off must be 4-byte aligned (KA_EINVAL otherwise). */
static int cuda_checksum_device(ka_backend_ctx *ctx, ka_devptr p, size_t off, size_t bytes,
                                uint64_t key, uint64_t *sum) {
  *sum = 0;
  int rc = cuda_enter(ctx, "checksum_device");
  if (rc != KA_OK) return rc;
  if ((p + off) & 3) return cuda_seterr(ctx, KA_EINVAL, "checksum_device: unaligned address");
  if (bytes == 0) return KA_OK;
  if ((rc = cuda_cmp_ready(ctx)) != KA_OK) return rc;
  CUdeviceptr out = ctx->cmp_flag + 8;
  unsigned long long blocks = (bytes / 4 + 255) / 256;
  CUresult cr = cuda_drv.f.MemsetD32Async(out, 0, 2, ctx->stream);
  if (cr != CUDA_SUCCESS)
    return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuMemsetD32Async(checksum)");
  ka_arg args[4] = {{.kind = KA_ARG_PTR, .v.ptr = p + off},
                    {.kind = KA_ARG_I64, .v.i64 = (int64_t)bytes},
                    {.kind = KA_ARG_I64, .v.i64 = (int64_t)key},
                    {.kind = KA_ARG_PTR, .v.ptr = (ka_devptr)out}};
  ka_launch l = {.kernel = KA_TRUSTED_SUM_NAME,
                 .grid = {(unsigned)(blocks == 0                  ? 1
                                     : blocks < ctx->cmp_grid_max ? blocks
                                                                  : ctx->cmp_grid_max),
                          1, 1},
                 .block = {256, 1, 1},
                 .shared_bytes = 0,
                 .args = args,
                 .nargs = 4};
  if ((rc = cuda_launch(ctx, ctx->cmp, &l)) != KA_OK) return rc;
  unsigned long long v = 0;
  if ((rc = cuda_trusted_result(ctx, 8, &v, sizeof v, "checksum")) != KA_OK) return rc;
  *sum = v;
  return KA_OK;
}

/* Records the start event on the stream behind the timer's gate: the stream first waits
 * (cuStreamWaitValue32) until the host opens the gate, which timer_stop does once the
 * stop event is queued (any other op opens it too). So the device runs the start event,
 * every launch of the call and the stop event back to back, and the interval holds the
 * call's device work only, not the host's time to queue each launch (several
 * microseconds a launch, with its jitter: on the H200 the per-call noise of a 58 us GELU
 * fell from 3.1% to 1.0%, bench/timer_noise.c; nvbench holds its timed launches behind a
 * blocking kernel for the same reason). Ungated (no stream memory operations, a refused
 * wait, a kernel's first launch: cuda_launch): the start event alone, as before. */
static int cuda_timer_start(ka_backend_ctx *ctx) {
  int rc = cuda_enter(ctx, "timer_start");
  if (rc != KA_OK) return rc;
  CUresult cr;
  if (ctx->gate_host && !ctx->gate_off) {
    /* closed again first: a word a kernel of an earlier call overwrote (it is in the
     * context's address space) cannot leave this call's gate open */
    __atomic_store_n(ctx->gate_host, ctx->gate_seq, __ATOMIC_RELEASE);
    cr = cuda_drv.f.StreamWaitValue32(ctx->stream, ctx->gate_dev, ctx->gate_seq + 1,
                                      CU_STREAM_WAIT_VALUE_GEQ);
    if (cr == CUDA_SUCCESS) {
      ctx->gate_seq++, ctx->gate_armed = 1;
    } else if (cr == CUDA_ERROR_NOT_SUPPORTED || cr == CUDA_ERROR_INVALID_VALUE) {
      ctx->gate_off = 1; /* ungated from now on: a wait the driver refuses is no fault of
                            the submission (the word is freed at close) */
    } else {
      return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuStreamWaitValue32(timer gate)");
    }
  }
  cr = cuda_drv.f.EventRecord(ctx->ev_start, ctx->stream);
  if (cr != CUDA_SUCCESS) return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuEventRecord(start)");
  ctx->timer_running = 1;
  return KA_OK;
}

/* Records the stop event, opens the timer's gate, waits for the stop event and returns
 * the elapsed device time between the two events in *ms (milliseconds, ~0.5 us
 * resolution). KA_ESTATE without timer_start. */
static int cuda_timer_stop(ka_backend_ctx *ctx, double *ms) {
  *ms = 0;
  int rc = cuda_enter_queued(ctx, "timer_stop");
  if (rc != KA_OK) {
    if (ctx) cuda_gate_release(ctx);
    return rc;
  }
  if (!ctx->timer_running) {
    cuda_gate_release(ctx);
    return cuda_seterr(ctx, KA_ESTATE, "timer_stop without timer_start");
  }
  ctx->timer_running = 0;
  CUresult cr = cuda_drv.f.EventRecord(ctx->ev_stop, ctx->stream);
  cuda_gate_release(ctx);
  if (cr != CUDA_SUCCESS) return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuEventRecord(stop)");
  cr = cuda_drv.f.EventSynchronize(ctx->ev_stop);
  if (cr != CUDA_SUCCESS) return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuEventSynchronize");
  float f = 0;
  cr = cuda_drv.f.EventElapsedTime(&f, ctx->ev_start, ctx->ev_stop);
  if (cr != CUDA_SUCCESS) return cuda_fail(ctx, NULL, 0, cr, KA_EDEVICE, "cuEventElapsedTime");
  *ms = f;
  return KA_OK;
}

static const ka_backend_ops cuda_ops = {
    .api_version = KA_BACKEND_API_VERSION,
    .name = "cuda",
    .device_count = cuda_device_count,
    .open = cuda_open,
    .close = cuda_close,
    .last_error = cuda_last_error,
    .device_info = cuda_device_info,
    .telemetry = cuda_telemetry,
    .compile = cuda_compile,
    .module_free = cuda_module_free,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .copy_to_device = cuda_copy_to_device,
    .copy_to_host = cuda_copy_to_host,
    .memset8 = cuda_memset8,
    .launch = cuda_launch,
    .synchronize = cuda_synchronize,
    .flush_cache = cuda_flush_cache,
    .timer_start = cuda_timer_start,
    .timer_stop = cuda_timer_stop,
    .flush_bytes = cuda_flush_bytes,
    .copy_device = cuda_copy_device,
    .compare_device = cuda_compare_device,
    .checksum_device = cuda_checksum_device,
    .fill_device = cuda_fill_device,
    .close_device = cuda_close_device,
};

/* Module entry point (KA_BACKEND_GET_SYMBOL): the cuda backend's ops, or NULL if
 * api_version is not KA_BACKEND_API_VERSION. Loads nothing itself: libraries are
 * dlopen'd on first use. Thread safe; the returned table is static. */
__attribute__((visibility("default"))) const ka_backend_ops *ka_backend_get(int api_version);
const ka_backend_ops *ka_backend_get(int api_version) {
  return api_version == KA_BACKEND_API_VERSION ? &cuda_ops : NULL;
}
