/* Trusted references: each task's reference.c compiled once (with -fopenmp, so a
 * reference may parallelise its loops with `#pragma omp parallel for`) into a shared object that
 * gpuexec loads into its own process (never into a runner). */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuexec.h"
#include "ka_common.h"

#define REF_MAX 256
static pthread_mutex_t ref_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char key[160];
  ka_reference_fn fn;
} ref_cache[REF_MAX];
static int ref_n;

static int ref_compile(const char *src, const char *so, char *err, size_t errlen) {
  char tmp[PATH_MAX + 16], logp[PATH_MAX + 16];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", so, (int)getpid());
  snprintf(logp, sizeof logp, "%s.log", so);
  const char *cc = getenv("KA_HOST_CC");
  pid_t pid = fork();
  if (pid < 0) return ka_seterr(err, errlen, KA_ESYS, "fork: %s", strerror(errno));
  if (pid == 0) {
    FILE *f = freopen(logp, "w", stderr);
    (void)f;
    execlp(cc && *cc ? cc : "cc", "cc", "-std=gnu11", "-O2", "-fopenmp", "-shared", "-fPIC", "-o",
           tmp, src, "-lm", (char *)NULL);
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char *log = NULL;
    ka_read_file(logp, 8192, &log, NULL);
    ka_seterr(err, errlen, KA_ECOMPILE, "reference %s failed to compile: %s", src,
              log ? log : "(no log)");
    free(log);
    return KA_ECOMPILE;
  }
  unlink(logp);
  if (rename(tmp, so) != 0) return ka_seterr(err, errlen, KA_EIO, "rename %s", so);
  return KA_OK;
}

int ka_reference_get(const ka_task *task, const char *cache_dir, ka_reference_fn *fn, char *err,
                     size_t errlen) {
  char key[160];
  snprintf(key, sizeof key, "%s@%s", task->id, task->version);
  pthread_mutex_lock(&ref_mu);
  for (int i = 0; i < ref_n; i++)
    if (!strcmp(ref_cache[i].key, key)) {
      *fn = ref_cache[i].fn;
      pthread_mutex_unlock(&ref_mu);
      return KA_OK;
    }
  char name[160], so[PATH_MAX], src[PATH_MAX];
  snprintf(name, sizeof name, "%s", task->id);
  for (char *p = name; *p; p++)
    if (*p == '/') *p = '_';
  ka_mkdirs(cache_dir);
  snprintf(so, sizeof so, "%s/ref-%s-%s.so", cache_dir, name, task->version);
  snprintf(src, sizeof src, "%s/reference.c", task->dir);
  int rc = KA_OK;
  if (access(so, R_OK) != 0) rc = ref_compile(src, so, err, errlen);
  if (rc == KA_OK) {
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    void *sym = h ? dlsym(h, task->reference_symbol) : NULL;
    if (!sym) {
      rc = ka_seterr(err, errlen, KA_ENOENT, "reference %s: %s", so,
                     h ? "symbol not found" : dlerror());
    } else {
      *fn = (ka_reference_fn)sym;
      if (ref_n < REF_MAX) {
        snprintf(ref_cache[ref_n].key, sizeof ref_cache[0].key, "%s", key);
        ref_cache[ref_n++].fn = *fn;
      }
    }
  }
  pthread_mutex_unlock(&ref_mu);
  return rc;
}
