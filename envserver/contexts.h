/* The RPC front's contexts (contexts.c), shared by server.c (the client side) and
 * executor.c (the executor side): nng contexts and their states, the park lists, the
 * outbox of I/O to start once the lock is released, and the store threads' queue.
 * Internal to the RPC front; server.c's header comment describes the state machine and
 * the locking. */
#ifndef KA_ENVSERVER_CONTEXTS_H
#define KA_ENVSERVER_CONTEXTS_H

#include "envserver.h"

#define SRV_STORE_THREADS 4

typedef enum srv_kind { SRV_CLIENT, SRV_EXEC } srv_kind;
typedef enum srv_state { SRV_IDLE, SRV_RECV, SRV_BUSY, SRV_PARKED, SRV_SEND } srv_state;

struct srv_sock;

typedef struct srv_ctx {
  struct srv_sock *sk;
  nng_ctx ctx;
  nng_aio *aio;
  srv_state state;
  uint64_t request_id;           /* PARKED: the parked request's id */
  double deadline;               /* PARKED: ka_now_s() at which to answer anyway; 0 none */
  es_job *job;                   /* client PARKED: the step or Evaluate job it waits for */
  es_worker *worker;             /* exec PARKED: the polling worker */
  uint32_t pipe_id;              /* exec: the nng pipe the request came on */
  struct srv_ctx *pprev, *pnext; /* park list */
  struct srv_ctx *all_next, *idle_next;
} srv_ctx;

typedef struct srv_sock {
  es_server *s;
  srv_kind kind;
  void (*cb)(void *); /* the nng_aio callback of its contexts (server.c's srv_cb) */
  nng_socket sock;
  int opened;
  srv_ctx *all, *idle;
  int nctx, nrecv, target, max_ctx;
  srv_ctx *park_head, *park_tail;
} srv_sock;

/* Work for a store thread: a client request that may touch the trace store (c set), or
 * the Result of a job to record (job set). */
typedef struct srv_work {
  struct srv_work *next;
  struct srv_ctx *c;
  nng_msg *m;                        /* the request's message (freed by the handler) */
  Kernelarena__V1__Request *rq;      /* decoded */
  size_t acct;                       /* bytes counted in es_server.inflight_bytes */
  es_job *job;                       /* COMPLETING: owned by the work */
  Kernelarena__V1__ExecRequest *erq; /* holds the job's Result */
  char worker_id[260];
} srv_work;

struct es_net {
  srv_sock client, exec;
  pthread_t timer;
  int timer_started;
  pthread_cond_t cond; /* with es_server.mtx: wakes the timer thread */
  int stopping;
  double next_reap; /* ka_now_s() of the next idle-reaper pass */
  /* the store threads' queue */
  pthread_mutex_t wmtx;
  pthread_cond_t wcond;
  srv_work *whead, *wtail;
  int wclosed; /* no more work: handled on the calling thread */
  pthread_t wthreads[SRV_STORE_THREADS];
  int nwthreads;
};

/* Work for after the lock is released: a reply to send, or (msg NULL) a receive to
 * start. */
typedef struct srv_outbox {
  struct {
    srv_ctx *c;
    nng_msg *msg;
  } * v;
  int n, cap;
} srv_outbox;

/* The request_id of a message that did not decode, if it begins with field 1 as a
 * varint (as every encoder writes it); else 0. */
uint64_t srv_salvage_id(const uint8_t *p, size_t n);
/* Queues a reply to send on c (msg set; ownership passes) or, msg NULL, a receive to
 * start, for srv_out_flush. */
void srv_out_push(srv_outbox *o, srv_ctx *c, nng_msg *msg);
/* Starts the queued I/O (no lock held) and empties the outbox. */
void srv_out_flush(srv_outbox *o);
/* Keeps sk->target contexts receiving (mtx held); the receives go to out. */
void srv_refill(srv_sock *sk, srv_outbox *out);
/* Parks c (mtx held) until deadline (ka_now_s(); 0 none) and wakes the timer thread. */
void srv_park(srv_ctx *c, double deadline);
/* Takes a parked context off its park list and marks it answering (mtx held). */
void srv_unpark(srv_ctx *c);
/* Answers a parked client context with an error (mtx held; the send goes to out). */
void srv_answer_error(srv_ctx *c, srv_outbox *out, Kernelarena__V1__ErrorCode code, int retryable,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Queues w for a store thread. Returns 1, or 0 when they have stopped (the caller then
 * does the work itself). Takes s->net->wmtx; call without mtx. */
int srv_work_push(es_server *s, srv_work *w);

#endif
