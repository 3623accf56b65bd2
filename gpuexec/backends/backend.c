/* Backend registry: the built-in host backend and dlopen'd GPU backend modules. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ka_common.h"

#define BE_MAX 8
static struct {
  char name[16];
  const ka_backend_ops *ops;
} be_loaded[BE_MAX];
static int be_nloaded;

const ka_backend_ops *ka_backend_load(const char *name, char *err, size_t errlen) {
  if (!strcmp(name, "host")) return ka_backend_host();
  for (int i = 0; i < be_nloaded; i++)
    if (!strcmp(be_loaded[i].name, name)) return be_loaded[i].ops;
  if (strlen(name) >= sizeof be_loaded[0].name || !ka_path_is_safe(name) || strchr(name, '/')) {
    ka_seterr(err, errlen, KA_EINVAL, "bad backend name '%s'", name);
    return NULL;
  }
  char dir[PATH_MAX], path[PATH_MAX + 64];
  const char *env = getenv("KA_BACKEND_PATH");
  if (env && *env)
    snprintf(dir, sizeof dir, "%s", env);
  else if (ka_exe_dir(dir, sizeof dir)) {
    ka_seterr(err, errlen, KA_ESYS, "cannot find the executable's folder");
    return NULL;
  }
  snprintf(path, sizeof path, "%s/ka_backend_%s.so", dir, name);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    ka_seterr(err, errlen, KA_EUNAVAIL, "backend '%s' not available: %s", name, dlerror());
    return NULL;
  }
  ka_backend_get_fn get = (ka_backend_get_fn)dlsym(h, KA_BACKEND_GET_SYMBOL);
  const ka_backend_ops *ops = get ? get(KA_BACKEND_API_VERSION) : NULL;
  if (!ops || ops->api_version != KA_BACKEND_API_VERSION) {
    ka_seterr(err, errlen, KA_EUNAVAIL, "backend module %s does not serve backend API version %d",
              path, KA_BACKEND_API_VERSION);
    dlclose(h);
    return NULL;
  }
  if (be_nloaded < BE_MAX) {
    snprintf(be_loaded[be_nloaded].name, sizeof be_loaded[0].name, "%s", name);
    be_loaded[be_nloaded++].ops = ops;
  }
  return ops;
}

int ka_backend_device_staging(const ka_backend_ops *be) {
  return be->copy_device && be->compare_device && be->checksum_device && be->fill_device &&
         be->close_device;
}
