/* The executor's prefetch thread (gpuexec.h, ka_prefetch_queue; issue 15): reference
 * prefetches that envserver sends at Reset run here, one at a time, at the lowest CPU
 * priority, so the worker that took one polls again at once and a step never waits
 * for it. Jobs are kept packed (a copy: the worker frees its message). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gpuexec.h"
#include "ka_common.h"

typedef struct pf_item {
  uint8_t *buf;
  size_t len;
} pf_item;

static pthread_mutex_t pf_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pf_cv = PTHREAD_COND_INITIALIZER;
static pf_item pf_q[KA_PREFETCH_QUEUE];
static int pf_head, pf_n, pf_started;
static const ka_exec_config *pf_cfg;
static pthread_t pf_thread;

/* Runs one packed prefetch job; says what it did on stderr when cfg->verbose. */
static void pf_run(const pf_item *it) {
  Kernelarena__V1__Job *job = kernelarena__v1__job__unpack(NULL, it->len, it->buf);
  if (!job) return;
  char err[512] = "";
  double ms = 0;
  int rc = ka_prefetch(pf_cfg, job, &ms, err, sizeof err);
  if (pf_cfg->verbose || rc)
    fprintf(stderr, "gpuexec: prefetch %s (%s): %s in %.1f ms%s%s\n", job->job_id, job->task_id,
            rc ? "failed" : "references ready", ms, rc ? ": " : "", rc ? err : "");
  kernelarena__v1__job__free_unpacked(job, NULL);
}

static void *pf_main(void *arg) {
  (void)arg;
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19); /* this thread and its helpers */
  pthread_mutex_lock(&pf_mu);
  for (;;) { /* until the process ends (gpuexec exits with _exit) */
    if (!pf_n) {
      pthread_cond_wait(&pf_cv, &pf_mu);
      continue;
    }
    pf_item it = pf_q[pf_head];
    pf_head = (pf_head + 1) % KA_PREFETCH_QUEUE;
    pf_n--;
    pthread_mutex_unlock(&pf_mu);
    pf_run(&it);
    free(it.buf);
    pthread_mutex_lock(&pf_mu);
  }
  return NULL;
}

void ka_prefetch_queue(const ka_exec_config *cfg, const Kernelarena__V1__Job *job) {
  size_t len = kernelarena__v1__job__get_packed_size(job);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) return;
  kernelarena__v1__job__pack(job, buf);
  pthread_mutex_lock(&pf_mu);
  if (!pf_started) {
    pf_cfg = cfg;
    pf_started = pthread_create(&pf_thread, NULL, pf_main, NULL) == 0;
    if (!pf_started) {
      pthread_mutex_unlock(&pf_mu);
      free(buf);
      return;
    }
  }
  if (pf_n == KA_PREFETCH_QUEUE) { /* full: the oldest goes */
    free(pf_q[pf_head].buf);
    pf_head = (pf_head + 1) % KA_PREFETCH_QUEUE;
    pf_n--;
  }
  pf_q[(pf_head + pf_n) % KA_PREFETCH_QUEUE] = (pf_item){.buf = buf, .len = len};
  pf_n++;
  pthread_cond_signal(&pf_cv);
  pthread_mutex_unlock(&pf_mu);
}
