/* The RPC front: two nng REP listeners, one for clients (the environment protocol) and
 * one for executors (the long poll of gpuexec workers), each served by contexts driven
 * by an nng_aio callback state machine, as in nng's "reqrep async server" demo:
 *
 *     RECV --request--> BUSY --reply--> SEND --sent--> RECV (or IDLE)
 *                         \--Step / empty poll--> PARKED --result / job / timer--> SEND
 *
 * A parked context holds its request open without a reply (a Step waiting for its
 * Result, a worker's poll waiting for a job) while the other contexts keep serving, so
 * a slow evaluation never blocks other clients or Health. Whenever a context parks,
 * another one (reused from the idle list, or new) starts receiving, so `--contexts`
 * contexts are always ready for new requests however many are parked.
 *
 * One timer thread ends parked polls at their wait, parked Steps at their deadline, and
 * steps whose executor was lost.
 *
 * Faults of peers (docs/protocol.md, "Faults"): a reply the peer does not read within
 * ES_SEND_TIMEOUT_MS is dropped, and a context leaving RECV is replaced at once, so a
 * client that pipelines requests and never reads holds contexts for seconds, never the
 * endpoint. Parked executor polls remember their nng pipe: a poll whose connection is
 * gone is dropped (a killed gpuexec gets no job), and a job whose worker's connection
 * closes is re-queued at once. Requests and results that touch the trace store run on
 * SRV_STORE_THREADS store threads, never on nng's callback threads, so a locked store
 * delays only what needs it and Health is answered at once.
 *
 * Locking: es_server.mtx guards every context's state and the park lists; nng
 * operations that start I/O are issued with no lock held, from an outbox collected
 * under the lock. A callback never touches its context after handing it to another
 * thread (parking it or sending on it), because that thread may already be using it. */
#include <errno.h>
#include <inttypes.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "contexts.h"
#include "ka_tls.h"
#include "executor.h"

#include <nng/protocol/reqrep0/rep.h>

#define SRV_MAX_CLIENT_CTX (ES_MAX_QUEUED_JOBS + 4096)
#define SRV_MAX_EXEC_CTX 8192
#define SRV_TICK_S 1.0 /* the timer thread's longest sleep */

/* ---- client methods */

static void srv_describe(es_server *s, es_arena *a, es_pb_response *resp) {
  Kernelarena__V1__DescribeResponse *d = es_arena_alloc(a, sizeof *d);
  kernelarena__v1__describe_response__init(d);
  d->protocol_version = KA_PROTOCOL_VERSION;
  d->env_version = KA_VERSION;
  d->code_hash = KA_GIT_HASH;
  d->reward_function = ES_REWARD_FUNCTION;
  d->n_reward_components = (size_t)es_reward_ncomponent_keys;
  d->reward_components = (char **)es_reward_component_keys;
  Kernelarena__V1__Limits *l = es_arena_alloc(a, sizeof *l);
  kernelarena__v1__limits__init(l);
  l->max_file_bytes = (int64_t)ES_MAX_FILE_BYTES;
  l->max_files = KA_MAX_EDITABLE;
  l->max_total_bytes = (int64_t)ES_MAX_TOTAL_BYTES;
  l->max_steps = s->cfg.max_steps;
  l->max_episodes = s->cfg.max_episodes;
  l->step_timeout_s = s->max_task_timeout_s;
  l->max_queued_jobs = s->cfg.max_queued;
  l->idle_ttl_s = s->cfg.idle_ttl_s;
  d->limits = l;
  static const char *const methods[] = {"describe", "list_tasks",  "reset",        "step",
                                        "close",    "health",      "evaluate",     "state",
                                        "cancel",   "get_episode", "list_episodes"};
  d->n_methods = sizeof methods / sizeof methods[0];
  d->methods = (char **)methods;
  d->held_out_scoring = s->cfg.admin_token != NULL;
  pthread_mutex_lock(&s->mtx);
  double now = ka_now_s();
  d->devices = es_arena_alloc(a, sizeof *d->devices * (size_t)(s->jobs.nworkers + 1));
  for (es_worker *w = s->jobs.workers; w; w = w->next)
    if (w->device && es_worker_live(w, now))
      d->devices[d->n_devices++] = es_device_to_arena(a, w->device);
  pthread_mutex_unlock(&s->mtx);
  resp->body_case = KERNELARENA__V1__RESPONSE__BODY_DESCRIBE;
  resp->describe = d;
}

/* 1 if a live executor can run task t now (mtx held). */
static int srv_task_runnable(es_server *s, const ka_task *t, double now) {
  for (const es_worker *w = s->jobs.workers; w; w = w->next)
    if (w->device && es_worker_live(w, now) && es_device_runs(t, w->device)) return 1;
  return 0;
}

static void srv_list_tasks(es_server *s, const Kernelarena__V1__ListTasksRequest *rq, es_arena *a,
                           es_pb_response *resp) {
  Kernelarena__V1__ListTasksResponse *lt = es_arena_alloc(a, sizeof *lt);
  kernelarena__v1__list_tasks_response__init(lt);
  const ka_registry *r = s->reg;
  lt->tasks = es_arena_alloc(a, sizeof *lt->tasks * (size_t)(r->ntasks + 1));
  for (int i = 0; i < r->ntasks; i++) {
    const ka_task *t = r->tasks[i];
    Kernelarena__V1__TaskInfo *ti = es_arena_alloc(a, sizeof *ti);
    kernelarena__v1__task_info__init(ti);
    ti->id = t->id;
    ti->type = t->type;
    ti->language = t->language;
    ti->mode = t->mode;
    ti->n_backends = (size_t)t->nbackends;
    ti->backends = (char **)t->backends;
    ti->shown_cases = t->ncases;
    ti->held_out_cases = t->nheld;
    ti->n_editable_files = (size_t)t->neditable;
    ti->editable_files = (char **)t->editable;
    ti->version = t->version;
    ti->description = t->description ? t->description : "";
    ti->n_tags = (size_t)t->ntags;
    ti->tags = (char **)t->tags;
    ti->case_names = es_arena_alloc(a, sizeof *ti->case_names * (size_t)(t->ncases + 1));
    for (int c = 0; c < t->ncases; c++) ti->case_names[ti->n_case_names++] = t->cases[c].name;
    pthread_mutex_lock(&s->mtx);
    ti->runnable = srv_task_runnable(s, t, ka_now_s());
    pthread_mutex_unlock(&s->mtx);
    char err[600];
    if (rq->include_prompts && es_ep_task_prompt(s, t, a, ti, err, sizeof err)) {
      es_log(s, "list_tasks: %s", err);
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1, "task %s: %s; retry", t->id,
                     err);
      return;
    }
    lt->tasks[lt->n_tasks++] = ti;
  }
  resp->body_case = KERNELARENA__V1__RESPONSE__BODY_LIST_TASKS;
  resp->list_tasks = lt;
}

/* Live workers in *slots and the distinct devices among them in *devices (mtx held). */
static void srv_count_live(es_server *s, double now, int *slots, int *devices) {
  *slots = *devices = 0;
  for (es_worker *w = s->jobs.workers; w; w = w->next) {
    if (!es_worker_live(w, now)) continue;
    ++*slots;
    int seen = 0;
    for (es_worker *v = s->jobs.workers; v != w && !seen; v = v->next)
      seen = es_worker_live(v, now) && es_worker_same_device(v->id, w->id);
    *devices += !seen;
  }
}

static void srv_health(es_server *s, es_arena *a, es_pb_response *resp) {
  Kernelarena__V1__HealthResponse *h = es_arena_alloc(a, sizeof *h);
  kernelarena__v1__health_response__init(h);
  pthread_mutex_lock(&s->mtx);
  double now = ka_now_s();
  h->ok = !s->net->stopping;
  srv_count_live(s, now, &h->executors, &h->devices);
  h->queued_jobs = s->jobs.nqueued;
  h->running_jobs = s->jobs.nrunning;
  h->open_episodes = s->nopen;
  h->episodes_in_memory = s->nepisodes;
  h->uptime_s = now - s->started;
  h->redispatched_jobs = s->jobs.redispatched;
  h->stale_results = s->jobs.stale_results;
  h->prefetches_queued = s->jobs.pf_queued;
  h->prefetches_sent = s->jobs.pf_sent;
  h->prefetches_dropped = s->jobs.pf_dropped;
  pthread_mutex_unlock(&s->mtx);
  resp->body_case = KERNELARENA__V1__RESPONSE__BODY_HEALTH;
  resp->health = h;
}

/* Admits a Step and parks c on it. Returns 1 if parked, 0 if resp holds the answer. */
static int srv_step(srv_ctx *c, const Kernelarena__V1__Request *rq, es_arena *a,
                    es_pb_response *resp, srv_outbox *out) {
  es_server *s = c->sk->s;
  pthread_mutex_lock(&s->mtx);
  if (s->net->stopping) {
    pthread_mutex_unlock(&s->mtx);
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__UNAVAILABLE, 1,
                   "the server is shutting down");
    return 0;
  }
  es_episode *ep;
  es_job *job;
  int arc = es_ep_step_admit(s, rq->step, a, resp, &ep, &job);
  if (arc != KA_OK) {
    pthread_mutex_unlock(&s->mtx);
    /* not in the table: closed and evicted, or unknown; the trace store says which */
    if (arc == KA_ENOENT) es_ep_answer_stored(s, ES_ASK_STEP, rq->step->episode_id, a, resp);
    return 0;
  }
  c->request_id = rq->request_id;
  c->job = job;
  job->waiter = c;
  srv_park(c, rq->deadline_ms ? ka_now_s() + rq->deadline_ms / 1000.0 : 0);
  es_log(s, "episode %s: step %d queued as job %s", ep->id, job->step, job->id);
  srv_dispatch(s, out);
  srv_refill(&s->net->client, out);
  pthread_mutex_unlock(&s->mtx);
  return 1;
}

/* Admits an Evaluate and parks c on it. Returns 1 if parked, 0 if resp holds the
 * answer. */
static int srv_evaluate(srv_ctx *c, const Kernelarena__V1__Request *rq, es_arena *a,
                        es_pb_response *resp, srv_outbox *out) {
  es_server *s = c->sk->s;
  es_job *job;
  if (es_eval_admit(s, rq->evaluate, a, resp, &job) != KA_OK) return 0;
  /* mtx is held */
  if (s->net->stopping) {
    es_jobs_unqueue(&s->jobs, job);
    es_job_free(job);
    pthread_mutex_unlock(&s->mtx);
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__UNAVAILABLE, 1,
                   "the server is shutting down");
    return 0;
  }
  c->request_id = rq->request_id;
  c->job = job;
  job->waiter = c;
  srv_park(c, rq->deadline_ms ? ka_now_s() + rq->deadline_ms / 1000.0 : 0);
  es_log(s, "evaluate %s queued as job %s", job->task->id, job->id);
  srv_dispatch(s, out);
  srv_refill(&s->net->client, out);
  pthread_mutex_unlock(&s->mtx);
  return 1;
}

/* Cancel: answers the cancelled step's parked request with CANCELLED. */
static void srv_cancel(es_server *s, const Kernelarena__V1__Request *rq, es_arena *a,
                       es_pb_response *resp, srv_outbox *out) {
  pthread_mutex_lock(&s->mtx);
  srv_ctx *waiter = es_ep_cancel(s, rq->cancel, a, resp);
  if (waiter)
    srv_answer_error(waiter, out, KERNELARENA__V1__ERROR_CODE__CANCELLED, 0,
                     "step %d of episode %s was cancelled; it was not counted",
                     (int)resp->cancel->step, rq->cancel->episode_id);
  pthread_mutex_unlock(&s->mtx);
  if (resp->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR &&
      resp->error->code == KERNELARENA__V1__ERROR_CODE__NOT_FOUND)
    es_ep_answer_stored(s, ES_ASK_CANCEL, rq->cancel->episode_id, a, resp);
  if (resp->body_case == KERNELARENA__V1__RESPONSE__BODY_CANCEL && resp->cancel->cancelled)
    es_log(s, "episode %s: step %d cancelled", rq->cancel->episode_id, (int)resp->cancel->step);
}

/* The reaper cancelled a step in flight past the idle TTL: answers its parked request. */
static void srv_reap_cancelled(void *waiter, const char *id, int step, void *arg) {
  srv_answer_error(waiter, arg, KERNELARENA__V1__ERROR_CODE__CANCELLED, 0,
                   "episode %s passed its idle TTL with step %d in flight: closed (idle_ttl); "
                   "the step was cancelled and not counted",
                   id, step);
}

/* Close: cancels the episode's step in flight (queued or running, as Cancel does; its
 * parked request is answered CANCELLED), then closes the episode (es_ep_close). */
static void srv_close(es_server *s, const Kernelarena__V1__Request *rq, es_arena *a,
                      es_pb_response *resp, srv_outbox *out) {
  Kernelarena__V1__CancelRequest cq = KERNELARENA__V1__CANCEL_REQUEST__INIT;
  cq.episode_id = rq->close->episode_id;
  es_pb_response cresp = KERNELARENA__V1__RESPONSE__INIT;
  pthread_mutex_lock(&s->mtx);
  srv_ctx *waiter = es_ep_cancel(s, &cq, a, &cresp);
  int step = cresp.body_case == KERNELARENA__V1__RESPONSE__BODY_CANCEL ? cresp.cancel->step : 0;
  if (waiter)
    srv_answer_error(waiter, out, KERNELARENA__V1__ERROR_CODE__CANCELLED, 0,
                     "episode %s was closed while step %d was in flight; it was not counted",
                     cq.episode_id, step);
  pthread_mutex_unlock(&s->mtx);
  if (cresp.body_case == KERNELARENA__V1__RESPONSE__BODY_CANCEL && cresp.cancel->cancelled)
    es_log(s, "episode %s: step %d cancelled by Close", cq.episode_id, step);
  es_ep_close(s, rq->close, a, resp);
}

static void srv_get_episode(es_server *s, const Kernelarena__V1__GetEpisodeRequest *rq, es_arena *a,
                            es_pb_response *resp) {
  Kernelarena__V1__EpisodeRecord *e;
  char err[512];
  int rc =
      es_store_get_episode(s->store, rq->episode_id, 1, rq->omit_files, a, &e, err, sizeof err);
  if (rc == KA_ENOENT) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__NOT_FOUND, 0, "unknown episode");
    return;
  }
  if (rc) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1, "%s", err);
    return;
  }
  Kernelarena__V1__GetEpisodeResponse *g = es_arena_alloc(a, sizeof *g);
  kernelarena__v1__get_episode_response__init(g);
  g->episode = e;
  resp->body_case = KERNELARENA__V1__RESPONSE__BODY_GET_EPISODE;
  resp->get_episode = g;
}

static void srv_list_episodes(es_server *s, const Kernelarena__V1__ListEpisodesRequest *rq,
                              es_arena *a, es_pb_response *resp) {
  int limit = rq->limit;
  if (limit < 0 || limit > 1000) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, 0,
                   "limit must be 0 (100) to 1000");
    return;
  }
  if (!limit) limit = 100;
  Kernelarena__V1__ListEpisodesResponse *l = es_arena_alloc(a, sizeof *l);
  kernelarena__v1__list_episodes_response__init(l);
  char err[512];
  int rc =
      es_store_list_episodes(s->store, rq->run_id, rq->task_id, limit, rq->page_token, a,
                             &l->episodes, &l->n_episodes, &l->next_page_token, err, sizeof err);
  if (rc) {
    es_reply_error(a, resp,
                   rc == KA_EINVAL ? KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT
                                   : KERNELARENA__V1__ERROR_CODE__INTERNAL,
                   rc != KA_EINVAL, "%s", err);
    return;
  }
  resp->body_case = KERNELARENA__V1__RESPONSE__BODY_LIST_EPISODES;
  resp->list_episodes = l;
}

/* Answers a client request at once with an error (nothing parked); consumes m. */
static void srv_client_refuse(srv_ctx *c, nng_msg *m, uint64_t rid, Kernelarena__V1__ErrorCode code,
                              int retryable, const char *msg) {
  es_server *s = c->sk->s;
  es_arena a = {0};
  es_pb_response resp = KERNELARENA__V1__RESPONSE__INIT;
  resp.request_id = rid;
  es_reply_error(&a, &resp, code, retryable, "%s", msg);
  nng_msg_free(m);
  nng_msg *reply = es_encode(&resp.base);
  es_arena_free(&a);
  pthread_mutex_lock(&s->mtx);
  c->state = SRV_SEND;
  pthread_mutex_unlock(&s->mtx);
  es_server_send(c, reply);
}

/* Serves one decoded client request (on an nng callback or a store thread): consumes m
 * and rq and releases acct bytes of es_server.inflight_bytes. */
static void srv_client_handle(srv_ctx *c, nng_msg *m, Kernelarena__V1__Request *rq, size_t acct) {
  es_server *s = c->sk->s;
  es_arena a = {0};
  srv_outbox out = {0};
  es_pb_response resp = KERNELARENA__V1__RESPONSE__INIT;
  int parked = 0;
  resp.request_id = rq->request_id;
  switch (rq->body_case) {
    case KERNELARENA__V1__REQUEST__BODY_DESCRIBE:
      srv_describe(s, &a, &resp);
      break;
    case KERNELARENA__V1__REQUEST__BODY_LIST_TASKS:
      srv_list_tasks(s, rq->list_tasks, &a, &resp);
      break;
    case KERNELARENA__V1__REQUEST__BODY_RESET:
      es_ep_reset(s, rq->reset, &a, &resp);
      pthread_mutex_lock(&s->mtx);
      srv_dispatch(s, &out); /* its prefetch, to an idle worker (srv_dispatch) */
      pthread_mutex_unlock(&s->mtx);
      break;
    case KERNELARENA__V1__REQUEST__BODY_STEP:
      parked = srv_step(c, rq, &a, &resp, &out);
      break;
    case KERNELARENA__V1__REQUEST__BODY_CLOSE:
      srv_close(s, rq, &a, &resp, &out);
      break;
    case KERNELARENA__V1__REQUEST__BODY_HEALTH:
      srv_health(s, &a, &resp);
      break;
    case KERNELARENA__V1__REQUEST__BODY_EVALUATE:
      parked = srv_evaluate(c, rq, &a, &resp, &out);
      break;
    case KERNELARENA__V1__REQUEST__BODY_STATE:
      es_ep_state(s, rq->state, &a, &resp);
      break;
    case KERNELARENA__V1__REQUEST__BODY_CANCEL:
      srv_cancel(s, rq, &a, &resp, &out);
      break;
    case KERNELARENA__V1__REQUEST__BODY_GET_EPISODE:
      srv_get_episode(s, rq->get_episode, &a, &resp);
      break;
    case KERNELARENA__V1__REQUEST__BODY_LIST_EPISODES:
      srv_list_episodes(s, rq->list_episodes, &a, &resp);
      break;
    default:
      if (rq->base.n_unknown_fields)
        es_reply_error(&a, &resp, KERNELARENA__V1__ERROR_CODE__UNIMPLEMENTED, 0,
                       "unknown method (field %u); this server speaks %s",
                       rq->base.unknown_fields[0].tag, KA_PROTOCOL_VERSION);
      else
        es_reply_error(&a, &resp, KERNELARENA__V1__ERROR_CODE__MALFORMED, 0,
                       "the request names no method");
      break;
  }
  nng_msg_free(m);
  nng_msg *reply = parked ? NULL : es_encode(&resp.base);
  pthread_mutex_lock(&s->mtx);
  s->inflight_bytes -= acct;
  if (!parked) c->state = SRV_SEND;
  pthread_mutex_unlock(&s->mtx);
  if (reply) srv_out_push(&out, c, reply);
  kernelarena__v1__request__free_unpacked(rq, NULL);
  es_arena_free(&a);
  /* Last: once flushed, c may be in use by another thread. */
  srv_out_flush(&out);
}

/* 1 for the methods that may wait on the trace store: served on a store thread. */
static int srv_uses_store(const Kernelarena__V1__Request *rq) {
  switch (rq->body_case) {
    case KERNELARENA__V1__REQUEST__BODY_RESET:
    case KERNELARENA__V1__REQUEST__BODY_CLOSE:
    case KERNELARENA__V1__REQUEST__BODY_STATE:
    case KERNELARENA__V1__REQUEST__BODY_CANCEL:
    case KERNELARENA__V1__REQUEST__BODY_GET_EPISODE:
    case KERNELARENA__V1__REQUEST__BODY_LIST_EPISODES:
      return 1;
    default:
      return 0;
  }
}

/* A client request off the wire (nng callback): admits its bytes against
 * --max-inflight-mb, decodes it, checks that every string is UTF-8, then serves it here
 * or hands it to a store thread. Consumes m. */
static void srv_client_request(srv_ctx *c, nng_msg *m) {
  es_server *s = c->sk->s;
  const uint8_t *body = nng_msg_body(m);
  size_t len = nng_msg_len(m);
  char why[512];
  /* The request's bytes plus the files of every job held: bounded, so concurrent large
   * requests cannot exhaust the server's memory. */
  pthread_mutex_lock(&s->mtx);
  size_t held = s->inflight_bytes + es_jobs_held_bytes();
  int over = held + len > s->cfg.max_inflight_bytes;
  if (!over) s->inflight_bytes += len;
  pthread_mutex_unlock(&s->mtx);
  if (!over && len > ES_REQUEST_MAX_BYTES) {
    pthread_mutex_lock(&s->mtx);
    s->inflight_bytes -= len;
    pthread_mutex_unlock(&s->mtx);
    snprintf(why, sizeof why,
             "the request is %zu bytes; a request carries at most %zu bytes of files (%zu in "
             "all with its other fields)",
             len, ES_MAX_TOTAL_BYTES, ES_REQUEST_MAX_BYTES);
    srv_client_refuse(c, m, srv_salvage_id(body, len),
                      KERNELARENA__V1__ERROR_CODE__RESOURCE_EXHAUSTED, 0, why);
    return;
  }
  if (over) {
    snprintf(why, sizeof why,
             "the server holds %zu bytes of requests and evaluations in flight; this request "
             "(%zu bytes) would pass its limit of %zu (--max-inflight-mb); retry later",
             held, len, s->cfg.max_inflight_bytes);
    srv_client_refuse(c, m, srv_salvage_id(body, len),
                      KERNELARENA__V1__ERROR_CODE__RESOURCE_EXHAUSTED, 1, why);
    return;
  }
  Kernelarena__V1__Request *rq = kernelarena__v1__request__unpack(NULL, len, body);
  char path[200];
  if (!rq || !es_pb_utf8_check(&rq->base, path, sizeof path)) {
    uint64_t rid = rq ? rq->request_id : srv_salvage_id(body, len);
    if (rq)
      snprintf(why, sizeof why, "field %s is not valid UTF-8 (proto3 strings must be)", path);
    else
      snprintf(why, sizeof why, "the message (%zu bytes) is not a valid kernelarena.v1 Request",
               len);
    if (rq) kernelarena__v1__request__free_unpacked(rq, NULL);
    pthread_mutex_lock(&s->mtx);
    s->inflight_bytes -= len;
    pthread_mutex_unlock(&s->mtx);
    srv_client_refuse(
        c, m, rid,
        rq ? KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT : KERNELARENA__V1__ERROR_CODE__MALFORMED,
        0, why);
    return;
  }
  if (srv_uses_store(rq)) {
    srv_work *w = es_xcalloc(1, sizeof *w);
    w->c = c;
    w->m = m;
    w->rq = rq;
    w->acct = len;
    if (srv_work_push(s, w)) return;
    free(w); /* the store threads have stopped: serve it here */
  }
  srv_client_handle(c, m, rq, len);
}
/* ---- store threads */

static void *srv_store_main(void *arg) {
  es_server *s = arg;
  struct es_net *n = s->net;
  pthread_mutex_lock(&n->wmtx);
  for (;;) {
    srv_work *w = n->whead;
    if (!w) {
      if (n->wclosed) break;
      pthread_cond_wait(&n->wcond, &n->wmtx);
      continue;
    }
    n->whead = w->next;
    if (!n->whead) n->wtail = NULL;
    pthread_mutex_unlock(&n->wmtx);
    if (w->job) {
      srv_complete(s, w);
    } else {
      srv_client_handle(w->c, w->m, w->rq, w->acct);
      free(w);
    }
    pthread_mutex_lock(&n->wmtx);
  }
  pthread_mutex_unlock(&n->wmtx);
  return NULL;
}

/* ---- the callback */

static void srv_cb(void *arg) {
  srv_ctx *c = arg;
  srv_sock *sk = c->sk;
  es_server *s = sk->s;
  int rv = nng_aio_result(c->aio);
  srv_outbox out = {0};
  pthread_mutex_lock(&s->mtx);
  srv_state st = c->state;
  if (st == SRV_RECV) {
    sk->nrecv--;
    c->state = SRV_BUSY;
    /* Another context takes its place at once: however long this one stays busy or
     * sending (a peer that does not read), the endpoint keeps receiving. */
    if (rv == 0) srv_refill(sk, &out);
  }
  pthread_mutex_unlock(&s->mtx);
  srv_out_flush(&out);

  if (st == SRV_RECV && rv == 0) {
    nng_msg *m = nng_aio_get_msg(c->aio);
    if (sk->kind == SRV_CLIENT)
      srv_client_request(c, m);
    else
      srv_exec_request(c, m);
    return;
  }
  if (st == SRV_SEND && rv != 0) nng_msg_free(nng_aio_get_msg(c->aio));
  if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) return; /* shutting down */
  /* A reply went out (or a receive failed): receive again, or rest if enough do. */
  int recv = 0;
  pthread_mutex_lock(&s->mtx);
  if (!s->net->stopping && sk->nrecv < sk->target) {
    c->state = SRV_RECV;
    sk->nrecv++;
    recv = 1;
  } else {
    c->state = SRV_IDLE;
    c->idle_next = sk->idle;
    sk->idle = c;
  }
  pthread_mutex_unlock(&s->mtx);
  if (recv) {
    nng_aio_set_timeout(c->aio, NNG_DURATION_INFINITE);
    nng_ctx_recv(c->ctx, c->aio);
  }
}

/* ---- the timer thread */

/* Polls that waited long enough get an empty assignment into out; *next becomes the
 * earliest deadline of the others when sooner (mtx held; now: ka_now_s). */
static void srv_timer_polls(struct es_net *n, double now, double *next, srv_outbox *out) {
  for (srv_ctx *c = n->exec.park_head, *nx; c; c = nx) {
    nx = c->pnext;
    if (c->deadline <= now) {
      uint64_t rid = c->request_id;
      srv_unpark(c);
      srv_out_push(out, c, srv_assignment(rid, NULL));
    } else if (c->deadline < *next) {
      *next = c->deadline;
    }
  }
}

/* Abandons the job of the parked client request c, past its deadline (mtx held): the
 * job leaves the queue or its worker, its step is aborted (not counted) and c is
 * answered DEADLINE_EXCEEDED (retryable) into out. A job whose result is being recorded
 * is left to finish (c's deadline cleared). */
static void srv_timer_abandon(es_server *s, srv_ctx *c, srv_outbox *out) {
  es_job *job = c->job;
  if (!job || job->state == ES_JOB_COMPLETING) { /* its result is being recorded */
    c->deadline = 0;
    return;
  }
  if (job->state == ES_JOB_QUEUED)
    es_jobs_unqueue(&s->jobs, job);
  else
    es_jobs_detach(&s->jobs, job->worker);
  int step = job->step;
  char what[96];
  if (job->ep)
    snprintf(what, sizeof what, "step %d of episode %s", step, job->ep->id);
  else
    snprintf(what, sizeof what, "evaluation %s", job->id);
  es_ep_step_abort(s, job);
  es_log(s, "%s passed its deadline and was abandoned", what);
  srv_answer_error(c, out, KERNELARENA__V1__ERROR_CODE__DEADLINE_EXCEEDED, 1,
                   "%s had no result before the request's deadline; it was abandoned%s", what,
                   step ? " and not counted" : "");
}

/* Steps past their request's deadline are abandoned, not counted (srv_timer_abandon);
 * *next becomes the earliest deadline of the others when sooner (mtx held). */
static void srv_timer_deadlines(es_server *s, double now, double *next, srv_outbox *out) {
  for (srv_ctx *c = s->net->client.park_head, *nx; c; c = nx) {
    nx = c->pnext;
    if (!c->deadline) continue;
    if (c->deadline > now) {
      if (c->deadline < *next) *next = c->deadline;
      continue;
    }
    srv_timer_abandon(s, c, out);
  }
}

/* Workers holding a job that stopped polling (es_worker_lost): the job is re-queued at
 * the head and dispatched while it has attempts left (ES_JOB_MAX_ATTEMPTS), else its
 * step is aborted and the waiter answered INTERNAL (retryable) into out (mtx held). */
static void srv_timer_lost_workers(es_server *s, double now, srv_outbox *out) {
  for (es_worker *w = s->jobs.workers; w; w = w->next) {
    if (!es_worker_lost(w, now)) continue;
    es_job *job = es_jobs_detach(&s->jobs, w);
    if (job->attempts < ES_JOB_MAX_ATTEMPTS) {
      /* Re-dispatch: back to the head of the queue, for the next worker that polls. */
      es_jobs_requeue_front(&s->jobs, job);
      es_log(s, "worker %s lost while holding job %s; job re-queued (attempt %d of %d)", w->id,
             job->id, job->attempts + 1, ES_JOB_MAX_ATTEMPTS);
      srv_dispatch(s, out);
      continue;
    }
    char jid[128];
    snprintf(jid, sizeof jid, "%s", job->id);
    srv_ctx *waiter = es_ep_step_abort(s, job);
    es_log(s, "worker %s lost while holding job %s (attempt %d); job failed", w->id, jid,
           ES_JOB_MAX_ATTEMPTS);
    if (waiter)
      srv_answer_error(waiter, out, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1,
                       "executor workers stopped responding %d times while evaluating job %s; "
                       "it was not counted, retry it",
                       ES_JOB_MAX_ATTEMPTS, jid);
  }
}

/* Leases: open episodes idle past the TTL are closed, recorded as idle_ttl, at most once
 * per SRV_TICK_S. Called with mtx held; releases it while the store records them. An
 * episode the store cannot record stays in the table. Replies go to out. */
static void srv_timer_reap(es_server *s, double now, srv_outbox *out) {
  struct es_net *n = s->net;
  if (now < n->next_reap) return;
  n->next_reap = now + SRV_TICK_S;
  int nreaped = 0;
  char **reaped = es_ep_reap_idle(s, now, &nreaped, srv_reap_cancelled, out);
  if (!nreaped) return;
  pthread_mutex_unlock(&s->mtx);
  double wall = ka_wall_s();
  for (int i = 0; i < nreaped; i++) {
    char err[400];
    if (es_store_close_episode(s->store, reaped[i], wall, "idle_ttl", err, sizeof err)) {
      es_log(s, "reaper %s: %s", reaped[i], err);
      free(reaped[i]);
      reaped[i] = NULL; /* not recorded: stays in the table */
    } else {
      es_log(s, "episode %s idle past the TTL: closed (idle_ttl)", reaped[i]);
      es_ep_workspace_remove(s, reaped[i]);
    }
  }
  pthread_mutex_lock(&s->mtx);
  for (int i = 0; i < nreaped; i++) {
    if (reaped[i]) es_ep_close_recorded(s, reaped[i]);
    free(reaped[i]);
  }
  free(reaped);
}

/* Waits on n->cond (mtx held) until next (ka_now_s seconds; at least 1 ms after now)
 * or a signal. */
static void srv_timer_wait(es_server *s, double now, double next) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double wait = next - now;
  if (wait < 0.001) wait = 0.001;
  ts.tv_sec += (time_t)wait;
  ts.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  pthread_cond_timedwait(&s->net->cond, &s->mtx, &ts);
}

/* The timer thread (arg: the es_server): every tick (SRV_TICK_S, or sooner for a
 * deadline) it expires polls, abandons steps past their deadline, re-dispatches the
 * jobs of lost workers, checks unacknowledged jobs, reaps workers and idle episodes,
 * then sends the replies; until the server stops. */
static void *srv_timer_main(void *arg) {
  es_server *s = arg;
  struct es_net *n = s->net;
  pthread_mutex_lock(&s->mtx);
  while (!n->stopping) {
    srv_outbox out = {0};
    double now = ka_now_s(), next = now + SRV_TICK_S;
    srv_timer_polls(n, now, &next, &out);
    srv_timer_deadlines(s, now, &next, &out);
    srv_timer_lost_workers(s, now, &out);
    srv_unacked(s, now, &out);
    es_workers_reap(&s->jobs, now);
    srv_timer_reap(s, now, &out);
    if (out.n) {
      pthread_mutex_unlock(&s->mtx);
      srv_out_flush(&out);
      pthread_mutex_lock(&s->mtx);
      continue;
    }
    free(out.v);
    srv_timer_wait(s, now, next);
  }
  pthread_mutex_unlock(&s->mtx);
  return NULL;
}

/* ---- start and stop */

/* Creates the listener of sk on url and applies its transport's security: over ipc the
 * socket file's mode (only this user); over tls+tcp the server's certificate, and for the
 * executor endpoint the CA every executor's certificate must be signed by (ka_tls.h).
 * Does not start it. */
static int srv_listener_create(es_server *s, srv_sock *sk, const char *url, nng_listener *l,
                               char *err, size_t errlen) {
  int exec = sk->kind == SRV_EXEC;
  ka_tls_files f = {s->cfg.tls_cert, s->cfg.tls_key, exec ? s->cfg.tls_ca : s->cfg.tls_client_ca};
  if (exec && ka_exec_url_check(url, &f, s->cfg.insecure_executors, err, errlen) != KA_OK)
    return KA_EINVAL;
  if (!exec && s->cfg.tls_client_ca && !ka_url_is_tls(url))
    return ka_seterr(err, errlen, KA_EINVAL, "--tls-client-ca needs a tls+tcp:// --listen, not %s",
                     url);
  int rv = nng_listener_create(l, sk->sock, url);
  if (rv) return ka_seterr(err, errlen, KA_EIO, "cannot listen on %s: %s", url, nng_strerror(rv));
  /* What authenticates an executor over ipc: only this user (and root) may connect
   * (docs/protocol.md, "Executors"). */
  if (exec && !strncmp(url, "ipc://", 6))
    rv = nng_listener_set_int(*l, NNG_OPT_IPC_PERMISSIONS, 0600);
  if (rv) return ka_seterr(err, errlen, KA_EIO, "cannot listen on %s: %s", url, nng_strerror(rv));
  if (ka_url_is_tls(url)) {
    char why[512];
    if (ka_tls_listener_setup(*l, &f, why, sizeof why) != KA_OK)
      return ka_seterr(err, errlen, KA_EINVAL, "%s: %s", url, why);
  }
  return KA_OK;
}

static int srv_sock_open(es_server *s, srv_sock *sk, srv_kind kind, const char *url, int target,
                         char *err, size_t errlen) {
  sk->s = s;
  sk->kind = kind;
  sk->cb = srv_cb;
  sk->target = target;
  sk->max_ctx = kind == SRV_CLIENT ? SRV_MAX_CLIENT_CTX : SRV_MAX_EXEC_CTX;
  int rv = nng_rep0_open(&sk->sock);
  if (rv) return ka_seterr(err, errlen, KA_EIO, "nng_rep0_open: %s", nng_strerror(rv));
  sk->opened = 1;
  rv = nng_socket_set_size(sk->sock, NNG_OPT_RECVMAXSZ,
                           kind == SRV_CLIENT ? ES_CLIENT_RECV_MAX_BYTES : ES_RECV_MAX_BYTES);
  if (rv == 0 && kind == SRV_EXEC)
    rv = nng_pipe_notify(sk->sock, NNG_PIPE_EV_REM_POST, srv_exec_pipe_gone, s);
  if (rv == 0 && kind == SRV_EXEC)
    rv = nng_pipe_notify(sk->sock, NNG_PIPE_EV_ADD_PRE, srv_exec_pipe_admit, s);
  if (rv) return ka_seterr(err, errlen, KA_EIO, "cannot listen on %s: %s", url, nng_strerror(rv));
  nng_listener l;
  int rc = srv_listener_create(s, sk, url, &l, err, errlen);
  if (rc != KA_OK) return rc;
  rv = nng_listener_start(l, 0);
  if (rv) return ka_seterr(err, errlen, KA_EIO, "cannot listen on %s: %s", url, nng_strerror(rv));
  if (kind == SRV_EXEC && !ka_url_is_tls(url) && strncmp(url, "ipc://", 6))
    fprintf(stderr,
            "envserver: warning: the executor endpoint %s does not authenticate its peers: "
            "anyone who can reach it can take jobs (the candidates' sources) and post results. "
            "Use tls+tcp:// with --tls-cert, --tls-key and --tls-ca across hosts "
            "(docs/deploy.md).\n",
            url);
  return KA_OK;
}

int es_server_start(es_server *s, char *err, size_t errlen) {
  struct es_net *n = es_xcalloc(1, sizeof *n);
  s->net = n;
  s->started = ka_now_s();
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&n->cond, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&n->wmtx, NULL);
  pthread_cond_init(&n->wcond, NULL);
  if (!s->cfg.max_inflight_bytes) s->cfg.max_inflight_bytes = (size_t)ES_MAX_INFLIGHT_MB << 20;
  for (int i = 0; i < SRV_STORE_THREADS; i++)
    if (pthread_create(&n->wthreads[n->nwthreads], NULL, srv_store_main, s) == 0) n->nwthreads++;
  int rc = srv_sock_open(s, &n->exec, SRV_EXEC, s->cfg.exec_url, s->cfg.contexts, err, errlen);
  if (rc == KA_OK)
    rc = srv_sock_open(s, &n->client, SRV_CLIENT, s->cfg.listen_url, s->cfg.contexts, err, errlen);
  if (rc == KA_OK && pthread_create(&n->timer, NULL, srv_timer_main, s) != 0)
    rc = ka_seterr(err, errlen, KA_ESYS, "cannot start the timer thread");
  else if (rc == KA_OK)
    n->timer_started = 1;
  if (rc) return rc;
  srv_outbox out = {0};
  pthread_mutex_lock(&s->mtx);
  srv_refill(&n->exec, &out);
  srv_refill(&n->client, &out);
  int started = n->client.nrecv == s->cfg.contexts && n->exec.nrecv == s->cfg.contexts;
  pthread_mutex_unlock(&s->mtx);
  srv_out_flush(&out);
  if (!started)
    return ka_seterr(err, errlen, KA_EIO, "cannot open %d nng contexts", s->cfg.contexts);
  return KA_OK;
}

static void srv_sock_stop(srv_sock *sk) {
  for (srv_ctx *c = sk->all; c; c = c->all_next) nng_aio_stop(c->aio);
}

static void srv_sock_free(srv_sock *sk) {
  while (sk->all) {
    srv_ctx *c = sk->all;
    sk->all = c->all_next;
    nng_aio_free(c->aio);
    free(c);
  }
}

void es_server_stop(es_server *s) {
  struct es_net *n = s->net;
  if (!n) return;
  pthread_mutex_lock(&s->mtx);
  n->stopping = 1;
  pthread_cond_broadcast(&n->cond);
  pthread_mutex_unlock(&s->mtx);
  if (n->timer_started) pthread_join(n->timer, NULL);
  /* The store threads finish the work queued (a result being recorded), then stop;
   * later work is done on the thread that has it. */
  pthread_mutex_lock(&n->wmtx);
  n->wclosed = 1;
  pthread_cond_broadcast(&n->wcond);
  pthread_mutex_unlock(&n->wmtx);
  for (int i = 0; i < n->nwthreads; i++) pthread_join(n->wthreads[i], NULL);
  /* Closing ends every pending receive and send; nng_aio_stop then waits for callbacks
   * in progress, so a step being recorded finishes its transaction. Every context is
   * stopped before any is freed: a callback of one socket may answer on the other. */
  if (n->client.opened) nng_close(n->client.sock);
  if (n->exec.opened) nng_close(n->exec.sock);
  srv_sock_stop(&n->client);
  srv_sock_stop(&n->exec);
  srv_sock_free(&n->client);
  srv_sock_free(&n->exec);
  pthread_cond_destroy(&n->cond);
  pthread_cond_destroy(&n->wcond);
  pthread_mutex_destroy(&n->wmtx);
  free(n);
  s->net = NULL;
}
