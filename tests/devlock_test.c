/* The device lock (gpuexec/runner/devlock.h), across processes as runners use it:
 * - exclusion: processes taking it shared and exclusive at random never see an exclusive
 *   hold overlap any other hold, and shared holds do overlap each other;
 * - precedence: a shared request made while an exclusive one waits is served after it;
 * - a holder that dies without releasing frees the lock;
 * - descriptions of one's own: two processes that reopened the files exclude each other,
 *   while one description shared by fork would not (the reason for ka_devlock_reopen);
 * - no lock (m -1): every call succeeds and holds nothing.
 * (A warm runner's pre-open takes no lock at all, runner.c rn_preopen: there is nothing
 * of it to test here; what it does beside timed calls is measured on the GPU,
 * tests/device/churn_h200.sh.) */
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devlock.h"
#include "ka_check.h"
#include "ka_common.h"

typedef struct shared {
  atomic_int sh, ex, violations, max_sh;
  atomic_int order[8], norder;
} shared;

static void nap_us(long us) {
  struct timespec t = {0, us * 1000};
  nanosleep(&t, NULL);
}

static ka_devlock open_lock(int m, int t) {
  ka_devlock l = {.m = -1, .t = -1};
  char err[128];
  if (ka_devlock_reopen(m, t, &l.m, &l.t, err, sizeof err) != KA_OK) {
    fprintf(stderr, "reopen: %s\n", err);
    _exit(9);
  }
  return l;
}

/* One process of the exclusion test: iters holds, a third of them exclusive. */
static void exclusion_child(int m, int t, shared *sv, unsigned seed, int iters) {
  ka_devlock l = open_lock(m, t);
  for (int i = 0; i < iters; i++) {
    int excl = rand_r(&seed) % 3 == 0;
    if (excl) {
      if (ka_devlock_exclusive(&l) != KA_OK) _exit(8);
      if (atomic_fetch_add(&sv->ex, 1) != 0 || atomic_load(&sv->sh) != 0)
        atomic_fetch_add(&sv->violations, 1);
      nap_us(100);
      atomic_fetch_sub(&sv->ex, 1);
    } else {
      if (ka_devlock_shared(&l) != KA_OK) _exit(8);
      int n = atomic_fetch_add(&sv->sh, 1) + 1;
      if (atomic_load(&sv->ex) != 0) atomic_fetch_add(&sv->violations, 1);
      int mx = atomic_load(&sv->max_sh);
      while (n > mx && !atomic_compare_exchange_weak(&sv->max_sh, &mx, n)) {
      }
      nap_us(300);
      atomic_fetch_sub(&sv->sh, 1);
    }
    /* sometimes straight from one kind to the other, as a runner does */
    if (rand_r(&seed) % 2 && ka_devlock_release(&l) != KA_OK) _exit(8);
  }
  ka_devlock_release(&l);
  _exit(0);
}

static int wait_all(int n) {
  int bad = 0;
  for (int i = 0; i < n; i++) {
    int st;
    if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
  }
  return bad;
}

static void test_exclusion(int m, int t, shared *sv) {
  enum { KIDS = 4, ITERS = 150 };
  for (int k = 0; k < KIDS; k++)
    if (fork() == 0) exclusion_child(m, t, sv, 1234u + (unsigned)k, ITERS);
  int bad = wait_all(KIDS);
  check(bad == 0, "exclusion_children", "%d of %d processes failed", bad, KIDS);
  check(atomic_load(&sv->violations) == 0, "exclusive_alone",
        "%d holds overlapped an exclusive one", atomic_load(&sv->violations));
  check(atomic_load(&sv->max_sh) >= 2, "shared_overlaps", "at most %d shared holders at once",
        atomic_load(&sv->max_sh));
}

/* Records who got the lock in which order (1: the exclusive waiter, 2: the late shared). */
static void record(shared *sv, int who) {
  int i = atomic_fetch_add(&sv->norder, 1);
  if (i < 8) atomic_store(&sv->order[i], who);
}

static void test_precedence(int m, int t, shared *sv) {
  ka_devlock mine = open_lock(m, t);
  ka_devlock_shared(&mine);
  if (fork() == 0) { /* the timed call waiting */
    ka_devlock l = open_lock(m, t);
    if (ka_devlock_exclusive(&l) != KA_OK) _exit(8);
    record(sv, 1);
    nap_us(20000);
    _exit(0);
  }
  nap_us(50000);     /* the exclusive request is waiting now */
  if (fork() == 0) { /* untimed work asking after it */
    ka_devlock l = open_lock(m, t);
    if (ka_devlock_shared(&l) != KA_OK) _exit(8);
    record(sv, 2);
    _exit(0);
  }
  nap_us(50000);
  int before = atomic_load(&sv->norder);
  ka_devlock_release(&mine);
  int bad = wait_all(2);
  check(before == 0, "waiting_while_shared", "%d got the lock while it was held shared", before);
  check(bad == 0 && atomic_load(&sv->norder) == 2 && atomic_load(&sv->order[0]) == 1 &&
            atomic_load(&sv->order[1]) == 2,
        "exclusive_first", "order %d then %d (want 1 then 2)", atomic_load(&sv->order[0]),
        atomic_load(&sv->order[1]));
  close(mine.m), close(mine.t);
}

static void test_dead_holder(int m, int t) {
  pid_t p = fork();
  if (p == 0) {
    ka_devlock l = open_lock(m, t);
    if (ka_devlock_exclusive(&l) != KA_OK) _exit(8);
    _exit(0); /* without releasing */
  }
  int st;
  waitpid(p, &st, 0);
  ka_devlock l = open_lock(m, t);
  double t0 = ka_now_s();
  int rc = ka_devlock_exclusive(&l);
  check(rc == KA_OK && ka_now_s() - t0 < 1.0, "dead_holder_releases", "rc %d after %.3f s", rc,
        ka_now_s() - t0);
  ka_devlock_release(&l);
  close(l.m), close(l.t);
}

static void test_own_descriptions(int m, int t) {
  ka_devlock a = open_lock(m, t), b = open_lock(m, t);
  ka_devlock_exclusive(&a);
  int other = flock(b.m, LOCK_SH | LOCK_NB);
  check(other != 0, "reopened_excludes", "a second description got a shared hold: %d", other);
  /* one description shared (as by fork or SCM_RIGHTS) is one holder: the reason every
   * runner gets descriptions of its own */
  int shared_desc = dup(a.m);
  int same = flock(shared_desc, LOCK_EX | LOCK_NB);
  check(same == 0, "shared_description_is_one_holder", "flock on a dup: %d", same);
  close(shared_desc);
  ka_devlock_release(&a);
  int after = flock(b.m, LOCK_EX | LOCK_NB);
  check(after == 0, "released_is_free", "flock after release: %d", after);
  flock(b.m, LOCK_UN);
  close(a.m), close(a.t), close(b.m), close(b.t);
}

static void test_no_lock(void) {
  ka_devlock l = {.m = -1, .t = -1};
  int rc = ka_devlock_shared(&l) | ka_devlock_exclusive(&l) | ka_devlock_release(&l);
  check(rc == KA_OK && l.held == KA_DEVLOCK_NONE, "no_lock_is_noop", "rc %d held %d", rc, l.held);
}

int main(void) {
  int m, t;
  char err[128];
  if (ka_devlock_create(&m, &t, err, sizeof err) != KA_OK) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  shared *sv = mmap(NULL, sizeof *sv, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sv == MAP_FAILED) return 1;
  memset(sv, 0, sizeof *sv);
  test_exclusion(m, t, sv);
  memset(sv, 0, sizeof *sv);
  test_precedence(m, t, sv);
  test_dead_holder(m, t);
  test_own_descriptions(m, t);
  test_no_lock();
  printf("%d passed, %d failed\n", ka_check_pass, ka_check_fail);
  return ka_check_fail ? 1 : 0;
}
