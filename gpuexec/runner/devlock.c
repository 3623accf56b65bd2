/* The device lock: flock(2) on two memfds per device (devlock.h). */
#include "devlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
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
