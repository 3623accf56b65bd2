/* libFuzzer target: decoding of the environment protocol's Request envelope and the
 * envserver's admission and validation of its body, without a socket.
 *
 * Once: a server state like envserver's main() builds (task registry from
 * KA_FUZZ_TASKS, the bench/copy fixture; a trace store and workspaces in a private
 * temporary folder; no network, no executor) and one open episode. Per input: protobuf-c
 * unpack of Request; then the body goes to the handler the server calls for it (Reset
 * and Close, State, Step and Cancel admission, Evaluate admission). An episode_id of
 * "E" is replaced by the open episode's id so that inputs reach the checks past the
 * lookup (expected_step, files, sizes). Admitted jobs are taken back off the queue
 * (nothing runs them), so every input leaves the server as it found it: the target
 * checks that no job stays queued and that the episode's step count is unchanged.
 * Describe, Health, ListTasks, GetEpisode and ListEpisodes are answered in server.c's
 * static dispatch (not linkable without a socket) and only decoded here. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envserver.h"
#include "ka_common.h"

static es_server g_s;
static char g_state[256], g_episode[128];
static Kernelarena__V1__Device g_dev = KERNELARENA__V1__DEVICE__INIT;

/* Keeps one host worker live in the job table (as its polls would), so that Reset and
 * Evaluate find an executor for bench/copy. */
static void touch_worker(void) {
  pthread_mutex_lock(&g_s.mtx);
  es_worker_touch(&g_s.jobs, "fuzz/1/host:0", &g_dev, ka_now_s());
  pthread_mutex_unlock(&g_s.mtx);
}

/* Opens a fresh episode of bench/copy and remembers its id. */
static void open_episode(void) {
  Kernelarena__V1__ResetRequest rq = KERNELARENA__V1__RESET_REQUEST__INIT;
  rq.task_id = "bench/copy";
  rq.has_seed = 1;
  rq.seed = 7;
  es_arena a = {0};
  es_pb_response resp = KERNELARENA__V1__RESPONSE__INIT;
  es_ep_reset(&g_s, &rq, &a, &resp);
  if (resp.body_case != KERNELARENA__V1__RESPONSE__BODY_RESET) {
    fprintf(stderr, "fuzz_request: reset failed: %s\n",
            resp.error && resp.error->message ? resp.error->message : "?");
    abort();
  }
  snprintf(g_episode, sizeof g_episode, "%s", resp.reset->episode_id);
  es_arena_free(&a);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *tmp = getenv("TMPDIR"); /* fuzz/run.sh points it at a folder it removes */
  snprintf(g_state, sizeof g_state, "%s/ka-fuzz-srv-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(g_state)) abort();
  static char ws[512], db[512];
  snprintf(ws, sizeof ws, "%s/workspaces", g_state);
  snprintf(db, sizeof db, "%s/trace.db", g_state);
  if (ka_mkdirs(ws)) abort();
  const char *tasks = getenv("KA_FUZZ_TASKS");
  if (!tasks) tasks = KA_FUZZ_TASKS;
  g_s.cfg.state_dir = g_state;
  g_s.cfg.tasks_dir = (char *)tasks;
  g_s.cfg.max_steps = 10;
  g_s.cfg.max_episodes = 100000;
  g_s.cfg.max_queued = 65536;
  g_s.cfg.idle_ttl_s = 3600;
  g_s.cfg.quiet = 1;
  g_s.cfg.admin_token = "fuzz-admin-token";
  char err[1024];
  if (ka_registry_load(tasks, 1, &g_s.reg, err, sizeof err) != KA_OK ||
      es_store_open(db, &g_s.store, err, sizeof err) != KA_OK) {
    fprintf(stderr, "fuzz_request: %s\n", err);
    abort();
  }
  for (int i = 0; i < g_s.reg->ntasks; i++)
    if (g_s.reg->tasks[i]->timeout_s > g_s.max_task_timeout_s)
      g_s.max_task_timeout_s = g_s.reg->tasks[i]->timeout_s;
  pthread_mutex_init(&g_s.mtx, NULL);
  g_s.started = ka_now_s();
  g_dev.backend = "host";
  g_dev.name = "fuzz host CPU";
  g_dev.arch = "x86_64";
  touch_worker();
  open_episode();
  return 0;
}

/* "E" stands for the open episode. */
static void fix_id(char **id) {
  if (*id && !strcmp(*id, "E")) *id = g_episode;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Kernelarena__V1__Request *rq = kernelarena__v1__request__unpack(NULL, size, data);
  if (!rq) return 0;
  touch_worker();
  es_arena a = {0};
  es_pb_response resp = KERNELARENA__V1__RESPONSE__INIT;
  pthread_mutex_lock(&g_s.mtx);
  es_episode *ep = es_ep_find(&g_s, g_episode);
  int steps_before = ep ? ep->steps : -1;
  pthread_mutex_unlock(&g_s.mtx);
  char *saved = NULL, **idp = NULL; /* restore the decoded id before freeing rq */
  switch (rq->body_case) {
    case KERNELARENA__V1__REQUEST__BODY_RESET:
      es_ep_reset(&g_s, rq->reset, &a, &resp);
      if (resp.body_case == KERNELARENA__V1__RESPONSE__BODY_RESET) {
        Kernelarena__V1__CloseRequest cr = KERNELARENA__V1__CLOSE_REQUEST__INIT;
        cr.episode_id = resp.reset->episode_id;
        es_pb_response r2 = KERNELARENA__V1__RESPONSE__INIT;
        es_ep_close(&g_s, &cr, &a, &r2);
        if (r2.body_case != KERNELARENA__V1__RESPONSE__BODY_CLOSE) abort();
      }
      break;
    case KERNELARENA__V1__REQUEST__BODY_STEP: {
      idp = &rq->step->episode_id, saved = *idp, fix_id(idp);
      es_episode *sep = NULL;
      es_job *job = NULL;
      pthread_mutex_lock(&g_s.mtx);
      if (es_ep_step_admit(&g_s, rq->step, &a, &resp, &sep, &job) == KA_OK) {
        if (!job || sep->inflight != job) abort();
        es_jobs_unqueue(&g_s.jobs, job);
        es_ep_step_abort(&g_s, job);
        if (sep->inflight) abort();
      } else if (resp.body_case != KERNELARENA__V1__RESPONSE__BODY_ERROR) {
        abort();
      }
      pthread_mutex_unlock(&g_s.mtx);
      break;
    }
    case KERNELARENA__V1__REQUEST__BODY_EVALUATE: {
      idp = &rq->evaluate->episode_id, saved = *idp, fix_id(idp);
      es_job *job = NULL;
      if (es_eval_admit(&g_s, rq->evaluate, &a, &resp, &job) == KA_OK) {
        es_jobs_unqueue(&g_s.jobs, job); /* mtx is held */
        es_job_free(job);
        pthread_mutex_unlock(&g_s.mtx);
      } else if (resp.body_case != KERNELARENA__V1__RESPONSE__BODY_ERROR) {
        abort();
      }
      break;
    }
    case KERNELARENA__V1__REQUEST__BODY_STATE:
      idp = &rq->state->episode_id, saved = *idp, fix_id(idp);
      es_ep_state(&g_s, rq->state, &a, &resp);
      break;
    case KERNELARENA__V1__REQUEST__BODY_CANCEL:
      idp = &rq->cancel->episode_id, saved = *idp, fix_id(idp);
      pthread_mutex_lock(&g_s.mtx);
      if (es_ep_cancel(&g_s, rq->cancel, &a, &resp)) abort(); /* nothing was in flight */
      pthread_mutex_unlock(&g_s.mtx);
      break;
    case KERNELARENA__V1__REQUEST__BODY_CLOSE:
      /* closing the open episode is fine: a new one is opened below */
      idp = &rq->close->episode_id, saved = *idp, fix_id(idp);
      es_ep_close(&g_s, rq->close, &a, &resp);
      break;
    default:
      break;
  }
  if (idp) *idp = saved;
  if (resp.body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR &&
      (!resp.error || !resp.error->message || !resp.error->code))
    abort(); /* every refusal carries a code and a reason */
  /* Nothing stays behind: no job queued, the episode's step count unchanged. */
  pthread_mutex_lock(&g_s.mtx);
  if (g_s.jobs.nqueued != 0 || g_s.jobs.head) abort();
  ep = es_ep_find(&g_s, g_episode);
  int reopen = !ep || ep->closed;
  if (ep && !ep->closed && ep->steps != steps_before) abort();
  pthread_mutex_unlock(&g_s.mtx);
  if (reopen) open_episode();
  es_arena_free(&a);
  kernelarena__v1__request__free_unpacked(rq, NULL);
  return 0;
}
