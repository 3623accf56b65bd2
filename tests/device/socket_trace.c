/* A diagnostic for the GPU machine (tests/device/cuda_sockets_h200.sh): an LD_PRELOAD
 * library that writes every socket(2), socketpair(2), connect(2), bind(2), listen(2),
 * sendto(2) and sendmsg(2)
 * the process makes through libc to stderr (family, type, address, result, errno), so
 * that what the CUDA driver's initialisation needs of the command sandbox's socket rules
 * (gpuexec/sandbox/sandbox.c sb_seccomp_gpu_unix) is read, not guessed. Not part of any
 * evaluation path. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

/* The address of a sockaddr for the log: an AF_UNIX path (abstract names with '@'). */
static const char *st_addr(const struct sockaddr *a, socklen_t len, char *buf, size_t blen) {
  if (!a || len < sizeof(sa_family_t)) return "-";
  if (a->sa_family != AF_UNIX) {
    snprintf(buf, blen, "family %d", a->sa_family);
    return buf;
  }
  const struct sockaddr_un *u = (const struct sockaddr_un *)a;
  size_t n = len - offsetof(struct sockaddr_un, sun_path);
  if (n == 0) return "unnamed";
  if (u->sun_path[0] == '\0') {
    snprintf(buf, blen, "@%.*s", (int)(n - 1), u->sun_path + 1);
  } else {
    snprintf(buf, blen, "%.*s", (int)strnlen(u->sun_path, n), u->sun_path);
  }
  return buf;
}

#define ST_REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

int socket(int domain, int type, int protocol) {
  int r = ST_REAL("socket", int (*)(int, int, int))(domain, type, protocol);
  int e = errno;
  fprintf(stderr, "[socket_trace] socket(family %d, type %d (low %d), proto %d) = %d%s%s\n", domain,
          type, type & 0xf, protocol, r, r < 0 ? " errno " : "", r < 0 ? strerror(e) : "");
  errno = e;
  return r;
}

int socketpair(int domain, int type, int protocol, int sv[2]) {
  int r = ST_REAL("socketpair", int (*)(int, int, int, int *))(domain, type, protocol, sv);
  int e = errno;
  fprintf(stderr, "[socket_trace] socketpair(family %d, type low %d) = %d%s%s\n", domain,
          type & 0xf, r, r < 0 ? " errno " : "", r < 0 ? strerror(e) : "");
  errno = e;
  return r;
}

int connect(int fd, const struct sockaddr *a, socklen_t len) {
  int r = ST_REAL("connect", int (*)(int, const struct sockaddr *, socklen_t))(fd, a, len);
  int e = errno;
  char buf[160];
  fprintf(stderr, "[socket_trace] connect(%d, %s) = %d%s%s\n", fd, st_addr(a, len, buf, sizeof buf),
          r, r < 0 ? " errno " : "", r < 0 ? strerror(e) : "");
  errno = e;
  return r;
}

int bind(int fd, const struct sockaddr *a, socklen_t len) {
  int r = ST_REAL("bind", int (*)(int, const struct sockaddr *, socklen_t))(fd, a, len);
  int e = errno;
  char buf[160];
  fprintf(stderr, "[socket_trace] bind(%d, %s) = %d%s%s\n", fd, st_addr(a, len, buf, sizeof buf), r,
          r < 0 ? " errno " : "", r < 0 ? strerror(e) : "");
  errno = e;
  return r;
}

ssize_t sendto(int fd, const void *b, size_t n, int flags, const struct sockaddr *a,
               socklen_t len) {
  ssize_t r = ST_REAL("sendto", ssize_t(*)(int, const void *, size_t, int, const struct sockaddr *,
                                           socklen_t))(fd, b, n, flags, a, len);
  int e = errno;
  char buf[160];
  fprintf(stderr, "[socket_trace] sendto(%d, %zu bytes, %s) = %zd%s%s\n", fd, n,
          st_addr(a, len, buf, sizeof buf), r, r < 0 ? " errno " : "", r < 0 ? strerror(e) : "");
  errno = e;
  return r;
}

int listen(int fd, int backlog) {
  int r = ST_REAL("listen", int (*)(int, int))(fd, backlog);
  int e = errno;
  fprintf(stderr, "[socket_trace] listen(%d, %d) = %d%s%s\n", fd, backlog, r,
          r < 0 ? " errno " : "", r < 0 ? strerror(e) : "");
  errno = e;
  return r;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags) {
  ssize_t r = ST_REAL("sendmsg", ssize_t(*)(int, const struct msghdr *, int))(fd, m, flags);
  int e = errno;
  char buf[160];
  fprintf(stderr, "[socket_trace] sendmsg(%d, %s, control %zu bytes) = %zd%s%s\n", fd,
          st_addr(m ? m->msg_name : NULL, m ? m->msg_namelen : 0, buf, sizeof buf),
          m ? (size_t)m->msg_controllen : 0, r, r < 0 ? " errno " : "", r < 0 ? strerror(e) : "");
  errno = e;
  return r;
}
