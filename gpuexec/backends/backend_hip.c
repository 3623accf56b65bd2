/* The hip backend module (ka_backend_hip.so): hiprtc compile, HIP runtime run, rocm-smi
 * telemetry, for AMD GPUs.
 *
 * Links no vendor library. hip_runtime_api.h and hiprtc.h (Debian's libamdhip64-dev,
 * ROCm 5.2) give the types and, through __typeof__, the function-pointer types; the
 * functions come from dlopen'd libraries, each loaded once (pthread_once) on first use:
 *   HIP runtime   libamdhip64.so.7, .so.6, .so.5, libamdhip64.so, then
 *                 $ROCM_PATH/lib/libamdhip64.so and /opt/rocm/lib/libamdhip64.so
 *   hiprtc        libhiprtc.so.7, .so.6, .so.5, libhiprtc.so (later ROCm releases ship
 *                 it as its own library), same folders; else the runtime library
 *                 itself, which exports the hiprtc functions in ROCm 5.2 (Debian 12)
 *   comgr         libamd_comgr.so.3, .so.2, libamd_comgr.so: only for the list of
 *                 targets the installed compiler knows (amd_comgr_get_isa_name)
 *   rocm-smi      librocm_smi64.so.7, .so.6, .so.5, .so.1, librocm_smi64.so: optional,
 *                 telemetry only
 *
 * ABI across ROCm versions (checked against ROCm/HIP rocm-6.2 and ROCm/rocm-systems
 * headers): the hipError_t and hipDeviceAttribute_t values used here are the same in
 * ROCm 5.2's and ROCm/HIP 6.2's hip_runtime_api.h. hipDeviceProp_t changed in ROCm 6.0
 * (the header maps hipGetDeviceProperties to hipGetDevicePropertiesR0600); the old
 * layout, identical to ROCm 5.2's hipDeviceProp_t, stays available as
 * hipGetDevicePropertiesR0000 (include/hip/hip_deprecated.h since ROCm 6.1, still in
 * ROCm/rocm-systems), so that symbol is preferred and the unversioned one is the
 * fallback for ROCm 5. rsmi_frequencies_t gained a leading `bool has_deep_sleep`
 * and one more entry (RSMI_MAX_NUM_FREQUENCIES 32 -> 33) in rocm_smi_lib 6.0.0
 * (commit 3d40c4bb, "Add sleep frequency support"); hip_smi_clock reads either layout
 * by the library's version (rsmi_version_get).
 *
 * hiprtc: ROCm 5.2's built-in hip_runtime.h is preprocessed text, so its macros
 * (hipThreadIdx_x, HIP_DYNAMIC_SHARED, __HIP_PLATFORM_AMD__, ...) are missing. The
 * backend puts a short prelude (hip_prelude below, every definition #ifndef-guarded)
 * before the source, followed by `#line 1 "<file>"` so diagnostics keep the
 * submission's file name and line numbers.
 *
 * Error mapping (hip_code): hipErrorOutOfMemory -> KA_EOOM; faults of a kernel
 * (IllegalAddress, LaunchFailure, LaunchTimeOut, Assert, ECCNotCorrectable,
 * PriorLaunchFailure, Unknown, anything unlisted) -> KA_EDEVICE; launch-configuration
 * errors (InvalidValue, InvalidConfiguration, InvalidDeviceFunction, InvalidHandle,
 * NotFound, LaunchOutOfResources, ...) -> KA_ELAUNCH in launch, KA_EINVAL elsewhere;
 * runtime or device absent (NoDevice, InsufficientDriver, NotInitialized,
 * InvalidDevice) -> KA_EUNAVAIL. Every error text names the operation and the
 * hipError_t's name and string, and goes into the context's last_error.
 *
 * No device: hipInit / hipGetDeviceCount answer hipErrorNoDevice (or, in ROCm 5.2 without
 * /dev/kfd, hipErrorInvalidDevice); device_count then gives 0 and the reason, open
 * KA_EUNAVAIL, and compile-only still works (hiprtc needs no device).
 *
 * Threading: the loaders are thread safe; a context is used by one thread at a time,
 * and every op first selects the context's device on the calling thread
 * (hipSetDevice), so a context may move between threads between calls. */
#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
#include <hip/hiprtc.h>
#include <rocm_smi/rocm_smi.h>

#include "backend.h"
#include "ka_common.h"

#define HIP_ERRLEN 1024
#define HIP_MAX_ARGS 64
#define HIP_MAX_ISAS 256
/* Flush buffer floor: MI300X and MI325X (AMD CDNA 3 architecture white paper, 2023) and
 * MI355X (CDNA 4) put a 256 MiB AMD Infinity Cache (MALL) behind the L2, and HIP reports
 * only the L2 (hipDeviceAttributeL2CacheSize). Writing 512 MiB, twice the Infinity
 * Cache, evicts both; it is capped at 1/8 of the device memory. */
#define HIP_FLUSH_FLOOR ((size_t)512 << 20)

/* ---- HIP runtime table. X(field, exported symbol, required) */
#define HIP_RUNTIME_FNS(X)                              \
  X(Init, hipInit, 1)                                   \
  X(GetErrorName, hipGetErrorName, 1)                   \
  X(GetErrorString, hipGetErrorString, 1)               \
  X(RuntimeGetVersion, hipRuntimeGetVersion, 1)         \
  X(DriverGetVersion, hipDriverGetVersion, 1)           \
  X(GetDeviceCount, hipGetDeviceCount, 1)               \
  X(SetDevice, hipSetDevice, 1)                         \
  X(DeviceGetAttribute, hipDeviceGetAttribute, 1)       \
  X(DeviceTotalMem, hipDeviceTotalMem, 1)               \
  X(DeviceGetName, hipDeviceGetName, 1)                 \
  X(DeviceSynchronize, hipDeviceSynchronize, 1)         \
  X(StreamCreateWithFlags, hipStreamCreateWithFlags, 1) \
  X(StreamDestroy, hipStreamDestroy, 1)                 \
  X(StreamSynchronize, hipStreamSynchronize, 1)         \
  X(EventCreate, hipEventCreate, 1)                     \
  X(EventDestroy, hipEventDestroy, 1)                   \
  X(EventRecord, hipEventRecord, 1)                     \
  X(EventSynchronize, hipEventSynchronize, 1)           \
  X(EventElapsedTime, hipEventElapsedTime, 1)           \
  X(Malloc, hipMalloc, 1)                               \
  X(Free, hipFree, 1)                                   \
  X(MemcpyAsync, hipMemcpyAsync, 1)                     \
  X(MemsetAsync, hipMemsetAsync, 1)                     \
  X(ModuleLoadData, hipModuleLoadData, 1)               \
  X(ModuleUnload, hipModuleUnload, 1)                   \
  X(ModuleGetFunction, hipModuleGetFunction, 1)         \
  X(ModuleLaunchKernel, hipModuleLaunchKernel, 1)

#define HIP_RTC_FNS(X)                             \
  X(Version, hiprtcVersion, 1)                     \
  X(GetErrorString, hiprtcGetErrorString, 1)       \
  X(CreateProgram, hiprtcCreateProgram, 1)         \
  X(DestroyProgram, hiprtcDestroyProgram, 1)       \
  X(CompileProgram, hiprtcCompileProgram, 1)       \
  X(GetProgramLogSize, hiprtcGetProgramLogSize, 1) \
  X(GetProgramLog, hiprtcGetProgramLog, 1)         \
  X(GetCodeSize, hiprtcGetCodeSize, 1)             \
  X(GetCode, hiprtcGetCode, 1)

/* The device-properties layout of ROCm 5 (hipDeviceProp_t), kept in ROCm >= 6.1 as
 * hipDeviceProp_tR0000 (hip/hip_deprecated.h), which ROCm 6's hipDeviceProp_t is not.
 * The assertion pins ROCm 5.2's offsets, so a header with another layout fails the
 * build instead of misreading gcnArchName. */
#if HIP_VERSION_MAJOR >= 6
#include <hip/hip_deprecated.h>
typedef hipDeviceProp_tR0000 hip_props_t;
#else
typedef hipDeviceProp_t hip_props_t;
#endif
_Static_assert(offsetof(hip_props_t, gcnArchName) == 396 && sizeof(hip_props_t) == 792,
               "hipDeviceProp_t is not the ROCm 5.2 (R0000) layout");
/* hipGetDevicePropertiesR0000 / ROCm 5's hipGetDeviceProperties */
typedef hipError_t (*hip_props_fn)(hip_props_t *prop, int device);

#define HIP_FIELD(field, sym, req) __typeof__(sym) *field;
static struct {
  int ok;          /* library loaded, symbols resolved */
  char why[768];   /* reason when !ok */
  hipError_t init; /* hipInit's answer (hipErrorNoDevice etc. without a GPU) */
  void *handle;
  char lib[64]; /* the soname that loaded */
  hip_props_fn GetDeviceProperties;
  struct {
    HIP_RUNTIME_FNS(HIP_FIELD)
  } f;
} hip_rt;
static struct {
  int ok, major, minor;
  char why[1024];
  char lib[64];
  struct {
    HIP_RTC_FNS(HIP_FIELD)
  } f;
} hip_rtc;
#undef HIP_FIELD

/* ---- comgr: two functions, declared from amd_comgr.h (ROCm-CompilerSupport,
 * lib/comgr/include/amd_comgr.h): amd_comgr_status_t is an enum whose
 * AMD_COMGR_STATUS_SUCCESS is 0; the names are "amdgcn-amd-amdhsa--gfx90a" and so on,
 * static strings owned by the library. */
typedef int hip_comgr_status;
static struct {
  int ok;
  char why[512];
  int nisa;
  char isa[HIP_MAX_ISAS][64]; /* processor names with any feature suffix: "gfx90a" */
} hip_comgr;

/* ---- rocm-smi (librocm_smi64): rocm_smi.h for types and prototypes; the frequency
 * table is read through hip_smi_freq_v1 / _v6 (see the file comment). */
#define HIP_SMI_FNS(X)                                  \
  X(init, rsmi_init, 1)                                 \
  X(version_get, rsmi_version_get, 1)                   \
  X(num_monitor_devices, rsmi_num_monitor_devices, 1)   \
  X(dev_pci_id_get, rsmi_dev_pci_id_get, 1)             \
  X(dev_name_get, rsmi_dev_name_get, 0)                 \
  X(dev_gpu_clk_freq_get, rsmi_dev_gpu_clk_freq_get, 0) \
  X(dev_temp_metric_get, rsmi_dev_temp_metric_get, 0)   \
  X(dev_power_ave_get, rsmi_dev_power_ave_get, 0)       \
  X(dev_busy_percent_get, rsmi_dev_busy_percent_get, 0)
typedef struct hip_smi_freq_v1 { /* rocm_smi_lib < 6.0.0 */
  uint32_t num_supported, current;
  uint64_t frequency[32];
} hip_smi_freq_v1;
typedef struct hip_smi_freq_v6 { /* rocm_smi_lib >= 6.0.0 */
  bool has_deep_sleep;
  uint32_t num_supported, current;
  uint64_t frequency[33];
} hip_smi_freq_v6;
/* rsmi_dev_power_get (rocm_smi_lib >= 6) and rsmi_dev_current_socket_power_get report
 * microwatts like rsmi_dev_power_ave_get; they are looked up by name because ROCm 5.2's
 * header lacks them. power_get's third argument is a RSMI_POWER_TYPE enum. */
typedef rsmi_status_t (*hip_smi_power_get_fn)(uint32_t dv, uint64_t *power, int *type);
typedef rsmi_status_t (*hip_smi_socket_power_fn)(uint32_t dv, uint64_t *power);
#define HIP_FIELD(field, sym, req) __typeof__(sym) *field;
static struct {
  int ok;
  char why[512];
  unsigned version_major;
  hip_smi_power_get_fn power_get;
  hip_smi_socket_power_fn socket_power_get;
  struct {
    HIP_SMI_FNS(HIP_FIELD)
  } f;
} hip_smi;
#undef HIP_FIELD

static pthread_once_t hip_rt_once = PTHREAD_ONCE_INIT;
static pthread_once_t hip_rtc_once = PTHREAD_ONCE_INIT;
static pthread_once_t hip_comgr_once = PTHREAD_ONCE_INIT;
static pthread_once_t hip_smi_once = PTHREAD_ONCE_INIT;

struct ka_backend_ctx {
  int index;
  hipStream_t stream;
  hipEvent_t ev_start, ev_stop;
  void *flush;
  size_t flush_bytes;
  unsigned flush_seq;
  int timer_running;
  char arch[64];      /* gcnArchName, e.g. "gfx942:sramecc+:xnack-" */
  uint64_t pci_bdfid; /* rocm-smi's BDFID of the device; 0 unknown */
  int smi_state;      /* 0 not tried, 1 smi_index valid, -1 unavailable */
  uint32_t smi_index;
  char err[HIP_ERRLEN];
};

typedef struct hip_fn {
  char *name;
  hipFunction_t fn;
} hip_fn;

struct ka_module {
  hipModule_t mod;
  int nfns;
  hip_fn fns[];
};

/* Definitions hiprtc's built-in headers lack in ROCm 5.2 (its hip_runtime.h is
 * preprocessed, so macros are gone), within the subset gpuexec/hip_on_cuda.h maps on
 * NVIDIA. Every one is guarded, so a ROCm that defines them keeps its own. Names and
 * meanings follow HIP's amd_detail/amd_hip_runtime.h and C11's math.h. */
static const char hip_prelude[] =
    "#ifndef __HIP_PLATFORM_AMD__\n"
    "#define __HIP_PLATFORM_AMD__ 1\n"
    "#endif\n"
    "#ifndef hipThreadIdx_x\n"
    "#define hipThreadIdx_x (threadIdx.x)\n"
    "#define hipThreadIdx_y (threadIdx.y)\n"
    "#define hipThreadIdx_z (threadIdx.z)\n"
    "#endif\n"
    "#ifndef hipBlockIdx_x\n"
    "#define hipBlockIdx_x (blockIdx.x)\n"
    "#define hipBlockIdx_y (blockIdx.y)\n"
    "#define hipBlockIdx_z (blockIdx.z)\n"
    "#endif\n"
    "#ifndef hipBlockDim_x\n"
    "#define hipBlockDim_x (blockDim.x)\n"
    "#define hipBlockDim_y (blockDim.y)\n"
    "#define hipBlockDim_z (blockDim.z)\n"
    "#endif\n"
    "#ifndef hipGridDim_x\n"
    "#define hipGridDim_x (gridDim.x)\n"
    "#define hipGridDim_y (gridDim.y)\n"
    "#define hipGridDim_z (gridDim.z)\n"
    "#endif\n"
    "#ifndef HIP_DYNAMIC_SHARED_ATTRIBUTE\n"
    "#define HIP_DYNAMIC_SHARED_ATTRIBUTE\n"
    "#endif\n"
    "#ifndef HIP_DYNAMIC_SHARED\n"
    "#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];\n"
    "#endif\n"
    /* math.h's float INFINITY and NAN (C11 7.12), which gpuexec/hip_on_cuda.h also
     * provides on NVIDIA */
    "#ifndef INFINITY\n"
    "#define INFINITY (__builtin_inff())\n"
    "#endif\n"
    "#ifndef NAN\n"
    "#define NAN (__builtin_nanf(\"\"))\n"
    "#endif\n";

/* ---- loaders */

/* Opens the first library of names[] that loads, trying each bare name (the dynamic
 * loader's path) and then under $ROCM_PATH/lib and /opt/rocm/lib. Appends each
 * failure to why. Copies the name that loaded into lib. */
static void *hip_dlopen_any(const char *const *names, int n, ka_sb *why, char *lib, size_t liblen) {
  const char *dirs[3] = {NULL, getenv("ROCM_PATH"), "/opt/rocm"};
  for (int d = 0; d < 3; d++) {
    if (d > 0 && (!dirs[d] || !*dirs[d])) continue;
    for (int i = 0; i < n; i++) {
      char path[600];
      if (d == 0)
        snprintf(path, sizeof path, "%s", names[i]);
      else
        snprintf(path, sizeof path, "%s/lib/%s", dirs[d], names[i]);
      void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (h) {
        snprintf(lib, liblen, "%s", names[i]);
        return h;
      }
      if (d == 0) ka_sb_printf(why, "%s%s", why->len ? "; " : "", dlerror());
    }
  }
  return NULL;
}

static void hip_rt_load(void) {
  static const char *const names[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5",
                                      "libamdhip64.so"};
  ka_sb why = {0};
  void *h = hip_dlopen_any(names, 4, &why, hip_rt.lib, sizeof hip_rt.lib);
  if (!h) {
    snprintf(hip_rt.why, sizeof hip_rt.why, "ROCm HIP runtime not found (libamdhip64.so): %s",
             why.s ? why.s : "");
    ka_sb_free(&why);
    return;
  }
  ka_sb_free(&why);
#define HIP_RESOLVE(field, sym, req)                                                        \
  hip_rt.f.field = (__typeof__(sym) *)dlsym(h, #sym);                                       \
  if (!hip_rt.f.field && req) {                                                             \
    snprintf(hip_rt.why, sizeof hip_rt.why, "%s lacks %s: the ROCm HIP runtime is too old", \
             hip_rt.lib, #sym);                                                             \
    dlclose(h);                                                                             \
    memset(&hip_rt.f, 0, sizeof hip_rt.f);                                                  \
    return;                                                                                 \
  }
  HIP_RUNTIME_FNS(HIP_RESOLVE)
#undef HIP_RESOLVE
  hip_rt.GetDeviceProperties = (hip_props_fn)dlsym(h, "hipGetDevicePropertiesR0000");
  if (!hip_rt.GetDeviceProperties)
    hip_rt.GetDeviceProperties = (hip_props_fn)dlsym(h, "hipGetDeviceProperties");
  if (!hip_rt.GetDeviceProperties) {
    snprintf(hip_rt.why, sizeof hip_rt.why, "%s lacks hipGetDeviceProperties", hip_rt.lib);
    dlclose(h);
    memset(&hip_rt.f, 0, sizeof hip_rt.f);
    return;
  }
  hip_rt.handle = h;
  /* Without a GPU hipInit answers hipErrorNoDevice or (ROCm 5.2 without /dev/kfd)
   * hipErrorInvalidDevice; hip_no_device turns that into the reason. */
  hip_rt.init = hip_rt.f.Init(0);
  hip_rt.ok = 1;
}

/* Writes why no AMD GPU is usable into err: the runtime's answers (hipInit and
 * hipGetDeviceCount) and the state of /dev/kfd, the amdgpu compute driver's device
 * file, which every ROCm process opens. */
static void hip_no_device(hipError_t count_rc, char *err, size_t errlen) {
  ka_sb sb = {0};
  ka_sb_printf(&sb, "no AMD GPU: the ROCm HIP runtime (%s) reports none (", hip_rt.lib);
  if (hip_rt.init != hipSuccess)
    ka_sb_printf(&sb, "hipInit: %s (%d)", hip_rt.f.GetErrorName(hip_rt.init), (int)hip_rt.init);
  else if (count_rc != hipSuccess)
    ka_sb_printf(&sb, "hipGetDeviceCount: %s (%d)", hip_rt.f.GetErrorName(count_rc), (int)count_rc);
  else
    ka_sb_puts(&sb, "hipGetDeviceCount: 0 devices");
  if (access("/dev/kfd", F_OK) != 0)
    ka_sb_puts(&sb,
               "); /dev/kfd does not exist: the amdgpu kernel driver is not loaded or "
               "there is no AMD GPU");
  else if (access("/dev/kfd", R_OK | W_OK) != 0)
    ka_sb_puts(&sb,
               "); /dev/kfd exists but is not readable and writable by this user (add "
               "it to the 'render' and 'video' groups)");
  else
    ka_sb_puts(&sb, ")");
  ka_seterr(err, errlen, KA_EUNAVAIL, "%s", sb.s ? sb.s : "no AMD GPU");
  ka_sb_free(&sb);
}

static void hip_rtc_load(void) {
  static const char *const names[] = {"libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5",
                                      "libhiprtc.so"};
  ka_sb why = {0};
  void *h = hip_dlopen_any(names, 4, &why, hip_rtc.lib, sizeof hip_rtc.lib);
  if (!h) {
    /* ROCm 5.2 (Debian 12): hiprtc lives in libamdhip64 */
    pthread_once(&hip_rt_once, hip_rt_load);
    if (hip_rt.handle && dlsym(hip_rt.handle, "hiprtcCompileProgram")) {
      h = hip_rt.handle;
      snprintf(hip_rtc.lib, sizeof hip_rtc.lib, "%s", hip_rt.lib);
    }
  }
  if (!h) {
    snprintf(hip_rtc.why, sizeof hip_rtc.why,
             "hiprtc not found (libhiprtc.so, or libamdhip64.so of ROCm 5.2): %s%s%s",
             why.s ? why.s : "", hip_rt.handle ? "" : "; ", hip_rt.handle ? "" : hip_rt.why);
    ka_sb_free(&why);
    return;
  }
  ka_sb_free(&why);
#define HIP_RESOLVE(field, sym, req)                                                            \
  hip_rtc.f.field = (__typeof__(sym) *)dlsym(h, #sym);                                          \
  if (!hip_rtc.f.field && req) {                                                                \
    snprintf(hip_rtc.why, sizeof hip_rtc.why, "hiprtc library %s lacks %s", hip_rtc.lib, #sym); \
    memset(&hip_rtc.f, 0, sizeof hip_rtc.f);                                                    \
    return;                                                                                     \
  }
  HIP_RTC_FNS(HIP_RESOLVE)
#undef HIP_RESOLVE
  if (hip_rtc.f.Version(&hip_rtc.major, &hip_rtc.minor) != HIPRTC_SUCCESS)
    hip_rtc.major = hip_rtc.minor = 0;
  hip_rtc.ok = 1;
}

/* The installed compiler's own target list (amd_comgr_get_isa_count/_name). */
static void hip_comgr_load(void) {
  static const char *const names[] = {"libamd_comgr.so.3", "libamd_comgr.so.2", "libamd_comgr.so"};
  ka_sb why = {0};
  char lib[64];
  void *h = hip_dlopen_any(names, 3, &why, lib, sizeof lib);
  if (!h) {
    snprintf(hip_comgr.why, sizeof hip_comgr.why,
             "ROCm code object manager not found (libamd_comgr.so): %s", why.s ? why.s : "");
    ka_sb_free(&why);
    return;
  }
  ka_sb_free(&why);
  hip_comgr_status (*count)(size_t *) =
      (hip_comgr_status(*)(size_t *))dlsym(h, "amd_comgr_get_isa_count");
  hip_comgr_status (*name)(size_t, const char **) =
      (hip_comgr_status(*)(size_t, const char **))dlsym(h, "amd_comgr_get_isa_name");
  size_t n = 0;
  if (!count || !name || count(&n) != 0) {
    snprintf(hip_comgr.why, sizeof hip_comgr.why, "%s cannot list its targets", lib);
    return;
  }
  for (size_t i = 0; i < n && hip_comgr.nisa < HIP_MAX_ISAS; i++) {
    const char *s = NULL;
    if (name(i, &s) != 0 || !s) continue;
    const char *p = strstr(s, "--"); /* amdgcn-amd-amdhsa--gfx90a[:feature...] */
    p = p ? p + 2 : s;
    snprintf(hip_comgr.isa[hip_comgr.nisa++], sizeof hip_comgr.isa[0], "%s", p);
  }
  if (hip_comgr.nisa == 0) {
    snprintf(hip_comgr.why, sizeof hip_comgr.why, "%s lists no targets", lib);
    return;
  }
  hip_comgr.ok = 1;
}

static void hip_smi_load(void) {
  static const char *const names[] = {"librocm_smi64.so.7", "librocm_smi64.so.6",
                                      "librocm_smi64.so.5", "librocm_smi64.so.1",
                                      "librocm_smi64.so"};
  ka_sb why = {0};
  char lib[64];
  void *h = hip_dlopen_any(names, 5, &why, lib, sizeof lib);
  if (!h) {
    snprintf(hip_smi.why, sizeof hip_smi.why, "rocm-smi not found (librocm_smi64.so): %s",
             why.s ? why.s : "");
    ka_sb_free(&why);
    return;
  }
  ka_sb_free(&why);
#define HIP_RESOLVE(field, sym, req)                                     \
  hip_smi.f.field = (__typeof__(sym) *)dlsym(h, #sym);                   \
  if (!hip_smi.f.field && req) {                                         \
    snprintf(hip_smi.why, sizeof hip_smi.why, "%s lacks %s", lib, #sym); \
    dlclose(h);                                                          \
    return;                                                              \
  }
  HIP_SMI_FNS(HIP_RESOLVE)
#undef HIP_RESOLVE
  hip_smi.power_get = (hip_smi_power_get_fn)dlsym(h, "rsmi_dev_power_get");
  hip_smi.socket_power_get = (hip_smi_socket_power_fn)dlsym(h, "rsmi_dev_current_socket_power_get");
  rsmi_version_t v = {0};
  if (hip_smi.f.version_get(&v) == RSMI_STATUS_SUCCESS) hip_smi.version_major = v.major;
  rsmi_status_t rc = hip_smi.f.init(0);
  if (rc != RSMI_STATUS_SUCCESS) {
    snprintf(hip_smi.why, sizeof hip_smi.why, "rsmi_init failed (%d)", (int)rc);
    return; /* never shut down: it lives as long as the process */
  }
  hip_smi.ok = 1;
}

/* Loads the runtime once; returns KA_OK or KA_EUNAVAIL with the reason in err. */
static int hip_runtime(char *err, size_t errlen) {
  pthread_once(&hip_rt_once, hip_rt_load);
  if (!hip_rt.ok) return ka_seterr(err, errlen, KA_EUNAVAIL, "%s", hip_rt.why);
  return KA_OK;
}

/* ---- errors */

/* The ka_err for a hipError_t; cfg is the code for configuration errors (bad launch
 * parameters or handles): KA_ELAUNCH in launch, KA_EINVAL elsewhere. */
static int hip_code(hipError_t rc, int cfg) {
  switch (rc) {
    case hipSuccess:
      return KA_OK;
    case hipErrorOutOfMemory:
      return KA_EOOM;
    /* faults of a kernel: the device or context is unusable after these */
    case hipErrorIllegalAddress:
    case hipErrorLaunchFailure:
    case hipErrorLaunchTimeOut:
    case hipErrorAssert:
    case hipErrorECCNotCorrectable:
    case hipErrorPriorLaunchFailure:
    case hipErrorContextIsDestroyed:
    case hipErrorRuntimeMemory:
    case hipErrorRuntimeOther:
    case hipErrorUnknown:
      return KA_EDEVICE;
    /* launch configuration and handles */
    case hipErrorInvalidValue:
    case hipErrorInvalidConfiguration:
    case hipErrorInvalidDeviceFunction:
    case hipErrorInvalidHandle:
    case hipErrorInvalidDevicePointer:
    case hipErrorInvalidContext:
    case hipErrorNotFound:
    case hipErrorLaunchOutOfResources:
    case hipErrorCooperativeLaunchTooLarge:
    case hipErrorNotSupported:
    case hipErrorMissingConfiguration:
      return cfg;
    /* runtime or device absent or unusable */
    case hipErrorNotInitialized:
    case hipErrorDeinitialized:
    case hipErrorInsufficientDriver:
    case hipErrorNoDevice:
    case hipErrorInvalidDevice:
      return KA_EUNAVAIL;
    default:
      return KA_EDEVICE;
  }
}

/* Formats "<op>: <hipErrorName> (<n>): <string>" into ctx->err (if ctx) and err (if
 * non-NULL) and returns hip_code(rc, cfg). */
static int hip_fail(ka_backend_ctx *ctx, char *err, size_t errlen, hipError_t rc, int cfg,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int hip_fail(ka_backend_ctx *ctx, char *err, size_t errlen, hipError_t rc, int cfg,
                    const char *fmt, ...) {
  char op[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(op, sizeof op, fmt, ap);
  va_end(ap);
  const char *name = hip_rt.f.GetErrorName ? hip_rt.f.GetErrorName(rc) : NULL;
  const char *str = hip_rt.f.GetErrorString ? hip_rt.f.GetErrorString(rc) : NULL;
  char msg[HIP_ERRLEN];
  snprintf(msg, sizeof msg, "%s: %s (%d): %s", op, name ? name : "hipError?", (int)rc,
           str ? str : "unrecognized error code");
  if (ctx) snprintf(ctx->err, sizeof ctx->err, "%s", msg);
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return hip_code(rc, cfg);
}

/* Records a non-HIP error in ctx->err and returns code. */
static int hip_seterr(ka_backend_ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int hip_seterr(ka_backend_ctx *ctx, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
  va_end(ap);
  return code;
}

/* Selects ctx's device on the calling thread. */
static int hip_enter(ka_backend_ctx *ctx, const char *op) {
  if (!ctx) return KA_EINVAL;
  hipError_t rc = hip_rt.f.SetDevice(ctx->index);
  if (rc != hipSuccess)
    return hip_fail(ctx, NULL, 0, rc, KA_EINVAL, "%s: hipSetDevice(%d)", op, ctx->index);
  return KA_OK;
}

/* ---- ops */

/* Number of HIP devices into *count. With no runtime (libamdhip64 missing or too old),
 * when hipInit fails, or when hipGetDeviceCount answers hipErrorNoDevice (a machine
 * without an AMD GPU or without the amdgpu kernel driver), *count is 0, the reason goes
 * into err and KA_OK is returned: absence is a fact, not a fault. Thread safe. */
static int hip_device_count(int *count, char *err, size_t errlen) {
  *count = 0;
  if (hip_runtime(err, errlen) != KA_OK) return KA_OK;
  int n = 0;
  hipError_t rc = hip_rt.f.GetDeviceCount(&n);
  if (hip_rt.init != hipSuccess || rc == hipErrorNoDevice || (rc == hipSuccess && n <= 0)) {
    hip_no_device(rc, err, errlen);
    return KA_OK;
  }
  if (rc != hipSuccess) {
    hip_fail(NULL, err, errlen, rc, KA_EINVAL, "hipGetDeviceCount");
    return KA_OK;
  }
  *count = n;
  return KA_OK;
}

static void hip_close(ka_backend_ctx *ctx);

/* Opens device index: selects it, creates one blocking stream (it synchronizes with the
 * null stream), two timing events and the cache-flush buffer (see HIP_FLUSH_FLOOR), and
 * reads the device's gcnArchName. On success the caller owns *ctx (hip_close). On
 * failure everything made so far is released, *ctx is NULL and err says why:
 * KA_EUNAVAIL (no runtime / device), KA_EINVAL (bad index), KA_EOOM, KA_ENOMEM. Thread
 * safe (each call its own context). */
static int hip_open(int index, ka_backend_ctx **out, char *err, size_t errlen) {
  *out = NULL;
  int rc = hip_runtime(err, errlen);
  if (rc != KA_OK) return rc;
  int n = 0;
  hipError_t hr = hip_rt.f.GetDeviceCount(&n);
  if (hip_rt.init != hipSuccess || hr == hipErrorNoDevice || (hr == hipSuccess && n <= 0)) {
    hip_no_device(hr, err, errlen);
    return KA_EUNAVAIL;
  }
  if (hr != hipSuccess) return hip_fail(NULL, err, errlen, hr, KA_EINVAL, "hipGetDeviceCount");
  if (index < 0 || index >= n)
    return ka_seterr(err, errlen, KA_EINVAL, "hip device %d does not exist (%d devices)", index, n);
  ka_backend_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return ka_seterr(err, errlen, KA_ENOMEM, "out of host memory");
  ctx->index = index;
  const char *op = "hipSetDevice";
  if ((hr = hip_rt.f.SetDevice(index)) != hipSuccess) goto fail;
  hip_props_t prop;
  memset(&prop, 0, sizeof prop);
  op = "hipGetDeviceProperties";
  if ((hr = hip_rt.GetDeviceProperties(&prop, index)) != hipSuccess) goto fail;
  prop.gcnArchName[sizeof prop.gcnArchName - 1] = '\0';
  snprintf(ctx->arch, sizeof ctx->arch, "%s", prop.gcnArchName);
  int dom = 0, bus = 0, dev = 0;
  if (hip_rt.f.DeviceGetAttribute(&dom, hipDeviceAttributePciDomainID, index) == hipSuccess &&
      hip_rt.f.DeviceGetAttribute(&bus, hipDeviceAttributePciBusId, index) == hipSuccess &&
      hip_rt.f.DeviceGetAttribute(&dev, hipDeviceAttributePciDeviceId, index) == hipSuccess)
    /* rocm_smi.h, rsmi_dev_pci_id_get: (DOMAIN << 32) | (BUS << 8) | (DEVICE << 3) | FN */
    ctx->pci_bdfid = ((uint64_t)(uint32_t)dom << 32) | ((uint64_t)(bus & 0xff) << 8) |
                     ((uint64_t)(dev & 0x1f) << 3);
  op = "hipStreamCreateWithFlags";
  if ((hr = hip_rt.f.StreamCreateWithFlags(&ctx->stream, hipStreamDefault)) != hipSuccess)
    goto fail;
  op = "hipEventCreate";
  if ((hr = hip_rt.f.EventCreate(&ctx->ev_start)) != hipSuccess) goto fail;
  if ((hr = hip_rt.f.EventCreate(&ctx->ev_stop)) != hipSuccess) goto fail;
  int l2 = 0;
  if (hip_rt.f.DeviceGetAttribute(&l2, hipDeviceAttributeL2CacheSize, index) != hipSuccess ||
      l2 < 0)
    l2 = 0;
  size_t mem = 0;
  if (hip_rt.f.DeviceTotalMem(&mem, index) != hipSuccess) mem = 0;
  ctx->flush_bytes = 2 * (size_t)l2 > HIP_FLUSH_FLOOR ? 2 * (size_t)l2 : HIP_FLUSH_FLOOR;
  if (mem > 0 && ctx->flush_bytes > mem / 8) ctx->flush_bytes = mem / 8;
  if (ctx->flush_bytes < 2 * (size_t)l2) ctx->flush_bytes = 2 * (size_t)l2;
  op = "hipMalloc(flush buffer)";
  if ((hr = hip_rt.f.Malloc(&ctx->flush, ctx->flush_bytes)) != hipSuccess) goto fail;
  *out = ctx;
  return KA_OK;
fail:
  rc = hip_fail(NULL, err, errlen, hr, KA_EINVAL, "open hip device %d: %s", index, op);
  hip_close(ctx);
  return rc;
}

/* Releases everything open made (flush buffer, events, stream); modules and
 * allocations of the caller should be freed first. NULL is a no-op. Errors are ignored
 * (after a device fault every call fails). */
static void hip_close(ka_backend_ctx *ctx) {
  if (!ctx) return;
  if (hip_rt.f.SetDevice && hip_rt.f.SetDevice(ctx->index) == hipSuccess) {
    if (ctx->flush) hip_rt.f.Free(ctx->flush);
    if (ctx->ev_stop) hip_rt.f.EventDestroy(ctx->ev_stop);
    if (ctx->ev_start) hip_rt.f.EventDestroy(ctx->ev_start);
    if (ctx->stream) hip_rt.f.StreamDestroy(ctx->stream);
  }
  free(ctx);
}

/* The text of the context's last error ("" if none). Valid until the next op on ctx. */
static const char *hip_last_error(ka_backend_ctx *ctx) {
  return ctx ? ctx->err : "";
}

/* Fills *out with the device's properties (see ka_device_info), every one from the
 * device: arch = gcnArchName ("gfx942:sramecc+:xnack-"), multiprocessors = compute
 * units (hipDeviceAttributeMultiprocessorCount; half the CUs on RDNA in WGP mode),
 * warp_size = wavefront size (64 on CDNA, 32 on RDNA by default), shared bytes = LDS per
 * block (hipDeviceAttributeMaxSharedMemoryPerBlock; AMD needs no opt-in), l2_bytes =
 * hipDeviceAttributeL2CacheSize, clock_mhz from hipDeviceAttributeClockRate (kHz).
 * mem_bandwidth_gbps is 0 (unknown): HIP's memory clock does not give the data rate,
 * which depends on the memory type. Returns KA_OK or the mapped hipError_t. */
static int hip_device_info(ka_backend_ctx *ctx, ka_device_info *out) {
  memset(out, 0, sizeof *out);
  int rc = hip_enter(ctx, "device_info");
  if (rc != KA_OK) return rc;
  snprintf(out->backend, sizeof out->backend, "hip");
  out->index = ctx->index;
  snprintf(out->arch, sizeof out->arch, "%s", ctx->arch);
  hipError_t hr = hip_rt.f.DeviceGetName(out->name, (int)sizeof out->name, ctx->index);
  if (hr != hipSuccess) return hip_fail(ctx, NULL, 0, hr, KA_EINVAL, "hipDeviceGetName");
  size_t mem = 0;
  hr = hip_rt.f.DeviceTotalMem(&mem, ctx->index);
  if (hr != hipSuccess) return hip_fail(ctx, NULL, 0, hr, KA_EINVAL, "hipDeviceTotalMem");
  out->memory_bytes = (int64_t)mem;
  struct {
    hipDeviceAttribute_t attr;
    int v;
  } a[] = {
      {hipDeviceAttributeMultiprocessorCount, 0}, {hipDeviceAttributeWarpSize, 0},
      {hipDeviceAttributeL2CacheSize, 0},         {hipDeviceAttributeMaxSharedMemoryPerBlock, 0},
      {hipDeviceAttributeMaxThreadsPerBlock, 0},  {hipDeviceAttributeClockRate, 0}, /* kHz */
  };
  for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
    hr = hip_rt.f.DeviceGetAttribute(&a[i].v, a[i].attr, ctx->index);
    if (hr != hipSuccess) {
      if (i < 5)
        return hip_fail(ctx, NULL, 0, hr, KA_EINVAL, "hipDeviceGetAttribute(%d)", (int)a[i].attr);
      a[i].v = 0; /* clock: optional */
    }
  }
  out->multiprocessors = a[0].v;
  out->warp_size = a[1].v;
  out->l2_bytes = a[2].v;
  out->shared_bytes_per_block = a[3].v;
  out->max_threads_per_block = a[4].v;
  out->clock_mhz = a[5].v / 1000;
  int ver = 0;
  if (hip_rt.f.RuntimeGetVersion(&ver) != hipSuccess) ver = 0;
  /* HIP_VERSION = major * 10000000 + minor * 100000 + patch (hip_version.h) */
  snprintf(out->driver, sizeof out->driver, "ROCm HIP %d.%d.%d", ver / 10000000,
           (ver / 100000) % 100, ver % 100000);
  snprintf(out->timer, sizeof out->timer, "device events");
  return KA_OK;
}

/* Reads the current entry of a rocm-smi frequency table in MHz, either layout; 0 when
 * unreadable. */
static int hip_smi_clock(uint32_t dv, rsmi_clk_type_t type) {
  if (!hip_smi.f.dev_gpu_clk_freq_get) return 0;
  union {
    hip_smi_freq_v1 v1;
    hip_smi_freq_v6 v6;
    unsigned char room[1024]; /* room for a later, larger table */
  } u;
  memset(&u, 0, sizeof u);
  if (hip_smi.f.dev_gpu_clk_freq_get(dv, type, (rsmi_frequencies_t *)(void *)&u) !=
      RSMI_STATUS_SUCCESS)
    return 0;
  uint32_t num, cur;
  uint64_t hz;
  if (hip_smi.version_major >= 6) {
    num = u.v6.num_supported, cur = u.v6.current;
    hz = cur < num && cur < 33 ? u.v6.frequency[cur] : 0;
  } else {
    num = u.v1.num_supported, cur = u.v1.current;
    hz = cur < num && cur < 32 ? u.v1.frequency[cur] : 0;
  }
  return (int)(hz / 1000000); /* Hz -> MHz */
}

/* Telemetry from rocm-smi: device name, system (shader) and memory clocks (MHz),
 * temperature (C; edge sensor, else junction, as MI300 has no edge sensor), power (W;
 * rsmi_dev_power_get, else current socket power, else average power; microwatts in
 * all three). The rocm-smi device is matched to the HIP device by PCI address. KA_OK
 * except for a NULL ctx (KA_EINVAL): with no rocm-smi or no match out->valid is 0; a
 * field rocm-smi cannot read stays 0. Never fails an evaluation. */
static int hip_telemetry(ka_backend_ctx *ctx, ka_telemetry *out) {
  memset(out, 0, sizeof *out);
  if (!ctx) return KA_EINVAL;
  pthread_once(&hip_smi_once, hip_smi_load);
  if (!hip_smi.ok) return KA_OK;
  if (ctx->smi_state == 0) {
    ctx->smi_state = -1;
    uint32_t n = 0;
    if (ctx->pci_bdfid && hip_smi.f.num_monitor_devices(&n) == RSMI_STATUS_SUCCESS)
      for (uint32_t i = 0; i < n; i++) {
        uint64_t id = 0;
        /* compare domain, bus and device only: HIP reports no function, and
         * rocm_smi_lib >= 6 puts a partition id in bits 28-31 (the first partition of
         * a partitioned GPU is taken) */
        if (hip_smi.f.dev_pci_id_get(i, &id) == RSMI_STATUS_SUCCESS &&
            (id & 0xFFFFFFFF0000FFF8ull) == ctx->pci_bdfid) {
          ctx->smi_index = i;
          ctx->smi_state = 1;
          break;
        }
      }
  }
  if (ctx->smi_state != 1) return KA_OK;
  uint32_t dv = ctx->smi_index;
  if (!hip_smi.f.dev_name_get ||
      hip_smi.f.dev_name_get(dv, out->device_name, sizeof out->device_name) != RSMI_STATUS_SUCCESS)
    out->device_name[0] = '\0';
  out->sm_clock_mhz = hip_smi_clock(dv, RSMI_CLK_TYPE_SYS);
  out->mem_clock_mhz = hip_smi_clock(dv, RSMI_CLK_TYPE_MEM);
  int64_t mc = 0;
  if (hip_smi.f.dev_temp_metric_get &&
      (hip_smi.f.dev_temp_metric_get(dv, RSMI_TEMP_TYPE_EDGE, RSMI_TEMP_CURRENT, &mc) ==
           RSMI_STATUS_SUCCESS ||
       hip_smi.f.dev_temp_metric_get(dv, RSMI_TEMP_TYPE_JUNCTION, RSMI_TEMP_CURRENT, &mc) ==
           RSMI_STATUS_SUCCESS))
    out->temperature_c = (int)(mc / 1000); /* millidegrees C */
  uint64_t uw = 0;
  int ptype = 0;
  if ((hip_smi.power_get && hip_smi.power_get(dv, &uw, &ptype) == RSMI_STATUS_SUCCESS) ||
      (hip_smi.socket_power_get && hip_smi.socket_power_get(dv, &uw) == RSMI_STATUS_SUCCESS) ||
      (hip_smi.f.dev_power_ave_get &&
       hip_smi.f.dev_power_ave_get(dv, 0, &uw) == RSMI_STATUS_SUCCESS))
    out->power_w = (double)uw / 1e6; /* uW -> W */
  out->valid = 1;
  return KA_OK;
}

/* ---- compile */

/* 1 if arch is "gfx" + [0-9a-z-]+ (gfx90a, gfx942, gfx1100, gfx9-generic) followed by
 * any number of ":feature+" / ":feature-" (gfx90a:sramecc+:xnack-). */
static int hip_arch_syntax_ok(const char *arch) {
  if (!arch || strncmp(arch, "gfx", 3)) return 0;
  const char *p = arch + 3;
  int n = 0;
  while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || *p == '-') p++, n++;
  if (n == 0) return 0;
  while (*p == ':') {
    p++;
    int k = 0;
    while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_') p++, k++;
    if (k == 0 || (*p != '+' && *p != '-')) return 0;
    p++;
  }
  return *p == '\0';
}

/* 1 if the processor of arch (the part before any ':') is a target of the installed
 * compiler (comgr's list). */
static int hip_arch_known(const char *arch) {
  size_t n = strcspn(arch, ":");
  for (int i = 0; i < hip_comgr.nisa; i++) {
    const char *s = hip_comgr.isa[i];
    if (strlen(s) >= n && !strncmp(s, arch, n) && (s[n] == '\0' || s[n] == ':')) return 1;
  }
  return 0;
}

/* The installed compiler's processors, space-separated, without duplicates. */
static void hip_arch_list(ka_sb *sb) {
  for (int i = 0; i < hip_comgr.nisa; i++) {
    size_t n = strcspn(hip_comgr.isa[i], ":");
    int dup = 0;
    for (int j = 0; j < i && !dup; j++)
      dup = strcspn(hip_comgr.isa[j], ":") == n && !strncmp(hip_comgr.isa[j], hip_comgr.isa[i], n);
    if (!dup) ka_sb_printf(sb, "%s%.*s", sb->len ? " " : "", (int)n, hip_comgr.isa[i]);
  }
}

/* Looks for kernel `name` in an AMDGPU code object (ELF): a kernel has a global
 * function symbol and a kernel-descriptor object "<name>.kd" (LLVM AMDGPUUsage, "Code
 * Object V3+ Metadata" and "Kernel Descriptor"). Returns 1 found, 0 not found, -1 not
 * an ELF image. If not found and a C++-mangled kernel embeds the name, copies that
 * symbol (without ".kd") to mangled (for the log). */
static int hip_code_has_kernel(const unsigned char *img, size_t size, const char *name,
                               char *mangled, size_t mlen) {
  mangled[0] = '\0';
  if (size < sizeof(Elf64_Ehdr) || memcmp(img, ELFMAG, SELFMAG) || img[EI_CLASS] != ELFCLASS64)
    return -1;
  Elf64_Ehdr eh;
  memcpy(&eh, img, sizeof eh);
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > size ||
      (size - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum)
    return -1;
  char kd[300], needle[300];
  snprintf(kd, sizeof kd, "%s.kd", name);
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
      if (ELF64_ST_TYPE(sym.st_info) != STT_OBJECT || ELF64_ST_BIND(sym.st_info) != STB_GLOBAL ||
          sym.st_name >= strh.sh_size)
        continue;
      const char *sn = strtab + sym.st_name;
      size_t sl = strnlen(sn, strh.sh_size - sym.st_name);
      if (sl == strh.sh_size - sym.st_name) continue; /* not terminated */
      if (!strcmp(sn, kd)) return 1;
      if (sl > 3 && !strcmp(sn + sl - 3, ".kd") && !strncmp(sn, "_Z", 2) && strstr(sn, needle))
        snprintf(mangled, mlen, "%.*s", (int)(sl - 3), sn);
    }
  }
  return 0;
}

/* Copies the first line of log that mentions "error" into dst (for err). */
static void hip_first_error(const char *log, char *dst, size_t dlen) {
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

static void hip_module_free(ka_backend_ctx *ctx, ka_module *m);

/* Compiles req->sources[0] with hiprtc to an AMDGPU code object for req->arch (or the
 * context's device's gcnArchName), options --offload-arch=<arch> -std=c++17 (no fast
 * math). The arch must be a target of the installed compiler (comgr's own list):
 * anything else is refused with KA_EINVAL and the list, before hiprtc sees it (ROCm
 * 5.2's compiler crashes on gfx942). The source is preceded by hip_prelude and a
 * `#line 1 "<name>"`; sources[1..] are in-memory headers under their names. Every name
 * in req->kernels must be an extern "C" __global__ kernel of the code object (checked
 * in its ELF symbol table, also without a device). With ctx the code object is loaded
 * (hipModuleLoadData) and *out receives the module (caller frees with module_free);
 * with ctx NULL nothing is loaded and *out stays NULL. *log (if non-NULL) always
 * receives a malloc'd, NUL-terminated log (hiprtc's log plus our notes), owned by the
 * caller, also on failure. Returns KA_ECOMPILE (compile error, missing kernel, code
 * object the runtime rejects), KA_EUNAVAIL (no hiprtc / comgr / runtime), KA_EINVAL
 * (bad request, unknown or unsupported arch), KA_EOOM, KA_ENOMEM, KA_EINTERNAL
 * (hiprtc fault). Thread safe for distinct contexts. */
static int hip_compile(ka_backend_ctx *ctx, const ka_compile_req *req, ka_module **out, char **log,
                       char *err, size_t errlen) {
  char e[HIP_ERRLEN] = "";
  ka_sb lg = {0}, main_src = {0};
  int rc = KA_OK;
  hiprtcProgram prog = NULL;
  char **texts = NULL;
  const char **hdr = NULL, **hdr_names = NULL;
  char *code = NULL;
  ka_module *m = NULL;
  int nhdr = 0;
  if (out) *out = NULL;
  if (log) *log = NULL;

  if (!req || !req->language || !req->sources || req->nsources < 1 || !req->sources[0].text ||
      req->nkernels < 0 || (req->nkernels > 0 && !req->kernels)) {
    rc = ka_seterr(e, sizeof e, KA_EINVAL, "compile: incomplete request");
    goto done;
  }
  if (strcmp(req->language, "hip")) {
    rc = ka_seterr(e, sizeof e, KA_EINVAL,
                   "compile: the hip backend compiles language hip, not '%s'", req->language);
    goto done;
  }
  const char *arch = req->arch ? req->arch : ctx ? ctx->arch : NULL;
  if (!hip_arch_syntax_ok(arch)) {
    rc = ka_seterr(e, sizeof e, KA_EINVAL,
                   "compile: %s architecture '%s' (want gfx<id>[:feature+|-...], e.g. gfx90a)",
                   arch ? "bad" : "no", arch ? arch : "");
    goto done;
  }
  pthread_once(&hip_comgr_once, hip_comgr_load);
  if (!hip_comgr.ok) {
    rc = ka_seterr(e, sizeof e, KA_EUNAVAIL,
                   "cannot list the installed ROCm compiler's targets: %s", hip_comgr.why);
    goto done;
  }
  if (!hip_arch_known(arch)) {
    ka_sb l = {0};
    hip_arch_list(&l);
    rc = ka_seterr(e, sizeof e, KA_EINVAL,
                   "unsupported architecture %s: the installed ROCm compiler does not know it "
                   "(it knows: %s); install a ROCm release that supports %s",
                   arch, l.s ? l.s : "", arch);
    ka_sb_free(&l);
    ka_sb_printf(&lg, "error: %s\n", e);
    goto done;
  }
  pthread_once(&hip_rtc_once, hip_rtc_load);
  if (!hip_rtc.ok) {
    rc = ka_seterr(e, sizeof e, KA_EUNAVAIL, "%s", hip_rtc.why);
    goto done;
  }
  if (ctx && (rc = hip_runtime(e, sizeof e)) != KA_OK) goto done;

  /* NUL-terminated copies: ka_source text is (pointer, length). */
  texts = calloc((size_t)req->nsources, sizeof *texts);
  hdr = calloc((size_t)req->nsources + 1, sizeof *hdr);
  hdr_names = calloc((size_t)req->nsources + 1, sizeof *hdr_names);
  if (!texts || !hdr || !hdr_names) {
    rc = ka_seterr(e, sizeof e, KA_ENOMEM, "compile: out of host memory");
    goto done;
  }
  for (int i = 1; i < req->nsources; i++) {
    const ka_source *s = &req->sources[i];
    if (!s->text || !s->name) continue;
    texts[i] = malloc(s->len + 1);
    if (!texts[i]) {
      rc = ka_seterr(e, sizeof e, KA_ENOMEM, "compile: out of host memory");
      goto done;
    }
    if (s->len) memcpy(texts[i], s->text, s->len);
    texts[i][s->len] = '\0';
    hdr[nhdr] = texts[i];
    hdr_names[nhdr++] = s->name;
  }
  const char *pname = req->sources[0].name ? req->sources[0].name : "kernel.hip";
  ka_sb_puts(&main_src, hip_prelude);
  ka_sb_puts(&main_src, "#line 1 \"");
  for (const char *p = pname; *p; p++) /* a file name in a string literal */
    ka_sb_printf(&main_src, (*p == '"' || *p == '\\') ? "\\%c" : "%c", *p);
  ka_sb_puts(&main_src, "\"\n");
  ka_sb_append(&main_src, req->sources[0].text, req->sources[0].len);
  if (main_src.oom) {
    rc = ka_seterr(e, sizeof e, KA_ENOMEM, "compile: out of host memory");
    goto done;
  }
  hiprtcResult hr = hip_rtc.f.CreateProgram(&prog, main_src.s, pname, nhdr, hdr, hdr_names);
  if (hr != HIPRTC_SUCCESS) {
    prog = NULL;
    rc = ka_seterr(e, sizeof e, hr == HIPRTC_ERROR_OUT_OF_MEMORY ? KA_ENOMEM : KA_EINTERNAL,
                   "hiprtcCreateProgram: %s", hip_rtc.f.GetErrorString(hr));
    goto done;
  }
  char archopt[96];
  snprintf(archopt, sizeof archopt, "--offload-arch=%s", arch);
  const char *opts[] = {archopt, "-std=c++17"};
  hiprtcResult cr = hip_rtc.f.CompileProgram(prog, 2, opts);
  size_t lsz = 0;
  if (hip_rtc.f.GetProgramLogSize(prog, &lsz) == HIPRTC_SUCCESS && lsz > 0) {
    char *buf = malloc(lsz + 1);
    if (buf && hip_rtc.f.GetProgramLog(prog, buf) == HIPRTC_SUCCESS) {
      buf[lsz] = '\0';
      ka_sb_puts(&lg, buf);
    }
    free(buf);
  }
  if (cr != HIPRTC_SUCCESS) {
    char first[512];
    hip_first_error(lg.s, first, sizeof first);
    if (cr == HIPRTC_ERROR_COMPILATION)
      rc = ka_seterr(e, sizeof e, KA_ECOMPILE, "hiprtc: %s failed to compile for %s%s%s", pname,
                     arch, first[0] ? ": " : "", first);
    else
      rc = ka_seterr(e, sizeof e,
                     cr == HIPRTC_ERROR_INVALID_OPTION  ? KA_EINVAL
                     : cr == HIPRTC_ERROR_OUT_OF_MEMORY ? KA_ENOMEM
                                                        : KA_EINTERNAL,
                     "hiprtcCompileProgram(%s, %s): %s%s%s", pname, arch,
                     hip_rtc.f.GetErrorString(cr), first[0] ? ": " : "", first);
    goto done;
  }
  size_t csz = 0;
  if ((hr = hip_rtc.f.GetCodeSize(prog, &csz)) != HIPRTC_SUCCESS || csz == 0) {
    rc = ka_seterr(e, sizeof e, KA_EINTERNAL, "hiprtcGetCodeSize: %s",
                   hr != HIPRTC_SUCCESS ? hip_rtc.f.GetErrorString(hr) : "empty code object");
    goto done;
  }
  code = malloc(csz);
  if (!code) {
    rc = ka_seterr(e, sizeof e, KA_ENOMEM, "compile: out of host memory");
    goto done;
  }
  if ((hr = hip_rtc.f.GetCode(prog, code)) != HIPRTC_SUCCESS) {
    rc = ka_seterr(e, sizeof e, KA_EINTERNAL, "hiprtcGetCode: %s", hip_rtc.f.GetErrorString(hr));
    goto done;
  }
  /* Every kernel must be in the code object, with or without a device to load it on. */
  int missing = 0;
  for (int i = 0; i < req->nkernels; i++) {
    const char *k = req->kernels[i] ? req->kernels[i] : "";
    char mangled[256];
    int has = hip_code_has_kernel((const unsigned char *)code, csz, k, mangled, sizeof mangled);
    if (has == 1) continue;
    if (has < 0) {
      ka_sb_printf(&lg, "note: the code object is not an ELF image; kernel '%s' not checked\n", k);
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
  if ((rc = hip_enter(ctx, "compile")) != KA_OK) {
    snprintf(e, sizeof e, "%s", ctx->err);
    goto done;
  }
  m = calloc(1, sizeof *m + (size_t)req->nkernels * sizeof m->fns[0]);
  if (!m) {
    rc = ka_seterr(e, sizeof e, KA_ENOMEM, "compile: out of host memory");
    goto done;
  }
  hipError_t lr = hip_rt.f.ModuleLoadData(&m->mod, code);
  if (lr != hipSuccess) {
    m->mod = NULL;
    rc = hip_fail(NULL, e, sizeof e, lr, KA_ECOMPILE, "hipModuleLoadData(%s, %s)", pname, arch);
    if (lr == hipErrorInvalidImage || lr == hipErrorNoBinaryForGpu ||
        lr == hipErrorInvalidKernelFile || lr == hipErrorSharedObjectInitFailed ||
        lr == hipErrorSharedObjectSymbolNotFound || lr == hipErrorInvalidSource)
      rc = KA_ECOMPILE; /* the runtime rejects the image: a result for the submission */
    ka_sb_printf(&lg, "error: %s\n", e);
    goto done;
  }
  for (int i = 0; i < req->nkernels; i++) {
    hip_fn *f = &m->fns[m->nfns];
    lr = hip_rt.f.ModuleGetFunction(&f->fn, m->mod, req->kernels[i]);
    if (lr != hipSuccess) {
      rc =
          hip_fail(NULL, e, sizeof e, lr, KA_ECOMPILE, "hipModuleGetFunction(%s)", req->kernels[i]);
      if (lr == hipErrorNotFound || lr == hipErrorInvalidDeviceFunction) rc = KA_ECOMPILE;
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
  if (m) hip_module_free(ctx, m);
  free(code);
  if (prog) hip_rtc.f.DestroyProgram(&prog);
  if (texts)
    for (int i = 0; i < req->nsources; i++) free(texts[i]);
  free(texts);
  free((void *)hdr);
  free((void *)hdr_names);
  ka_sb_free(&main_src);
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
static void hip_module_free(ka_backend_ctx *ctx, ka_module *m) {
  if (!m) return;
  if (m->mod && ctx && hip_rt.f.SetDevice(ctx->index) == hipSuccess) hip_rt.f.ModuleUnload(m->mod);
  for (int i = 0; i < m->nfns; i++) free(m->fns[i].name);
  free(m);
}

/* ---- memory */

/* Allocates bytes (> 0) of device memory into *out. KA_EOOM when the device is full. */
static int hip_mem_alloc(ka_backend_ctx *ctx, size_t bytes, ka_devptr *out) {
  *out = 0;
  int rc = hip_enter(ctx, "mem_alloc");
  if (rc != KA_OK) return rc;
  if (bytes == 0) return hip_seterr(ctx, KA_EINVAL, "mem_alloc: zero bytes");
  void *p = NULL;
  hipError_t hr = hip_rt.f.Malloc(&p, bytes);
  if (hr != hipSuccess) return hip_fail(ctx, NULL, 0, hr, KA_EINVAL, "hipMalloc(%zu bytes)", bytes);
  *out = (ka_devptr)(uintptr_t)p;
  return KA_OK;
}

/* Frees device memory from mem_alloc; 0 is a no-op. Errors go to last_error only. */
static void hip_mem_free(ka_backend_ctx *ctx, ka_devptr p) {
  if (!p || hip_enter(ctx, "mem_free") != KA_OK) return;
  hipError_t hr = hip_rt.f.Free((void *)(uintptr_t)p);
  if (hr != hipSuccess) hip_fail(ctx, NULL, 0, hr, KA_EINVAL, "hipFree");
}

/* Copies bytes host -> device on the context's stream, after the work queued before it,
 * and waits: returns when src may be reused. */
static int hip_copy_to_device(ka_backend_ctx *ctx, ka_devptr dst, const void *src, size_t bytes) {
  int rc = hip_enter(ctx, "copy_to_device");
  if (rc != KA_OK || bytes == 0) return rc;
  hipError_t hr =
      hip_rt.f.MemcpyAsync((void *)(uintptr_t)dst, src, bytes, hipMemcpyHostToDevice, ctx->stream);
  if (hr == hipSuccess) hr = hip_rt.f.StreamSynchronize(ctx->stream);
  if (hr != hipSuccess)
    return hip_fail(ctx, NULL, 0, hr, KA_EINVAL, "hipMemcpyAsync(host to device, %zu bytes)",
                    bytes);
  return KA_OK;
}

/* Copies bytes device -> host after the work queued before it on the stream, and waits
 * (a kernel's fault surfaces here as KA_EDEVICE). */
static int hip_copy_to_host(ka_backend_ctx *ctx, void *dst, ka_devptr src, size_t bytes) {
  int rc = hip_enter(ctx, "copy_to_host");
  if (rc != KA_OK || bytes == 0) return rc;
  hipError_t hr = hip_rt.f.MemcpyAsync(dst, (const void *)(uintptr_t)src, bytes,
                                       hipMemcpyDeviceToHost, ctx->stream);
  if (hr == hipSuccess) hr = hip_rt.f.StreamSynchronize(ctx->stream);
  if (hr != hipSuccess)
    return hip_fail(ctx, NULL, 0, hr, KA_EINVAL, "hipMemcpyAsync(device to host, %zu bytes)",
                    bytes);
  return KA_OK;
}

/* Sets bytes of device memory to value, ordered with the stream (hipMemsetAsync). */
static int hip_memset8(ka_backend_ctx *ctx, ka_devptr dst, uint8_t value, size_t bytes) {
  int rc = hip_enter(ctx, "memset8");
  if (rc != KA_OK || bytes == 0) return rc;
  hipError_t hr = hip_rt.f.MemsetAsync((void *)(uintptr_t)dst, value, bytes, ctx->stream);
  if (hr != hipSuccess)
    return hip_fail(ctx, NULL, 0, hr, KA_EINVAL, "hipMemsetAsync(%zu bytes)", bytes);
  return KA_OK;
}

/* ---- launch and timing */

/* Enqueues l on the context's stream (asynchronous, hipModuleLaunchKernel). Arguments
 * are passed by value: KA_ARG_PTR as a device pointer, I32, I64. Dynamic shared memory
 * (LDS) needs no opt-in on AMD; above the device's limit the launch fails. Returns
 * KA_ELAUNCH for an unknown kernel or a bad configuration, KA_EDEVICE for a fault of
 * earlier work, KA_EOOM. */
static int hip_launch(ka_backend_ctx *ctx, ka_module *m, const ka_launch *l) {
  int rc = hip_enter(ctx, "launch");
  if (rc != KA_OK) return rc;
  if (!m || !l || !l->kernel) return hip_seterr(ctx, KA_ELAUNCH, "launch: no module or kernel");
  if (l->nargs < 0 || l->nargs > HIP_MAX_ARGS || (l->nargs > 0 && !l->args))
    return hip_seterr(ctx, KA_ELAUNCH, "launch %s: %d arguments (at most %d)", l->kernel, l->nargs,
                      HIP_MAX_ARGS);
  hipFunction_t fn = NULL;
  for (int i = 0; i < m->nfns && !fn; i++)
    if (!strcmp(m->fns[i].name, l->kernel)) fn = m->fns[i].fn;
  if (!fn) { /* not in the compile request: look it up, without caching */
    hipError_t hr = hip_rt.f.ModuleGetFunction(&fn, m->mod, l->kernel);
    if (hr == hipErrorNotFound || hr == hipErrorInvalidDeviceFunction)
      return hip_seterr(ctx, KA_ELAUNCH,
                        "launch: kernel '%s' is not in the module (kernels must be extern "
                        "\"C\" __global__)",
                        l->kernel);
    if (hr != hipSuccess)
      return hip_fail(ctx, NULL, 0, hr, KA_ELAUNCH, "hipModuleGetFunction(%s)", l->kernel);
  }
  union {
    void *p;
    int32_t i32;
    int64_t i64;
  } vals[HIP_MAX_ARGS];
  void *params[HIP_MAX_ARGS + 1];
  for (int i = 0; i < l->nargs; i++) {
    switch (l->args[i].kind) {
      case KA_ARG_PTR:
        vals[i].p = (void *)(uintptr_t)l->args[i].v.ptr;
        break;
      case KA_ARG_I32:
        vals[i].i32 = l->args[i].v.i32;
        break;
      case KA_ARG_I64:
        vals[i].i64 = l->args[i].v.i64;
        break;
      default:
        return hip_seterr(ctx, KA_ELAUNCH, "launch %s: argument %d has unknown kind %d", l->kernel,
                          i, (int)l->args[i].kind);
    }
    params[i] = &vals[i];
  }
  params[l->nargs] = NULL;
  hipError_t hr =
      hip_rt.f.ModuleLaunchKernel(fn, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                                  l->block[2], l->shared_bytes, ctx->stream, params, NULL);
  if (hr != hipSuccess)
    return hip_fail(ctx, NULL, 0, hr, KA_ELAUNCH,
                    "hipModuleLaunchKernel(%s, grid %ux%ux%u, block %ux%ux%u, shared %u)",
                    l->kernel, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                    l->block[2], l->shared_bytes);
  return KA_OK;
}

/* Waits for all work on the device, every stream (hipDeviceSynchronize). A fault of a
 * kernel launched earlier is reported here as KA_EDEVICE. */
static int hip_synchronize(ka_backend_ctx *ctx) {
  int rc = hip_enter(ctx, "synchronize");
  if (rc != KA_OK) return rc;
  hipError_t hr = hip_rt.f.DeviceSynchronize();
  if (hr != hipSuccess) return hip_fail(ctx, NULL, 0, hr, KA_EDEVICE, "hipDeviceSynchronize");
  return KA_OK;
}

/* Evicts the L2 and the Infinity Cache: writes the whole flush buffer (see
 * HIP_FLUSH_FLOOR) with a byte that differs from the previous call, and waits. */
static int hip_flush_cache(ka_backend_ctx *ctx) {
  int rc = hip_enter(ctx, "flush_cache");
  if (rc != KA_OK) return rc;
  unsigned char v = (unsigned char)(++ctx->flush_seq);
  hipError_t hr = hip_rt.f.MemsetAsync(ctx->flush, v, ctx->flush_bytes, ctx->stream);
  if (hr != hipSuccess)
    return hip_fail(ctx, NULL, 0, hr, KA_EDEVICE, "hipMemsetAsync(flush, %zu bytes)",
                    ctx->flush_bytes);
  hr = hip_rt.f.StreamSynchronize(ctx->stream);
  if (hr != hipSuccess) return hip_fail(ctx, NULL, 0, hr, KA_EDEVICE, "hipStreamSynchronize");
  return KA_OK;
}

/* Records the start event on the stream. */
static int hip_timer_start(ka_backend_ctx *ctx) {
  int rc = hip_enter(ctx, "timer_start");
  if (rc != KA_OK) return rc;
  hipError_t hr = hip_rt.f.EventRecord(ctx->ev_start, ctx->stream);
  if (hr != hipSuccess) return hip_fail(ctx, NULL, 0, hr, KA_EDEVICE, "hipEventRecord(start)");
  ctx->timer_running = 1;
  return KA_OK;
}

/* Records the stop event, waits for it and returns the elapsed device time between the
 * two events in *ms (milliseconds). KA_ESTATE without timer_start. */
static int hip_timer_stop(ka_backend_ctx *ctx, double *ms) {
  *ms = 0;
  int rc = hip_enter(ctx, "timer_stop");
  if (rc != KA_OK) return rc;
  if (!ctx->timer_running) return hip_seterr(ctx, KA_ESTATE, "timer_stop without timer_start");
  ctx->timer_running = 0;
  hipError_t hr = hip_rt.f.EventRecord(ctx->ev_stop, ctx->stream);
  if (hr != hipSuccess) return hip_fail(ctx, NULL, 0, hr, KA_EDEVICE, "hipEventRecord(stop)");
  hr = hip_rt.f.EventSynchronize(ctx->ev_stop);
  if (hr != hipSuccess) return hip_fail(ctx, NULL, 0, hr, KA_EDEVICE, "hipEventSynchronize");
  float f = 0;
  hr = hip_rt.f.EventElapsedTime(&f, ctx->ev_start, ctx->ev_stop);
  if (hr != hipSuccess) return hip_fail(ctx, NULL, 0, hr, KA_EDEVICE, "hipEventElapsedTime");
  *ms = f;
  return KA_OK;
}

static const ka_backend_ops hip_ops = {
    .api_version = KA_BACKEND_API_VERSION,
    .name = "hip",
    .device_count = hip_device_count,
    .open = hip_open,
    .close = hip_close,
    .last_error = hip_last_error,
    .device_info = hip_device_info,
    .telemetry = hip_telemetry,
    .compile = hip_compile,
    .module_free = hip_module_free,
    .mem_alloc = hip_mem_alloc,
    .mem_free = hip_mem_free,
    .copy_to_device = hip_copy_to_device,
    .copy_to_host = hip_copy_to_host,
    .memset8 = hip_memset8,
    .launch = hip_launch,
    .synchronize = hip_synchronize,
    .flush_cache = hip_flush_cache,
    .timer_start = hip_timer_start,
    .timer_stop = hip_timer_stop,
};

/* Module entry point (KA_BACKEND_GET_SYMBOL): the hip backend's ops, or NULL if
 * api_version is not KA_BACKEND_API_VERSION. Loads nothing itself: libraries are
 * dlopen'd on first use. Thread safe; the returned table is static. */
__attribute__((visibility("default"))) const ka_backend_ops *ka_backend_get(int api_version);
const ka_backend_ops *ka_backend_get(int api_version) {
  return api_version == KA_BACKEND_API_VERSION ? &hip_ops : NULL;
}
