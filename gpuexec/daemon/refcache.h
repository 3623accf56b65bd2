/* Correctness inputs and reference outputs, kept across evaluations (issue 15).
 *
 * The correctness trial of a case runs on inputs drawn from the job's problem seed (the
 * episode's seed) mixed with a secret of the executor process, so every step of an
 * episode, and every rollout of a GRPO group that shares a seed, sees the same inputs
 * on one executor, and their reference outputs (trusted C, double precision, on the
 * host) need computing once. The submission never learns the secret, so it still cannot
 * predict the inputs (docs/integrity.md, property 2); timed calls draw their own inputs
 * per call and per evaluation.
 *
 * An entry holds one case's inputs in sealed memfds (F_SEAL_WRITE: no process, the
 * runner included, can change them, so they can be handed to every runner as they are)
 * and its reference outputs. Entries are reference counted; unused ones are evicted
 * least recently used first past the cache's byte budget. Thread safe. */
#ifndef KA_REFCACHE_H
#define KA_REFCACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuexec.h"
#include "task.h"

typedef struct ka_refcache ka_refcache;

/* One case's correctness data. Read-only for holders once ka_ref_reference returned. */
typedef struct ka_refentry {
  const ka_task *task;
  int case_index;                 /* index in task->cases */
  uint64_t seed;                  /* the input seed the inputs were drawn from */
  int fd[KA_MAX_TENSORS];         /* inputs: sealed memfd (-1 until drawn); outputs: -1 */
  const void *in[KA_MAX_TENSORS]; /* inputs: read-only mapping of fd */
  double *ref[KA_MAX_TENSORS];    /* outputs: reference values (NULL until computed) */
  double ref_max[KA_MAX_TENSORS]; /* outputs: largest finite |value| of ref (once ready) */
  int64_t elems[KA_MAX_TENSORS];
  size_t bytes[KA_MAX_TENSORS];
  size_t cost; /* bytes held: inputs and reference outputs */
  /* private to refcache.c */
  pthread_mutex_t mu;
  int drawn;       /* every input drawn and sealed (fd, in set) */
  int ready;       /* reference computed */
  int uncacheable; /* its reference has NaN or Inf: dropped when the last holder lets go */
  int refs;        /* holders */
  int speculative; /* made by a prefetch and not yet used by an evaluation */
  int cached;      /* in the cache's list */
  struct ka_refentry *prev, *next;
} ka_refentry;

/* A cache of at most budget_bytes of unused entries (0: keep none beyond their use).
 * NULL on out of memory. */
ka_refcache *ka_refcache_new(size_t budget_bytes);
/* Frees the cache and every unused entry. Call it only when no entry is held (a later
 * ka_ref_release would use the freed cache). NULL is a no-op. */
void ka_refcache_free(ka_refcache *c);

/* The entry of (t, case_index, seed), held for the caller: found in the cache, or made
 * now, with its inputs drawn (ka_fill_input) and sealed before it returns (an entry found
 * undrawn: drawn now, or waited for while another holder draws it; a drawn one returns
 * at once, even while another holder computes its reference); its reference may not be
 * computed yet (ka_ref_reference). cache may be NULL (a private entry). Returns KA_OK,
 * or KA_ESYS / KA_ENOMEM with the reason in err and *out NULL. */
int ka_ref_acquire(ka_refcache *c, const ka_task *t, int case_index, uint64_t seed,
                   ka_refentry **out, char *err, size_t errlen);

/* As ka_ref_acquire, but an entry made now (or found before anyone drew it) comes with
 * its inputs not drawn: fd and in are -1 and NULL until ka_ref_inputs or ka_ref_reference
 * returns. For a runner that draws the trial's inputs on the device itself
 * (Device.device_staging): the worker starts it first and draws while it works. Making an
 * entry costs no draw, so threads that miss on the same entry at once make one, and its
 * inputs are drawn once (the first ka_ref_inputs; the others wait for it). */
int ka_ref_acquire_lazy(ka_refcache *c, const ka_task *t, int case_index, uint64_t seed,
                        ka_refentry **out, char *err, size_t errlen);

/* Draws and seals e's inputs unless done already (concurrent callers wait for the first).
 * KA_OK, or KA_ESYS / KA_ENOMEM with the reason in err (the inputs not drawn stay so: a
 * later call tries again). */
int ka_ref_inputs(ka_refentry *e, char *err, size_t errlen);

/* *bytes: what an entry of (t, case_index) holds (its inputs and its reference outputs
 * as doubles), as the cache counts it. KA_OK or the error of the case's sizes, the
 * reason in err. */
int ka_ref_entry_bytes(const ka_task *t, int case_index, size_t *bytes, char *err, size_t errlen);

/* Computes e's reference outputs with fn unless done already (by this or another
 * holder: concurrent callers wait for the first), drawing its inputs first if they are not
 * (ka_ref_inputs); a task with reference.split is computed in slices on several threads
 * (ka_ref_reference_parts). Returns KA_OK, or KA_ENOMEM / KA_ESYS (a draw's failure, or
 * no memory for the outputs), the reason in err (may be NULL). */
int ka_ref_reference(ka_refentry *e, ka_reference_fn fn, char *err, size_t errlen);

/* As ka_ref_reference, in `parts` slices of the task's reference.split param (task.h),
 * parts 1.. each on a thread of its own that inherits the caller's priority; parts <= 0
 * chooses: up to one per online CPU, one per 2^18 elements of the case's tensors. A task
 * without a split is computed in one piece; one with fewer rows than parts, a row a part. */
int ka_ref_reference_parts(ka_refentry *e, ka_reference_fn fn, int parts, char *err, size_t errlen);

/* As ka_ref_acquire for a reference prefetch (ka_prefetch): an entry found is held as
 * it is; one made is marked speculative until an evaluation acquires it. A prefetch never
 * evicts an entry that an evaluation made or used, held or not: it makes an entry only
 * when it fits the budget beside them, evicting other speculative entries no one holds
 * (oldest first); else KA_EUNAVAIL ("no room"), nothing made or evicted. Other errors
 * as ka_ref_acquire. c must not be NULL (KA_EINVAL). */
int ka_ref_acquire_prefetch(ka_refcache *c, const ka_task *t, int case_index, uint64_t seed,
                            ka_refentry **out, char *err, size_t errlen);

/* Releases a hold from ka_ref_acquire; the entry stays cached within the budget
 * (trimming evicts unheld speculative entries first, then the least recently used). */
void ka_ref_release(ka_refcache *c, ka_refentry *e);

/* The cache's statistics (a snapshot). */
typedef struct ka_refstats {
  int entries;            /* in the cache now */
  int speculative;        /* of them made by a prefetch, no evaluation's yet */
  size_t bytes, budget;   /* bytes of the entries in the cache; the budget */
  uint64_t hits, misses;  /* ka_ref_acquire lookups (evaluations) */
  uint64_t prefetch_hits; /* of the hits, on an entry a prefetch made */
  uint64_t refused;       /* ka_ref_acquire_prefetch calls refused for room */
} ka_refstats;
void ka_refcache_stats(ka_refcache *c, ka_refstats *out);

#endif
