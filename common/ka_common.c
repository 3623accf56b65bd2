#include "ka_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/sha256.h>

const char *ka_strerror(int err) {
  switch (err) {
#define KA_ERR_CASE(name, val, text) \
  case val:                          \
    return text;
    KA_ERR_MAP(KA_ERR_CASE)
#undef KA_ERR_CASE
  }
  return "unknown error";
}

int ka_seterr(char *err, size_t errlen, int code, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

static int ka_read_fd(int fd, size_t max_bytes, char **out, size_t *len);

int ka_read_file(const char *path, size_t max_bytes, char **out, size_t *len) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? KA_ENOENT : KA_EIO;
  return ka_read_fd(fd, max_bytes, out, len);
}

int ka_read_file_nofollow(const char *path, size_t max_bytes, char **out, size_t *len) {
  *out = NULL;
  /* non-blocking: a FIFO must not hang the open (it is refused below as not regular) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return errno == ENOENT ? KA_ENOENT : KA_EIO;
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return ka_read_fd(fd, max_bytes, out, len);
}

/* ka_read_file's body on an open fd (closed here). */
static int ka_read_fd(int fd, size_t max_bytes, char **out, size_t *len) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return KA_EIO;
  }
  if (max_bytes && (size_t)st.st_size > max_bytes) {
    close(fd);
    return KA_ETOOBIG;
  }
  size_t n = (size_t)st.st_size;
  char *buf = malloc(n + 1);
  if (!buf) {
    close(fd);
    return KA_ENOMEM;
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (got != n) {
    free(buf);
    return KA_EIO;
  }
  buf[n] = 0;
  *out = buf;
  if (len) *len = n;
  return KA_OK;
}

int ka_write_file(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return KA_EIO;
  const char *p = data;
  size_t left = len;
  while (left) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      close(fd);
      return KA_EIO;
    }
    p += w;
    left -= (size_t)w;
  }
  return close(fd) == 0 ? KA_OK : KA_EIO;
}

int ka_mkdirs(const char *path) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return KA_ERANGE;
  for (char *p = tmp + 1; *p; p++) {
    if (*p == '/') {
      *p = 0;
      if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return KA_EIO;
      *p = '/';
    }
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return KA_EIO;
  return KA_OK;
}

int ka_rmtree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT ? KA_OK : KA_EIO;
  if (!S_ISDIR(st.st_mode)) return unlink(path) == 0 ? KA_OK : KA_EIO;
  DIR *d = opendir(path);
  if (!d) return KA_EIO;
  struct dirent *e;
  int rc = KA_OK;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char sub[PATH_MAX];
    if (snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= (int)sizeof sub) {
      rc = KA_ERANGE;
      continue;
    }
    int r = ka_rmtree(sub);
    if (r) rc = r;
  }
  closedir(d);
  if (rmdir(path) != 0) rc = KA_EIO;
  return rc;
}

double ka_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double ka_wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void ka_sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char dig[32];
  mbedtls_sha256_ret(data, len, dig, 0);
  static const char hx[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    out[2 * i] = hx[dig[i] >> 4];
    out[2 * i + 1] = hx[dig[i] & 15];
  }
  out[64] = 0;
}

void ka_sb_append(ka_sb *sb, const char *s, size_t n) {
  if (sb->len + n + 1 > sb->cap) {
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + n + 1) cap *= 2;
    char *p = realloc(sb->s, cap);
    if (!p) {
      sb->oom = 1;
      return;
    }
    sb->s = p;
    sb->cap = cap;
  }
  memcpy(sb->s + sb->len, s, n);
  sb->len += n;
  sb->s[sb->len] = 0;
}

void ka_sb_puts(ka_sb *sb, const char *s) {
  ka_sb_append(sb, s, strlen(s));
}

void ka_sb_printf(ka_sb *sb, const char *fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    ka_sb_append(sb, small, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    sb->oom = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  ka_sb_append(sb, big, (size_t)n);
  free(big);
}

void ka_sb_free(ka_sb *sb) {
  free(sb->s);
  memset(sb, 0, sizeof *sb);
}

char *ka_sb_take(ka_sb *sb) {
  char *s = sb->s ? sb->s : strdup("");
  memset(sb, 0, sizeof *sb);
  return s;
}

int ka_exe_dir(char *out, size_t outlen) {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return KA_ESYS;
  buf[n] = 0;
  char *slash = strrchr(buf, '/');
  if (!slash) return KA_ESYS;
  *slash = 0;
  if (snprintf(out, outlen, "%s", buf) >= (int)outlen) return KA_ERANGE;
  return KA_OK;
}

int ka_path_is_safe(const char *path) {
  size_t n = strlen(path);
  if (n == 0 || n > 255 || path[0] == '/') return 0;
  const char *seg = path;
  for (size_t i = 0; i <= n; i++) {
    unsigned char c = (unsigned char)path[i];
    if (c == '/' || c == 0) {
      size_t sl = (size_t)(path + i - seg);
      if (sl == 0) return 0;
      if (sl == 1 && seg[0] == '.') return 0;
      if (sl == 2 && seg[0] == '.' && seg[1] == '.') return 0;
      seg = path + i + 1;
      continue;
    }
    if (c < 0x20 || c == 0x7f || c == '\\') return 0;
  }
  return 1;
}

int ka_sb_read_until(ka_sb *sb, int fd, double deadline, size_t keep) {
  for (;;) {
    int ms = (int)((deadline - ka_now_s()) * 1000);
    if (ms <= 0) return 1;
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return 0;
    if (sb->len < keep) ka_sb_append(sb, buf, (size_t)n);
  }
}
