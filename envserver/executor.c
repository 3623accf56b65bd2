/* The executor side of the RPC front (executor.h): gpuexec workers' long polls and
 * heartbeats, their results (recorded on a store thread), executor connections and the
 * ack rule. Locking as in server.c's header comment. */
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "executor.h"

/* ---- assignments */

/* An ExecResponse with an assignment (job may be NULL: nothing to do). */
nng_msg *srv_assignment(uint64_t request_id, const es_job *job) {
  es_arena a = {0};
  Kernelarena__V1__ExecResponse r = KERNELARENA__V1__EXEC_RESPONSE__INIT;
  Kernelarena__V1__WorkerAssignment wa = KERNELARENA__V1__WORKER_ASSIGNMENT__INIT;
  r.request_id = request_id;
  r.body_case = KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT;
  r.assignment = &wa;
  if (job) wa.job = es_job_to_pb(&a, job);
  nng_msg *m = es_encode(&r.base);
  es_arena_free(&a);
  return m;
}

/* A parked poll that can take a job, with its worker's load (es_worker_load; dev < 0:
 * not computed yet, as it costs a pass over the workers). */
typedef struct srv_idle {
  srv_ctx *c;
  double dev, exec;
} srv_idle;

/* The parked polls whose worker holds no job, in park order (oldest first); *n their
 * count. Caller frees. mtx held. */
static srv_idle *srv_idle_polls(es_server *s, int *n) {
  *n = 0;
  for (srv_ctx *c = s->net->exec.park_head; c; c = c->pnext) ++*n;
  srv_idle *v = es_xmalloc(sizeof *v * (size_t)(*n ? *n : 1));
  *n = 0;
  for (srv_ctx *c = s->net->exec.park_head; c; c = c->pnext) {
    if (c->worker->job || !c->worker->device) continue;
    v[*n].c = c;
    v[*n].dev = v[*n].exec = -1;
    ++*n;
  }
  return v;
}

/* The least-busy idle poll that can run job: smallest device load, then executor load,
 * then the oldest poll. Its index in v, or -1. Computes the loads it compares. */
static int srv_least_busy(es_server *s, srv_idle *v, int n, const es_job *job, double now) {
  int best = -1;
  for (int i = 0; i < n; i++) {
    if (!v[i].c || !es_device_runs(job->task, v[i].c->worker->device)) continue;
    if (v[i].dev < 0) es_worker_load(&s->jobs, v[i].c->worker, now, &v[i].dev, &v[i].exec);
    if (best < 0 || v[i].dev < v[best].dev || (v[i].dev == v[best].dev && v[i].exec < v[best].exec))
      best = i;
  }
  return best;
}

/* 1 if episode ep_id is open and its first step not yet submitted: its prefetch is still
 * of use (es_prefetch_take's test; mtx held). */
static int srv_ep_open(void *arg, const char *ep_id) {
  es_episode *ep = es_ep_find(arg, ep_id);
  return ep && !ep->closed && !ep->steps && !ep->inflight;
}

/* Hands queued prefetches to the idle polls of v that no job took and that take them
 * (WorkerPoll.prefetch): fire and forget, the worker holds no job for it (issue 15).
 * mtx held. */
static void srv_dispatch_prefetches(es_server *s, srv_idle *v, int n, srv_outbox *out) {
  for (int i = 0; i < n && s->jobs.pf_head; i++) {
    if (!v[i].c || !v[i].c->worker->prefetch) continue;
    es_prefetch *p = es_prefetch_take(&s->jobs, v[i].c->worker->device, srv_ep_open, s);
    if (!p) continue;
    srv_ctx *c = v[i].c;
    es_arena a = {0};
    Kernelarena__V1__ExecResponse r = KERNELARENA__V1__EXEC_RESPONSE__INIT;
    Kernelarena__V1__WorkerAssignment wa = KERNELARENA__V1__WORKER_ASSIGNMENT__INIT;
    r.request_id = c->request_id;
    r.body_case = KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT;
    r.assignment = &wa;
    wa.job = es_prefetch_to_pb(&a, p);
    nng_msg *m = es_encode(&r.base);
    es_arena_free(&a);
    es_log(s, "prefetch %s (%s, seed %" PRIu64 ") handed to worker %s", p->ep_id, p->task->id,
           p->problem_seed, c->worker->id);
    srv_unpark(c);
    srv_out_push(out, c, m);
    s->jobs.pf_sent++;
    v[i].c = NULL;
    free(p);
  }
}

/* Hands queued jobs, oldest first, to parked worker polls by the least-busy rule
 * (srv_least_busy: per-device capacity is the device's live slots), then queued
 * prefetches to the idle polls left (so a step never waits behind one), mtx held. */
void srv_dispatch(es_server *s, srv_outbox *out) {
  if (s->net->stopping || (!s->jobs.nqueued && !s->jobs.pf_head) || !s->net->exec.park_head) return;
  double now = ka_now_s();
  int n, left;
  srv_idle *v = srv_idle_polls(s, &n);
  left = n;
  for (es_job *j = s->jobs.head, *jn; j && left; j = jn) {
    jn = j->next;
    int i = srv_least_busy(s, v, n, j, now);
    if (i < 0) continue;
    srv_ctx *c = v[i].c;
    es_worker *w = c->worker; /* srv_unpark forgets it */
    es_jobs_assign_job(&s->jobs, w, j, now);
    w->pipe_id = c->pipe_id;
    uint64_t rid = c->request_id;
    srv_unpark(c);
    srv_out_push(out, c, srv_assignment(rid, j));
    es_log(s, "job %s -> worker %s (dispatch %d)", j->id, w->id, j->dispatches);
    v[i].c = NULL;
    left--;
    /* the loads of the polls on that executor (and device) changed */
    for (int k = 0; k < n; k++)
      if (v[k].c && es_worker_same_executor(v[k].c->worker->id, w->id)) v[k].dev = -1;
  }
  if (s->jobs.pf_head) srv_dispatch_prefetches(s, v, n, out);
  free(v);
}

/* ---- executor long poll */

static int srv_worker_id_ok(const char *id) {
  size_t n = strlen(id);
  if (n == 0 || n > 256) return 0;
  for (; *id; id++)
    if ((unsigned char)*id < 0x20 || *id == 0x7f) return 0;
  return 1;
}

/* A heartbeat of a worker evaluating a job: refreshes its liveness (so that it is found
 * lost within ES_HEARTBEAT_LOST_S of its last one) and says whether the job is still
 * wanted. Answered at once; consumes rq. */
static void srv_heartbeat(srv_ctx *c, Kernelarena__V1__ExecRequest *rq) {
  es_server *s = c->sk->s;
  const Kernelarena__V1__WorkerHeartbeat *hb = rq->heartbeat;
  Kernelarena__V1__ExecResponse r = KERNELARENA__V1__EXEC_RESPONSE__INIT;
  Kernelarena__V1__HeartbeatAck ack = KERNELARENA__V1__HEARTBEAT_ACK__INIT;
  r.request_id = rq->request_id;
  r.body_case = KERNELARENA__V1__EXEC_RESPONSE__BODY_HEARTBEAT;
  r.heartbeat = &ack;
  pthread_mutex_lock(&s->mtx);
  es_worker *w = s->jobs.workers;
  while (w && strcmp(w->id, hb->worker_id)) w = w->next;
  if (w) w->acks = 1; /* it heartbeats: its next jobs must be acknowledged (ES_ACK_S) */
  if (w && es_worker_result_current(w, hb->job_id, hb->attempt)) {
    w->last_poll = ka_now_s();
    w->heartbeats = 1;
    w->acked = 1;
    ack.job_wanted = 1;
  }
  c->state = SRV_SEND;
  pthread_mutex_unlock(&s->mtx);
  nng_msg *reply = es_encode(&r.base);
  kernelarena__v1__exec_request__free_unpacked(rq, NULL);
  es_server_send(c, reply);
}

/* Decodes an executor request off the wire and frees m: *rid is its request id (salvaged
 * from the bytes when it does not decode), *pipe_id the connection's, and bytes that are
 * not UTF-8 are replaced by '?'. Returns the request (the caller frees it), or NULL when
 * m is not an ExecRequest. */
static Kernelarena__V1__ExecRequest *srv_exec_decode(es_server *s, nng_msg *m, uint64_t *rid,
                                                     uint32_t *pipe_id) {
  const uint8_t *body = nng_msg_body(m);
  size_t len = nng_msg_len(m);
  Kernelarena__V1__ExecRequest *rq = kernelarena__v1__exec_request__unpack(NULL, len, body);
  *rid = rq ? rq->request_id : srv_salvage_id(body, len);
  *pipe_id = nng_pipe_id(nng_msg_get_pipe(m));
  nng_msg_free(m);
  /* Compiler logs and messages may quote a submission's bytes: stored and echoed only as
   * UTF-8. */
  if (rq && es_pb_utf8_fix(&rq->base))
    es_log(s, "executor request: bytes that are not UTF-8 replaced by '?'");
  return rq;
}

/* What is wrong with an executor request rq (NULL: it did not decode) that is not a
 * heartbeat: not decoded (*code MALFORMED), no poll, a bad worker id, or no device
 * backend (*code INVALID_ARGUMENT). Returns the message, or NULL for a valid poll. */
static const char *srv_exec_check(const Kernelarena__V1__ExecRequest *rq,
                                  Kernelarena__V1__ErrorCode *code) {
  const Kernelarena__V1__WorkerPoll *poll =
      rq && rq->body_case == KERNELARENA__V1__EXEC_REQUEST__BODY_POLL ? rq->poll : NULL;
  *code = KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT;
  if (!rq) {
    *code = KERNELARENA__V1__ERROR_CODE__MALFORMED;
    return "the message is not a valid kernelarena.v1 ExecRequest";
  }
  if (!poll) return "the request holds no poll";
  if (!srv_worker_id_ok(poll->worker_id)) return "worker_id must be 1 to 256 printable bytes";
  if (!poll->device || !poll->device->backend || !*poll->device->backend)
    return "the poll must carry the worker's device with its backend";
  return NULL;
}

/* Answers the executor request rid on c with the error code and message bad (no lock
 * held); frees rq (may be NULL). */
static void srv_exec_refuse(srv_ctx *c, Kernelarena__V1__ExecRequest *rq, uint64_t rid,
                            Kernelarena__V1__ErrorCode code, const char *bad) {
  es_server *s = c->sk->s;
  es_arena a = {0};
  es_pb_response er = KERNELARENA__V1__RESPONSE__INIT; /* only for es_reply_error */
  es_reply_error(&a, &er, code, 0, "%s", bad);
  Kernelarena__V1__ExecResponse r = KERNELARENA__V1__EXEC_RESPONSE__INIT;
  r.request_id = rid;
  r.body_case = KERNELARENA__V1__EXEC_RESPONSE__BODY_ERROR;
  r.error = er.error;
  nng_msg *reply = es_encode(&r.base);
  es_arena_free(&a);
  if (rq) kernelarena__v1__exec_request__free_unpacked(rq, NULL);
  pthread_mutex_lock(&s->mtx);
  c->state = SRV_SEND;
  pthread_mutex_unlock(&s->mtx);
  es_server_send(c, reply);
}

/* A poll of worker w carrying the result res, from connection pipe_id (mtx held): the
 * job it is for, detached and marked completing, when the result is current and comes
 * from the connection that took the job; else NULL, counted and logged as stale. */
static es_job *srv_exec_result(es_server *s, es_worker *w, const Kernelarena__V1__Result *res,
                               uint32_t pipe_id) {
  /* a result counts only from the connection that took the job: another peer naming
   * the same worker id cannot post it */
  if (es_worker_result_current(w, res->job_id, res->attempt) &&
      (!w->pipe_id || w->pipe_id == pipe_id)) {
    es_job *completing = es_jobs_detach(&s->jobs, w);
    completing->state = ES_JOB_COMPLETING;
    return completing;
  }
  /* a superseded dispatch (the job was re-dispatched after this worker was lost),
   * or a peer that did not take the job: never recorded */
  s->jobs.stale_results++;
  if (w->job && !strcmp(w->job->id, res->job_id) && (!w->pipe_id || w->pipe_id == pipe_id))
    es_log(s, "worker %s: dropping a stale result for job %s (dispatch %u; current %d)", w->id,
           res->job_id, res->attempt, w->job->dispatches);
  else
    es_log(s,
           "worker %s: dropping a stale result for job %s, dispatch %u (not the job it "
           "holds on this connection)",
           w->id, res->job_id, res->attempt);
  return NULL;
}

/* Worker w polls without the result of the job it holds (mtx held): it restarted and
 * lost it. The job is detached, its step aborted and the step's waiter answered
 * INTERNAL (retryable) into out. */
static void srv_exec_lost_job(es_server *s, es_worker *w, srv_outbox *out) {
  /* It polls without the result of the job it holds: it restarted and lost it. */
  es_job *lost = es_jobs_detach(&s->jobs, w);
  char jid[128];
  snprintf(jid, sizeof jid, "%s", lost->id);
  srv_ctx *waiter = es_ep_step_abort(s, lost);
  es_log(s, "worker %s polled again without the result of job %s", w->id, jid);
  if (waiter)
    srv_answer_error(waiter, out, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1,
                     "executor worker %s dropped job %s; the step was not counted, retry it", w->id,
                     jid);
}

/* A worker has one poll open at a time: releases an older parked poll of w with an
 * empty assignment into out (mtx held). */
static void srv_exec_release_poll(es_server *s, const es_worker *w, srv_outbox *out) {
  for (srv_ctx *p = s->net->exec.park_head; p; p = p->pnext)
    if (p->worker == w) {
      uint64_t prid = p->request_id;
      srv_unpark(p);
      srv_out_push(out, p, srv_assignment(prid, NULL));
      break;
    }
}

/* Parks the poll rid of worker w on c until now + wait_ms (0: ES_POLL_DEFAULT_MS, at
 * most ES_POLL_MAX_MS), then dispatches (srv_dispatch) and refills the parked contexts
 * when c is still parked; replies go to out (mtx held). */
static void srv_exec_park_poll(srv_ctx *c, es_worker *w, uint64_t rid, uint32_t pipe_id,
                               unsigned wait_ms, double now, srv_outbox *out) {
  es_server *s = c->sk->s;
  /* Parked first, then the least-busy rule decides whether this poll or another idle
   * one gets the queued job (srv_dispatch). */
  unsigned wait = wait_ms ? wait_ms : ES_POLL_DEFAULT_MS;
  if (wait > ES_POLL_MAX_MS) wait = ES_POLL_MAX_MS;
  c->request_id = rid;
  c->worker = w;
  c->pipe_id = pipe_id;
  srv_park(c, now + wait / 1000.0);
  srv_dispatch(s, out);
  if (c->state == SRV_PARKED) srv_refill(&s->net->exec, out);
}

/* Hands the completing job and its request rq (ownership of both) to a store thread to
 * record (recording waits on the trace store), or records it here when the store
 * threads have stopped. worker_id: the worker that ran it. No lock held. */
static void srv_exec_complete(es_server *s, es_job *completing, Kernelarena__V1__ExecRequest *rq,
                              const char *worker_id) {
  /* Recording waits on the trace store: a store thread does it. */
  srv_work *wk = es_xcalloc(1, sizeof *wk);
  wk->job = completing;
  wk->erq = rq;
  snprintf(wk->worker_id, sizeof wk->worker_id, "%s", worker_id);
  if (!srv_work_push(s, wk)) {
    srv_complete(s, wk); /* the store threads have stopped */
  }
}

/* An executor request (executor.h): a heartbeat is answered at once, a bad request
 * refused; a poll hands in its result or reports a lost job, replaces the worker's
 * older poll, is parked and dispatched, and a current result is recorded. */
void srv_exec_request(srv_ctx *c, nng_msg *m) {
  es_server *s = c->sk->s;
  srv_outbox out = {0};
  uint64_t rid;
  uint32_t pipe_id;
  Kernelarena__V1__ExecRequest *rq = srv_exec_decode(s, m, &rid, &pipe_id);
  if (rq && rq->body_case == KERNELARENA__V1__EXEC_REQUEST__BODY_HEARTBEAT) {
    srv_heartbeat(c, rq);
    return;
  }
  Kernelarena__V1__ErrorCode bad_code;
  const char *bad = srv_exec_check(rq, &bad_code);
  if (bad) {
    srv_exec_refuse(c, rq, rid, bad_code, bad);
    return;
  }
  const Kernelarena__V1__WorkerPoll *poll = rq->poll;
  es_job *completing = NULL;
  char worker_id[260];
  snprintf(worker_id, sizeof worker_id, "%s", poll->worker_id);
  pthread_mutex_lock(&s->mtx);
  double now = ka_now_s();
  es_worker *w = es_worker_touch(&s->jobs, poll->worker_id, poll->device, now);
  if (poll->heartbeats) w->acks = 1;
  w->prefetch = poll->prefetch;
  if (poll->result)
    completing = srv_exec_result(s, w, poll->result, pipe_id);
  else if (w->job)
    srv_exec_lost_job(s, w, &out);
  srv_exec_release_poll(s, w, &out);
  srv_exec_park_poll(c, w, rid, pipe_id, poll->wait_ms, now, &out);
  pthread_mutex_unlock(&s->mtx);
  if (completing) {
    srv_exec_complete(s, completing, rq, worker_id);
    rq = NULL;
  }
  if (rq) kernelarena__v1__exec_request__free_unpacked(rq, NULL);
  /* Last: once flushed, c may be in use by another thread. */
  srv_out_flush(&out);
}

/* ---- results */

/* Records a job's Result and answers its waiter (a store thread); frees w. */
void srv_complete(es_server *s, srv_work *w) {
  nng_msg *creply = NULL;
  void *waiter = NULL;
  const es_pb_result *result = w->erq->poll->result;
  if (w->job->ep)
    es_ep_step_finish(s, w->job, result, w->worker_id, &creply, &waiter);
  else
    es_eval_finish(s, w->job, result, w->worker_id, &creply, &waiter);
  if (waiter) es_server_send(waiter, creply);
  kernelarena__v1__exec_request__free_unpacked(w->erq, NULL);
  free(w);
}

/* ---- executor connections */

/* nng pipe event on the executor socket (an nng thread): when a connection closes, its
 * parked polls are released (the reply goes nowhere), so no job is handed to a dead
 * executor, and a job whose worker took it on that connection is re-queued at once
 * (the attempt it used stays counted: the executor may have died of it). */
void srv_exec_pipe_gone(nng_pipe p, nng_pipe_ev ev, void *arg) {
  es_server *s = arg;
  if (ev != NNG_PIPE_EV_REM_POST) return;
  uint32_t id = nng_pipe_id(p);
  srv_outbox out = {0};
  pthread_mutex_lock(&s->mtx);
  struct es_net *n = s->net;
  for (srv_ctx *c = n->exec.park_head, *nx; c; c = nx) {
    nx = c->pnext;
    if (c->pipe_id != id) continue;
    es_log(s, "worker %s: its connection closed; its poll is dropped", c->worker->id);
    uint64_t rid = c->request_id;
    srv_unpark(c);
    srv_out_push(&out, c, srv_assignment(rid, NULL));
  }
  for (es_worker *w = s->jobs.workers; w; w = w->next) {
    if (!w->job || w->pipe_id != id || w->job->state != ES_JOB_RUNNING) continue;
    es_job *job = es_jobs_detach(&s->jobs, w);
    w->pipe_id = 0;
    if (job->attempts < ES_JOB_MAX_ATTEMPTS) {
      es_jobs_requeue_front(&s->jobs, job);
      es_log(s, "worker %s: its connection closed while holding job %s; job re-queued", w->id,
             job->id);
    } else {
      char jid[128];
      snprintf(jid, sizeof jid, "%s", job->id);
      srv_ctx *waiter = es_ep_step_abort(s, job);
      es_log(s, "worker %s: its connection closed while holding job %s (attempt %d); job failed",
             w->id, jid, ES_JOB_MAX_ATTEMPTS);
      if (waiter)
        srv_answer_error(waiter, &out, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1,
                         "executors disconnected %d times while evaluating job %s; it was not "
                         "counted, retry it",
                         ES_JOB_MAX_ATTEMPTS, jid);
    }
  }
  srv_dispatch(s, &out);
  pthread_mutex_unlock(&s->mtx);
  srv_out_flush(&out);
}

/* nng pipe event before an executor connection is admitted (an nng thread): over ipc,
 * a peer of another user is refused (the socket's permissions already keep them out;
 * this also holds if the file's mode was changed); over tls+tcp, a peer whose
 * certificate was not verified against --tls-ca is refused (the handshake already
 * fails without one; this holds whatever the TLS configuration). */
void srv_exec_pipe_admit(nng_pipe p, nng_pipe_ev ev, void *arg) {
  es_server *s = arg;
  if (ev != NNG_PIPE_EV_ADD_PRE) return;
  bool verified;
  if (nng_pipe_get_bool(p, NNG_OPT_TLS_VERIFIED, &verified) == 0 && !verified) {
    es_log(s, "executor connection refused: its TLS certificate was not verified");
    nng_pipe_close(p);
    return;
  }
  uint64_t uid;
  if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid) != 0) return;
  if (uid != (uint64_t)getuid() && uid != 0) {
    es_log(s, "executor connection of uid %llu refused (only uid %d may run executors)",
           (unsigned long long)uid, (int)getuid());
    nng_pipe_close(p);
  }
}

/* The ack rule (mtx held, timer thread): a job handed to a worker that acknowledges jobs
 * and not acknowledged within ES_ACK_S (the worker is stopped, or its reply is stuck) is
 * taken back and handed to another idle worker, without using one of its attempts. */
void srv_unacked(es_server *s, double now, srv_outbox *out) {
  for (es_worker *w = s->jobs.workers; w; w = w->next) {
    es_job *job = w->job;
    if (!job || !w->acks || w->acked || job->state != ES_JOB_RUNNING ||
        now - job->dispatched_at < ES_ACK_S)
      continue;
    int other = 0; /* another worker's poll waits and can run it */
    for (srv_ctx *c = s->net->exec.park_head; c && !other; c = c->pnext)
      other = c->worker != w && c->worker->device && es_device_runs(job->task, c->worker->device);
    if (!other) continue;
    es_jobs_detach(&s->jobs, w);
    job->attempts--; /* never acknowledged: not an attempt */
    es_jobs_requeue_front(&s->jobs, job);
    es_log(s, "worker %s did not acknowledge job %s within %.0f s; job handed to another worker",
           w->id, job->id, ES_ACK_S);
  }
  srv_dispatch(s, out);
}
