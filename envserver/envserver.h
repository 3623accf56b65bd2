/* envserver internals: the types and functions shared by the envserver modules.
 *
 * Files, each calling only those below it (tests/include_cycles.sh checks the includes):
 *
 *   main.c       command line, signals
 *   server.c     the RPC front: client methods, store threads, the nng callback, the
 *                timer thread, start and stop
 *   executor.c   the executor side of the RPC front: the long poll, results, executor
 *                connections, the ack rule (executor.h)
 *   contexts.c   nng contexts, the outbox, parking, the store threads' queue (contexts.h)
 *   episode.c  episode table, workspaces, prompts, Reset / Step / Close / State / Cancel,
 *              the idle reaper (leases)
 *   evaluate.c Evaluate: stateless one-shot evaluations, held-out scoring (admin token)
 *   jobs.c     job queue and executor workers
 *   reward.c   the reward function and its components
 *   store.c    the sqlite trace store (docs/trace-store.md), read by GetEpisode,
 *              ListEpisodes and Evaluate of a recorded step
 *   utf8.c     UTF-8 checks of the string fields of decoded messages
 *   log.c      es_log
 *   base.c     allocators, arenas, devices, file sets, encoding, randomness (base.h):
 *              the leaf every other file uses; it includes nothing else of envserver
 *
 * Locking: one mutex, es_server.mtx, guards the episode table, the job queue, the
 * worker list and every context's parking state. The trace store has its own mutex and
 * is never called with es_server.mtx held, and never from an nng callback thread (store
 * threads in server.c do that work). nng calls that can run a completion callback are
 * made with no lock held.
 *
 * Memory: allocation failure is fatal (es_xmalloc aborts with a message, as Redis'
 * zmalloc does): the server's allocations are small and bounded by the limits below,
 * and an allocator that fails on Linux means the machine is already lost. Everything
 * else that can fail (decoding, validation, I/O, sqlite) is an ordinary error reply. */
#ifndef KA_ENVSERVER_H
#define KA_ENVSERVER_H

#include <nng/nng.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "kernelarena.pb-c.h"
#include "ka_common.h"
#include "task.h"

/* ---- limits (reported by Describe) */
#define ES_MAX_FILE_BYTES ((size_t)1 << 20)   /* one submitted file, bytes */
#define ES_MAX_TOTAL_BYTES ((size_t)4 << 20)  /* all files of one step, bytes */
#define ES_RECV_MAX_BYTES ((size_t)128 << 20) /* largest message read off the executor socket */
#define ES_CLIENT_RECV_MAX_BYTES                                                 \
  ((size_t)8 << 20) /* largest message read off the client socket; nng drops the \
                        connection past it (it allocates what a peer announces) */
#define ES_REQUEST_MAX_BYTES                                              \
  (ES_MAX_TOTAL_BYTES + ((size_t)1 << 20)) /* a larger request is refused \
                                              RESOURCE_EXHAUSTED without being decoded */
#define ES_MAX_INFLIGHT_MB                                                                    \
  512                            /* default of --max-inflight-mb: requests being handled plus \
                                    the files of queued and running jobs */
#define ES_SEND_TIMEOUT_MS 10000 /* a reply the peer does not take within this is dropped */
#define ES_ACK_S                                                              \
  5.0 /* a job handed to a worker that acknowledges jobs must be acknowledged \
         (heartbeat) within this, else it goes to another idle worker */
#define ES_MAX_OPEN_EPISODES 100000 /* default of --max-episodes */
#define ES_MAX_QUEUED_JOBS 65536    /* default of --max-queued (and its upper bound) */
#define ES_IDLE_TTL_S 3600.0        /* default of --idle-ttl, seconds */
#define ES_HEARTBEAT_LOST_S \
  15.0                        /* a worker that sent heartbeats is lost this long after the last */
#define ES_JOB_MAX_ATTEMPTS 2 /* dispatches of one job before a lost worker fails it */
#define ES_MAX_STEPS_CAP 1000 /* largest max_steps a Reset may ask for */
#define ES_LIVE_S 30.0        /* an executor is live if it polled this recently */
#define ES_POLL_DEFAULT_MS 5000u
#define ES_POLL_MAX_MS 10000u
#define ES_JOB_WARMUP 3
#define ES_JOB_REPS 20
#define ES_REWARD_FUNCTION "agentkernelarena"
#define ES_DEFAULT_RUN "default"

/* ---- jobs and executor workers (jobs.c); all guarded by es_server.mtx */

typedef enum es_job_state {
  ES_JOB_QUEUED,     /* in the queue, no worker yet */
  ES_JOB_RUNNING,    /* handed to a worker */
  ES_JOB_COMPLETING, /* its Result arrived; the completing thread owns it */
} es_job_state;

struct es_episode;
struct es_worker;

typedef struct es_job {
  char *id; /* episode_id "/" step, or "eval-" 16 hex for an Evaluate */
  const ka_task *task;
  struct es_episode *ep; /* NULL for an Evaluate; the episode is not evicted while its
                            inflight is this job (episode.c) */
  int step;              /* 1-based number of the step this job evaluates (0: Evaluate) */
  int include_held_out;  /* Evaluate with a valid admin token only */
  int reproducible;      /* Evaluate reproducible (admin token): no secret in the seeds */
  int attempts;          /* dispatches that count against ES_JOB_MAX_ATTEMPTS (one never
                            acknowledged does not: the ack rule) */
  int dispatches;        /* times handed to a worker: the dispatch token of the current
                            one (Job.attempt; a Result or heartbeat of another is stale) */
  void *waiter;          /* the client context parked on this job (server.c), or NULL */
  uint64_t seed;
  uint64_t problem_seed; /* the episode's seed (Evaluate: seed): the correctness inputs' */
  es_fileset files;      /* the complete editable set of the candidate */
  size_t held_bytes;     /* es_fileset_bytes(files) at creation (es_jobs_held_bytes) */
  es_job_state state;
  struct es_worker *worker;          /* RUNNING: the worker holding it */
  double enqueued_at, dispatched_at; /* ka_now_s() */
  struct es_job *prev, *next;        /* queue links while QUEUED */
} es_job;

typedef struct es_worker {
  char *id;
  es_pb_device *device;         /* owned deep copy of the last poll's device */
  double first_seen, last_poll; /* ka_now_s(); last_poll: last poll or heartbeat */
  int heartbeats;               /* it has sent heartbeats for its current job */
  double heartbeat_lost_s;      /* copied from es_jobs at each poll */
  es_job *job;                  /* the job it holds, or NULL */
  uint32_t pipe_id;             /* nng pipe of the poll that took its job (0: none) */
  int acks;                     /* it acknowledges each job with a heartbeat at once
                                   (WorkerPoll.heartbeats, or it has sent one) */
  int acked;                    /* its current job was acknowledged (heartbeat) */
  int prefetch;                 /* its last poll takes prefetch jobs (WorkerPoll.prefetch) */
  struct es_worker *next;
} es_worker;

/* A reference prefetch queued by Reset (Job.prefetch, issue 15): the episode's task and
 * seed, so that an idle worker computes the correctness inputs and references of its
 * first step ahead. Fire and forget: no waiter, no result, never a step. The episode is
 * named by id (looked up at dispatch: one closed meanwhile, or whose first step was
 * submitted first, is dropped). */
#define ES_PREFETCH_MAX 256 /* queued at most; the oldest is dropped beyond */
typedef struct es_prefetch {
  char ep_id[32];
  const ka_task *task;
  uint64_t problem_seed;
  struct es_prefetch *next;
} es_prefetch;

typedef struct es_jobs {
  es_job *head, *tail; /* FIFO of queued jobs */
  int nqueued, nrunning;
  es_worker *workers;
  int nworkers;
  double heartbeat_lost_s;        /* --heartbeat-timeout (default ES_HEARTBEAT_LOST_S) */
  long long redispatched;         /* jobs re-queued after their worker was lost (Health) */
  long long stale_results;        /* results dropped: their dispatch was superseded (Health) */
  es_prefetch *pf_head, *pf_tail; /* FIFO of queued prefetches (dispatched after jobs) */
  int npf;
  long long pf_queued, pf_sent, pf_dropped; /* since start (Health) */
} es_jobs;

/* Queues a prefetch of (task, problem_seed) for episode ep_id (Reset); beyond
 * ES_PREFETCH_MAX queued, the oldest is dropped. */
void es_prefetch_push(es_jobs *q, const char *ep_id, const ka_task *task, uint64_t problem_seed);
/* Unlinks and returns the oldest queued prefetch that device d runs (es_device_runs), or
 * NULL; the caller frees it (free). Those of episodes for which open(arg, ep_id) says 0
 * (closed meanwhile, or their first step submitted) are dropped on the way. */
es_prefetch *es_prefetch_take(es_jobs *q, const es_pb_device *d,
                              int (*open)(void *arg, const char *ep_id), void *arg);
/* The Job of a prefetch (Job.prefetch) in arena memory: the seeds of the episode's first
 * step's Job (es_step_seed), so that any input-seed derivation of the executor's
 * (fixed inputs included) draws that step's inputs. */
Kernelarena__V1__Job *es_prefetch_to_pb(es_arena *a, const es_prefetch *p);

/* The job seed of step `step` (1, 2, ...) of an episode of seed ep_seed: what its Job
 * carries as `seed` (the timed calls' secrets mix it in; a reproducible re-score and
 * the Reset prefetch, which is step 1's, use the same). */
uint64_t es_step_seed(uint64_t ep_seed, int step);

/* Creates a job for step `step` of ep, taking ownership of files. */
es_job *es_job_new(struct es_episode *ep, int step, uint64_t seed, es_fileset *files);
/* Creates an Evaluate job (no episode) with id `id`, taking ownership of files. */
es_job *es_job_new_eval(const ka_task *t, const char *id, uint64_t seed, es_fileset *files,
                        int include_held_out);
/* Puts a job back at the head of the queue (state QUEUED): re-dispatch after its
 * worker was lost (counted in q->redispatched). Its next dispatch gets a new token. */
void es_jobs_requeue_front(es_jobs *q, es_job *job);
/* Frees a job that is in no queue and held by no worker. NULL is a no-op. */
void es_job_free(es_job *job);
/* Bytes of candidate files held by every job not yet freed (queued, running or being
 * completed). Thread-safe (an atomic counter). */
size_t es_jobs_held_bytes(void);
/* Appends job to the queue (state QUEUED). */
void es_jobs_enqueue(es_jobs *q, es_job *job);
/* Unlinks a QUEUED job from the queue. */
void es_jobs_unqueue(es_jobs *q, es_job *job);
/* Takes the oldest queued job whose task lists backend, hands it to w (state RUNNING)
 * and returns it; NULL if none. w must hold no job. */
es_job *es_jobs_assign(es_jobs *q, es_worker *w, double now);
/* Hands the QUEUED job j to w (state RUNNING, a new dispatch token in j->dispatches).
 * w must hold no job and be able to run it (es_device_runs). */
void es_jobs_assign_job(es_jobs *q, es_worker *w, es_job *j, double now);
/* 1 if worker ids a and b name one device: equal up to a "#slot" suffix (gpuexec names
 * a device's evaluation slots HOST/PID/BACKEND:INDEX#K). */
int es_worker_same_device(const char *a, const char *b);
/* 1 if worker ids a and b belong to one executor process: equal up to the second '/'
 * (HOST/PID). */
int es_worker_same_executor(const char *a, const char *b);
/* The load of w's device in *dev and of its executor in *exec: running jobs over slots
 * (live workers), each in [0, 1]; the least-busy rule (srv_dispatch) hands a job to the
 * idle worker with the smallest (dev, exec). */
void es_worker_load(const es_jobs *q, const es_worker *w, double now, double *dev, double *exec);
/* 1 if a Result for dispatch `attempt` of job_id answers the job w holds: same id, and
 * the current dispatch token (attempt 0, an executor without tokens, matches any). */
int es_worker_result_current(const es_worker *w, const char *job_id, uint32_t attempt);
/* Detaches the job w holds (RUNNING -> caller-owned, state unchanged) and returns it. */
es_job *es_jobs_detach(es_jobs *q, es_worker *w);
/* 1 if the task lists backend among its backends. */
int es_task_has_backend(const ka_task *t, const char *backend);
/* 1 if device d (an executor's, as polled) can run task t: one of t's backends, and for a
 * language the backend lacks (triton) d lists it in Device.languages. */
int es_device_runs(const ka_task *t, const es_pb_device *d);
/* Finds or creates the worker with this id and records the poll: device (deep
 * copied; may be NULL to keep the old one) and last_poll = now. */
es_worker *es_worker_touch(es_jobs *q, const char *id, const es_pb_device *device, double now);
/* 1 if w counts as live at now: it polled within ES_LIVE_S, or it holds a job and is
 * not yet lost (es_worker_lost). */
int es_worker_live(const es_worker *w, double now);

/* 1 if w holds a job and has not polled for 2 x (job timeout + 30 s), or, when it sent
 * heartbeats for that job, for its heartbeat_lost_s. */
int es_worker_lost(const es_worker *w, double now);
/* Forgets workers that hold no job and have not polled for 10 minutes. */
void es_workers_reap(es_jobs *q, double now);
/* Frees every queued job and every worker (shutdown). Jobs held by workers are freed
 * too. */
void es_jobs_clear(es_jobs *q);
/* Builds the Job message for an assignment in arena memory (files copied). */
Kernelarena__V1__Job *es_job_to_pb(es_arena *a, const es_job *job);
/* Warm-up and timed calls per kernel and case of every job: ES_JOB_WARMUP and
 * ES_JOB_REPS, unless the environment sets KA_JOB_WARMUP (0..1000) or KA_JOB_REPS
 * (1..1000), which the test profile does (HACKING.md); a value outside those ranges is
 * ignored with a warning on stderr. Thread-safe while nothing calls setenv. */
int es_job_warmup(void);
int es_job_reps(void);

/* ---- reward (reward.c) */

typedef struct es_reward {
  double reward;
  int n;
  char **keys; /* "compiled", "correct", "speedup_geomean", "status", "speedup/<case>" */
  double *values;
} es_reward;

/* The keys Describe reports; "speedup/<case>" stands for one key per shown case. */
extern const char *const es_reward_component_keys[];
extern const int es_reward_ncomponent_keys;

/* Computes the AgentKernelArena score of a Result into out (caller frees with
 * es_reward_free): COMPILE_ERROR 0; INCORRECT, RUNTIME_ERROR, TIMEOUT, OOM 20; OK
 * 120 + 100 x geomean_speedup. Returns KA_EINVAL for INFRA_ERROR or an unknown status
 * (the step must not be counted); out is then empty. Held-out cases are skipped. */
int es_reward_compute(const es_pb_result *r, es_reward *out);
void es_reward_free(es_reward *rw);

/* ---- trace store (store.c) */

typedef struct es_store es_store;

/* Opens (creating if needed) the sqlite database at path in WAL mode and creates the
 * schema. Returns KA_OK, or KA_EIO with sqlite's message in err. The caller owns
 * *out (es_store_close). Thread safety: every es_store_* call may come from any
 * thread; calls are serialised by the store's mutex. */
int es_store_open(const char *path, es_store **out, char *err, size_t errlen);
/* Waits for the transaction in flight, then closes the database. NULL is a no-op. */
void es_store_close(es_store *st);

typedef struct es_episode_rec {
  const char *id, *run_id, *run_label, *task_id, *task_version, *workspace;
  uint64_t seed; /* stored as the same 64 bits in a signed INTEGER */
  int max_steps;
  double created_at; /* Unix seconds */
} es_episode_rec;
/* Records an episode and creates its run if missing (one transaction). A non-empty
 * run_label replaces the run's label. Returns KA_OK or KA_EIO (message in err). */
int es_store_add_episode(es_store *st, const es_episode_rec *rec, char *err, size_t errlen);
/* Sets closed_at and close_reason ("closed", "idle_ttl") of an episode. Returns KA_OK or
 * KA_EIO. */
int es_store_close_episode(es_store *st, const char *id, double closed_at, const char *reason,
                           char *err, size_t errlen);

/* Reads one episode into arena memory: its record and, if with_steps, every step
 * (files too unless omit_files). Held-out cases are left out. Returns KA_OK, KA_ENOENT
 * (unknown id) or KA_EIO (message in err). */
int es_store_get_episode(es_store *st, const char *id, int with_steps, int omit_files, es_arena *a,
                         Kernelarena__V1__EpisodeRecord **out, char *err, size_t errlen);
/* Lists episodes (no steps) oldest first, filtered by run_id / task_id when non-empty,
 * after the rowid in page_token, at most limit. *next receives the next page token
 * ("" on the last page). Returns KA_OK, KA_EINVAL (bad token) or KA_EIO. */
int es_store_list_episodes(es_store *st, const char *run_id, const char *task_id, int limit,
                           const char *page_token, es_arena *a,
                           Kernelarena__V1__EpisodeRecord ***out, size_t *n, char **next, char *err,
                           size_t errlen);
/* Reads the complete editable set of a recorded step (0: the last one) into files and
 * the step number into *step. Returns KA_OK, KA_ENOENT (no such step) or KA_EIO. */
int es_store_step_files(es_store *st, const char *episode_id, int step, es_fileset *files,
                        int *step_out, char *err, size_t errlen);

typedef struct es_step_rec {
  const char *episode_id;
  int step;          /* 1-based */
  double created_at; /* Unix seconds */
  const es_pb_result *result;
  const es_reward *reward;
  const es_fileset *files; /* the complete editable set evaluated */
  const char *worker_id;
  int attempt; /* the dispatch whose result this is (1; more: re-dispatched) */
} es_step_rec;
/* Records one step: the steps row, its files (content-addressed blobs), reward
 * components and cases, in one BEGIN IMMEDIATE transaction (rolled back on error).
 * Returns KA_OK or KA_EIO (message in err). */
int es_store_add_step(es_store *st, const es_step_rec *rec, char *err, size_t errlen);

/* ---- episodes (episode.c) */

typedef struct es_episode {
  char *id;
  const ka_task *task;
  char *run_id;
  uint64_t seed;
  int max_steps;
  int steps; /* steps taken (counted) */
  int closed;
  const char *close_reason; /* "closed" or "idle_ttl" once closed (static string) */
  int close_recorded;       /* the trace store has the close: evicted once idle */
  double created_at;        /* Unix seconds */
  double last_active;       /* ka_now_s() of the last request that used it */
  char *workspace;          /* absolute path */
  es_fileset files;         /* current editable set (emptied on close) */
  es_job *inflight;         /* the step being evaluated, or NULL */
  struct es_episode *hnext;
} es_episode;

struct es_net;

typedef struct es_config {
  char *listen_url, *exec_url, *tasks_dir, *state_dir;
  int contexts, max_steps, quiet;
  int max_episodes, max_queued;   /* capacity limits: CAPACITY (retryable) beyond them */
  double idle_ttl_s;              /* 0: episodes never expire */
  size_t max_inflight_bytes;      /* requests being handled + job files: RESOURCE_EXHAUSTED
                                     (retryable) past it; 0: ES_MAX_INFLIGHT_MB MiB */
  char *admin_token;              /* NULL: held-out scoring is refused */
  const char *tls_cert, *tls_key; /* --tls-cert / --tls-key: the server's certificate and
                                     key for tls+tcp:// listeners (NULL: none) */
  const char *tls_ca;             /* --tls-ca: the CA that signed executors' certificates;
                                     a tls+tcp:// executor listener requires them */
  const char *tls_client_ca;      /* --tls-client-ca: the CA that signed clients'
                                     certificates; a tls+tcp:// client listener then
                                     requires them (NULL: clients present none) */
  int insecure_executors;         /* --insecure-executors: allow a plain network executor
                                     endpoint off loopback (ka_exec_url_check, ka_tls.h) */
} es_config;

typedef struct es_server {
  es_config cfg;
  ka_registry *reg;
  es_store *store;
  double started; /* ka_now_s() at start */
  double max_task_timeout_s;

  pthread_mutex_t mtx; /* guards everything below */
  es_jobs jobs;
  es_episode **ep_buckets;
  size_t ep_nbuckets;
  int nepisodes, nopen;
  int nresetting;        /* Resets admitted and not yet finished (counted against
                            max_episodes with nopen) */
  size_t inflight_bytes; /* bytes of client requests being handled (server.c) */
  struct es_net *net;    /* server.c */
} es_server;

/* Looks an episode up by id (mtx held). NULL if unknown. */
es_episode *es_ep_find(es_server *s, const char *id);
/* Frees the episode table (shutdown; no context may still reference it). */
void es_ep_table_free(es_server *s);

/* Handles Reset (takes and releases mtx itself; does workspace and store I/O without
 * it). Fills resp with a ResetResponse or an Error; everything lives in a. */
void es_ep_reset(es_server *s, const Kernelarena__V1__ResetRequest *rq, es_arena *a,
                 es_pb_response *resp);

/* Admits a Step (mtx held): checks the episode state, expected_step and every file,
 * then builds the job (complete editable set) and queues it, marking it the
 * episode's in-flight step. Returns KA_OK with *ep_out and *job_out set, or an error
 * with resp filled; a refused step changes nothing. */
int es_ep_step_admit(es_server *s, const Kernelarena__V1__StepRequest *rq, es_arena *a,
                     es_pb_response *resp, es_episode **ep_out, es_job **job_out);

/* Completes a step whose job is COMPLETING (owned by the caller; called without mtx):
 * computes the reward, records the step, updates the workspace, then under mtx
 * counts the step and encodes the reply for the parked client into *reply: a
 * StepResponse, or an Error if the result is an INFRA_ERROR or could not be recorded
 * (the step is then not counted). Consumes job. *waiter_out receives the client
 * context to answer, or NULL (then *reply is NULL too). */
void es_ep_step_finish(es_server *s, es_job *job, const es_pb_result *result, const char *worker_id,
                       nng_msg **reply, void **waiter_out);

/* Ends an in-flight job without counting it (mtx held): lost executor, deadline,
 * cancel, shutdown. Frees job (which must be in no queue and held by no worker), clears
 * the episode's in-flight state (if a step) and returns its waiter (may be NULL). */
void *es_ep_step_abort(es_server *s, es_job *job);

/* Admits an Evaluate (mtx not held; takes it): checks the task or episode, the admin
 * token, the files, and queues the job. Returns KA_OK with *job_out queued (mtx is then
 * HELD, so the caller can park on it), or an error with resp filled (mtx not held). */
int es_eval_admit(es_server *s, const Kernelarena__V1__EvaluateRequest *rq, es_arena *a,
                  es_pb_response *resp, es_job **job_out);
/* Completes an Evaluate job (caller owns it, no mtx): encodes the EvaluateResponse (or
 * an Error for INFRA_ERROR) for its waiter. Consumes job. */
void es_eval_finish(es_server *s, es_job *job, const es_pb_result *result, const char *worker_id,
                    nng_msg **reply, void **waiter_out);
/* What a request asks of an episode that is not in the table. */
typedef enum es_ep_ask { ES_ASK_STATE, ES_ASK_CLOSE, ES_ASK_CANCEL, ES_ASK_STEP } es_ep_ask;
/* Answers a request about episode id after es_ep_find found nothing (mtx NOT held: this
 * reads the trace store, which has its own lock): NOT_FOUND when the store has no such
 * episode; INTERNAL (retryable) when it cannot be read; else as for a closed episode:
 * State from the record (closed, its close reason, steps, seed, task, run), Close
 * was_open = false (recording the close of an earlier run's episode that has none),
 * Cancel cancelled = false, Step FAILED_PRECONDITION. Replies in arena memory. */
void es_ep_answer_stored(es_server *s, es_ep_ask ask, const char *id, es_arena *a,
                         es_pb_response *resp);
/* After the trace store recorded the close of episode id (mtx held): marks it so, and
 * evicts it from the table unless a step is in flight (then when that step ends). Closed
 * episodes are then served from the trace store (State, Step's error, Close, Cancel). */
void es_ep_close_recorded(es_server *s, const char *id);

/* Removes the workspace of episode id, <state>/workspaces/<id> (mtx NOT held): called
 * once its close is recorded. A missing folder is fine; a failure is logged. */
void es_ep_workspace_remove(es_server *s, const char *id);

/* Handles State (takes mtx itself). */
void es_ep_state(es_server *s, const Kernelarena__V1__StateRequest *rq, es_arena *a,
                 es_pb_response *resp);
/* ListTasks with include_prompts (mtx not held; takes it): fills ti->prompt with the
 * prompt a Reset of t would show now at the default max_steps (the Device section from a
 * live executor that can run t, none when there is none) and ti->files with the editable
 * files' baseline contents, in arena memory. Returns KA_OK, or the ka_read_file error
 * with the file named in err. Thread-safe. */
int es_ep_task_prompt(es_server *s, const ka_task *t, es_arena *a, Kernelarena__V1__TaskInfo *ti,
                      char *err, size_t errlen);

/* Cancel (mtx held): detaches the episode's in-flight job (queued or running; a job
 * whose result is being recorded is not cancelled), fills resp with CancelResponse and
 * returns the waiter of the cancelled step (to answer CANCELLED), or NULL. */
void *es_ep_cancel(es_server *s, const Kernelarena__V1__CancelRequest *rq, es_arena *a,
                   es_pb_response *resp);
/* Called by the reaper (mtx held) for the waiter of a step it cancelled: the parked
 * request of step `step` of episode id, to be answered CANCELLED. */
typedef void (*es_ep_cancelled_fn)(void *waiter, const char *id, int step, void *arg);
/* The idle reaper (mtx held): closes open episodes idle for more than cfg.idle_ttl_s
 * (since their last request, or since their step in flight was queued), with reason
 * idle_ttl; a step in flight is cancelled first, as Cancel does (cancelled(waiter, ...)
 * for its parked request, when there is one), unless its result is being recorded (that
 * episode waits for the next pass). Returns their ids (caller frees each and the array)
 * for recording without mtx; *n receives the count. */
char **es_ep_reap_idle(es_server *s, double now, int *n, es_ep_cancelled_fn cancelled, void *arg);

/* Handles Close (takes mtx itself; store I/O without it). */
void es_ep_close(es_server *s, const Kernelarena__V1__CloseRequest *rq, es_arena *a,
                 es_pb_response *resp);

/* ---- server (server.c) */

/* Opens both listeners, starts the contexts and the timer thread. s->cfg, s->reg and
 * s->store must be set. Returns KA_OK, or an error with the reason in err (nothing
 * left running). */
int es_server_start(es_server *s, char *err, size_t errlen);
/* Closes the sockets, waits for every callback in progress (so the store transaction
 * in flight finishes), stops the timer thread and frees the server's state. Safe
 * after a failed start. */
void es_server_stop(es_server *s);

/* Takes the client context parked on a step off the park list (mtx held) and marks
 * it as answering; returns the request_id of its parked request. The caller then
 * hands it its reply with es_server_send. */
uint64_t es_server_waiter_take(es_server *s, void *waiter);
/* Sends msg (ownership passes) on a context taken with es_server_waiter_take. Call
 * without mtx. */
void es_server_send(void *ctx, nng_msg *msg);

/* ---- UTF-8 (utf8.c) */

/* Checks every string field of m, nested messages, repeated fields and the set member
 * of each oneof included. Returns 1 if all are valid UTF-8; else 0 with the path of the
 * first invalid field ("reset.options[1].value") in path (pathlen bytes, may be 0).
 * Does not modify m. Thread-safe. */
int es_pb_utf8_check(const ProtobufCMessage *m, char *path, size_t pathlen);
/* Replaces every byte of m's string fields that is not part of valid UTF-8 with '?'
 * (in place: lengths do not change). Returns 1 if anything was replaced. */
int es_pb_utf8_fix(ProtobufCMessage *m);

/* Logs one line to stderr ("envserver: ..."), unless --quiet. Thread-safe. */
void es_log(const es_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The proto name of a Status ("OK", "COMPILE_ERROR", ...) for logs; "?" if unknown.
 * Static storage; thread-safe. */
const char *es_status_name(int status);

#endif
