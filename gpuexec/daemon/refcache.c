/* Correctness inputs and reference outputs kept across evaluations (refcache.h). */
#include "refcache.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data.h"
#include "ka_common.h"

struct ka_refcache {
  pthread_mutex_t mu;
  size_t budget, bytes; /* bytes: entries in the list */
  int entries;
  uint64_t hits, misses, prefetch_hits, refused;
  ka_refentry *head, *tail; /* most recently used first */
};

ka_refcache *ka_refcache_new(size_t budget_bytes) {
  ka_refcache *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  pthread_mutex_init(&c->mu, NULL);
  c->budget = budget_bytes;
  return c;
}

/* Reference outputs at least this large are mapped with transparent huge pages asked
 * for: the reference's threads write them first, and with 4 KiB pages their page faults
 * (one per 512 doubles, serialized on the process's memory map) took a large part of a
 * new seed's reference on the H200 (docs/benchmarks/2026-12-03-session24-h200.md). */
#define REF_HUGE_MIN ((size_t)4 << 20)

/* A reference output of n doubles: mapped (huge pages advised) when large, else malloc'd;
 * NULL on out of memory. Freed by ref_out_free with the same n. */
static double *ref_out_alloc(int64_t n) {
  size_t len = sizeof(double) * (size_t)(n ? n : 1);
  if (len < REF_HUGE_MIN) return malloc(len);
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  madvise(p, len, MADV_HUGEPAGE); /* advice: without THP it is refused, and 4 KiB pages stay */
  madvise(p, len, MADV_DONTFORK); /* a runner forked meanwhile copies none of it */
  return p;
}

static void ref_out_free(double *p, int64_t n) {
  size_t len = sizeof(double) * (size_t)(n ? n : 1);
  if (!p) return;
  if (len < REF_HUGE_MIN)
    free(p);
  else
    munmap(p, len);
}

static void ref_free(ka_refentry *e) {
  for (int k = 0; k < KA_MAX_TENSORS; k++) {
    if (e->in[k]) munmap((void *)e->in[k], e->bytes[k] ? e->bytes[k] : 1);
    if (e->fd[k] >= 0) close(e->fd[k]);
    ref_out_free(e->ref[k], e->elems[k]);
  }
  pthread_mutex_destroy(&e->mu);
  free(e);
}

static void ref_unlink(ka_refcache *c, ka_refentry *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    c->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    c->tail = e->prev;
  e->prev = e->next = NULL;
  e->cached = 0;
  c->bytes -= e->cost;
  c->entries--;
}

static void ref_push_front(ka_refcache *c, ka_refentry *e) {
  e->prev = NULL;
  e->next = c->head;
  if (c->head) c->head->prev = e;
  c->head = e;
  if (!c->tail) c->tail = e;
  e->cached = 1;
  c->bytes += e->cost;
  c->entries++;
}

/* Evicts unused entries until the cache fits its budget: speculative ones (a prefetch's
 * that no evaluation used) first, then the rest, each pass from the tail (least
 * recently used). Held entries stay. Under c->mu. */
static void ref_trim(ka_refcache *c) {
  for (int pass = 0; pass < 2 && c->bytes > c->budget; pass++)
    for (ka_refentry *e = c->tail, *prev; e && c->bytes > c->budget; e = prev) {
      prev = e->prev;
      if (e->refs == 0 && (pass == 1 || e->speculative)) {
        ref_unlink(c, e);
        ref_free(e);
      }
    }
}

/* The cached entry of (t, case_index, seed), or NULL. Under c->mu. */
static ka_refentry *ref_find(ka_refcache *c, const ka_task *t, int case_index, uint64_t seed) {
  for (ka_refentry *e = c->head; e; e = e->next)
    if (e->task == t && e->case_index == case_index && e->seed == seed) return e;
  return NULL;
}

/* The bytes a prefetch may fill: the budget less the entries it may not evict (held,
 * or made or used by an evaluation). Under c->mu. */
static size_t ref_room(const ka_refcache *c) {
  size_t keep = 0;
  for (const ka_refentry *e = c->head; e; e = e->next)
    if (e->refs > 0 || !e->speculative) keep += e->cost;
  return keep >= c->budget ? 0 : c->budget - keep;
}

void ka_refcache_free(ka_refcache *c) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  for (ka_refentry *e = c->head, *n; e; e = n) {
    n = e->next;
    ref_unlink(c, e);
    if (e->refs == 0) ref_free(e);
  }
  pthread_mutex_unlock(&c->mu);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* Draws input k of e into a new memfd and seals it. */
static int ref_input(ka_refentry *e, int k, char *err, size_t errlen) {
  const ka_tensor_spec *ts = &e->task->tensors[k];
  size_t len = e->bytes[k] ? e->bytes[k] : 1;
  if (e->fd[k] >= 0) close(e->fd[k]), e->fd[k] = -1; /* what a failed draw left */
  int fd = memfd_create(ts->name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return ka_seterr(err, errlen, KA_ESYS, "memfd_create: %s", strerror(errno));
  /* keep shared fds above the runner's fixed descriptors (0-3) */
  e->fd[k] = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  close(fd);
  if (e->fd[k] < 0) return ka_seterr(err, errlen, KA_ESYS, "fcntl: %s", strerror(errno));
  if (ftruncate(e->fd[k], (off_t)len) != 0)
    return ka_seterr(err, errlen, KA_ESYS, "ftruncate %zu bytes: %s", len, strerror(errno));
  void *w = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, e->fd[k], 0);
  if (w == MAP_FAILED) return ka_seterr(err, errlen, KA_ESYS, "mmap: %s", strerror(errno));
  /* a process forked meanwhile (another worker's runner) must not inherit this writable
   * mapping: it would keep F_SEAL_WRITE from succeeding (EBUSY) until its execve */
  madvise(w, len, MADV_DONTFORK);
  ka_fill_input(ts, w, e->elems[k], e->seed, e->case_index, k);
  munmap(w, len);
  if (fcntl(e->fd[k], F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL))
    return ka_seterr(err, errlen, KA_ESYS, "sealing an input: %s", strerror(errno));
  void *r = mmap(NULL, len, PROT_READ, MAP_SHARED, e->fd[k], 0);
  if (r == MAP_FAILED) return ka_seterr(err, errlen, KA_ESYS, "mmap: %s", strerror(errno));
  e->in[k] = r;
  return KA_OK;
}

/* The bytes an entry of (t, ci) holds: its inputs and its reference outputs (doubles),
 * as ref_make counts them. */
static int ref_cost(const ka_task *t, int ci, size_t *cost, char *err, size_t errlen) {
  *cost = 0;
  for (int k = 0; k < t->ntensors; k++) {
    int64_t n;
    int rc = ka_task_tensor_elems(t, k, &t->cases[ci], &n, err, errlen);
    if (rc) return rc;
    *cost += (size_t)n * (t->tensors[k].role == KA_ROLE_INPUT ? ka_dtype_size(t->tensors[k].dtype)
                                                              : sizeof(double));
  }
  return KA_OK;
}

int ka_ref_entry_bytes(const ka_task *t, int case_index, size_t *bytes, char *err, size_t errlen) {
  return ref_cost(t, case_index, bytes, err, errlen);
}

/* A new entry, its sizes and cost counted, nothing drawn or computed (ref_draw_locked,
 * ref_compute). */
static int ref_make(const ka_task *t, int ci, uint64_t seed, ka_refentry **out, char *err,
                    size_t errlen) {
  ka_refentry *e = calloc(1, sizeof *e);
  if (!e) return ka_seterr(err, errlen, KA_ENOMEM, "out of host memory");
  pthread_mutex_init(&e->mu, NULL);
  e->task = t, e->case_index = ci, e->seed = seed;
  for (int k = 0; k < KA_MAX_TENSORS; k++) e->fd[k] = -1;
  int rc = KA_OK;
  for (int k = 0; k < t->ntensors && rc == KA_OK; k++) {
    rc = ka_task_tensor_elems(t, k, &t->cases[ci], &e->elems[k], err, errlen);
    if (rc) break;
    e->bytes[k] = (size_t)e->elems[k] * ka_dtype_size(t->tensors[k].dtype);
    e->cost +=
        t->tensors[k].role == KA_ROLE_INPUT ? e->bytes[k] : sizeof(double) * (size_t)e->elems[k];
  }
  if (rc) {
    ref_free(e);
    return rc;
  }
  *out = e;
  return KA_OK;
}

/* Draws and seals every input of e not drawn yet; e->mu held. KA_OK (e->drawn set) or
 * the first failure (KA_ESYS, KA_ENOMEM), reason in err; inputs drawn before it stay, and
 * a later call draws the rest. */
static int ref_draw_locked(ka_refentry *e, char *err, size_t errlen) {
  const ka_task *t = e->task;
  for (int k = 0; k < t->ntensors && !e->drawn; k++) {
    if (t->tensors[k].role != KA_ROLE_INPUT || e->in[k]) continue;
    int rc = ref_input(e, k, err, errlen);
    if (rc) return rc;
  }
  __atomic_store_n(&e->drawn, 1, __ATOMIC_RELEASE); /* after fd and in (ka_ref_inputs) */
  return KA_OK;
}

int ka_ref_inputs(ka_refentry *e, char *err, size_t errlen) {
  /* drawn already: no wait for the mutex, which a holder computing the reference keeps
   * (a step of a GRPO group's seed must not wait for its sibling's reference) */
  if (__atomic_load_n(&e->drawn, __ATOMIC_ACQUIRE)) return KA_OK;
  pthread_mutex_lock(&e->mu);
  int rc = e->drawn ? KA_OK : ref_draw_locked(e, err, errlen);
  pthread_mutex_unlock(&e->mu);
  return rc;
}

int ka_ref_acquire(ka_refcache *c, const ka_task *t, int case_index, uint64_t seed,
                   ka_refentry **out, char *err, size_t errlen) {
  int rc = ka_ref_acquire_lazy(c, t, case_index, seed, out, err, errlen);
  if (rc == KA_OK && (rc = ka_ref_inputs(*out, err, errlen)) != KA_OK) {
    ka_ref_release(c, *out);
    *out = NULL;
  }
  return rc;
}

int ka_ref_acquire_lazy(ka_refcache *c, const ka_task *t, int case_index, uint64_t seed,
                        ka_refentry **out, char *err, size_t errlen) {
  *out = NULL;
  if (c) {
    pthread_mutex_lock(&c->mu);
    ka_refentry *e = ref_find(c, t, case_index, seed);
    if (e) {
      ref_unlink(c, e);
      ref_push_front(c, e);
      e->refs++;
      c->hits++;
      if (e->speculative) c->prefetch_hits++;
      e->speculative = 0; /* an evaluation's now: no prefetch evicts it */
      pthread_mutex_unlock(&c->mu);
      *out = e;
      return KA_OK;
    }
    c->misses++;
    pthread_mutex_unlock(&c->mu);
  }
  ka_refentry *e = NULL;
  int rc = ref_make(t, case_index, seed, &e, err, errlen);
  if (rc) return rc;
  e->refs = 1;
  if (c) {
    pthread_mutex_lock(&c->mu);
    /* another thread may have made the same entry meanwhile: keep one */
    ka_refentry *twin = ref_find(c, t, case_index, seed);
    if (twin) {
      twin->refs++;
      twin->speculative = 0;
      pthread_mutex_unlock(&c->mu);
      ref_free(e);
      *out = twin;
      return KA_OK;
    }
    if (e->cost <= c->budget) {
      ref_push_front(c, e);
      ref_trim(c);
    }
    pthread_mutex_unlock(&c->mu);
  }
  *out = e;
  return KA_OK;
}

int ka_ref_acquire_prefetch(ka_refcache *c, const ka_task *t, int case_index, uint64_t seed,
                            ka_refentry **out, char *err, size_t errlen) {
  *out = NULL;
  if (!c) return ka_seterr(err, errlen, KA_EINVAL, "a prefetch needs a reference cache");
  size_t cost;
  int rc = ref_cost(t, case_index, &cost, err, errlen);
  if (rc) return rc;
  pthread_mutex_lock(&c->mu);
  ka_refentry *e = ref_find(c, t, case_index, seed);
  if (e) { /* its first step is coming: keep it fresh */
    ref_unlink(c, e);
    ref_push_front(c, e);
    e->refs++;
    pthread_mutex_unlock(&c->mu);
    *out = e;
    return KA_OK;
  }
  int fits = cost <= ref_room(c);
  if (!fits) c->refused++;
  pthread_mutex_unlock(&c->mu);
  if (!fits)
    return ka_seterr(err, errlen, KA_EUNAVAIL,
                     "no room in the reference cache beside the evaluations' entries (%zu bytes "
                     "needed)",
                     cost);
  if ((rc = ref_make(t, case_index, seed, &e, err, errlen))) return rc;
  e->refs = 1;
  pthread_mutex_lock(&c->mu);
  ka_refentry *twin = ref_find(c, t, case_index, seed); /* made meanwhile: keep one */
  if (twin) twin->refs++;
  /* the evaluations' entries may have grown meanwhile: check again */
  fits = twin || e->cost <= ref_room(c);
  if (!twin && fits) {
    e->speculative = 1;
    ref_push_front(c, e);
    ref_trim(c); /* speculative unheld entries only: the room left the rest out */
  }
  if (!fits) c->refused++;
  pthread_mutex_unlock(&c->mu);
  if (twin || !fits) ref_free(e);
  *out = twin ? twin : fits ? e : NULL;
  if (!fits) return ka_seterr(err, errlen, KA_EUNAVAIL, "no room in the reference cache");
  return KA_OK;
}

/* One slice [lo, hi) of the split param's range (all of it when the task has no split):
 * the reference on it, then the largest finite |value| of each output slice. */
typedef struct ref_part {
  ka_refentry *e;
  ka_reference_fn fn;
  int64_t lo, hi;
  int omp_threads; /* the OpenMP team of a reference's own parallel loops in this part */
  double max[KA_MAX_TENSORS];
  int nonfinite;
} ref_part;

static void *ref_part_run(void *arg) {
  ref_part *q = arg;
  ka_refentry *e = q->e;
  const ka_task *t = e->task;
  int64_t vals[KA_MAX_PARAMS];
  memcpy(vals, t->cases[e->case_index].values, sizeof vals);
  int64_t rows = t->ref_split >= 0 ? vals[t->ref_split] : 1;
  void *ptrs[KA_MAX_TENSORS];
  int64_t off[KA_MAX_TENSORS], len[KA_MAX_TENSORS];
  for (int k = 0; k < t->ntensors; k++) {
    int cut = t->ref_split >= 0 && (t->ref_sliced >> k & 1u);
    int64_t per_row = cut && rows > 0 ? e->elems[k] / rows : 0;
    off[k] = cut ? q->lo * per_row : 0;
    len[k] = cut ? (q->hi - q->lo) * per_row : e->elems[k];
    size_t esz =
        t->tensors[k].role == KA_ROLE_INPUT ? ka_dtype_size(t->tensors[k].dtype) : sizeof(double);
    char *base = t->tensors[k].role == KA_ROLE_INPUT ? (char *)e->in[k] : (char *)e->ref[k];
    ptrs[k] = base + (size_t)off[k] * esz;
  }
  if (t->ref_split >= 0) vals[t->ref_split] = q->hi - q->lo;
  /* references are built with -fopenmp (reference.c): a reference with parallel loops of
   * its own gets a team per part, so that the parts together use the cores once, not
   * once each (review 2026-12-01: 16 parts x 16 threads) */
  int before = omp_get_max_threads();
  omp_set_num_threads(q->omp_threads);
  q->fn(ptrs, vals);
  omp_set_num_threads(before);
  for (int k = 0; k < t->ntensors; k++) {
    if (t->tensors[k].role != KA_ROLE_OUTPUT) continue;
    double m = 0;
    const double *r = e->ref[k] + off[k];
    for (int64_t i = 0; i < len[k]; i++) {
      double v = fabs(r[i]);
      if (!isfinite(v))
        q->nonfinite = 1;
      else if (v > m)
        m = v;
    }
    q->max[k] = m;
  }
  return NULL;
}

/* Threads of one split reference (the priority of the caller's thread is inherited). */
#define REF_MAX_PARTS 64
/* Elements of all tensors per part below which a split reference stays on fewer threads. */
#define REF_MIN_PART_ELEMS ((int64_t)1 << 18)

/* How many parts a reference of e is computed in: 1 without a split, else at most the
 * online CPUs, the rows, and one per REF_MIN_PART_ELEMS elements. */
static int ref_parts(const ka_refentry *e) {
  const ka_task *t = e->task;
  if (t->ref_split < 0) return 1;
  int64_t rows = t->cases[e->case_index].values[t->ref_split], total = 0;
  for (int k = 0; k < t->ntensors; k++) total += e->elems[k];
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t n = total / REF_MIN_PART_ELEMS;
  if (n > ncpu) n = ncpu;
  if (n > rows) n = rows;
  if (n > REF_MAX_PARTS) n = REF_MAX_PARTS;
  return n < 1 ? 1 : (int)n;
}

/* Computes the reference of e in n slices (n <= REF_MAX_PARTS), parts 1.. on their own threads
 * (part 0, and any whose thread cannot start, on this one), and sets ref_max and
 * uncacheable from the parts. */
static void ref_compute(ka_refentry *e, ka_reference_fn fn, int n) {
  const ka_task *t = e->task;
  int64_t rows = t->ref_split >= 0 ? t->cases[e->case_index].values[t->ref_split] : 1;
  ref_part parts[REF_MAX_PARTS];
  pthread_t th[REF_MAX_PARTS];
  int started[REF_MAX_PARTS] = {0};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int team = n > 1 ? (int)(ncpu / n) : omp_get_max_threads();
  for (int i = 0; i < n; i++)
    parts[i] = (ref_part){.e = e,
                          .fn = fn,
                          .lo = rows * i / n,
                          .hi = rows * (i + 1) / n,
                          .omp_threads = team > 0 ? team : 1};
  for (int i = 1; i < n; i++)
    started[i] = pthread_create(&th[i], NULL, ref_part_run, &parts[i]) == 0;
  for (int i = 0; i < n; i++)
    if (!started[i]) ref_part_run(&parts[i]);
  for (int i = 1; i < n; i++)
    if (started[i]) pthread_join(th[i], NULL);
  for (int k = 0; k < t->ntensors; k++) {
    e->ref_max[k] = 0;
    for (int i = 0; i < n; i++)
      if (parts[i].max[k] > e->ref_max[k]) e->ref_max[k] = parts[i].max[k];
  }
  /* a reference with NaN or Inf (a reference's own failure, e.g. its malloc) is not kept
   * for later steps: they get a new computation */
  for (int i = 0; i < n; i++)
    if (parts[i].nonfinite) e->uncacheable = 1;
}

int ka_ref_reference(ka_refentry *e, ka_reference_fn fn, char *err, size_t errlen) {
  return ka_ref_reference_parts(e, fn, 0, err, errlen);
}

int ka_ref_reference_parts(ka_refentry *e, ka_reference_fn fn, int parts, char *err,
                           size_t errlen) {
  pthread_mutex_lock(&e->mu);
  int rc = e->ready || e->drawn ? KA_OK : ref_draw_locked(e, err, errlen);
  if (!e->ready && rc == KA_OK) {
    const ka_task *t = e->task;
    for (int k = 0; k < t->ntensors && rc == KA_OK; k++) {
      if (t->tensors[k].role != KA_ROLE_OUTPUT || e->ref[k]) continue;
      e->ref[k] = ref_out_alloc(e->elems[k]);
      if (!e->ref[k])
        rc = ka_seterr(err, errlen, KA_ENOMEM,
                       "out of host memory for the reference of output %s (%lld doubles)",
                       t->tensors[k].name, (long long)e->elems[k]);
    }
    if (rc == KA_OK) {
      const ka_task *tk = e->task;
      int64_t rows = tk->ref_split >= 0 ? tk->cases[e->case_index].values[tk->ref_split] : 1;
      int n = parts > 0 ? parts : ref_parts(e);
      if (tk->ref_split < 0) n = 1;
      if (n > rows) n = rows < 1 ? 1 : (int)rows; /* a part per row at most */
      if (n > REF_MAX_PARTS) n = REF_MAX_PARTS;
      ref_compute(e, fn, n);
      e->ready = 1;
    }
  }
  pthread_mutex_unlock(&e->mu);
  return rc;
}

void ka_ref_release(ka_refcache *c, ka_refentry *e) {
  if (!e) return;
  if (!c) {
    ref_free(e);
    return;
  }
  pthread_mutex_lock(&c->mu);
  int gone = --e->refs == 0 && !e->cached;
  if (e->refs == 0 && e->cached && (!e->ready || e->uncacheable)) {
    /* its reference was never computed (the evaluation failed early): drop it, so that
     * a cached entry is always complete or being completed by a holder */
    ref_unlink(c, e);
    gone = 1;
  }
  ref_trim(c);
  pthread_mutex_unlock(&c->mu);
  if (gone) ref_free(e);
}

void ka_refcache_stats(ka_refcache *c, ka_refstats *out) {
  pthread_mutex_lock(&c->mu);
  *out = (ka_refstats){.entries = c->entries,
                       .bytes = c->bytes,
                       .budget = c->budget,
                       .hits = c->hits,
                       .misses = c->misses,
                       .prefetch_hits = c->prefetch_hits,
                       .refused = c->refused};
  for (ka_refentry *e = c->head; e; e = e->next) out->speculative += e->speculative;
  pthread_mutex_unlock(&c->mu);
}
