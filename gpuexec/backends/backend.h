/* The backend interface: one vtable per device family (cuda, hip, host).
 *
 * Modelled on ggml's backend interface. The host backend is built into ka-runner;
 * GPU backends are shared objects (ka_backend_<name>.so, beside the binaries) that
 * export `const ka_backend_ops *ka_backend_get(int api_version)`; the loader refuses a
 * module whose ops->api_version differs from KA_BACKEND_API_VERSION. A GPU module
 * links no vendor library: it dlopens the driver, the runtime compiler and the
 * telemetry library itself, so it loads everywhere and reports what is missing.
 *
 * Conventions: every function returns KA_OK or a negative ka_err; the reason goes into
 * the context's error text (last_error) or, before a context exists, into err.
 * Device errors of a submitted kernel (illegal address, launch failure) are results,
 * not crashes: the backend returns KA_EDEVICE / KA_ELAUNCH / KA_EOOM with the vendor's
 * code and name in the error text. A context is used by one thread at a time.
 * Slots marked "optional" may be NULL; ka_backend_* wrappers check them. */
#ifndef KA_BACKEND_H
#define KA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

/* 2: fill_device and close_device (device-drawn inputs, comparison on the device);
 * 3: ka_device_info.timer */
#define KA_BACKEND_API_VERSION 3

typedef uint64_t ka_devptr; /* device address (host backend: a host pointer) */

typedef struct ka_device_info {
  char backend[16];
  int index;
  char name[128];
  char arch[32]; /* "sm_90", "gfx90a", "x86_64" */
  int multiprocessors;
  int warp_size;
  int64_t memory_bytes;
  int64_t l2_bytes;
  int64_t shared_bytes_per_block;
  int max_threads_per_block;
  int clock_mhz;
  double mem_bandwidth_gbps; /* peak: GPUs theoretical (memory clock x bus width), host an
                                upper bound measured at open (backend_host.c); 0 unknown */
  char driver[64];
  char timer[48]; /* how timed calls are timed, for the runner's log ("" unknown): cuda
                     "device events, gated" (cuda_timer_start) or "device events" */
} ka_device_info;

/* The number fields that ka_device_info shares by name with the protocol's Device (an
 * X-macro: X(field) for each); the strings are backend, name, arch and driver. */
/* clang-format off */
#define KA_DEVICE_NUMBERS(X) \
  X(index) \
  X(multiprocessors) \
  X(warp_size) \
  X(memory_bytes) \
  X(l2_bytes) \
  X(shared_bytes_per_block) \
  X(max_threads_per_block) \
  X(mem_bandwidth_gbps) \
  X(clock_mhz)
/* clang-format on */

typedef struct ka_telemetry {
  int valid;
  char device_name[128];
  int sm_clock_mhz, mem_clock_mhz, temperature_c;
  double power_w;
} ka_telemetry;

/* KA_ARG_F64 is for the backends' own trusted kernels; launch plans give no doubles. */
typedef enum ka_arg_kind { KA_ARG_PTR, KA_ARG_I32, KA_ARG_I64, KA_ARG_F64 } ka_arg_kind;
typedef struct ka_arg {
  ka_arg_kind kind;
  union {
    ka_devptr ptr;
    int32_t i32;
    int64_t i64;
    double f64;
  } v;
} ka_arg;

/* One kernel launch on the context's stream. The host backend ignores grid, block and
 * shared_bytes and calls the symbol once with args (module mode). */
typedef struct ka_launch {
  const char *kernel;
  unsigned grid[3], block[3];
  unsigned shared_bytes;
  const ka_arg *args;
  int nargs;
} ka_launch;

typedef struct ka_source {
  const char *name; /* file name, used in diagnostics and #include resolution */
  const char *text;
  size_t len;
} ka_source;

typedef struct ka_compile_req {
  const char *language;     /* "cuda", "hip" or "c" */
  const ka_source *sources; /* sources[0] is compiled; the rest are includable */
  int nsources;
  const char *const *kernels; /* symbols that must resolve after loading */
  int nkernels;
  const char *arch;    /* NULL: the context's device; required when ctx NULL */
  const char *workdir; /* private scratch directory for temporary files */
  double timeout_s;    /* external compilers are killed after this */
  /* optional, backends that compile to a loadable image (cuda: a CUBIN): image (not NULL,
   * image_len > 0) is such an image of this very request built before, loaded instead
   * of compiling; image_out (not NULL) receives a malloc'd copy of the image built now
   * (the caller frees it), *image_out_len its size; left NULL when none was built */
  const void *image;
  size_t image_len;
  void **image_out;
  size_t *image_out_len;
} ka_compile_req;

/* What fill_device draws: `elems` elements of dtype (a ka_dtype code) from dist (a
 * ka_dist code, or KA_FILL_POISON for poison) with its numbers a,
 * b (normal: mean, std; uniform and integers: low, high), under a secret 64-bit key. */
#define KA_FILL_POISON 3 /* ka_fill.dist: poison, not values (trusted_kernels.h) */
/* ka_fill.dist: normal (mean a, std b) drawn in single precision with approximate
 * intrinsics, for dtypes f32, f16 and bf16 only: not the host generator's bits, so only
 * for inputs that never leave the device (the timed calls'; trusted_kernels.h). About half
 * the exact generator's device time (71 against 135 us for 16 Mi f32 elements on the H200,
 * docs/benchmarks/2026-12-01-session15-h200.md). */
#define KA_FILL_FAST_NORMAL 4
typedef struct ka_fill {
  int dtype, dist;
  double a, b;
  uint64_t key;
} ka_fill;

typedef struct ka_backend_ctx ka_backend_ctx; /* backend-owned, opaque */
typedef struct ka_module ka_module;           /* compiled and loaded code */

typedef struct ka_backend_ops {
  int api_version; /* KA_BACKEND_API_VERSION */
  const char *name;

  /* Number of devices; 0 with a reason in err when the driver or device is absent. */
  int (*device_count)(int *count, char *err, size_t errlen);
  /* Opens device `index` (creates the context and a stream). Caller owns *ctx. */
  int (*open)(int index, ka_backend_ctx **ctx, char *err, size_t errlen);
  void (*close)(ka_backend_ctx *ctx); /* NULL is a no-op */
  const char *(*last_error)(ka_backend_ctx *ctx);
  int (*device_info)(ka_backend_ctx *ctx, ka_device_info *out);
  int (*telemetry)(ka_backend_ctx *ctx, ka_telemetry *out); /* optional: none */

  /* Compiles and loads. ctx may be NULL for a compile-only check (req->arch required;
   * *out then stays NULL). *log (may be NULL) receives the compiler's log, malloc'd,
   * owned by the caller, also on failure. Returns KA_ECOMPILE for a submission's
   * compile error, other codes for infrastructure faults. */
  int (*compile)(ka_backend_ctx *ctx, const ka_compile_req *req, ka_module **out, char **log,
                 char *err, size_t errlen);
  void (*module_free)(ka_backend_ctx *ctx, ka_module *m);

  int (*mem_alloc)(ka_backend_ctx *ctx, size_t bytes, ka_devptr *out); /* KA_EOOM */
  void (*mem_free)(ka_backend_ctx *ctx, ka_devptr p);
  int (*copy_to_device)(ka_backend_ctx *ctx, ka_devptr dst, const void *src, size_t bytes);
  int (*copy_to_host)(ka_backend_ctx *ctx, void *dst, ka_devptr src, size_t bytes);
  int (*memset8)(ka_backend_ctx *ctx, ka_devptr dst, uint8_t value, size_t bytes);

  /* Enqueues one launch on the context's stream (asynchronous on GPUs). */
  int (*launch)(ka_backend_ctx *ctx, ka_module *m, const ka_launch *l);
  /* Waits for all work on the device (every stream, not only ours). */
  int (*synchronize)(ka_backend_ctx *ctx);

  /* Evicts the last-level cache (writes a buffer of at least twice its size) and
   * waits for that to finish; never inside a timed interval. */
  int (*flush_cache)(ka_backend_ctx *ctx);
  /* Marks the start / end of a timed interval on the stream; timer_stop waits and
   * returns the elapsed time in milliseconds (device events on GPUs,
   * CLOCK_MONOTONIC on host). Between the two only launch may be called: cuda holds
   * the launches back until timer_stop (its gate), so that the device runs them back to
   * back; any other op opens the gate first. */
  int (*timer_start)(ka_backend_ctx *ctx);
  int (*timer_stop)(ka_backend_ctx *ctx, double *ms);

  /* Optional (NULL: unknown). Bytes that flush_cache writes, so that the runner can
   * check that they cover at least twice the last-level cache (docs/integrity.md). */
  int (*flush_bytes)(ka_backend_ctx *ctx, size_t *out);
  /* Optional (NULL: none observable). Work the backend saw done by loaded modules while
   * no launch was in flight, accumulated since open: *busy_ms of it over *idle_ms of
   * such time, both in milliseconds (host: CPU time of the module processes, read from
   * the kernel, against wall time). The runner flags a result whose modules worked
   * outside their calls (docs/integrity.md). */
  int (*untimed_work)(ka_backend_ctx *ctx, double *busy_ms, double *idle_ms);

  /* Device-resident staging (docs/integrity.md, property 3). Both optional; a backend
   * that sets neither (host, hip) gets today's host path: the runner stages every call's
   * inputs and poison on the host and reads the inputs back after every call. The runner
   * uses the device path only when both are set.
   *
   * copy_device: copies `bytes` from src + src_off to dst + dst_off (offsets in bytes;
   * regions must not overlap), enqueued on the context's stream, so it is ordered before
   * every later launch, copy, memset, flush_cache and compare_device of the context; the
   * host does not wait. 0 bytes is a no-op (KA_OK). Errors: the mapped vendor code
   * (KA_EDEVICE for a sticky fault of earlier work, KA_EINVAL for a bad address). */
  int (*copy_device)(ka_backend_ctx *ctx, ka_devptr dst, size_t dst_off, ka_devptr src,
                     size_t src_off, size_t bytes);
  /* compare_device: compares `bytes` at a + a_off and at b + b_off bytewise, after all
   * work queued before it, with a trusted kernel of the backend (never submitted code),
   * and waits for the answer: *equal = 1 if identical, 0 if any byte differs. 0 bytes:
   * *equal = 1. Errors as copy_device, plus KA_EUNAVAIL / KA_ECOMPILE when the trusted
   * kernel cannot be built (an infrastructure fault); *equal is then 0. */
  int (*compare_device)(ka_backend_ctx *ctx, ka_devptr a, size_t a_off, ka_devptr b, size_t b_off,
                        size_t bytes, int *equal);
  /* checksum_device (optional; the runner keeps timed outputs on the device only when it
   * is set): *sum = the keyed checksum of `bytes` at p + off (a multiple of 4 bytes from
   * an allocation's start) that trusted_kernels.h defines (ka_trusted_sum_host gives the
   * same value), computed by a trusted kernel after all work queued before it; waits for
   * the answer. Errors as compare_device; *sum is then 0. */
  int (*checksum_device)(ka_backend_ctx *ctx, ka_devptr p, size_t off, size_t bytes, uint64_t key,
                         uint64_t *sum);

  /* Device-drawn inputs (docs/integrity.md, properties 3 and 5). Both optional; the
   * runner draws inputs on the device only when fill_device, close_device and the three
   * staging slots above are all set, else on the host.
   *
   * fill_device: with check 0, writes `elems` elements of f->dtype at p, element i being
   * ka_trusted_element_host(i, f->dtype, f->dist, f->a, f->b, f->key) (trusted_kernels.h;
   * f->dist KA_FILL_POISON writes poison); with check 1, sets *differs = 1 if any of
   * them differs from what check 0 would write, else 0 (differs may be NULL with check
   * 0). Enqueued after the work queued before; check 1 waits for the answer, check 0
   * does not. Errors as compare_device. */
  int (*fill_device)(ka_backend_ctx *ctx, ka_devptr p, const ka_fill *f, int64_t elems, int check,
                     int *differs);
  /* close_device: counts the elements of got (elems of dtype) that are not within
   * abs_tol + rtol |want| of want's element, where abs_tol = atol x the largest finite
   * magnitude of want (1 if none); equal values match; NaN in both matches unless got's
   * element is still the poison that fill_device writes under `poison` (NULL: no
   * poison). *bad = the count, *first = the first index that differs (-1 if none).
   * Waits for the answer, after the work queued before. Errors as compare_device. */
  int (*close_device)(ka_backend_ctx *ctx, ka_devptr want, ka_devptr got, int dtype, int64_t elems,
                      double atol, double rtol, const ka_fill *poison, int64_t *bad,
                      int64_t *first);
} ka_backend_ops;

/* Entry point a backend module exports. Returns NULL if it cannot serve api_version. */
typedef const ka_backend_ops *(*ka_backend_get_fn)(int api_version);
#define KA_BACKEND_GET_SYMBOL "ka_backend_get"

/* The built-in host backend. */
const ka_backend_ops *ka_backend_host(void);

/* Returns the backend named name ("host" is built in; others are loaded from
 * <dir of executable>/ka_backend_<name>.so, or KA_BACKEND_PATH if set). Loaded modules
 * stay loaded. Returns NULL with a reason in err. Not thread safe on first load. */
const ka_backend_ops *ka_backend_load(const char *name, char *err, size_t errlen);

/* Whether be stages on the device: it has every slot the runner's device path needs
 * (copy_device, compare_device, checksum_device, fill_device, close_device), so a case's
 * inputs are drawn and its outputs compared there. 1 or 0; be must not be NULL. */
int ka_backend_device_staging(const ka_backend_ops *be);

#endif
