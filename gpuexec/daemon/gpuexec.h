/* gpuexec internals: the executor daemon's workers, evaluation and references. */
#ifndef KA_GPUEXEC_H
#define KA_GPUEXEC_H

#include <stdint.h>

#include "kernelarena.pb-c.h"
#include "task.h"

/* Reference ABI (docs/tasks.md): tensors[i] points at tensor i in task order; inputs
 * hold their dtype, outputs are double arrays of the same element count; params[j] is
 * param j in task order. Runs in the trusted gpuexec process, never in a runner. */
typedef void (*ka_reference_fn)(void *const *tensors, const int64_t *params);

/* Compiles task->dir/reference.c with the system C compiler (once per task version,
 * cached in cache_dir) and returns its entry point. Thread safe. Returns KA_OK,
 * KA_ECOMPILE (compiler output in err) or KA_ENOENT (symbol missing). */
int ka_reference_get(const ka_task *task, const char *cache_dir, ka_reference_fn *fn, char *err,
                     size_t errlen);

typedef struct ka_exec_config {
  const char *server_url;  /* executor URL of the envserver */
  const char *runner_path; /* ka-runner executable */
  const char *cache_dir;   /* compiled references */
  const char *tmp_dir;     /* parent of per-evaluation private directories */
  const ka_registry *tasks;
  int verbose;
  struct ka_refcache *ref_cache; /* correctness inputs and references (refcache.h), or NULL */
  int pool; /* keep a warm runner per GPU device (worker.c; gpuexec --no-pool turns it off) */
  int adaptive_reps;     /* timed calls may go on up to this many times the job's reps while
                            the speedup estimate is unstable (runner_case.c); <= 1: exactly reps */
  double timed_budget_s; /* wall seconds of timed calls per case past which adaptive
                            repetition stops (RunnerJob.timed_budget_s; gpuexec
                            --timed-budget-ms; 0: the runner's default) */
  int jobs_per_device;   /* evaluations in flight per GPU device (gpuexec --jobs-per-device;
                            worker.c, devlock.h); <= 1: one at a time */
  int host_slots;        /* the same for the host backend's device: 1 unless
                            --jobs-per-device was given */
  double call_limit_s;   /* one call of the candidate on a GPU past this is its TIMEOUT
                            (RunnerJob.call_limit_s; gpuexec --call-limit; 0: none) */
  int fixed_inputs;      /* ka-validate only: inputs from the job's seed alone (no per-evaluation
                           secret), so that two evaluations of one seed can be compared */

  /* command tasks: folders put before the system's on their commands' PATH, e.g. a
   * venv's bin (gpuexec --command-path; command.c) */
  const char *command_path;
  int command_pairs; /* command tasks: >= 2: the step is scored by the medians of this many
                        pairs of performance runs, the baseline's and the candidate's
                        alternated (gpuexec --command-pairs; command.c); <= 1: the
                        candidate's one run against the baseline's kept times */

  int no_prefetch;           /* gpuexec --no-prefetch: its workers take no reference prefetches */
  double prefetch_max_age_s; /* a queued prefetch older than this is dropped (prefetch.c;
                                <= 0: KA_PREFETCH_MAX_AGE_S) */
} ka_exec_config;

/* Evaluates one job on one device in a fresh ka-runner process and fills *res
 * (caller-initialised; strings it sets are malloc'd and freed by ka_result_clear).
 * Never fails: every fault becomes a status in *res. Thread safe. */
void ka_evaluate(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                 const Kernelarena__V1__Job *job, Kernelarena__V1__Result *res);

/* Finishes the calling thread's last ka_evaluate once its result is sent: frees the
 * evaluation's buffers (gelu's take tens of milliseconds to unmap) and folder, and warms
 * the device's next runner (ka_pool_warm), so none of it is on the step's critical path.
 * A no-op when nothing is left; ka_evaluate calls it first itself, so a caller that
 * never does loses nothing but that time. Per thread: call it from the thread that
 * called ka_evaluate. */
void ka_evaluate_finish(const ka_exec_config *cfg);

/* The input seed of job's correctness inputs, the key of their reference-cache entries
 * (refcache.h): the job's problem seed (else its seed) mixed with the executor's secret;
 * a reproducible job's without the secret; with cfg->fixed_inputs (ka-validate) the job's
 * seed. Evaluations and prefetches both derive it here (worker.c). Thread safe. */
uint64_t ka_job_input_seed(const ka_exec_config *cfg, const Kernelarena__V1__Job *job);

/* A reference prefetch (Job.prefetch, issue 15): draws the correctness inputs of the
 * job's cases from its input seed as a step of the same (task, seeds) would
 * (ka_job_input_seed) and computes their reference outputs into cfg->ref_cache, so that
 * step finds them there, one case at a time between ka_prefetch_unit_begin and _end.
 * Entries it makes are speculative (ka_ref_acquire_prefetch): it never evicts an entry
 * an evaluation made or holds, and stops with KA_EUNAVAIL when the cache has no room
 * beside them. Starts no runner and makes no Result. *ms (may be NULL): the time it
 * took. KA_OK; KA_EINVAL for a task it does not know or a command task; KA_ETIMEDOUT when
 * it waited past its age bound (ka_prefetch_unit_begin); the error of the cache or of
 * the task's reference otherwise, with the reason in err. A failure changes nothing:
 * the step computes what is missing itself. Thread safe. */
int ka_prefetch(const ka_exec_config *cfg, const Kernelarena__V1__Job *job, double *ms, char *err,
                size_t errlen);

/* The executor's prefetch queue (prefetch.c): one thread runs the queued jobs with
 * ka_prefetch at the lowest CPU priority, oldest first, and takes none while a host
 * runner is in flight (ka_prefetch_pause). Bounds (docs/protocol.md,
 * "Reference prefetch"): at most KA_PREFETCH_QUEUE jobs and at most the reference
 * cache's budget of entry bytes queued (the oldest dropped to make room; a job larger
 * than the budget alone is not queued); a job whose entries (task, version, input seed)
 * are queued already is not queued again; one queued longer than cfg->prefetch_max_age_s
 * is dropped; ka_prefetch_supersede drops those a step makes useless. */
#define KA_PREFETCH_QUEUE 16
#define KA_PREFETCH_MAX_AGE_S 30.0

/* Queues a copy of a prefetch job (see above); nothing without cfg->ref_cache. Returns
 * at once: the worker polls again. Thread safe. */
void ka_prefetch_queue(const ka_exec_config *cfg, const Kernelarena__V1__Job *job);

/* Drops the queued prefetch of the entries (task, version, input seed) of job, a step
 * or Evaluate about to run on this executor: it draws them itself (or waits for a
 * prefetch computing them now). Thread safe. */
void ka_prefetch_supersede(const ka_exec_config *cfg, const Kernelarena__V1__Job *job);

/* Host-backend evaluations (their timed calls run on the CPU, where any other work is
 * noise): ka_prefetch_pause before the runner starts raises the count of such runners in
 * flight and waits until no prefetch unit (one case: its inputs drawn, its reference
 * computed) is running, so none runs beside the runner's calls; ka_prefetch_resume
 * after its result lowers it, and at 0 prefetches go on. The wait is one unit at most
 * (host/gelu's largest case: about 0.1 s here). With KA_PREFETCH_GATE=0 in gpuexec's
 * environment (read once; for bench/prefetch_host_noise.sh's "before" column) neither
 * waits. Thread safe. */
void ka_prefetch_pause(void);
void ka_prefetch_resume(void);

/* Brackets one unit of prefetch work (ka_prefetch, one case). _begin waits while a host
 * runner is in flight (ka_prefetch_pause); KA_OK, or KA_ETIMEDOUT when the job being run
 * by the prefetch thread passed its age bound meanwhile (then call no _end). Thread safe. */
int ka_prefetch_unit_begin(void);
void ka_prefetch_unit_end(void);

/* What the prefetch queue did since the process started (a snapshot). */
typedef struct ka_prefetch_counts {
  long queued;     /* jobs queued */
  long done;       /* jobs run to the end with KA_OK */
  long failed;     /* run and failed (no room in the cache included) */
  long duplicate;  /* not queued: the same entries were queued already */
  long superseded; /* dropped for a step of the same entries (ka_prefetch_supersede) */
  long aged;       /* dropped past the age bound */
  long full;       /* dropped for room (count or bytes), or larger than the cache */
  int pending;     /* queued now */
  int running;     /* 1 while the thread runs a job */
  int paused;      /* host runners in flight (ka_prefetch_pause) */
  int in_unit;     /* prefetch units running now (ka_prefetch_unit_begin) */
} ka_prefetch_counts;
void ka_prefetch_counts_get(ka_prefetch_counts *out);

/* Kills the process group of every runner still running (gpuexec shutdown). */
void ka_kill_runners(void);

/* Starts a warm runner for dev (a GPU device; nothing for the host backend or with
 * cfg->pool 0) unless it has one: the runner opens the device and waits for its job.
 * Called when a runner of dev has gone (its teardown thread, or ka_evaluate_finish when
 * none is leaving), so that one context's opening never meets another's teardown.
 * Errors are silent: the next job then starts its own runner. Thread safe. */
void ka_pool_warm(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev);

/* Stops and removes every warm runner of the pool, and warms none after (gpuexec
 * shutdown). Thread safe. */
void ka_pool_drain(void);

/* The baseline's history (issue 14 item 12, issue 16): the baseline is timed in every
 * evaluation, so its median time for (key: task version, case, device) has a history in
 * this executor. Returns 1 when ms (a median, milliseconds) disagrees with the median of
 * key's records by more than KA_BASELINE_SPREAD times either way, with *history_ms that
 * median; 0 otherwise (also while fewer than KA_BASELINE_MIN_HISTORY records exist).
 * Records nothing: ka_baseline_record does, for a time that is not FLAGGED (a flagged
 * time recorded would move the median towards the fault: review 2026-12-01). The last
 * KA_BASELINE_HISTORY records count.
 * A baseline slower than that, in a case whose speedup exceeds KA_BASELINE_SPEEDUP, is a
 * measurement fault: the evaluation is FLAGGED, never a reward (a baseline slowed 113x by
 * CPU contention once gave reward 1169). Thread safe. */
/* 4x and 2x: host timings on a loaded machine moved an honest baseline 2.4x from its
 * history (the integrity test, CI); the fault this exists for was 113x */
#define KA_BASELINE_SPREAD 4.0
#define KA_BASELINE_SPEEDUP 2.0
#define KA_BASELINE_MIN_HISTORY 3
#define KA_BASELINE_HISTORY 16
int ka_baseline_outlier(const char *key, double ms, double *history_ms);
/* Records ms under key (ka_baseline_outlier). Thread safe. */
void ka_baseline_record(const char *key, double ms);

/* Frees what ka_evaluate put into res and re-initialises it. */
void ka_result_clear(Kernelarena__V1__Result *res);

/* Deep-copies a Device message (malloc'd; free with ka_device_free). */
Kernelarena__V1__Device *ka_device_dup(const Kernelarena__V1__Device *d);
void ka_device_free(Kernelarena__V1__Device *d);

#endif
