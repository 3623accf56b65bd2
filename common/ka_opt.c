/* Command-line option values (ka_opt.h). */
#include "ka_opt.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ka_common.h"

int ka_opt_int(const char *prog, const char *opt, const char *v, long lo, long hi, int *out) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (errno || end == v || *end || n < lo || n > hi) {
    fprintf(stderr, "%s: --%s needs an integer from %ld to %ld, not '%s'\n", prog, opt, lo, hi, v);
    return KA_EINVAL;
  }
  *out = (int)n;
  return KA_OK;
}

int ka_opt_u64(const char *prog, const char *opt, const char *v, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 0);
  if (errno || end == v || *end || strchr(v, '-') || strchr(v, '+')) {
    fprintf(stderr, "%s: --%s needs an integer from 0 to 2^64-1, not '%s'\n", prog, opt, v);
    return KA_EINVAL;
  }
  *out = (uint64_t)n;
  return KA_OK;
}

int ka_opt_double(const char *prog, const char *opt, const char *v, double lo, double hi,
                  double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (errno || end == v || *end || !isfinite(d) || d < lo || d > hi) {
    fprintf(stderr, "%s: --%s needs a number from %g to %g, not '%s'\n", prog, opt, lo, hi, v);
    return KA_EINVAL;
  }
  *out = d;
  return KA_OK;
}

int ka_opt_fraction(const char *prog, const char *opt, const char *v, double *out) {
  char *end;
  double d = strtod(v, &end);
  if (end == v || *end || !(d > 0 && d <= 1)) {
    fprintf(stderr, "%s: --%s needs a number in (0, 1]\n", prog, opt);
    return KA_EINVAL;
  }
  *out = d;
  return KA_OK;
}

int ka_opt_timeout_s(const char *prog, const char *opt, const char *v, int *out) {
  return ka_opt_int(prog, opt, v, 1, KA_OPT_MAX_TIMEOUT_S, out);
}

/* 1 if path is a folder. */
static int opt_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* <executable's folder>/rel resolved into buf when it exists (a folder when want_dir,
 * else any file). Returns buf or NULL. */
static const char *opt_beside_exe(const char *rel, int want_dir, char *buf, size_t len) {
  char exe[PATH_MAX], b[PATH_MAX + 64];
  if (ka_exe_dir(exe, sizeof exe) != KA_OK) return NULL;
  snprintf(b, sizeof b, "%s/%s", exe, rel);
  char *r = realpath(b, NULL);
  struct stat st;
  int ok = r && stat(r, &st) == 0 && (!want_dir || S_ISDIR(st.st_mode));
  if (ok) snprintf(buf, len, "%s", r);
  free(r);
  return ok ? buf : NULL;
}

const char *ka_helper_path(const char *name, char *buf, size_t len) {
  char rel[256];
  snprintf(rel, sizeof rel, "%s", name);
  if (opt_beside_exe(rel, 0, buf, len)) return buf;
  snprintf(rel, sizeof rel, "../libexec/kernelarena/%s", name);
  if (opt_beside_exe(rel, 0, buf, len)) return buf;
  char exe[PATH_MAX];
  if (ka_exe_dir(exe, sizeof exe) != KA_OK) snprintf(exe, sizeof exe, ".");
  snprintf(buf, len, "%s/%s", exe, name);
  return buf;
}

const char *ka_tasks_dir(const char *given, char *buf, size_t len) {
  if (given) return given;
  if (opt_is_dir("tasks")) return "tasks";
  if (opt_beside_exe("../share/kernelarena/tasks", 1, buf, len)) return buf;
#ifdef KA_SOURCE_TASKS_DIR
  if (opt_is_dir(KA_SOURCE_TASKS_DIR)) return KA_SOURCE_TASKS_DIR;
#endif
  char exe[PATH_MAX], b[PATH_MAX + 16];
  if (ka_exe_dir(exe, sizeof exe) == KA_OK) {
    snprintf(b, sizeof b, "%s/../../tasks", exe);
    char *r = realpath(b, NULL);
    if (r && opt_is_dir(r)) {
      snprintf(buf, len, "%s", r);
      free(r);
      return buf;
    }
    free(r);
  }
  return "tasks";
}
