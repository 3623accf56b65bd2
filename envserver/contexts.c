/* The RPC front's contexts (contexts.h): opening and reusing nng contexts, parking and
 * answering them, the outbox, and the store threads' queue. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contexts.h"

/* The request_id of a message that did not decode, if it begins with field 1 as a
 * varint (as every encoder writes it); else 0. */
uint64_t srv_salvage_id(const uint8_t *p, size_t n) {
  if (n < 2 || p[0] != 0x08) return 0;
  uint64_t v = 0;
  for (size_t i = 1; i < n && i < 11; i++) {
    v |= (uint64_t)(p[i] & 0x7f) << (7 * (i - 1));
    if (!(p[i] & 0x80)) return v;
  }
  return 0;
}

void srv_out_push(srv_outbox *o, srv_ctx *c, nng_msg *msg) {
  if (o->n == o->cap) {
    o->cap = o->cap ? 2 * o->cap : 8;
    o->v = es_xrealloc(o->v, sizeof *o->v * (size_t)o->cap);
  }
  o->v[o->n].c = c;
  o->v[o->n].msg = msg;
  o->n++;
}

/* Starts the queued I/O (no lock held) and empties the outbox. */
void srv_out_flush(srv_outbox *o) {
  for (int i = 0; i < o->n; i++) {
    srv_ctx *c = o->v[i].c;
    if (o->v[i].msg) {
      es_server_send(c, o->v[i].msg);
    } else {
      nng_aio_set_timeout(c->aio, NNG_DURATION_INFINITE);
      nng_ctx_recv(c->ctx, c->aio);
    }
  }
  free(o->v);
  memset(o, 0, sizeof *o);
}
/* A context ready to receive: from the idle list or newly opened (mtx held). NULL when
 * the socket has max_ctx contexts already or nng refuses. */
static srv_ctx *srv_ctx_get(srv_sock *sk) {
  srv_ctx *c = sk->idle;
  if (c) {
    sk->idle = c->idle_next;
    c->idle_next = NULL;
    return c;
  }
  if (sk->nctx >= sk->max_ctx) return NULL;
  c = es_xcalloc(1, sizeof *c);
  c->sk = sk;
  if (nng_ctx_open(&c->ctx, sk->sock) != 0) {
    free(c);
    return NULL;
  }
  if (nng_aio_alloc(&c->aio, sk->cb, c) != 0) {
    nng_ctx_close(c->ctx);
    free(c);
    return NULL;
  }
  c->all_next = sk->all;
  sk->all = c;
  sk->nctx++;
  return c;
}

/* Keeps `target` contexts receiving (mtx held). */
void srv_refill(srv_sock *sk, srv_outbox *out) {
  while (!sk->s->net->stopping && sk->nrecv < sk->target) {
    srv_ctx *c = srv_ctx_get(sk);
    if (!c) break;
    c->state = SRV_RECV;
    sk->nrecv++;
    srv_out_push(out, c, NULL);
  }
}

void srv_park(srv_ctx *c, double deadline) {
  srv_sock *sk = c->sk;
  c->state = SRV_PARKED;
  c->deadline = deadline;
  c->pnext = NULL;
  c->pprev = sk->park_tail;
  if (sk->park_tail)
    sk->park_tail->pnext = c;
  else
    sk->park_head = c;
  sk->park_tail = c;
  pthread_cond_signal(&sk->s->net->cond);
}

/* Takes a parked context off its park list and marks it answering (mtx held). */
void srv_unpark(srv_ctx *c) {
  srv_sock *sk = c->sk;
  if (c->pprev)
    c->pprev->pnext = c->pnext;
  else
    sk->park_head = c->pnext;
  if (c->pnext)
    c->pnext->pprev = c->pprev;
  else
    sk->park_tail = c->pprev;
  c->pprev = c->pnext = NULL;
  c->state = SRV_SEND;
  c->job = NULL;
  c->worker = NULL;
  c->deadline = 0;
}

uint64_t es_server_waiter_take(es_server *s, void *waiter) {
  srv_ctx *c = waiter;
  uint64_t rid = c->request_id;
  srv_unpark(c);
  return rid;
}

void es_server_send(void *ctx, nng_msg *msg) {
  srv_ctx *c = ctx;
  /* a peer that does not read its replies holds this context for this long at most */
  nng_aio_set_timeout(c->aio, ES_SEND_TIMEOUT_MS);
  nng_aio_set_msg(c->aio, msg);
  nng_ctx_send(c->ctx, c->aio);
}

/* Answers a parked client context with an error (mtx held; the send goes to out). */
void srv_answer_error(srv_ctx *c, srv_outbox *out, Kernelarena__V1__ErrorCode code, int retryable,
                      const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  es_arena a = {0};
  es_pb_response resp = KERNELARENA__V1__RESPONSE__INIT;
  resp.request_id = c->request_id;
  es_reply_error(&a, &resp, code, retryable, "%s", msg);
  srv_unpark(c);
  srv_out_push(out, c, es_encode(&resp.base));
  es_arena_free(&a);
}

/* Queues w for a store thread. Returns 1, or 0 when they have stopped (the caller then
 * does the work itself). */
int srv_work_push(es_server *s, srv_work *w) {
  struct es_net *n = s->net;
  pthread_mutex_lock(&n->wmtx);
  int ok = !n->wclosed && n->nwthreads > 0;
  if (ok) {
    w->next = NULL;
    if (n->wtail)
      n->wtail->next = w;
    else
      n->whead = w;
    n->wtail = w;
    pthread_cond_signal(&n->wcond);
  }
  pthread_mutex_unlock(&n->wmtx);
  return ok;
}
