/* The job queue and the executor workers that pull from it.
 *
 * Jobs wait in one FIFO. A worker's poll takes the oldest job whose task lists the
 * worker's backend, so a queue of cuda jobs never starves a host worker. Every function
 * here runs with es_server.mtx held (the caller's duty). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "envserver.h"

#define JOB_REAP_S 600.0 /* forget idle workers not seen for this long */

static atomic_size_t job_held_bytes; /* files of every job not yet freed */

size_t es_jobs_held_bytes(void) {
  return atomic_load(&job_held_bytes);
}

uint64_t es_step_seed(uint64_t ep_seed, int step) {
  return ka_mix64(ep_seed, (uint64_t)step);
}

es_job *es_job_new(es_episode *ep, int step, uint64_t seed, es_fileset *files) {
  es_job *job = es_xcalloc(1, sizeof *job);
  size_t n = strlen(ep->id) + 16;
  job->id = es_xmalloc(n);
  snprintf(job->id, n, "%s/%d", ep->id, step);
  job->task = ep->task;
  job->ep = ep;
  job->step = step;
  job->seed = seed;
  job->problem_seed = ep->seed;
  job->files = *files;
  memset(files, 0, sizeof *files);
  job->state = ES_JOB_QUEUED;
  job->held_bytes = es_fileset_bytes(&job->files);
  atomic_fetch_add(&job_held_bytes, job->held_bytes);
  return job;
}

es_job *es_job_new_eval(const ka_task *t, const char *id, uint64_t seed, es_fileset *files,
                        int include_held_out) {
  es_job *job = es_xcalloc(1, sizeof *job);
  job->id = es_xstrdup(id);
  job->task = t;
  job->seed = seed;
  job->problem_seed = seed;
  job->files = *files;
  memset(files, 0, sizeof *files);
  job->include_held_out = include_held_out;
  job->state = ES_JOB_QUEUED;
  job->held_bytes = es_fileset_bytes(&job->files);
  atomic_fetch_add(&job_held_bytes, job->held_bytes);
  return job;
}

void es_job_free(es_job *job) {
  if (!job) return;
  atomic_fetch_sub(&job_held_bytes, job->held_bytes);
  free(job->id);
  es_fileset_free(&job->files);
  free(job);
}

void es_jobs_enqueue(es_jobs *q, es_job *job) {
  job->state = ES_JOB_QUEUED;
  job->next = NULL;
  job->prev = q->tail;
  if (q->tail)
    q->tail->next = job;
  else
    q->head = job;
  q->tail = job;
  q->nqueued++;
}

void es_jobs_requeue_front(es_jobs *q, es_job *job) {
  q->redispatched++;
  job->state = ES_JOB_QUEUED;
  job->prev = NULL;
  job->next = q->head;
  if (q->head)
    q->head->prev = job;
  else
    q->tail = job;
  q->head = job;
  q->nqueued++;
}

void es_jobs_unqueue(es_jobs *q, es_job *job) {
  if (job->prev)
    job->prev->next = job->next;
  else
    q->head = job->next;
  if (job->next)
    job->next->prev = job->prev;
  else
    q->tail = job->prev;
  job->prev = job->next = NULL;
  q->nqueued--;
}

int es_task_has_backend(const ka_task *t, const char *backend) {
  for (int i = 0; backend && i < t->nbackends; i++)
    if (!strcmp(t->backends[i], backend)) return 1;
  return 0;
}

int es_device_runs(const ka_task *t, const es_pb_device *d) {
  if (!d || !es_task_has_backend(t, d->backend)) return 0;
  if (strcmp(t->language, "triton")) return 1;
  for (size_t i = 0; i < d->n_languages; i++)
    if (d->languages[i] && !strcmp(d->languages[i], t->language)) return 1;
  return 0;
}

void es_jobs_assign_job(es_jobs *q, es_worker *w, es_job *j, double now) {
  es_jobs_unqueue(q, j);
  j->state = ES_JOB_RUNNING;
  j->worker = w;
  j->dispatched_at = now;
  j->attempts++;
  j->dispatches++;
  w->job = j;
  w->heartbeats = 0;
  w->acked = 0;
  q->nrunning++;
}

es_job *es_jobs_assign(es_jobs *q, es_worker *w, double now) {
  if (w->job || !w->device) return NULL;
  for (es_job *j = q->head; j; j = j->next) {
    if (!es_device_runs(j->task, w->device)) continue;
    es_jobs_assign_job(q, w, j, now);
    return j;
  }
  return NULL;
}

int es_worker_same_device(const char *a, const char *b) {
  size_t na = strcspn(a, "#"), nb = strcspn(b, "#");
  return na == nb && !strncmp(a, b, na);
}

/* Length of the HOST/PID prefix of a worker id (the whole id when it has no second '/'). */
static size_t job_executor_len(const char *id) {
  const char *p = strchr(id, '/');
  if (p) p = strchr(p + 1, '/');
  return p ? (size_t)(p - id) : strlen(id);
}

int es_worker_same_executor(const char *a, const char *b) {
  size_t na = job_executor_len(a), nb = job_executor_len(b);
  return na == nb && !strncmp(a, b, na);
}

void es_worker_load(const es_jobs *q, const es_worker *w, double now, double *dev, double *exec) {
  int dslots = 0, drun = 0, eslots = 0, erun = 0;
  for (const es_worker *v = q->workers; v; v = v->next) {
    if (v != w && !es_worker_live(v, now)) continue;
    if (es_worker_same_executor(v->id, w->id)) eslots++, erun += v->job != NULL;
    if (es_worker_same_device(v->id, w->id)) dslots++, drun += v->job != NULL;
  }
  *dev = dslots ? (double)drun / dslots : 0;
  *exec = eslots ? (double)erun / eslots : 0;
}

int es_worker_result_current(const es_worker *w, const char *job_id, uint32_t attempt) {
  if (!w->job || strcmp(w->job->id, job_id)) return 0;
  return attempt == 0 || attempt == (uint32_t)w->job->dispatches;
}

es_job *es_jobs_detach(es_jobs *q, es_worker *w) {
  es_job *j = w->job;
  if (!j) return NULL;
  w->job = NULL;
  j->worker = NULL;
  q->nrunning--;
  return j;
}

es_worker *es_worker_touch(es_jobs *q, const char *id, const es_pb_device *device, double now) {
  es_worker *w = q->workers;
  while (w && strcmp(w->id, id)) w = w->next;
  if (!w) {
    w = es_xcalloc(1, sizeof *w);
    w->id = es_xstrdup(id);
    w->first_seen = now;
    w->next = q->workers;
    q->workers = w;
    q->nworkers++;
  }
  if (device) {
    es_device_free(w->device);
    w->device = es_device_dup(device);
  }
  w->last_poll = now;
  w->heartbeat_lost_s = q->heartbeat_lost_s > 0 ? q->heartbeat_lost_s : ES_HEARTBEAT_LOST_S;
  return w;
}

int es_worker_lost(const es_worker *w, double now) {
  if (!w->job) return 0;
  if (w->heartbeats) return now - w->last_poll > w->heartbeat_lost_s;
  return now - w->last_poll > 2.0 * (w->job->task->timeout_s + 30.0);
}

int es_worker_live(const es_worker *w, double now) {
  if (now - w->last_poll <= ES_LIVE_S) return 1;
  return w->job && !es_worker_lost(w, now);
}

static void job_worker_free(es_worker *w) {
  free(w->id);
  es_device_free(w->device);
  free(w);
}

void es_workers_reap(es_jobs *q, double now) {
  es_worker **pp = &q->workers;
  while (*pp) {
    es_worker *w = *pp;
    if (!w->job && now - w->last_poll > JOB_REAP_S) {
      *pp = w->next;
      q->nworkers--;
      job_worker_free(w);
    } else {
      pp = &w->next;
    }
  }
}

void es_prefetch_push(es_jobs *q, const char *ep_id, const ka_task *task, uint64_t problem_seed) {
  if (q->npf >= ES_PREFETCH_MAX) { /* the oldest goes: its episode waited longest */
    es_prefetch *old = q->pf_head;
    q->pf_head = old->next;
    if (!q->pf_head) q->pf_tail = NULL;
    q->npf--;
    q->pf_dropped++;
    free(old);
  }
  es_prefetch *p = es_xcalloc(1, sizeof *p);
  snprintf(p->ep_id, sizeof p->ep_id, "%s", ep_id);
  p->task = task;
  p->problem_seed = problem_seed;
  if (q->pf_tail)
    q->pf_tail->next = p;
  else
    q->pf_head = p;
  q->pf_tail = p;
  q->npf++;
  q->pf_queued++;
}

es_prefetch *es_prefetch_take(es_jobs *q, const es_pb_device *d,
                              int (*open)(void *arg, const char *ep_id), void *arg) {
  es_prefetch *prev = NULL;
  for (es_prefetch *p = q->pf_head, *next; p; p = next) {
    next = p->next;
    int alive = open(arg, p->ep_id), runs = alive && es_device_runs(p->task, d);
    if (alive && !runs) {
      prev = p;
      continue;
    }
    if (prev)
      prev->next = next;
    else
      q->pf_head = next;
    if (q->pf_tail == p) q->pf_tail = prev;
    q->npf--;
    if (runs) return p;
    q->pf_dropped++; /* its episode closed before a worker was idle */
    free(p);
  }
  return NULL;
}

Kernelarena__V1__Job *es_prefetch_to_pb(es_arena *a, const es_prefetch *p) {
  Kernelarena__V1__Job *pj = es_arena_alloc(a, sizeof *pj);
  kernelarena__v1__job__init(pj);
  char id[48];
  snprintf(id, sizeof id, "%s/prefetch", p->ep_id);
  pj->job_id = es_arena_strdup(a, id);
  pj->task_id = es_arena_strdup(a, p->task->id);
  pj->task_version = es_arena_strdup(a, p->task->version);
  pj->seed = es_step_seed(p->problem_seed, 1); /* the first step's job (es_ep_step) */
  pj->problem_seed = p->problem_seed;
  pj->timeout_s = p->task->timeout_s;
  pj->prefetch = 1;
  return pj;
}

void es_jobs_clear(es_jobs *q) {
  while (q->pf_head) {
    es_prefetch *p = q->pf_head;
    q->pf_head = p->next;
    free(p);
  }
  q->pf_tail = NULL;
  q->npf = 0;
  while (q->head) {
    es_job *j = q->head;
    es_jobs_unqueue(q, j);
    es_job_free(j);
  }
  while (q->workers) {
    es_worker *w = q->workers;
    q->workers = w->next;
    es_job_free(es_jobs_detach(q, w));
    job_worker_free(w);
  }
  q->nworkers = 0;
}

/* The value of environment variable NAME if it is an integer in [lo, hi], else def
 * (with a warning when it is set but not such an integer). */
static int jobs_env_count(const char *name, int lo, int hi, int def) {
  const char *s = getenv(name);
  if (!s || !*s) return def;
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || v < lo || v > hi) {
    fprintf(stderr, "envserver: ignoring %s=%s (needs an integer in %d..%d)\n", name, s, lo, hi);
    return def;
  }
  return (int)v;
}

int es_job_warmup(void) {
  return jobs_env_count("KA_JOB_WARMUP", 0, 1000, ES_JOB_WARMUP);
}

int es_job_reps(void) {
  return jobs_env_count("KA_JOB_REPS", 1, 1000, ES_JOB_REPS);
}

Kernelarena__V1__Job *es_job_to_pb(es_arena *a, const es_job *job) {
  Kernelarena__V1__Job *pj = es_arena_alloc(a, sizeof *pj);
  kernelarena__v1__job__init(pj);
  pj->job_id = es_arena_strdup(a, job->id);
  pj->task_id = es_arena_strdup(a, job->task->id);
  pj->task_version = es_arena_strdup(a, job->task->version);
  pj->seed = job->seed;
  pj->problem_seed = job->problem_seed;
  pj->files = es_fileset_to_pb(a, &job->files, &pj->n_files);
  pj->include_held_out = job->include_held_out;
  pj->reproducible = job->reproducible;
  pj->timeout_s = job->task->timeout_s;
  pj->warmup = es_job_warmup();
  pj->reps = es_job_reps();
  pj->attempt = (uint32_t)job->dispatches;
  return pj;
}
