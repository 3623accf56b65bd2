/* enospc_shim: an LD_PRELOAD library for tests that makes writes to regular files under
 * $KA_TEST_ENOSPC_DIR fail with ENOSPC while the file $KA_TEST_ENOSPC_FLAG exists, as
 * a full disk would (tests/reliability_test.py, case enospc). Sockets, pipes and files
 * elsewhere are written normally. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* 1 if a write to fd must fail now. */
static int shim_full(int fd) {
  const char *dir = getenv("KA_TEST_ENOSPC_DIR"), *flag = getenv("KA_TEST_ENOSPC_FLAG");
  if (!dir || !flag || access(flag, F_OK) != 0) return 0;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  char link[64], path[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = 0;
  return strncmp(path, dir, strlen(dir)) == 0;
}

ssize_t write(int fd, const void *buf, size_t n) {
  static ssize_t (*real)(int, const void *, size_t);
  if (!real) real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
  if (shim_full(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
  static ssize_t (*real)(int, const void *, size_t, off_t);
  if (!real) real = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
  if (shim_full(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) {
  static ssize_t (*real)(int, const void *, size_t, off64_t);
  if (!real) real = (ssize_t(*)(int, const void *, size_t, off64_t))dlsym(RTLD_NEXT, "pwrite64");
  if (shim_full(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buf, n, off);
}
