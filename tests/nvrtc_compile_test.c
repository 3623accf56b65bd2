/* nvrtc_compile_test: the cuda backend module's compile path, without a GPU.
 *
 * Usage: nvrtc_compile_test <tasks folder>
 * Loads ka_backend_cuda.so through the backend registry, reports the device count (0
 * with a reason on machines without a driver), compiles every cuda/hip task's baseline
 * for sm_90 with ctx NULL (compile only), and checks error paths: syntax error, missing
 * kernel, C++-mangled kernel, bad arch, unknown language, in-memory includes, and the
 * HIP-on-CUDA mapping header, and the runner's trusted compare kernels (trusted_kernels.h).
 * With a device it also checks copy_device / compare_device on device memory. One line
 * per check; exit status 1 on any failure. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "ka_check.h"
#include "ka_common.h"
#include "task.h"
#include "trusted_kernels.h"

/* backend.c refers to the built-in host backend, which this test does not build in. */
const ka_backend_ops *ka_backend_host(void) {
  return NULL;
}

/* Compiles one source (plus optional headers) compile-only for arch; returns the rc,
 * *log (caller frees) and err. */
static int compile1(const ka_backend_ops *be, const char *lang, const char *arch,
                    const ka_source *src, int nsrc, const char *const *kernels, int nk, char **log,
                    char *err, size_t errlen) {
  ka_compile_req req = {.language = lang,
                        .sources = src,
                        .nsources = nsrc,
                        .kernels = kernels,
                        .nkernels = nk,
                        .arch = arch,
                        .workdir = "/tmp",
                        .timeout_s = 60};
  ka_module *m = (ka_module *)&req; /* must be reset to NULL */
  err[0] = '\0';
  int rc = be->compile(NULL, &req, &m, log, err, errlen);
  if (m) {
    check(0, "compile-only leaves *out NULL", "out=%p", (void *)m);
    m = NULL;
  }
  return rc;
}

static ka_source src_of(const char *name, const char *text) {
  ka_source s = {.name = name, .text = text, .len = strlen(text)};
  return s;
}

/* The first line of log that mentions "error" (for diagnostics), in a static buffer. */
static const char *last_line(const char *log) {
  static char line[256];
  const char *p = log ? strstr(log, "error") : NULL;
  if (!p) p = log ? log : "";
  size_t n = strcspn(p, "\n");
  snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
  return line;
}

/* (c) every cuda/hip task's baseline compiles for sm_90. */
static void check_tasks(const ka_backend_ops *be, const char *root) {
  ka_registry *reg = NULL;
  char err[1024] = "";
  int rc = ka_registry_load(root, 0, &reg, err, sizeof err);
  check(rc == KA_OK, "registry", "%s: %d tasks%s%s", root, reg ? reg->ntasks : 0, rc ? ": " : "",
        rc ? err : "");
  if (rc) return;
  int ngpu = 0;
  for (int i = 0; i < reg->ntasks; i++) {
    const ka_task *t = reg->tasks[i];
    if (strcmp(t->language, "cuda") && strcmp(t->language, "hip")) continue;
    ngpu++;
    ka_source src[KA_MAX_EDITABLE];
    char *texts[KA_MAX_EDITABLE] = {0};
    int n = 0, ok = 1;
    char why[1024] = "";
    /* the task's source file first, its other editable files after it */
    const char *order[KA_MAX_EDITABLE];
    order[n++] = t->source;
    for (int j = 0; j < t->neditable; j++)
      if (strcmp(t->editable[j], t->source)) order[n++] = t->editable[j];
    for (int j = 0; j < n && ok; j++) {
      char path[4096];
      size_t len = 0;
      snprintf(path, sizeof path, "%s/baseline/%s", t->dir, order[j]);
      rc = ka_read_file(path, 1 << 20, &texts[j], &len);
      if (rc) {
        snprintf(why, sizeof why, "%s: %s", path, ka_strerror(rc));
        ok = 0;
        break;
      }
      src[j].name = order[j];
      src[j].text = texts[j];
      src[j].len = len;
    }
    ka_plan *plan = NULL;
    if (ok && t->launch_plan) {
      for (int j = 0; j < n; j++)
        if (!strcmp(order[j], t->launch_plan)) {
          rc = ka_plan_parse(t, src[j].text, src[j].len, &plan, why, sizeof why);
          if (rc) ok = 0;
        }
    } else if (ok) {
      rc = ka_plan_from_entry(t, &plan, why, sizeof why);
      if (rc) ok = 0;
    }
    if (!ok) {
      check(0, t->id, "cannot read the baseline: %s", why);
    } else {
      char *log = NULL;
      double t0 = ka_now_s();
      rc = compile1(be, t->language, "sm_90", src, n, (const char *const *)plan->kernels,
                    plan->nkernels, &log, why, sizeof why);
      check(rc == KA_OK && log != NULL, t->id,
            "compile %s (%s, %d kernel%s) for sm_90 in %.3f s: %s%s%s", t->source, t->language,
            plan->nkernels, plan->nkernels == 1 ? "" : "s", ka_now_s() - t0, ka_strerror(rc),
            rc ? " -- " : "", rc ? why : "");
      if (rc && log) printf("%s\n", log);
      free(log);
    }
    ka_plan_free(plan);
    for (int j = 0; j < n; j++) free(texts[j]);
  }
  check(ngpu > 0, "gpu tasks found", "%d cuda/hip tasks under %s", ngpu, root);
  ka_registry_free(reg);
}

static const char *const k_one[] = {"k"};

static void check_errors(const ka_backend_ops *be) {
  char err[1024], *log = NULL;
  int rc;

  /* (d) syntax error */
  ka_source bad = src_of("bad.cu", "extern \"C\" __global__ void k(float *y) { y[0] = 1.0f }\n");
  rc = compile1(be, "cuda", "sm_90", &bad, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_ECOMPILE && log && strstr(log, "error") && err[0], "syntax error",
        "rc=%s err='%s' log: %s", ka_strerror(rc), err, last_line(log));
  free(log);

  /* missing kernel */
  ka_source good = src_of("good.cu", "extern \"C\" __global__ void k(float *y) { y[0] = 1.0f; }\n");
  const char *const missing[] = {"k", "no_such_kernel"};
  rc = compile1(be, "cuda", "sm_90", &good, 1, missing, 2, &log, err, sizeof err);
  check(rc == KA_ECOMPILE && log && strstr(log, "no_such_kernel") &&
            strstr(log, "extern \"C\" __global__"),
        "missing kernel", "rc=%s log: %s", ka_strerror(rc), last_line(log));
  free(log);

  /* kernel without extern "C": C++-mangled, named in the log */
  ka_source mangled = src_of("mangled.cu", "__global__ void k(float *y) { y[0] = 1.0f; }\n");
  rc = compile1(be, "cuda", "sm_90", &mangled, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_ECOMPILE && log && strstr(log, "_Z1kPf"), "mangled kernel", "rc=%s log: %s",
        ka_strerror(rc), last_line(log));
  free(log);

  /* success still returns a (possibly empty) malloc'd log */
  rc = compile1(be, "cuda", "sm_90", &good, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_OK && log != NULL, "log on success", "rc=%s log=%s", ka_strerror(rc),
        log ? "non-NULL" : "NULL");
  free(log);

  /* bad requests */
  rc = compile1(be, "cuda", "sm_9x", &good, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_EINVAL && log, "bad arch", "rc=%s err='%s'", ka_strerror(rc), err);
  free(log);
  rc = compile1(be, "cuda", NULL, &good, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_EINVAL, "no arch without a context", "rc=%s err='%s'", ka_strerror(rc), err);
  free(log);
  rc = compile1(be, "c", "sm_90", &good, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_EINVAL, "language c refused", "rc=%s err='%s'", ka_strerror(rc), err);
  free(log);

  /* sources[1..] are in-memory headers under their names */
  ka_source inc[2] = {
      src_of("main.cu",
             "#include \"util/scale.h\"\n"
             "extern \"C\" __global__ void k(float *y) { y[0] = scale(y[0]); }\n"),
      src_of("util/scale.h", "__device__ inline float scale(float v) { return 2.0f * v; }\n")};
  rc = compile1(be, "cuda", "sm_90", inc, 2, k_one, 1, &log, err, sizeof err);
  check(rc == KA_OK, "in-memory include", "rc=%s %s", ka_strerror(rc), rc ? last_line(log) : "");
  free(log);
}

/* (e) the HIP-on-CUDA mapping header. */
static const char hip_src[] =
    "#include <hip/hip_runtime.h>\n"
    "#ifndef __HIP_PLATFORM_NVIDIA__\n#error no platform macro\n#endif\n"
    "extern \"C\" __global__ void __launch_bounds__(256)\n"
    "hip_names(const float *__restrict__ x, float *out, unsigned long long *mask, long long n) {\n"
    "  HIP_DYNAMIC_SHARED(float, partial)\n"
    "  long long i = (long long)hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;\n"
    "  float v = i < n ? x[i] : 0.0f;\n"
    "  for (int off = warpSize / 2; off > 0; off >>= 1) v += __shfl_down(v, off);\n"
    "  v += __shfl_xor(v, 1, 16) + __shfl_up(v, 1) + __shfl(v, 0);\n"
    "  double d = __shfl_down((double)v, 1u);\n"
    "  long long q = __shfl(i, 3);\n"
    "  unsigned long long b = __ballot(v > 0.0f);\n"
    "  if (hipThreadIdx_x == 0) *mask = b;\n"
    "  if (__any(v > 1.0f) && __all(v > -1e30f)) v += (float)d + (float)q;\n"
    "  if (__lane_id() == 0) partial[hipThreadIdx_x / warpSize] = v;\n"
    "  __syncthreads();\n"
    "  __threadfence();\n"
    "  if (hipThreadIdx_x == 0) {\n"
    "    float s = 0.0f;\n"
    "    for (unsigned w = 0; w < hipBlockDim_x / warpSize; w++) s += partial[w];\n"
    "    atomicAdd(out, s);\n"
    "    unsafeAtomicAdd(out, 0.0f);\n"
    "  }\n"
    "  (void)hipGridDim_x; (void)hipThreadIdx_y; (void)hipBlockIdx_z;\n"
    "}\n";

/* (f) the runner's trusted kernels (trusted_kernels.h: the compares of every width and the
 * keyed checksum) compile for sm_90 and each is in the image; the backend has
 * copy_device, compare_device and checksum_device; the host checksum is keyed (another
 * key, another sum) and sees a one-bit change in a word and in a tail byte. */
static void check_trusted(const ka_backend_ops *be) {
  check(be->copy_device && be->compare_device && be->checksum_device && be->fill_device &&
            be->close_device,
        "device staging ops",
        "copy_device %s, compare_device %s, checksum_device %s, fill_device %s, close_device %s",
        be->copy_device ? "set" : "NULL", be->compare_device ? "set" : "NULL",
        be->checksum_device ? "set" : "NULL", be->fill_device ? "set" : "NULL",
        be->close_device ? "set" : "NULL");
  ka_source src = src_of("ka_trusted_kernels.cu", ka_trusted_kernels_src);
  char *log = NULL, err[1024];
  int rc = compile1(be, "cuda", "sm_90", &src, 1, ka_trusted_kernel_names, KA_TRUSTED_NKERNELS,
                    &log, err, sizeof err);
  check(rc == KA_OK, "trusted kernels", "%d kernels for sm_90: %s%s%s", KA_TRUSTED_NKERNELS,
        rc ? ka_strerror(rc) : "compiled", rc ? ": " : "",
        rc ? (err[0] ? err : last_line(log)) : "");
  free(log);
  unsigned char d[23];
  for (int i = 0; i < 23; i++) d[i] = (unsigned char)(i * 37 + 5);
  uint64_t s0 = ka_trusted_sum_host(d, 23, 7), s1 = ka_trusted_sum_host(d, 23, 8);
  d[9] ^= 0x10;
  uint64_t s2 = ka_trusted_sum_host(d, 23, 7);
  d[9] ^= 0x10, d[22] ^= 0x01;
  uint64_t s3 = ka_trusted_sum_host(d, 23, 7);
  check(s0 != s1 && s0 != s2 && s0 != s3, "host checksum",
        "keyed %s, word change %s, tail change %s", s0 != s1 ? "yes" : "NO",
        s0 != s2 ? "seen" : "MISSED", s0 != s3 ? "seen" : "MISSED");
}

/* (g) with a device: copy_device and compare_device on real memory: equal and unequal
 * ranges of every alignment class, a difference in the last byte, rotation offset 0,
 * zero bytes. */
static void check_device_staging(const ka_backend_ops *be, ka_backend_ctx *ctx) {
  enum { N = 1 << 20 };
  unsigned char *h = malloc(N), *back = malloc(N);
  ka_devptr a = 0, b = 0;
  int ok = h && back && be->mem_alloc(ctx, N, &a) == KA_OK && be->mem_alloc(ctx, N, &b) == KA_OK;
  for (int i = 0; ok && i < N; i++) h[i] = (unsigned char)(i * 131 + (i >> 8));
  ok = ok && be->copy_to_device(ctx, a, h, N) == KA_OK;
  /* b = a rotated left by `off` bytes, as the runner stages inputs */
  static const size_t offs[] = {0, 1, 2, 4, 6, 8, 16, 17, 4096, N - 1};
  for (size_t k = 0; ok && k < sizeof offs / sizeof offs[0]; k++) {
    size_t off = offs[k];
    int rc = be->copy_device(ctx, b, 0, a, off, N - off);
    if (rc == KA_OK) rc = be->copy_device(ctx, b, N - off, a, 0, off);
    if (rc == KA_OK) rc = be->copy_to_host(ctx, back, b, N);
    int host_ok = rc == KA_OK && !memcmp(back, h + off, N - off) && !memcmp(back + N - off, h, off);
    int e1 = 0, e2 = 0;
    if (rc == KA_OK) rc = be->compare_device(ctx, b, 0, a, off, N - off, &e1);
    if (rc == KA_OK) rc = be->compare_device(ctx, b, N - off, a, 0, off, &e2);
    check(rc == KA_OK && host_ok && e1 && e2, "device rotate",
          "offset %zu: %s, copied %s, compare says equal %d %d", off,
          rc ? be->last_error(ctx) : "ok", host_ok ? "right" : "WRONG", e1, e2);
    /* one changed byte (the last of the range) must be seen */
    unsigned char x = (unsigned char)(back[N - 1] ^ 0x01);
    int e3 = 1;
    if (rc == KA_OK) rc = be->copy_to_device(ctx, b + N - 1, &x, 1);
    if (rc == KA_OK && off > 0) rc = be->compare_device(ctx, b, N - off, a, 0, off, &e3);
    if (rc == KA_OK && off == 0) rc = be->compare_device(ctx, b, 0, a, 0, N, &e3);
    check(rc == KA_OK && !e3, "device compare sees a change", "offset %zu: equal %d", off, e3);
    ok = rc == KA_OK;
  }
  /* the trusted checksum equals the host's over lengths with every tail (0 to 3 bytes),
   * at a 16-byte aligned offset (the kernel's chunked path) and at one aligned to 4 only
   * (its word path), and changes with one changed byte */
  static const size_t lens[] = {4, 5, 6, 7, 1000, 4096 + 3, N - 32};
  for (size_t k = 0; ok && k < 2 * (sizeof lens / sizeof lens[0]); k++) {
    size_t len = lens[k / 2], at = k % 2 ? 20 : 16;
    uint64_t got = 1, key = 0x1234567ULL * (k / 2 + 1);
    int rc = be->checksum_device(ctx, a, at, len, key, &got);
    uint64_t want = ka_trusted_sum_host(h + at, len, key);
    check(rc == KA_OK && got == want, "device checksum",
          "%zu bytes at offset %zu: %s, %#llx vs host %#llx", len, at,
          rc ? be->last_error(ctx) : "ok", (unsigned long long)got, (unsigned long long)want);
    ok = rc == KA_OK;
  }
  if (ok) {
    uint64_t before = 0, after = 0;
    unsigned char x = (unsigned char)(h[16 + 999] ^ 0x80);
    int rc = be->checksum_device(ctx, a, 16, 1000, 99, &before);
    if (rc == KA_OK) rc = be->copy_to_device(ctx, a + 16 + 999, &x, 1);
    if (rc == KA_OK) rc = be->checksum_device(ctx, a, 16, 1000, 99, &after);
    if (rc == KA_OK) rc = be->copy_to_device(ctx, a + 16 + 999, &h[16 + 999], 1);
    check(rc == KA_OK && before != after, "device checksum sees a change", "%#llx -> %#llx",
          (unsigned long long)before, (unsigned long long)after);
    uint64_t z = 1;
    rc = be->checksum_device(ctx, a, 3, 8, 1, &z);
    check(rc == KA_EINVAL, "device checksum refuses an unaligned address", "rc %d", rc);
  }
  int e0 = 0;
  int rc = be->compare_device(ctx, a, 0, b, 0, 0, &e0);
  check(rc == KA_OK && e0 == 1, "device compare of 0 bytes", "rc %d equal %d", rc, e0);
  rc = be->copy_device(ctx, a, 0, b, 0, 0);
  check(rc == KA_OK, "device copy of 0 bytes", "rc %d", rc);
  check(ok, "device staging buffers", "%s", ok ? "ok" : be->last_error(ctx));
  be->mem_free(ctx, a);
  be->mem_free(ctx, b);
  free(h);
  free(back);
}

/* (h) Philox4x32-10 of trusted_kernels.h against Random123's known-answer vectors
 * (tests/kat_vectors of DEShawResearch/random123: counter, key, expected). */
static void check_philox(void) {
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
       0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
       0x94fdcceb, 0x5001e420, 0x24126ea1}};
  for (int k = 0; k < 3; k++) {
    uint32_t out[4];
    ka_philox4x32_10(kat[k], kat[k] + 4, out);
    check(!memcmp(out, kat[k] + 6, sizeof out), "philox4x32-10 known answer",
          "vector %d: %08x %08x %08x %08x", k, out[0], out[1], out[2], out[3]);
  }
  /* the host generator's values lie in their distribution's range, integers are
   * integers, poison is a NaN, and another key draws other values */
  int in_range = 1, ints = 1, nan = 1, differ = 0;
  double sum = 0, sq = 0;
  enum { M = 20000 };
  for (uint64_t i = 0; i < M; i++) {
    uint64_t u = ka_trusted_element_host(i, 1, 1, -2.0, 3.0, 42), z;
    double v, w;
    memcpy(&v, &u, 8);
    in_range &= v >= -2.0 && v < 3.0;
    u = ka_trusted_element_host(i, 1, 2, 0.5, 7.0, 42);
    memcpy(&w, &u, 8);
    ints &= w == floor(w) && w >= 1 && w <= 7;
    u = ka_trusted_element_host(i, 1, 0, 1.0, 2.0, 42);
    memcpy(&v, &u, 8);
    sum += v, sq += v * v;
    u = ka_trusted_element_host(i, 0, KA_TRUSTED_POISON, 0, 0, 42);
    uint32_t f = (uint32_t)u;
    nan &= (f & 0x7fc00000u) == 0x7fc00000u && (f & 0x3fffffu) != 0;
    z = ka_trusted_element_host(i, 0, 1, 0, 1, 43);
    differ += z != ka_trusted_element_host(i, 0, 1, 0, 1, 42);
  }
  /* the generator's own log and cosine against libm's (data.h: below 1e-13) */
  double worst_log = 0, worst_cos = 0;
  for (int k = 1; k <= 200000; k++) {
    double x = (double)k / 200000.0, u = (double)(k - 1) / 200000.0;
    double el = fabs(ka_gen_log(x) - log(x)) / fmax(fabs(log(x)), 1e-300);
    double ec = fabs(ka_gen_cos2pi(u) - cos(6.283185307179586 * u));
    if (k < 200000 && el > worst_log) worst_log = el;
    if (ec > worst_cos) worst_cos = ec;
  }
  check(worst_log < 1e-13 && worst_cos < 1e-13 && ka_gen_log(1.0) == 0, "generator log and cosine",
        "worst relative error of log %.3g, absolute of cos %.3g", worst_log, worst_cos);
  double mean = sum / M, sd = sqrt(sq / M - mean * mean);
  check(in_range && ints && nan && differ > M - 10, "host generator",
        "uniform in range %d, integers %d, poison NaN %d, other key differs %d of %d", in_range,
        ints, nan, differ, M);
  check(fabs(mean - 1.0) < 0.05 && fabs(sd - 2.0) < 0.05, "host generator normal",
        "mean %.4f (want 1), std %.4f (want 2)", mean, sd);
}

/* (i) with a device: fill_device draws what the host mirror draws (uniform, integers and
 * poison bit for bit in every dtype, normal to rounding), a fill check sees one changed
 * element, and close_device counts differences beyond tolerance, matches NaN with NaN
 * but not with the element's own poison, and names the first differing index. */
static void check_device_fill(const ka_backend_ops *be, ka_backend_ctx *ctx) {
  enum { N = (1 << 20) + 7 };
  ka_devptr a = 0, b = 0;
  unsigned char *h = malloc((size_t)N * 8);
  int ok = h && be->fill_device && be->close_device && be->mem_alloc(ctx, (size_t)N * 8, &a) == 0 &&
           be->mem_alloc(ctx, (size_t)N * 8, &b) == 0;
  check(ok, "device fill setup", "%s", ok ? "ok" : "no fill_device/close_device or no memory");
  static const size_t es[8] = {4, 8, 2, 2, 1, 1, 4, 8};
  for (int dt = 0; ok && dt < 8; dt++)
    for (int dist = 0; ok && dist <= KA_TRUSTED_POISON; dist++) {
      if (dt >= 4 && dist < 2) continue; /* integer tensors draw integers */
      double lo = dt >= 4 ? (dt == 5 ? 0 : -100) : -3, hi = dt >= 4 ? 100 : 5;
      ka_fill f = {.dtype = dt,
                   .dist = dist,
                   .a = dist == 0 ? 0.5 : lo,
                   .b = dist == 0 ? 2 : hi,
                   .key = 0xfeedULL * (uint64_t)(dt * 8 + dist + 1)};
      int rc = be->fill_device(ctx, a, &f, N, 0, NULL);
      if (rc == KA_OK) rc = be->copy_to_host(ctx, h, a, (size_t)N * es[dt]);
      int64_t exact = 0;
      for (int64_t i = 0; rc == KA_OK && i < N; i++) {
        uint64_t want = ka_trusted_element_host((uint64_t)i, dt, dist, f.a, f.b, f.key), got = 0;
        memcpy(&got, h + (size_t)i * es[dt], es[dt]);
        exact += got == want;
      }
      check(rc == KA_OK && exact == N, "device fill = host generator, bit for bit",
            "dtype %d dist %d: %lld of %d equal: %s", dt, dist, (long long)exact, (int)N,
            rc ? be->last_error(ctx) : "ok");
      /* at an address off the 16-byte grid (the kernel's element-by-element path) the
       * same elements, and its check passes there and fails one element changed */
      int64_t exact_u = 0, nu = N - 1;
      ka_devptr u = b + es[dt];
      int du = -1, du1 = -1;
      if (rc == KA_OK) rc = be->fill_device(ctx, u, &f, nu, 0, NULL);
      if (rc == KA_OK) rc = be->copy_to_host(ctx, h, u, (size_t)nu * es[dt]);
      for (int64_t i = 0; rc == KA_OK && i < nu; i++) {
        uint64_t want = ka_trusted_element_host((uint64_t)i, dt, dist, f.a, f.b, f.key), got = 0;
        memcpy(&got, h + (size_t)i * es[dt], es[dt]);
        exact_u += got == want;
      }
      if (rc == KA_OK) rc = be->fill_device(ctx, u, &f, nu, 1, &du);
      unsigned char xu = (unsigned char)(h[12345 * es[dt]] ^ 0x01);
      if (rc == KA_OK) rc = be->copy_to_device(ctx, u + 12345 * es[dt], &xu, 1);
      if (rc == KA_OK) rc = be->fill_device(ctx, u, &f, nu, 1, &du1);
      check(rc == KA_OK && exact_u == nu && du == 0 && du1 == 1,
            "device fill off the 16-byte grid = host generator",
            "dtype %d dist %d: %lld of %lld equal, check %d, changed %d: %s", dt, dist,
            (long long)exact_u, (long long)nu, du, du1, rc ? be->last_error(ctx) : "ok");
      if (rc == KA_OK) rc = be->copy_to_host(ctx, h, a, (size_t)N * es[dt]);
      int differs = -1;
      if (rc == KA_OK) rc = be->fill_device(ctx, a, &f, N, 1, &differs);
      check(rc == KA_OK && differs == 0, "device fill check of an unchanged tensor",
            "dtype %d dist %d: differs %d", dt, dist, differs);
      unsigned char x = (unsigned char)(h[(size_t)(N - 1) * es[dt]] ^ 0x01);
      if (rc == KA_OK) rc = be->copy_to_device(ctx, a + (size_t)(N - 1) * es[dt], &x, 1);
      if (rc == KA_OK) rc = be->fill_device(ctx, a, &f, N, 1, &differs);
      check(rc == KA_OK && differs == 1, "device fill check sees one changed element",
            "dtype %d dist %d: differs %d", dt, dist, differs);
      ok = rc == KA_OK;
    }
  /* close_device on f32: a copy is close; 3 elements off by 10x the tolerance are counted,
   * the first named; NaN against NaN matches, NaN against the poison does not */
  if (ok) {
    ka_fill f = {.dtype = 0, .dist = 1, .a = -1, .b = 1, .key = 7};
    ka_fill poison = {.dtype = 0, .dist = KA_TRUSTED_POISON, .key = 99};
    int64_t bad = -1, first = -2;
    int rc = be->fill_device(ctx, a, &f, N, 0, NULL);
    if (rc == KA_OK) rc = be->copy_device(ctx, b, 0, a, 0, (size_t)N * 4);
    if (rc == KA_OK) rc = be->close_device(ctx, a, b, 0, N, 1e-5, 1e-5, &poison, &bad, &first);
    check(rc == KA_OK && bad == 0 && first == -1, "device close of a copy", "bad %lld first %lld",
          (long long)bad, (long long)first);
    float v[3];
    int64_t at[3] = {12345, 777777, N - 1};
    for (int k = 0; rc == KA_OK && k < 3; k++) {
      rc = be->copy_to_host(ctx, &v[k], a + (size_t)at[k] * 4, 4);
      v[k] += 3e-4f;
      if (rc == KA_OK) rc = be->copy_to_device(ctx, b + (size_t)at[k] * 4, &v[k], 4);
    }
    if (rc == KA_OK) rc = be->close_device(ctx, a, b, 0, N, 1e-5, 1e-5, &poison, &bad, &first);
    check(rc == KA_OK && bad == 3 && first == 12345, "device close counts differences",
          "bad %lld (want 3) first %lld (want 12345)", (long long)bad, (long long)first);
    /* element 5: NaN in want and a NaN in got (not the poison): matches; element 6: NaN
     * in want and got's poison element: counted */
    uint32_t qnan = 0x7fc00123u,
             pz = (uint32_t)ka_trusted_element_host(6, 0, KA_TRUSTED_POISON, 0, 0, 99);
    if (rc == KA_OK) rc = be->copy_device(ctx, b, 0, a, 0, (size_t)N * 4);
    if (rc == KA_OK) rc = be->copy_to_device(ctx, a + 5 * 4, &qnan, 4);
    if (rc == KA_OK) rc = be->copy_to_device(ctx, b + 5 * 4, &qnan, 4);
    if (rc == KA_OK) rc = be->copy_to_device(ctx, a + 6 * 4, &qnan, 4);
    if (rc == KA_OK) rc = be->copy_to_device(ctx, b + 6 * 4, &pz, 4);
    if (rc == KA_OK) rc = be->close_device(ctx, a, b, 0, N, 1e-5, 1e-5, &poison, &bad, &first);
    check(rc == KA_OK && bad == 1 && first == 6, "device close: NaN matches NaN, not poison",
          "bad %lld (want 1) first %lld (want 6)", (long long)bad, (long long)first);
    /* the same off the 16-byte grid (element by element): want and got one element on,
     * so the poison element is index 5 of N - 1, and got's poison is poison's element 5 */
    uint32_t pz5 = (uint32_t)ka_trusted_element_host(5, 0, KA_TRUSTED_POISON, 0, 0, 99);
    if (rc == KA_OK) rc = be->copy_to_device(ctx, b + 6 * 4, &pz5, 4);
    if (rc == KA_OK)
      rc = be->close_device(ctx, a + 4, b + 4, 0, N - 1, 1e-5, 1e-5, &poison, &bad, &first);
    check(rc == KA_OK && bad == 1 && first == 5, "device close off the 16-byte grid",
          "bad %lld (want 1) first %lld (want 5)", (long long)bad, (long long)first);
    /* atol is relative to want's largest magnitude (scaled on the device): want times
     * 1000 (|want| up to ~1000) lets an error of 0.5 pass at atol 1e-3, not at 1e-4 */
    float big[4] = {1000.0f, -999.0f, 1.0f, 2.0f}, off = 2.5f;
    if (rc == KA_OK) rc = be->copy_to_device(ctx, a, big, sizeof big);
    if (rc == KA_OK) rc = be->copy_to_device(ctx, b, big, sizeof big);
    if (rc == KA_OK) rc = be->copy_to_device(ctx, b + 3 * 4, &off, 4);
    int64_t bad3 = -1, bad4 = -1;
    if (rc == KA_OK) rc = be->close_device(ctx, a, b, 0, 4, 1e-3, 0, &poison, &bad3, &first);
    if (rc == KA_OK) rc = be->close_device(ctx, a, b, 0, 4, 1e-4, 0, &poison, &bad4, &first);
    check(rc == KA_OK && bad3 == 0 && bad4 == 1 && first == 3,
          "device close scales atol by want's largest magnitude",
          "atol 1e-3: bad %lld (want 0); 1e-4: bad %lld (want 1), first %lld (want 3)",
          (long long)bad3, (long long)bad4, (long long)first);
    ok = rc == KA_OK;
  }
  check(ok, "device fill and close", "%s", ok ? "ok" : be->last_error(ctx));
  be->mem_free(ctx, a);
  be->mem_free(ctx, b);
  free(h);
}

/* (j) with a device: the fast normal (KA_TRUSTED_FAST_NORMAL) of the timed calls' inputs:
 * in f32, f16 and bf16 every element finite, mean and standard deviation those asked for,
 * the tails of a normal (|z| > 3 about 0.27% of elements, none beyond 6.5: Box-Muller
 * with 24-bit uniforms reaches at most sqrt(-2 ln 2^-24) = 5.77), a redraw under the same
 * key equal (fill check), another key's draw different; f64 and integer dtypes refused
 * (their timed inputs keep the exact generator). */
static void check_device_fast_normal(const ka_backend_ops *be, ka_backend_ctx *ctx) {
  enum { N = (1 << 22) + 3 };
  ka_devptr a = 0;
  unsigned char *h = malloc((size_t)N * 4);
  int ok = h && be->fill_device && be->mem_alloc(ctx, (size_t)N * 8 + 64, &a) == 0;
  check(ok, "fast normal setup", "%s", ok ? "ok" : "no fill_device or no memory");
  static const int dts[3] = {0, 2, 3};
  for (int k = 0; ok && k < 3; k++) {
    int dt = dts[k], es = dt == 0 ? 4 : 2;
    ka_fill f = {.dtype = dt, .dist = KA_TRUSTED_FAST_NORMAL, .a = 0.5, .b = 2, .key = 77 + k};
    int rc = be->fill_device(ctx, a, &f, N, 0, NULL);
    if (rc == KA_OK) rc = be->copy_to_host(ctx, h, a, (size_t)N * es);
    double sum = 0, sq = 0;
    int64_t finite = 0, tail = 0, far = 0;
    for (int64_t i = 0; rc == KA_OK && i < N; i++) {
      double v;
      if (dt == 0) {
        float fv;
        memcpy(&fv, h + i * 4, 4);
        v = fv;
      } else {
        uint16_t u;
        _Float16 hv;
        memcpy(&u, h + i * 2, 2);
        memcpy(&hv, &u, 2);
        v = dt == 3 ? (double)ka_bf16_to_f32(u) : (double)hv;
      }
      if (!isfinite(v)) continue;
      finite++, sum += v, sq += v * v;
      double z = fabs(v - 0.5) / 2;
      tail += z > 3, far += z > 6.5;
    }
    double mean = sum / (double)N, sd = sqrt(sq / (double)N - mean * mean);
    double tail_pct = 100.0 * (double)tail / (double)N;
    check(rc == KA_OK && finite == N && fabs(mean - 0.5) < 0.01 && fabs(sd - 2) < 0.01 &&
              tail_pct > 0.2 && tail_pct < 0.35 && far == 0,
          "fast normal draws a normal",
          "dtype %d: %lld of %d finite, mean %.4f (0.5), sd %.4f (2), "
          "|z| > 3 %.3f%% (0.27), beyond 6.5: %lld: %s",
          dt, (long long)finite, (int)N, mean, sd, tail_pct, (long long)far,
          rc ? be->last_error(ctx) : "ok");
    int differs = -1;
    if (rc == KA_OK) rc = be->fill_device(ctx, a, &f, N, 1, &differs);
    check(rc == KA_OK && differs == 0, "fast normal: the same key draws the same",
          "dtype %d: differs %d", dt, differs);
    /* one changed element is seen by the redraw check: in the last, partial group of four
     * (N = 4k + 3) and at the third element of a group; restored after each (review) */
    int64_t at[2] = {N - 1, 4 * 1000 + 2};
    for (int w = 0; w < 2 && rc == KA_OK; w++) {
      unsigned char keep = h[(size_t)at[w] * es], x = (unsigned char)(keep ^ 0x01);
      rc = be->copy_to_device(ctx, a + (size_t)at[w] * es, &x, 1);
      if (rc == KA_OK) rc = be->fill_device(ctx, a, &f, N, 1, &differs);
      check(rc == KA_OK && differs == 1, "fast normal: the redraw check sees one changed element",
            "dtype %d, element %lld: differs %d", dt, (long long)at[w], differs);
      if (rc == KA_OK) rc = be->copy_to_device(ctx, a + (size_t)at[w] * es, &keep, 1);
    }
    /* off the 16-byte grid (element by element) the same draw as in chunks */
    int eq = 0, du = -1;
    size_t uoff = ((size_t)N * es + 15) / 16 * 16 + (size_t)es; /* es mod 16 */
    if (rc == KA_OK) rc = be->fill_device(ctx, a + uoff, &f, N, 0, NULL);
    if (rc == KA_OK) rc = be->compare_device(ctx, a, 0, a, uoff, (size_t)N * es, &eq);
    if (rc == KA_OK) rc = be->fill_device(ctx, a + uoff, &f, N, 1, &du);
    check(rc == KA_OK && eq == 1 && du == 0, "fast normal off the 16-byte grid = in chunks",
          "dtype %d: equal %d, check differs %d", dt, eq, du);
    f.key ^= 1;
    if (rc == KA_OK) rc = be->fill_device(ctx, a, &f, N, 1, &differs);
    check(rc == KA_OK && differs == 1, "fast normal: another key draws other values",
          "dtype %d: differs %d", dt, differs);
    ok = rc == KA_OK;
  }
  for (int dt = 1; ok && dt < 8; dt += (dt == 1 ? 3 : 1)) {
    ka_fill f = {.dtype = dt, .dist = KA_TRUSTED_FAST_NORMAL, .a = 0, .b = 1, .key = 5};
    int rc = be->fill_device(ctx, a, &f, 16, 0, NULL);
    check(rc == KA_EINVAL, "fast normal refused outside f32, f16, bf16", "dtype %d: %s", dt,
          ka_strerror(rc));
  }
  be->mem_free(ctx, a);
  free(h);
}

static void check_hip(const ka_backend_ops *be) {
  char err[1024], *log = NULL;
  ka_source s = src_of("hip_names.hip", hip_src);
  const char *const k[] = {"hip_names"};
  int rc = compile1(be, "hip", "sm_90", &s, 1, k, 1, &log, err, sizeof err);
  check(rc == KA_OK, "hip mapping header",
        "hipThreadIdx_x, HIP_DYNAMIC_SHARED, __shfl*, __ballot, __syncthreads, atomicAdd: %s %s",
        ka_strerror(rc), rc ? last_line(log) : "");
  if (rc && log) printf("%s\n", log);
  free(log);
}

/* The build cache's image (backend.h: image, image_out): a compile hands out its CUBIN,
 * a compile given that image loads it without NVRTC (its log says so), and an image
 * without the requested kernel is refused like a compile that lacks it. */
static void check_image(const ka_backend_ops *be) {
  const char *text = "extern \"C\" __global__ void k_img(float *y) { y[0] = 1.0f; }\n";
  ka_source src = src_of("img.cu", text);
  const char *kern[] = {"k_img"}, *other[] = {"k_other"};
  void *img = NULL;
  size_t len = 0;
  char err[512], *log = NULL;
  ka_compile_req req = {.language = "cuda",
                        .sources = &src,
                        .nsources = 1,
                        .kernels = kern,
                        .nkernels = 1,
                        .arch = "sm_90",
                        .workdir = "/tmp",
                        .timeout_s = 60,
                        .image_out = &img,
                        .image_out_len = &len};
  int rc = be->compile(NULL, &req, NULL, &log, err, sizeof err);
  free(log);
  check(rc == KA_OK && img && len > 4 && !memcmp(img, "\177ELF", 4), "image_out",
        "rc %d, %zu bytes", rc, len);
  if (!img) return;
  /* from the image: a source that would not compile shows NVRTC is not run */
  ka_source broken = src_of("img.cu", "this is not CUDA");
  ka_compile_req again = {.language = "cuda",
                          .sources = &broken,
                          .nsources = 1,
                          .kernels = kern,
                          .nkernels = 1,
                          .arch = "sm_90",
                          .workdir = "/tmp",
                          .timeout_s = 60,
                          .image = img,
                          .image_len = len};
  rc = be->compile(NULL, &again, NULL, &log, err, sizeof err);
  check(rc == KA_OK && log && strstr(log, "build cache"), "image_loaded", "rc %d, log: %s", rc,
        log ? log : "");
  free(log);
  again.kernels = other;
  rc = be->compile(NULL, &again, NULL, &log, err, sizeof err);
  check(rc == KA_ECOMPILE, "image_without_kernel", "rc %d: %s", rc, err);
  free(log);
  free(img);
}

/* The timer's gate (backend_cuda.c cuda_timer_start): the device runs a timed call's
 * launches back to back, so host time between queuing them is not in the interval (8
 * empty launches 200 us apart on the host: well under 1.4 ms on the device), except in
 * the call with the kernel's first launch in the context (at least 1.2 ms); a launch
 * that fails between timer_start and timer_stop leaves no stream waiting on the gate
 * (the next synchronize returns, the next timed call works). */
static void check_device_timer_gate(const ka_backend_ops *be, ka_backend_ctx *ctx) {
  static const char text[] = "extern \"C\" __global__ void empty(void) {}\n";
  ka_source src = src_of("empty.cu", text);
  const char *kernels[] = {"empty"};
  ka_compile_req req = {.language = "cuda",
                        .sources = &src,
                        .nsources = 1,
                        .kernels = kernels,
                        .nkernels = 1,
                        .workdir = "/tmp",
                        .timeout_s = 60};
  ka_module *m = NULL;
  char *log = NULL, err[512] = "";
  int rc = be->compile(ctx, &req, &m, &log, err, sizeof err);
  free(log);
  check(rc == KA_OK, "timer gate: compile", "%s", rc ? err : "ok");
  if (rc) return;
  ka_launch l = {.kernel = "empty", .grid = {1, 1, 1}, .block = {32, 1, 1}};
  /* the kernel's first launch in the context runs ungated (the driver may wait for the
   * stream to load it): the host's gaps are in that call's time; from the second on not */
  for (int pass = 0; pass < 2; pass++) {
    double ms = -1, t0 = ka_now_s();
    rc = be->timer_start(ctx);
    for (int i = 0; i < 8 && rc == KA_OK; i++) {
      if (i) {
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
      }
      rc = be->launch(ctx, m, &l);
    }
    if (rc == KA_OK) rc = be->timer_stop(ctx, &ms);
    double wall = (ka_now_s() - t0) * 1e3;
    int want = pass ? ms > 0 && ms < 0.35 : ms >= 1.2;
    check(rc == KA_OK && want && wall >= 1.4,
          pass ? "timer gate: host gaps not timed" : "timer gate: a first launch runs ungated",
          "8 launches 200 us apart: device %.4f ms, host %.3f ms%s%s", ms, wall, rc ? ": " : "",
          rc ? be->last_error(ctx) : "");
  }
  ka_launch bad = {.kernel = "no_such_kernel", .grid = {1, 1, 1}, .block = {32, 1, 1}};
  rc = be->timer_start(ctx);
  int lrc = rc == KA_OK ? be->launch(ctx, m, &bad) : rc;
  int src2 = be->synchronize(ctx);
  check(rc == KA_OK && lrc != KA_OK && src2 == KA_OK, "timer gate: failed launch",
        "timer_start %d, bad launch %d, synchronize after it %d (no wait left on the gate)", rc,
        lrc, src2);
  double ms = -1;
  rc = be->timer_start(ctx);
  if (rc == KA_OK) rc = be->launch(ctx, m, &l);
  if (rc == KA_OK) rc = be->timer_stop(ctx, &ms);
  check(rc == KA_OK && ms > 0, "timer gate: timed call after a failed one", "%.4f ms%s%s", ms,
        rc ? ": " : "", rc ? be->last_error(ctx) : "");
  be->module_free(ctx, m);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <tasks folder>\n", argv[0]);
    return 2;
  }
  char err[1024] = "";
  /* (a) the module loads */
  const ka_backend_ops *be = ka_backend_load("cuda", err, sizeof err);
  check(be != NULL, "load", "ka_backend_load(\"cuda\"): %s", be ? be->name : err);
  if (!be) return 1;

  /* (b) device count: 0 with a reason without a driver; otherwise print it */
  int count = -1;
  err[0] = '\0';
  int rc = be->device_count(&count, err, sizeof err);
  if (count > 0) {
    check(rc == KA_OK, "device_count", "%d device(s)", count);
    ka_backend_ctx *ctx = NULL;
    rc = be->open(0, &ctx, err, sizeof err);
    ka_device_info info;
    if (rc == KA_OK && be->device_info(ctx, &info) == KA_OK)
      printf("     device 0: %s %s, %d SMs, %.0f GB/s, driver %s\n", info.name, info.arch,
             info.multiprocessors, info.mem_bandwidth_gbps, info.driver);
    else
      printf("     device 0 did not open: %s\n", err);
    if (rc == KA_OK) check_device_staging(be, ctx);
    if (rc == KA_OK) check_device_fill(be, ctx);
    if (rc == KA_OK) check_device_fast_normal(be, ctx);
    if (rc == KA_OK) check_device_timer_gate(be, ctx);
    be->close(ctx);
  } else {
    check(rc == KA_OK && count == 0 && err[0], "device_count", "0 devices, reason: %s", err);
  }

  check_tasks(be, argv[1]);
  check_errors(be);
  check_hip(be);
  check_trusted(be);
  check_philox();
  check_image(be);

  printf("%d passed, %d failed\n", ka_check_pass, ka_check_fail);
  return ka_check_fail ? 1 : 0;
}
