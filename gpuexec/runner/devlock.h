/* The device lock (issue 15 item 3): several evaluations share one device, and a timed
 * call runs with no other evaluation's work on it.
 *
 * Two lock files per device, made by the gpuexec worker (memfds, ka_devlock_create):
 * M, taken shared by a runner around its untimed device work (staging, checks,
 * verification, correctness trial, teardown) and exclusive around a cache flush and the
 * timed call after it; and T, a turnstile that gives exclusive requests precedence, so
 * that a stream of shared holders cannot starve a timed call. Every runner gets open
 * file descriptions of its own (ka_devlock_reopen: flock(2) locks belong to an open file
 * description, so descriptors shared by fork or SCM_RIGHTS would count as one holder).
 * flock locks end with the process: a runner that crashes or is killed releases them.
 *
 * Deadlock freedom: T is only ever waited for by a process that holds nothing of M, and
 * it is held only while waiting for M, so every wait ends when the current holders of M
 * finish their device work, which is bounded: by runner.c's call limit (a call), the job's
 * deadline (the rest of an evaluation) and RN_PREOPEN_LIMIT_S (a warm runner's open). */
#ifndef KA_DEVLOCK_H
#define KA_DEVLOCK_H

#include <stddef.h>

/* One process's hold of one device's lock. m < 0: no lock (every call is a no-op). */
typedef struct ka_devlock {
  int m, t;        /* the main lock and the turnstile, this process's open descriptions */
  int held;        /* KA_DEVLOCK_NONE, _SHARED or _EXCLUSIVE */
  double waited_s; /* total time spent waiting for the lock (for the phase log) */
  int exclusive_n; /* exclusive holds taken */
} ka_devlock;

enum { KA_DEVLOCK_NONE = 0, KA_DEVLOCK_SHARED = 1, KA_DEVLOCK_EXCLUSIVE = 2 };

/* Creates the two lock files of one device (memfds, close-on-exec) in *m and *t.
 * KA_OK or KA_ESYS (errno in err). The caller owns and closes both. Thread safe. */
int ka_devlock_create(int *m, int *t, char *err, size_t errlen);

/* New open file descriptions of the lock files m and t (through /proc/self/fd), for one
 * runner: *m2 and *t2, close-on-exec, owned by the caller. KA_OK or KA_ESYS. */
int ka_devlock_reopen(int m, int t, int *m2, int *t2, char *err, size_t errlen);

/* Holds l shared (from none: through the turnstile; from exclusive: a downgrade).
 * Blocks while an exclusive hold or request exists. KA_OK, or KA_ESYS if flock fails. */
int ka_devlock_shared(ka_devlock *l);

/* Holds l exclusive: releases a shared hold first, then waits in the turnstile until
 * no other process holds M. KA_OK or KA_ESYS. */
int ka_devlock_exclusive(ka_devlock *l);

/* Releases l (no-op when not held). KA_OK or KA_ESYS. */
int ka_devlock_release(ka_devlock *l);

#endif
