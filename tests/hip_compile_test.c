/* hip_compile_test: the hip backend module without an AMD GPU.
 *
 * Usage: hip_compile_test <tasks folder>
 * Loads ka_backend_hip.so through the backend registry; checks that discovery reports 0
 * devices with a reason and that open fails cleanly on a machine without an AMD GPU
 * (on one with a GPU it prints device 0's facts instead); compiles every hip task's
 * baseline with hiprtc, compile only, for gfx90a (or, if the installed ROCm does not
 * know gfx90a, the first target it lists; the list comes from the error text of an
 * unknown target, i.e. from the installed ROCm); and checks the error paths: syntax
 * error (hiprtc's log comes back), missing kernel, C++-mangled kernel, unknown and
 * malformed targets (refused before hiprtc runs, naming the installed list), language
 * cuda, in-memory includes, and the HIP kernel-language subset the tasks use (the same
 * kernel the cuda backend's HIP mapping header is tested with). One line per check;
 * exit status 1 on any failure. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ka_check.h"
#include "ka_common.h"
#include "task.h"

/* backend.c refers to the built-in host backend, which this test does not build in. */
const ka_backend_ops *ka_backend_host(void) {
  return NULL;
}

/* Compiles one source (plus optional headers) compile-only for arch; returns the rc,
 * *log (caller frees) and err. Checks that *out stays NULL. */
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
  if (m) check(0, "compile-only leaves *out NULL", "out=%p", (void *)m);
  return rc;
}

static ka_source src_of(const char *name, const char *text) {
  ka_source s = {.name = name, .text = text, .len = strlen(text)};
  return s;
}

/* The first line of log that mentions "error" (for diagnostics), in a static buffer. */
static const char *first_error(const char *log) {
  static char line[300];
  const char *p = log ? strstr(log, "error") : NULL;
  if (!p) p = log ? log : "";
  size_t n = strcspn(p, "\n");
  snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
  return line;
}

static const char *const k_one[] = {"k"};
static const char good_text[] =
    "#include <hip/hip_runtime.h>\n"
    "extern \"C\" __global__ void k(float *y) { y[0] = 1.0f; }\n";

/* The target to compile for: gfx90a (MI200) if the installed ROCm knows it, else the
 * first target of the installed list (read from the refusal of an unknown target). */
static void pick_arch(const ka_backend_ops *be, char *arch, size_t len) {
  char err[2048], *log = NULL;
  ka_source s = src_of("good.hip", good_text);
  snprintf(arch, len, "gfx90a");
  int rc = compile1(be, "hip", "gfx90a", &s, 1, k_one, 1, &log, err, sizeof err);
  free(log);
  if (rc != KA_EINVAL || !strstr(err, "unsupported architecture")) return;
  const char *p = strstr(err, "it knows: ");
  if (p) {
    p += strlen("it knows: ");
    size_t n = strcspn(p, " )");
    snprintf(arch, len, "%.*s", (int)n, p);
  }
  printf("     the installed ROCm does not know gfx90a; using %s\n", arch);
}

/* Every hip task's baseline compiles for arch. */
static void check_tasks(const ka_backend_ops *be, const char *root, const char *arch) {
  ka_registry *reg = NULL;
  char err[2048] = "";
  int rc = ka_registry_load(root, 0, &reg, err, sizeof err);
  check(rc == KA_OK, "registry", "%s: %d tasks%s%s", root, reg ? reg->ntasks : 0, rc ? ": " : "",
        rc ? err : "");
  if (rc) return;
  int nhip = 0;
  for (int i = 0; i < reg->ntasks; i++) {
    const ka_task *t = reg->tasks[i];
    if (strcmp(t->language, "hip")) continue;
    nhip++;
    ka_source src[KA_MAX_EDITABLE];
    char *texts[KA_MAX_EDITABLE] = {0};
    int n = 0, ok = 1;
    char why[2048] = "";
    /* the task's source file first, its other editable files after it (the runner's
     * order), the launch plan excluded from the sources */
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
    int nsrc = 0;
    ka_source csrc[KA_MAX_EDITABLE];
    for (int j = 0; ok && j < n; j++) {
      if (t->launch_plan && !strcmp(order[j], t->launch_plan)) {
        rc = ka_plan_parse(t, src[j].text, src[j].len, &plan, why, sizeof why);
        if (rc) ok = 0;
      } else {
        csrc[nsrc++] = src[j];
      }
    }
    if (ok && !t->launch_plan) {
      rc = ka_plan_from_entry(t, &plan, why, sizeof why);
      if (rc) ok = 0;
    }
    if (!ok) {
      check(0, t->id, "cannot read the baseline: %s", why);
    } else {
      char *log = NULL;
      double t0 = ka_now_s();
      rc = compile1(be, "hip", arch, csrc, nsrc, (const char *const *)plan->kernels, plan->nkernels,
                    &log, why, sizeof why);
      check(rc == KA_OK && log != NULL, t->id,
            "hiprtc compile of %s (%d kernel%s) for %s in %.3f s: %s%s%s", t->source,
            plan->nkernels, plan->nkernels == 1 ? "" : "s", arch, ka_now_s() - t0, ka_strerror(rc),
            rc ? " -- " : "", rc ? why : "");
      if (rc && log) printf("%s\n", log);
      free(log);
    }
    ka_plan_free(plan);
    for (int j = 0; j < n; j++) free(texts[j]);
  }
  check(nhip > 0, "hip tasks found", "%d hip tasks under %s", nhip, root);
  ka_registry_free(reg);
}

static void check_errors(const ka_backend_ops *be, const char *arch) {
  char err[2048], *log = NULL;
  int rc;

  /* syntax error: KA_ECOMPILE, hiprtc's log with the submission's file name and line */
  ka_source bad = src_of("bad.hip",
                         "#include <hip/hip_runtime.h>\n"
                         "extern \"C\" __global__ void k(float *y) { y[0] = 1.0f }\n");
  rc = compile1(be, "hip", arch, &bad, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_ECOMPILE && log && strstr(log, "error") && strstr(log, "bad.hip:2:") &&
            strstr(err, "bad.hip"),
        "syntax error", "rc=%s err='%s' log: %s", ka_strerror(rc), err, first_error(log));
  free(log);

  /* missing kernel */
  ka_source good = src_of("good.hip", good_text);
  const char *const missing[] = {"k", "no_such_kernel"};
  rc = compile1(be, "hip", arch, &good, 1, missing, 2, &log, err, sizeof err);
  check(rc == KA_ECOMPILE && log && strstr(log, "no_such_kernel") &&
            strstr(log, "extern \"C\" __global__"),
        "missing kernel", "rc=%s log: %s", ka_strerror(rc), first_error(log));
  free(log);

  /* kernel without extern "C": C++-mangled, named in the log */
  ka_source mangled = src_of("mangled.hip",
                             "#include <hip/hip_runtime.h>\n"
                             "__global__ void k(float *y) { y[0] = 1.0f; }\n");
  rc = compile1(be, "hip", arch, &mangled, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_ECOMPILE && log && strstr(log, "_Z1kPf"), "mangled kernel", "rc=%s log: %s",
        ka_strerror(rc), first_error(log));
  free(log);

  /* success returns a (possibly empty) malloc'd log */
  rc = compile1(be, "hip", arch, &good, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_OK && log != NULL, "log on success", "rc=%s log=%s", ka_strerror(rc),
        log ? "non-NULL" : "NULL");
  free(log);

  /* a target with feature flags, as gcnArchName reports it */
  char feat[96];
  snprintf(feat, sizeof feat, "%s:xnack-", arch);
  rc = compile1(be, "hip", feat, &good, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_OK, "target with features", "%s: rc=%s %s", feat, ka_strerror(rc), rc ? err : "");
  free(log);

  /* a target the installed ROCm does not know: refused before hiprtc, with the list */
  rc = compile1(be, "hip", "gfx9999", &good, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_EINVAL && strstr(err, "unsupported architecture gfx9999") &&
            strstr(err, "it knows: gfx") && log && strstr(log, "gfx9999"),
        "unknown target", "rc=%s err='%.160s...'", ka_strerror(rc), err);
  free(log);
  /* gfx942 (MI300): ROCm 5.2's compiler crashes on it, so it must be refused there;
   * a newer ROCm compiles it */
  rc = compile1(be, "hip", "gfx942", &good, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_OK || (rc == KA_EINVAL && strstr(err, "unsupported architecture gfx942")),
        "gfx942", "rc=%s (%s)", ka_strerror(rc),
        rc == KA_OK ? "the installed ROCm knows gfx942" : "refused: not in the installed list");
  free(log);

  /* bad requests */
  rc = compile1(be, "hip", "sm_90", &good, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_EINVAL && log, "malformed target", "rc=%s err='%s'", ka_strerror(rc), err);
  free(log);
  rc = compile1(be, "hip", NULL, &good, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_EINVAL, "no target without a context", "rc=%s err='%s'", ka_strerror(rc), err);
  free(log);
  rc = compile1(be, "cuda", arch, &good, 1, k_one, 1, &log, err, sizeof err);
  check(rc == KA_EINVAL, "language cuda refused", "rc=%s err='%s'", ka_strerror(rc), err);
  free(log);

  /* sources[1..] are in-memory headers under their names */
  ka_source inc[2] = {
      src_of("main.hip",
             "#include <hip/hip_runtime.h>\n"
             "#include \"util/scale.h\"\n"
             "extern \"C\" __global__ void k(float *y) { y[0] = scale(y[0]); }\n"),
      src_of("util/scale.h", "__device__ inline float scale(float v) { return 2.0f * v; }\n")};
  rc = compile1(be, "hip", arch, inc, 2, k_one, 1, &log, err, sizeof err);
  check(rc == KA_OK, "in-memory include", "rc=%s %s", ka_strerror(rc), rc ? first_error(log) : "");
  free(log);
}

/* The HIP kernel-language subset of gpuexec/backends/hip_on_cuda.h, compiled natively. */
static const char hip_src[] =
    "#include <hip/hip_runtime.h>\n"
    "#ifndef __HIP_PLATFORM_AMD__\n#error no platform macro\n#endif\n"
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
    "  if (v == INFINITY || v != v || isnan(NAN)) v = 0.0f;\n"
    "  (void)hipGridDim_x; (void)hipThreadIdx_y; (void)hipBlockIdx_z;\n"
    "}\n";

static void check_hip_subset(const ka_backend_ops *be, const char *arch) {
  char err[2048], *log = NULL;
  ka_source s = src_of("hip_names.hip", hip_src);
  const char *const k[] = {"hip_names"};
  int rc = compile1(be, "hip", arch, &s, 1, k, 1, &log, err, sizeof err);
  check(rc == KA_OK, "hip kernel language",
        "hipThreadIdx_x, HIP_DYNAMIC_SHARED, __shfl*, __ballot, __syncthreads, atomicAdd: %s %s",
        ka_strerror(rc), rc ? first_error(log) : "");
  if (rc && log) printf("%s\n", log);
  free(log);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <tasks folder>\n", argv[0]);
    return 2;
  }
  char err[2048] = "";
  const ka_backend_ops *be = ka_backend_load("hip", err, sizeof err);
  check(be != NULL && !strcmp(be->name, "hip"), "load", "ka_backend_load(\"hip\"): %s",
        be ? be->name : err);
  if (!be) return 1;

  int count = -1;
  err[0] = '\0';
  int rc = be->device_count(&count, err, sizeof err);
  if (count > 0) {
    check(rc == KA_OK, "device_count", "%d device(s)", count);
    ka_backend_ctx *ctx = NULL;
    rc = be->open(0, &ctx, err, sizeof err);
    ka_device_info info;
    if (rc == KA_OK && be->device_info(ctx, &info) == KA_OK)
      printf("     device 0: %s %s, %d CUs, wavefront %d, LDS %lld bytes/block, %s\n", info.name,
             info.arch, info.multiprocessors, info.warp_size,
             (long long)info.shared_bytes_per_block, info.driver);
    else
      printf("     device 0 did not open: %s\n", err);
    be->close(ctx);
  } else {
    check(rc == KA_OK && count == 0 && err[0], "device_count", "0 devices, reason: %s", err);
    /* open fails cleanly, with the reason, and leaves *ctx NULL */
    ka_backend_ctx *ctx = (ka_backend_ctx *)&count;
    err[0] = '\0';
    rc = be->open(0, &ctx, err, sizeof err);
    check(rc == KA_EUNAVAIL && ctx == NULL && err[0], "open without a device", "rc=%s: %s",
          ka_strerror(rc), err);
    /* telemetry and close take NULL */
    ka_telemetry tm;
    check(be->telemetry(NULL, &tm) == KA_EINVAL && !tm.valid, "telemetry(NULL)", "KA_EINVAL");
    be->close(NULL);
  }

  char arch[64];
  pick_arch(be, arch, sizeof arch);
  check_tasks(be, argv[1], arch);
  check_errors(be, arch);
  check_hip_subset(be, arch);

  printf("%d passed, %d failed\n", ka_check_pass, ka_check_fail);
  return ka_check_fail ? 1 : 0;
}
