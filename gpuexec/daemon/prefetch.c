/* The executor's prefetch queue and thread (gpuexec.h, ka_prefetch_queue; issue 15):
 * reference prefetches that envserver sends at Reset run here, one at a time, at the
 * lowest CPU priority, so the worker that took one polls again at once and a step never
 * waits for it. Jobs are kept packed (a copy: the worker frees its message), with what
 * the queue's bounds need: when it came, the key of its entries, their bytes.
 *
 * The gate: host-backend runners in flight (ka_prefetch_pause) hold every prefetch unit
 * (one case) off, and a runner starts only once no unit runs, so that no prefetch work
 * is on the CPU while a host evaluation's calls are timed there. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gpuexec.h"
#include "ka_common.h"
#include "refcache.h"

typedef struct pf_item {
  uint8_t *buf;
  size_t len;
  double queued_at; /* ka_now_s() */
  size_t bytes;     /* the cache bytes of its entries (ka_ref_entry_bytes) */
  char key[192];    /* task, version, input seed: its entries (never logged: the seed
                       is the secret's) */
  char name[96];    /* its job id, for the log */
} pf_item;

static pthread_mutex_t pf_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pf_cv = PTHREAD_COND_INITIALIZER;      /* a job queued */
static pthread_cond_t pf_gate_cv = PTHREAD_COND_INITIALIZER; /* paused or in_unit changed */
static pf_item pf_q[KA_PREFETCH_QUEUE];
static int pf_head, pf_n, pf_started;
static size_t pf_bytes; /* of the queued jobs */
static const ka_exec_config *pf_cfg;
static pthread_t pf_thread;
static ka_prefetch_counts pf_counts;
static int pf_paused, pf_in_unit;
static int pf_gate_off = -1;      /* KA_PREFETCH_GATE=0: no gate (-1: not read yet) */
static double pf_deadline;        /* the running job's age bound (0: none) */
static __thread int pf_on_thread; /* 1 on the prefetch thread */
static char pf_running_key[192];  /* the key of the job the thread runs ("": none) */

/* Whether the gate is off (KA_PREFETCH_GATE=0, read once). Under pf_mu. */
static int pf_ungated(void) {
  if (pf_gate_off < 0) {
    const char *v = getenv("KA_PREFETCH_GATE");
    pf_gate_off = v && !strcmp(v, "0");
  }
  return pf_gate_off;
}

static double pf_max_age(const ka_exec_config *cfg) {
  return cfg->prefetch_max_age_s > 0 ? cfg->prefetch_max_age_s : KA_PREFETCH_MAX_AGE_S;
}

/* The key of job's entries (task, version, input seed) into key. */
static void pf_key(const ka_exec_config *cfg, const Kernelarena__V1__Job *job, char *key,
                   size_t len) {
  snprintf(key, len, "%s@%s#%016llx", job->task_id ? job->task_id : "",
           job->task_version ? job->task_version : "",
           (unsigned long long)ka_job_input_seed(cfg, job));
}

/* The cache bytes of the entries that job's prefetch makes (0 when the task is unknown:
 * ka_prefetch refuses it at once). */
static size_t pf_job_bytes(const ka_exec_config *cfg, const Kernelarena__V1__Job *job) {
  const ka_task *t = ka_registry_find(cfg->tasks, job->task_id);
  if (!t || t->command) return 0;
  size_t total = 0, b;
  char err[256];
  for (int i = 0; i < t->ncases + t->nheld; i++)
    if ((!t->cases[i].held_out || job->include_held_out) &&
        ka_ref_entry_bytes(t, i, &b, err, sizeof err) == KA_OK)
      total += b;
  return total;
}

/* Says on stderr (cfg->verbose) that prefetch job `name` was dropped, and why. */
static void pf_say_dropped(const ka_exec_config *cfg, const char *name, const char *why) {
  if (cfg && cfg->verbose) fprintf(stderr, "gpuexec: prefetch %s dropped: %s\n", name, why);
}

/* Removes queue slot i (0: the oldest) and frees its job. Under pf_mu. */
static void pf_remove(int i) {
  int at = (pf_head + i) % KA_PREFETCH_QUEUE;
  free(pf_q[at].buf);
  pf_bytes -= pf_q[at].bytes;
  for (int j = i; j > 0; j--) /* shift the older ones up by one */
    pf_q[(pf_head + j) % KA_PREFETCH_QUEUE] = pf_q[(pf_head + j - 1) % KA_PREFETCH_QUEUE];
  pf_head = (pf_head + 1) % KA_PREFETCH_QUEUE;
  pf_n--;
}

/* Drops the queued jobs older than the age bound. Under pf_mu. */
static void pf_drop_aged(double now) {
  for (int i = pf_n - 1; i >= 0; i--)
    if (now - pf_q[(pf_head + i) % KA_PREFETCH_QUEUE].queued_at > pf_max_age(pf_cfg)) {
      pf_say_dropped(pf_cfg, pf_q[(pf_head + i) % KA_PREFETCH_QUEUE].name, "past its age bound");
      pf_remove(i);
      pf_counts.aged++;
    }
}

/* The queue slot (0: the oldest) of a job with key, or -1. Under pf_mu. */
static int pf_find(const char *key) {
  for (int i = 0; i < pf_n; i++)
    if (!strcmp(pf_q[(pf_head + i) % KA_PREFETCH_QUEUE].key, key)) return i;
  return -1;
}

/* Runs one packed prefetch job; says what it did on stderr when cfg->verbose. */
static void pf_run(const pf_item *it) {
  Kernelarena__V1__Job *job = kernelarena__v1__job__unpack(NULL, it->len, it->buf);
  int rc = KA_EINVAL;
  if (job) {
    char err[512] = "";
    double ms = 0;
    rc = ka_prefetch(pf_cfg, job, &ms, err, sizeof err);
    /* no room and too old are the bounds at work: said with --verbose only */
    if (pf_cfg->verbose || (rc && rc != KA_EUNAVAIL && rc != KA_ETIMEDOUT))
      fprintf(stderr, "gpuexec: prefetch %s (%s): %s in %.1f ms%s%s\n", job->job_id, job->task_id,
              rc ? "failed" : "references ready", ms, rc ? ": " : "", rc ? err : "");
    kernelarena__v1__job__free_unpacked(job, NULL);
  }
  pthread_mutex_lock(&pf_mu);
  if (rc == KA_OK)
    pf_counts.done++;
  else if (rc == KA_ETIMEDOUT)
    pf_counts.aged++;
  else
    pf_counts.failed++;
  pthread_mutex_unlock(&pf_mu);
}

/* Whether the thread may take the next job: one is queued and no host runner is in
 * flight (a job waits in the queue, where a step can supersede it). Under pf_mu. */
static int pf_may_take(void) {
  return pf_n > 0 && (pf_paused == 0 || pf_ungated());
}

static void *pf_main(void *arg) {
  (void)arg;
  pf_on_thread = 1;
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19); /* this thread and its helpers */
  pthread_mutex_lock(&pf_mu);
  for (;;) { /* until the process ends (gpuexec exits with _exit) */
    pf_drop_aged(ka_now_s());
    if (!pf_may_take()) {
      pthread_cond_wait(&pf_cv, &pf_mu);
      continue;
    }
    pf_item it = pf_q[pf_head];
    pf_head = (pf_head + 1) % KA_PREFETCH_QUEUE;
    pf_n--;
    pf_bytes -= it.bytes;
    pf_deadline = it.queued_at + pf_max_age(pf_cfg);
    snprintf(pf_running_key, sizeof pf_running_key, "%s", it.key);
    pf_counts.running = 1;
    pthread_mutex_unlock(&pf_mu);
    pf_run(&it);
    free(it.buf);
    pthread_mutex_lock(&pf_mu);
    pf_counts.running = 0;
    pf_running_key[0] = 0;
    pf_deadline = 0;
  }
  return NULL;
}

/* Starts the thread at the first job (cfg kept for it). 1 if it runs. Under pf_mu. */
static int pf_start(const ka_exec_config *cfg) {
  if (!pf_started) {
    pf_cfg = cfg;
    pf_started = pthread_create(&pf_thread, NULL, pf_main, NULL) == 0;
  }
  return pf_started;
}

void ka_prefetch_queue(const ka_exec_config *cfg, const Kernelarena__V1__Job *job) {
  if (!cfg->ref_cache) return;
  ka_refstats st;
  ka_refcache_stats(cfg->ref_cache, &st);
  pf_item it = {.queued_at = ka_now_s(), .bytes = pf_job_bytes(cfg, job)};
  pf_key(cfg, job, it.key, sizeof it.key);
  snprintf(it.name, sizeof it.name, "%s", job->job_id ? job->job_id : "?");
  pthread_mutex_lock(&pf_mu);
  if (!pf_start(cfg)) {
    pthread_mutex_unlock(&pf_mu);
    return;
  }
  pf_drop_aged(it.queued_at);
  if (pf_find(it.key) >= 0 || !strcmp(pf_running_key, it.key)) { /* a GRPO group: its
                                                                     rollouts share them */
    pf_counts.duplicate++;
    pf_say_dropped(cfg, it.name, "the same entries are queued or running");
    pthread_mutex_unlock(&pf_mu);
    return;
  }
  if (it.bytes > st.budget) { /* it would evict its own first entries */
    pf_counts.full++;
    pf_say_dropped(cfg, it.name, "larger than the reference cache");
    pthread_mutex_unlock(&pf_mu);
    return;
  }
  /* room: the oldest go (their episodes waited longest: their first step is likelier
   * to have come already) */
  while (pf_n && (pf_n == KA_PREFETCH_QUEUE || pf_bytes + it.bytes > st.budget)) {
    pf_say_dropped(cfg, pf_q[pf_head].name, "the queue is full");
    pf_remove(0);
    pf_counts.full++;
  }
  it.len = kernelarena__v1__job__get_packed_size(job);
  it.buf = malloc(it.len ? it.len : 1);
  if (!it.buf) {
    pthread_mutex_unlock(&pf_mu);
    return;
  }
  kernelarena__v1__job__pack(job, it.buf);
  pf_q[(pf_head + pf_n) % KA_PREFETCH_QUEUE] = it;
  pf_n++;
  pf_bytes += it.bytes;
  pf_counts.queued++;
  pthread_cond_signal(&pf_cv);
  pthread_mutex_unlock(&pf_mu);
}

void ka_prefetch_supersede(const ka_exec_config *cfg, const Kernelarena__V1__Job *job) {
  char key[192];
  pf_key(cfg, job, key, sizeof key);
  pthread_mutex_lock(&pf_mu);
  int i = pf_find(key);
  if (i >= 0) {
    pf_say_dropped(cfg, pf_q[(pf_head + i) % KA_PREFETCH_QUEUE].name, "its step came first");
    pf_remove(i);
    pf_counts.superseded++;
  }
  pthread_mutex_unlock(&pf_mu);
}

void ka_prefetch_pause(void) {
  pthread_mutex_lock(&pf_mu);
  pf_paused++;
  while (pf_in_unit && !pf_ungated()) pthread_cond_wait(&pf_gate_cv, &pf_mu);
  pthread_mutex_unlock(&pf_mu);
}

void ka_prefetch_resume(void) {
  pthread_mutex_lock(&pf_mu);
  if (pf_paused > 0 && --pf_paused == 0) {
    pthread_cond_broadcast(&pf_gate_cv);
    pthread_cond_signal(&pf_cv); /* the thread may take the next job */
  }
  pthread_mutex_unlock(&pf_mu);
}

int ka_prefetch_unit_begin(void) {
  pthread_mutex_lock(&pf_mu);
  while (pf_paused > 0 && !pf_ungated()) {
    double deadline = pf_on_thread ? pf_deadline : 0;
    if (deadline > 0 && ka_now_s() >= deadline) {
      pthread_mutex_unlock(&pf_mu);
      return KA_ETIMEDOUT;
    }
    if (deadline > 0) { /* wake at the bound: it is dropped then */
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      double left = deadline - ka_now_s() + 0.001;
      ts.tv_sec += (time_t)left;
      ts.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&pf_gate_cv, &pf_mu, &ts);
    } else {
      pthread_cond_wait(&pf_gate_cv, &pf_mu);
    }
  }
  pf_in_unit++;
  pthread_mutex_unlock(&pf_mu);
  return KA_OK;
}

void ka_prefetch_unit_end(void) {
  pthread_mutex_lock(&pf_mu);
  if (--pf_in_unit == 0) pthread_cond_broadcast(&pf_gate_cv);
  pthread_mutex_unlock(&pf_mu);
}

void ka_prefetch_counts_get(ka_prefetch_counts *out) {
  pthread_mutex_lock(&pf_mu);
  *out = pf_counts;
  out->pending = pf_n;
  out->paused = pf_paused;
  out->in_unit = pf_in_unit;
  pthread_mutex_unlock(&pf_mu);
}
