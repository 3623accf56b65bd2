/* The device lock: flock(2) on two memfds per device (devlock.h). */
#include "devlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ka_common.h"

int ka_devlock_create(int *m, int *t, char *err, size_t errlen) {
  *m = memfd_create("ka-devlock", MFD_CLOEXEC);
  *t = *m >= 0 ? memfd_create("ka-devlock-turnstile", MFD_CLOEXEC) : -1;
  if (*m >= 0 && *t >= 0) return KA_OK;
  int e = errno;
  if (*m >= 0) close(*m);
  *m = *t = -1;
  return ka_seterr(err, errlen, KA_ESYS, "memfd_create (device lock): %s", strerror(e));
}

/* A new open file description of fd (opening /proc/self/fd/N opens the file again). */
static int dl_reopen(int fd) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  return open(path, O_RDWR | O_CLOEXEC);
}

int ka_devlock_reopen(int m, int t, int *m2, int *t2, char *err, size_t errlen) {
  *m2 = dl_reopen(m);
  *t2 = *m2 >= 0 ? dl_reopen(t) : -1;
  if (*m2 >= 0 && *t2 >= 0) return KA_OK;
  int e = errno;
  if (*m2 >= 0) close(*m2);
  *m2 = *t2 = -1;
  return ka_seterr(err, errlen, KA_ESYS, "reopening the device lock: %s", strerror(e));
}

/* flock, retried on EINTR; the time spent waiting is added to l->waited_s. */
static int dl_flock(ka_devlock *l, int fd, int op) {
  double t0 = ka_now_s();
  int rc;
  while ((rc = flock(fd, op)) != 0 && errno == EINTR) {
  }
  if (op != LOCK_UN) l->waited_s += ka_now_s() - t0;
  return rc == 0 ? KA_OK : KA_ESYS;
}

int ka_devlock_shared(ka_devlock *l) {
  if (l->m < 0 || l->held == KA_DEVLOCK_SHARED) return KA_OK;
  int rc;
  if (l->held == KA_DEVLOCK_EXCLUSIVE) { /* a downgrade: no other holder to wait for */
    rc = dl_flock(l, l->m, LOCK_SH);
  } else {
    rc = dl_flock(l, l->t, LOCK_EX);
    if (rc == KA_OK) rc = dl_flock(l, l->m, LOCK_SH);
    if (dl_flock(l, l->t, LOCK_UN) != KA_OK && rc == KA_OK) rc = KA_ESYS;
  }
  if (rc == KA_OK) l->held = KA_DEVLOCK_SHARED;
  return rc;
}

int ka_devlock_exclusive(ka_devlock *l) {
  if (l->m < 0 || l->held == KA_DEVLOCK_EXCLUSIVE) return KA_OK;
  /* never wait in the turnstile while holding M (devlock.h: deadlock freedom) */
  if (l->held == KA_DEVLOCK_SHARED && ka_devlock_release(l) != KA_OK) return KA_ESYS;
  int rc = dl_flock(l, l->t, LOCK_EX);
  if (rc == KA_OK) rc = dl_flock(l, l->m, LOCK_EX);
  if (dl_flock(l, l->t, LOCK_UN) != KA_OK && rc == KA_OK) rc = KA_ESYS;
  if (rc == KA_OK) {
    l->held = KA_DEVLOCK_EXCLUSIVE;
    l->exclusive_n++;
  }
  return rc;
}

int ka_devlock_release(ka_devlock *l) {
  if (l->m < 0 || l->held == KA_DEVLOCK_NONE) return KA_OK;
  l->held = KA_DEVLOCK_NONE;
  return dl_flock(l, l->m, LOCK_UN);
}

int ka_devlock_send(int sock, int m, int t, char tag) {
  int fds[2] = {m, t};
  union {
    struct cmsghdr h;
    char c[CMSG_SPACE(sizeof fds)];
  } cm;
  memset(&cm, 0, sizeof cm);
  struct iovec iov = {.iov_base = &tag, .iov_len = 1};
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.c, .msg_controllen = sizeof cm.c};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t r;
  while ((r = sendmsg(sock, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return r == 1 ? KA_OK : KA_ESYS;
}

int ka_devlock_recv(int sock, char tag, int *m, int *t) {
  *m = *t = -1;
  char byte = 0;
  union {
    struct cmsghdr h;
    char c[CMSG_SPACE(sizeof(int) * 2)];
  } cm;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.c, .msg_controllen = sizeof cm.c};
  ssize_t r;
  while ((r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  int got[2], n = 0;
  for (struct cmsghdr *c = r > 0 ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < k; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (n < 2)
        got[n++] = fd;
      else
        close(fd);
    }
  }
  if (r == 1 && byte == tag && n == 2 && !(msg.msg_flags & MSG_CTRUNC)) {
    *m = got[0], *t = got[1];
    return KA_OK;
  }
  for (int i = 0; i < n; i++) close(got[i]);
  return KA_EIO;
}
