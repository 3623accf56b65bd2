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

#include "envserver.h"

#include <nng/protocol/reqrep0/rep.h>

#define SRV_MAX_CLIENT_CTX (ES_MAX_QUEUED_JOBS + 4096)
#define SRV_MAX_EXEC_CTX 8192
#define SRV_TICK_S 1.0 /* the timer thread's longest sleep */
#define SRV_STORE_THREADS 4

/* ---- memory */

static void srv_oom(size_t n) {
  fprintf(stderr, "envserver: out of memory allocating %zu bytes\n", n);
  abort();
}

void *es_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) srv_oom(n);
  return p;
}

void *es_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) srv_oom(n * size);
  return p;
}

void *es_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) srv_oom(n);
  return q;
}

char *es_xstrdup(const char *s) {
  size_t n = strlen(s ? s : "") + 1;
  char *d = es_xmalloc(n);
  memcpy(d, s ? s : "", n);
  return d;
}

struct es_arena_blk {
  struct es_arena_blk *next;
  size_t used, cap;
  alignas(max_align_t) unsigned char data[];
};

void *es_arena_alloc(es_arena *a, size_t n) {
  const size_t al = alignof(max_align_t);
  n = (n + al - 1) / al * al;
  if (!n) n = al;
  struct es_arena_blk *b = a->head;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > 60000 ? n : 60000;
    b = es_xmalloc(sizeof *b + cap);
    b->cap = cap;
    b->used = 0;
    b->next = a->head;
    a->head = b;
  }
  void *p = b->data + b->used;
  b->used += n;
  memset(p, 0, n);
  return p;
}

void *es_arena_memdup(es_arena *a, const void *p, size_t n) {
  void *d = es_arena_alloc(a, n);
  if (n) memcpy(d, p, n);
  return d;
}

char *es_arena_strdup(es_arena *a, const char *s) {
  if (!s) s = "";
  return es_arena_memdup(a, s, strlen(s) + 1);
}

const char *es_arena_quote(es_arena *a, const char *s) {
  size_t n = strlen(s);
  int cut = n > 80;
  if (cut) n = 80;
  char *q = es_arena_alloc(a, n + 4); /* zeroed: NUL-terminated */
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    q[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  if (cut) memcpy(q + n, "...", 3);
  return q;
}

char *es_arena_printf(es_arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return es_arena_strdup(a, "");
  char *s = es_arena_alloc(a, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

void es_arena_free(es_arena *a) {
  while (a->head) {
    struct es_arena_blk *b = a->head;
    a->head = b->next;
    free(b);
  }
}

void es_reply_error(es_arena *a, es_pb_response *resp, Kernelarena__V1__ErrorCode code,
                    int retryable, const char *fmt, ...) {
  Kernelarena__V1__Error *e = es_arena_alloc(a, sizeof *e);
  kernelarena__v1__error__init(e);
  e->code = code;
  e->retryable = retryable != 0;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  e->message = es_arena_alloc(a, n > 0 ? (size_t)n + 1 : 1);
  if (n > 0) {
    va_start(ap, fmt);
    vsnprintf(e->message, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  resp->body_case = KERNELARENA__V1__RESPONSE__BODY_ERROR;
  resp->error = e;
}

es_pb_device *es_device_dup(const es_pb_device *d) {
  if (!d) return NULL;
  size_t n = kernelarena__v1__device__get_packed_size(d);
  uint8_t *buf = es_xmalloc(n);
  kernelarena__v1__device__pack(d, buf);
  es_pb_device *c = kernelarena__v1__device__unpack(NULL, n, buf);
  free(buf);
  if (!c) srv_oom(n); /* it was just packed: only allocation can fail */
  return c;
}

void es_device_free(es_pb_device *d) {
  if (d) kernelarena__v1__device__free_unpacked(d, NULL);
}

es_pb_device *es_device_to_arena(es_arena *a, const es_pb_device *d) {
  es_pb_device *c = es_arena_memdup(a, d, sizeof *d);
  c->backend = es_arena_strdup(a, d->backend);
  c->name = es_arena_strdup(a, d->name);
  c->arch = es_arena_strdup(a, d->arch);
  c->driver = es_arena_strdup(a, d->driver);
  /* unknown fields are not copied: the pointer would dangle once d is freed */
  c->base.n_unknown_fields = 0;
  c->base.unknown_fields = NULL;
  return c;
}

/* ---- file sets */

int es_fileset_find(const es_fileset *fs, const char *path) {
  for (int i = 0; i < fs->n; i++)
    if (!strcmp(fs->v[i].path, path)) return i;
  return -1;
}

void es_fileset_put(es_fileset *fs, const char *path, const void *data, size_t len) {
  int i = es_fileset_find(fs, path);
  if (i < 0) {
    fs->v = es_xrealloc(fs->v, sizeof *fs->v * (size_t)(fs->n + 1));
    i = fs->n++;
    fs->v[i].path = es_xstrdup(path);
  } else {
    free(fs->v[i].data);
  }
  fs->v[i].data = es_xmalloc(len ? len : 1);
  if (len) memcpy(fs->v[i].data, data, len);
  fs->v[i].len = len;
}

void es_fileset_copy(es_fileset *dst, const es_fileset *src) {
  for (int i = 0; i < src->n; i++)
    es_fileset_put(dst, src->v[i].path, src->v[i].data, src->v[i].len);
}

void es_fileset_free(es_fileset *fs) {
  for (int i = 0; i < fs->n; i++) free(fs->v[i].path), free(fs->v[i].data);
  free(fs->v);
  fs->v = NULL;
  fs->n = 0;
}

size_t es_fileset_bytes(const es_fileset *fs) {
  size_t n = 0;
  for (int i = 0; i < fs->n; i++) n += fs->v[i].len;
  return n;
}

Kernelarena__V1__File **es_fileset_to_pb(es_arena *a, const es_fileset *fs, size_t *n) {
  Kernelarena__V1__File **v = es_arena_alloc(a, sizeof *v * (size_t)(fs->n + 1));
  for (int i = 0; i < fs->n; i++) {
    Kernelarena__V1__File *f = es_arena_alloc(a, sizeof *f);
    kernelarena__v1__file__init(f);
    f->path = es_arena_strdup(a, fs->v[i].path);
    f->content.data = es_arena_memdup(a, fs->v[i].data, fs->v[i].len);
    f->content.len = fs->v[i].len;
    v[i] = f;
  }
  *n = (size_t)fs->n;
  return v;
}

/* ---- small utilities */

nng_msg *es_encode(const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  nng_msg *msg;
  if (nng_msg_alloc(&msg, n) != 0) srv_oom(n);
  protobuf_c_message_pack(m, nng_msg_body(msg));
  return msg;
}

int es_random(void *buf, size_t n) {
  unsigned char *p = buf;
  while (n) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return KA_ESYS;
    p += r;
    n -= (size_t)r;
  }
  return KA_OK;
}

void es_log(const es_server *s, const char *fmt, ...) {
  if (s->cfg.quiet) return;
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "envserver: %s\n", line);
}

/* The request_id of a message that did not decode, if it begins with field 1 as a
 * varint (as every encoder writes it); else 0. */
static uint64_t srv_salvage_id(const uint8_t *p, size_t n) {
  if (n < 2 || p[0] != 0x08) return 0;
  uint64_t v = 0;
  for (size_t i = 1; i < n && i < 11; i++) {
    v |= (uint64_t)(p[i] & 0x7f) << (7 * (i - 1));
    if (!(p[i] & 0x80)) return v;
  }
  return 0;
}

/* ---- contexts */

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

static void srv_out_push(srv_outbox *o, srv_ctx *c, nng_msg *msg) {
  if (o->n == o->cap) {
    o->cap = o->cap ? 2 * o->cap : 8;
    o->v = es_xrealloc(o->v, sizeof *o->v * (size_t)o->cap);
  }
  o->v[o->n].c = c;
  o->v[o->n].msg = msg;
  o->n++;
}

/* Starts the queued I/O (no lock held) and empties the outbox. */
static void srv_out_flush(srv_outbox *o) {
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

static void srv_cb(void *arg);

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
  if (nng_aio_alloc(&c->aio, srv_cb, c) != 0) {
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
static void srv_refill(srv_sock *sk, srv_outbox *out) {
  while (!sk->s->net->stopping && sk->nrecv < sk->target) {
    srv_ctx *c = srv_ctx_get(sk);
    if (!c) break;
    c->state = SRV_RECV;
    sk->nrecv++;
    srv_out_push(out, c, NULL);
  }
}

static void srv_park(srv_ctx *c, double deadline) {
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
static void srv_unpark(srv_ctx *c) {
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
static void srv_answer_error(srv_ctx *c, srv_outbox *out, Kernelarena__V1__ErrorCode code,
                             int retryable, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void srv_answer_error(srv_ctx *c, srv_outbox *out, Kernelarena__V1__ErrorCode code,
                             int retryable, const char *fmt, ...) {
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

/* An ExecResponse with an assignment (job may be NULL: nothing to do). */
static nng_msg *srv_assignment(uint64_t request_id, const es_job *job) {
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

/* Hands queued jobs to parked worker polls, oldest poll first (mtx held). */
static void srv_dispatch(es_server *s, srv_outbox *out) {
  double now = ka_now_s();
  srv_ctx *c = s->net->exec.park_head;
  while (c && s->jobs.nqueued) {
    srv_ctx *nx = c->pnext;
    es_job *job = es_jobs_assign(&s->jobs, c->worker, now);
    if (job) {
      c->worker->pipe_id = c->pipe_id;
      uint64_t rid = c->request_id;
      srv_unpark(c);
      srv_out_push(out, c, srv_assignment(rid, job));
      es_log(s, "job %s -> worker %s", job->id, job->worker->id);
    }
    c = nx;
  }
}

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

static void srv_health(es_server *s, es_arena *a, es_pb_response *resp) {
  Kernelarena__V1__HealthResponse *h = es_arena_alloc(a, sizeof *h);
  kernelarena__v1__health_response__init(h);
  pthread_mutex_lock(&s->mtx);
  double now = ka_now_s();
  h->ok = !s->net->stopping;
  for (es_worker *w = s->jobs.workers; w; w = w->next) h->executors += es_worker_live(w, now);
  h->queued_jobs = s->jobs.nqueued;
  h->running_jobs = s->jobs.nrunning;
  h->open_episodes = s->nopen;
  h->episodes_in_memory = s->nepisodes;
  h->uptime_s = now - s->started;
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

static int srv_work_push(es_server *s, srv_work *w);
static void srv_complete(es_server *s, srv_work *w);

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
  if (w && w->job && !strcmp(w->job->id, hb->job_id)) {
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

static void srv_exec_request(srv_ctx *c, nng_msg *m) {
  es_server *s = c->sk->s;
  srv_outbox out = {0};
  const uint8_t *body = nng_msg_body(m);
  size_t len = nng_msg_len(m);
  Kernelarena__V1__ExecRequest *rq = kernelarena__v1__exec_request__unpack(NULL, len, body);
  uint64_t rid = rq ? rq->request_id : srv_salvage_id(body, len);
  uint32_t pipe_id = nng_pipe_id(nng_msg_get_pipe(m));
  nng_msg_free(m);
  /* Compiler logs and messages may quote a submission's bytes: stored and echoed only as
   * UTF-8. */
  if (rq && es_pb_utf8_fix(&rq->base))
    es_log(s, "executor request: bytes that are not UTF-8 replaced by '?'");
  if (rq && rq->body_case == KERNELARENA__V1__EXEC_REQUEST__BODY_HEARTBEAT) {
    srv_heartbeat(c, rq);
    return;
  }
  const Kernelarena__V1__WorkerPoll *poll =
      rq && rq->body_case == KERNELARENA__V1__EXEC_REQUEST__BODY_POLL ? rq->poll : NULL;
  const char *bad = NULL;
  Kernelarena__V1__ErrorCode bad_code = KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT;
  if (!rq)
    bad = "the message is not a valid kernelarena.v1 ExecRequest",
    bad_code = KERNELARENA__V1__ERROR_CODE__MALFORMED;
  else if (!poll)
    bad = "the request holds no poll";
  else if (!srv_worker_id_ok(poll->worker_id))
    bad = "worker_id must be 1 to 256 printable bytes";
  else if (!poll->device || !poll->device->backend || !*poll->device->backend)
    bad = "the poll must carry the worker's device with its backend";
  if (bad) {
    es_arena a = {0};
    es_pb_response er = KERNELARENA__V1__RESPONSE__INIT; /* only for es_reply_error */
    es_reply_error(&a, &er, bad_code, 0, "%s", bad);
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
    return;
  }

  es_job *completing = NULL;
  nng_msg *reply = NULL;
  char worker_id[260];
  snprintf(worker_id, sizeof worker_id, "%s", poll->worker_id);
  pthread_mutex_lock(&s->mtx);
  double now = ka_now_s();
  es_worker *w = es_worker_touch(&s->jobs, poll->worker_id, poll->device, now);
  if (poll->heartbeats) w->acks = 1;
  if (poll->result) {
    /* a result counts only from the connection that took the job: another peer naming
     * the same worker id cannot post it */
    if (w->job && !strcmp(w->job->id, poll->result->job_id) &&
        (!w->pipe_id || w->pipe_id == pipe_id)) {
      completing = es_jobs_detach(&s->jobs, w);
      completing->state = ES_JOB_COMPLETING;
    } else {
      es_log(s, "worker %s: ignoring a result for job %s (not the job it holds)", w->id,
             poll->result->job_id);
    }
  } else if (w->job) {
    /* It polls without the result of the job it holds: it restarted and lost it. */
    es_job *lost = es_jobs_detach(&s->jobs, w);
    char jid[128];
    snprintf(jid, sizeof jid, "%s", lost->id);
    srv_ctx *waiter = es_ep_step_abort(s, lost);
    es_log(s, "worker %s polled again without the result of job %s", w->id, jid);
    if (waiter)
      srv_answer_error(waiter, &out, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1,
                       "executor worker %s dropped job %s; the step was not counted, retry it",
                       w->id, jid);
  }
  /* A worker has one poll open at a time: release an older one still parked. */
  for (srv_ctx *p = s->net->exec.park_head; p; p = p->pnext)
    if (p->worker == w) {
      uint64_t prid = p->request_id;
      srv_unpark(p);
      srv_out_push(&out, p, srv_assignment(prid, NULL));
      break;
    }
  es_job *job = s->net->stopping ? NULL : es_jobs_assign(&s->jobs, w, now);
  if (job) {
    w->pipe_id = pipe_id;
    reply = srv_assignment(rid, job);
    c->state = SRV_SEND;
    es_log(s, "job %s -> worker %s", job->id, w->id);
  } else {
    unsigned wait = poll->wait_ms ? poll->wait_ms : ES_POLL_DEFAULT_MS;
    if (wait > ES_POLL_MAX_MS) wait = ES_POLL_MAX_MS;
    c->request_id = rid;
    c->worker = w;
    c->pipe_id = pipe_id;
    srv_park(c, now + wait / 1000.0);
    srv_refill(&s->net->exec, &out);
  }
  pthread_mutex_unlock(&s->mtx);

  if (reply) srv_out_push(&out, c, reply);
  if (completing) {
    /* Recording waits on the trace store: a store thread does it. */
    srv_work *wk = es_xcalloc(1, sizeof *wk);
    wk->job = completing;
    wk->erq = rq;
    snprintf(wk->worker_id, sizeof wk->worker_id, "%s", worker_id);
    rq = NULL;
    if (!srv_work_push(s, wk)) {
      srv_complete(s, wk); /* the store threads have stopped */
    }
  }
  if (rq) kernelarena__v1__exec_request__free_unpacked(rq, NULL);
  /* Last: once flushed, c may be in use by another thread. */
  srv_out_flush(&out);
}

/* ---- store threads */

/* Records a job's Result and answers its waiter (a store thread); frees w. */
static void srv_complete(es_server *s, srv_work *w) {
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

/* Queues w for a store thread. Returns 1, or 0 when they have stopped (the caller then
 * does the work itself). */
static int srv_work_push(es_server *s, srv_work *w) {
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

/* ---- executor connections */

/* nng pipe event on the executor socket (an nng thread): when a connection closes, its
 * parked polls are released (the reply goes nowhere), so no job is handed to a dead
 * executor, and a job whose worker took it on that connection is re-queued at once
 * (the attempt it used stays counted: the executor may have died of it). */
static void srv_exec_pipe_gone(nng_pipe p, nng_pipe_ev ev, void *arg) {
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
 * this also holds if the file's mode was changed). */
static void srv_exec_pipe_admit(nng_pipe p, nng_pipe_ev ev, void *arg) {
  es_server *s = arg;
  uint64_t uid;
  if (ev != NNG_PIPE_EV_ADD_PRE || nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid) != 0) return;
  if (uid != (uint64_t)getuid() && uid != 0) {
    es_log(s, "executor connection of uid %llu refused (only uid %d may run executors)",
           (unsigned long long)uid, (int)getuid());
    nng_pipe_close(p);
  }
}

/* The ack rule (mtx held, timer thread): a job handed to a worker that acknowledges jobs
 * and not acknowledged within ES_ACK_S (the worker is stopped, or its reply is stuck) is
 * taken back and handed to another idle worker, without using one of its attempts. */
static void srv_unacked(es_server *s, double now, srv_outbox *out) {
  for (es_worker *w = s->jobs.workers; w; w = w->next) {
    es_job *job = w->job;
    if (!job || !w->acks || w->acked || job->state != ES_JOB_RUNNING ||
        now - job->dispatched_at < ES_ACK_S)
      continue;
    int other = 0; /* another worker's poll waits and can run it */
    for (srv_ctx *c = s->net->exec.park_head; c && !other; c = c->pnext)
      other = c->worker != w && c->worker->device &&
              es_task_has_backend(job->task, c->worker->device->backend);
    if (!other) continue;
    es_jobs_detach(&s->jobs, w);
    job->attempts--; /* never acknowledged: not an attempt */
    es_jobs_requeue_front(&s->jobs, job);
    es_log(s, "worker %s did not acknowledge job %s within %.0f s; job handed to another worker",
           w->id, job->id, ES_ACK_S);
  }
  srv_dispatch(s, out);
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

static void *srv_timer_main(void *arg) {
  es_server *s = arg;
  struct es_net *n = s->net;
  pthread_mutex_lock(&s->mtx);
  while (!n->stopping) {
    srv_outbox out = {0};
    double now = ka_now_s(), next = now + SRV_TICK_S;
    /* Polls that waited long enough get an empty assignment. */
    for (srv_ctx *c = n->exec.park_head, *nx; c; c = nx) {
      nx = c->pnext;
      if (c->deadline <= now) {
        uint64_t rid = c->request_id;
        srv_unpark(c);
        srv_out_push(&out, c, srv_assignment(rid, NULL));
      } else if (c->deadline < next) {
        next = c->deadline;
      }
    }
    /* Steps past their request's deadline are abandoned, not counted. */
    for (srv_ctx *c = n->client.park_head, *nx; c; c = nx) {
      nx = c->pnext;
      if (!c->deadline) continue;
      if (c->deadline > now) {
        if (c->deadline < next) next = c->deadline;
        continue;
      }
      es_job *job = c->job;
      if (!job || job->state == ES_JOB_COMPLETING) { /* its result is being recorded */
        c->deadline = 0;
        continue;
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
      srv_answer_error(c, &out, KERNELARENA__V1__ERROR_CODE__DEADLINE_EXCEEDED, 1,
                       "%s had no result before the request's deadline; it was abandoned%s", what,
                       step ? " and not counted" : "");
    }
    /* Workers holding a job that stopped polling. */
    for (es_worker *w = s->jobs.workers; w; w = w->next) {
      if (!es_worker_lost(w, now)) continue;
      es_job *job = es_jobs_detach(&s->jobs, w);
      if (job->attempts < ES_JOB_MAX_ATTEMPTS) {
        /* Re-dispatch: back to the head of the queue, for the next worker that polls. */
        es_jobs_requeue_front(&s->jobs, job);
        es_log(s, "worker %s lost while holding job %s; job re-queued (attempt %d of %d)", w->id,
               job->id, job->attempts + 1, ES_JOB_MAX_ATTEMPTS);
        srv_dispatch(s, &out);
        continue;
      }
      char jid[128];
      snprintf(jid, sizeof jid, "%s", job->id);
      srv_ctx *waiter = es_ep_step_abort(s, job);
      es_log(s, "worker %s lost while holding job %s (attempt %d); job failed", w->id, jid,
             ES_JOB_MAX_ATTEMPTS);
      if (waiter)
        srv_answer_error(waiter, &out, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1,
                         "executor workers stopped responding %d times while evaluating job %s; "
                         "it was not counted, retry it",
                         ES_JOB_MAX_ATTEMPTS, jid);
    }
    srv_unacked(s, now, &out);
    es_workers_reap(&s->jobs, now);
    /* Leases: open episodes idle past the TTL are closed (recorded as idle_ttl). */
    if (now >= n->next_reap) {
      n->next_reap = now + SRV_TICK_S;
      int nreaped = 0;
      char **reaped = es_ep_reap_idle(s, now, &nreaped, srv_reap_cancelled, &out);
      if (nreaped) {
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
    }
    if (out.n) {
      pthread_mutex_unlock(&s->mtx);
      srv_out_flush(&out);
      pthread_mutex_lock(&s->mtx);
      continue;
    }
    free(out.v);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double wait = next - now;
    if (wait < 0.001) wait = 0.001;
    ts.tv_sec += (time_t)wait;
    ts.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&n->cond, &s->mtx, &ts);
  }
  pthread_mutex_unlock(&s->mtx);
  return NULL;
}

/* ---- start and stop */

static int srv_sock_open(es_server *s, srv_sock *sk, srv_kind kind, const char *url, int target,
                         char *err, size_t errlen) {
  sk->s = s;
  sk->kind = kind;
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
  nng_listener l;
  if (rv == 0) rv = nng_listener_create(&l, sk->sock, url);
  /* What authenticates an executor over ipc: only this user (and root) may connect
   * (docs/protocol.md, "Executors"). */
  if (rv == 0 && kind == SRV_EXEC && !strncmp(url, "ipc://", 6))
    rv = nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, 0600);
  if (rv == 0) rv = nng_listener_start(l, 0);
  if (rv) return ka_seterr(err, errlen, KA_EIO, "cannot listen on %s: %s", url, nng_strerror(rv));
  if (kind == SRV_EXEC && strncmp(url, "ipc://", 6))
    fprintf(stderr,
            "envserver: warning: the executor endpoint %s does not authenticate its peers: "
            "anyone who can reach it can take jobs (the candidates' sources) and post results. "
            "Keep it on a private network, or use ipc:// on one host.\n",
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
