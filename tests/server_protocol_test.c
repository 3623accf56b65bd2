/* server_protocol_test: starts the real envserver on a temporary state folder and the
 * repository's tasks, then plays a client (two REQ sockets) and a fake executor (a REQ
 * socket on the executor endpoint that answers jobs with canned Results).
 *
 *   server_protocol_test ENVSERVER_BINARY TASKS_DIR
 *
 * It checks the methods, every refusal path (and that a refused step changes nothing),
 * the reward of OK / COMPILE_ERROR / INFRA_ERROR results, deadlines, the step limit,
 * Close, that Health answers while a step is parked, a clean SIGTERM exit, and the
 * rows of the trace store. Exits 0 on success, 1 with a message on the first failure. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>
#include <sqlite3.h>

#include "data.h"
#include "ka_common.h"
#include "ka_nng_test.h"
#include "kernelarena.pb-c.h"

typedef Kernelarena__V1__Request Req;
typedef Kernelarena__V1__Response Resp;

static pid_t g_child = -1, g_child2 = -1;
static char g_tmp[256];

static void cleanup(void) {
  if (g_child > 0) {
    kill(g_child, SIGKILL);
    waitpid(g_child, NULL, 0);
  }
  if (g_child2 > 0) {
    kill(g_child2, SIGKILL);
    waitpid(g_child2, NULL, 0);
  }
  if (g_tmp[0] && !getenv("KA_KEEP_TMP")) ka_rmtree(g_tmp);
}

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static const char *code_name(int c) {
  static const char *n[] = {
      "UNSPECIFIED",        "INVALID_ARGUMENT", "NOT_FOUND",         "FAILED_PRECONDITION",
      "RESOURCE_EXHAUSTED", "UNAVAILABLE",      "DEADLINE_EXCEEDED", "INTERNAL",
      "MALFORMED",          "CAPACITY",         "UNIMPLEMENTED",     "CANCELLED",
      "PERMISSION_DENIED"};
  return c >= 0 && c < 13 ? n[c] : "?";
}

/* ---- sockets */

static void send_raw(nng_socket s, const void *p, size_t n) {
  int rv = nng_send(s, (void *)p, n, 0);
  CHECK(rv == 0, "send: %s", nng_strerror(rv));
}

static Resp *call(nng_socket s, Req *rq) {
  ka_nt_send_pb(s, &rq->base);
  Resp *r = ka_nt_recv_resp(s);
  CHECK(r->request_id == rq->request_id, "request_id %llu echoed as %llu",
        (unsigned long long)rq->request_id, (unsigned long long)r->request_id);
  return r;
}

static void expect_error(Resp *r, int code, int line) {
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR,
        "line %d: expected error %s, got body %d", line, code_name(code), r->body_case);
  CHECK((int)r->error->code == code, "line %d: expected %s, got %s: %s", line, code_name(code),
        code_name(r->error->code), r->error->message);
  printf("  ok: %s: %s\n", code_name(code), r->error->message);
}
#define EXPECT_ERROR(r, code) expect_error((r), KERNELARENA__V1__ERROR_CODE__##code, __LINE__)

static void free_resp(Resp *r) {
  kernelarena__v1__response__free_unpacked(r, NULL);
}

/* ---- requests */

static uint64_t g_rid = 1;

static Resp *do_health(nng_socket s) {
  Req rq = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__HealthRequest h = KERNELARENA__V1__HEALTH_REQUEST__INIT;
  rq.request_id = g_rid++;
  rq.body_case = KERNELARENA__V1__REQUEST__BODY_HEALTH;
  rq.health = &h;
  Resp *r = call(s, &rq);
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_HEALTH, "Health: body %d", r->body_case);
  return r;
}

static Resp *do_reset(nng_socket s, const char *task, int has_seed, uint64_t seed, const char *okey,
                      const char *oval) {
  Req rq = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__ResetRequest rr = KERNELARENA__V1__RESET_REQUEST__INIT;
  Kernelarena__V1__ResetRequest__OptionsEntry opt =
      KERNELARENA__V1__RESET_REQUEST__OPTIONS_ENTRY__INIT;
  Kernelarena__V1__ResetRequest__OptionsEntry *opts[1] = {&opt};
  rr.task_id = (char *)task;
  rr.seed = seed;
  rr.has_seed = has_seed;
  if (okey) {
    opt.key = (char *)okey;
    opt.value = (char *)oval;
    rr.n_options = 1;
    rr.options = opts;
  }
  rq.request_id = g_rid++;
  rq.body_case = KERNELARENA__V1__REQUEST__BODY_RESET;
  rq.reset = &rr;
  return call(s, &rq);
}

/* Fills rq (with sr and one file f) for a Step; not sent. */
static void make_step(Req *rq, Kernelarena__V1__StepRequest *sr, Kernelarena__V1__File *f,
                      Kernelarena__V1__File **fv, const char *ep, int expected, const char *path,
                      const void *data, size_t len) {
  kernelarena__v1__request__init(rq);
  kernelarena__v1__step_request__init(sr);
  kernelarena__v1__file__init(f);
  sr->episode_id = (char *)ep;
  sr->expected_step = expected;
  if (path) {
    f->path = (char *)path;
    f->content.data = (uint8_t *)data;
    f->content.len = len;
    fv[0] = f;
    sr->n_files = 1;
    sr->files = fv;
  }
  rq->request_id = g_rid++;
  rq->body_case = KERNELARENA__V1__REQUEST__BODY_STEP;
  rq->step = sr;
}

static void send_step(nng_socket s, const char *ep, int expected, const char *path, const char *src,
                      uint32_t deadline_ms, uint64_t *rid) {
  Req rq;
  Kernelarena__V1__StepRequest sr;
  Kernelarena__V1__File f, *fv[1];
  make_step(&rq, &sr, &f, fv, ep, expected, path, src, src ? strlen(src) : 0);
  rq.deadline_ms = deadline_ms;
  if (rid) *rid = rq.request_id;
  ka_nt_send_pb(s, &rq.base);
}

static Resp *do_step(nng_socket s, const char *ep, int expected, const char *path, const void *data,
                     size_t len) {
  Req rq;
  Kernelarena__V1__StepRequest sr;
  Kernelarena__V1__File f, *fv[1];
  make_step(&rq, &sr, &f, fv, ep, expected, path, data, len);
  return call(s, &rq);
}

static Resp *do_close(nng_socket s, const char *ep) {
  Req rq = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__CloseRequest cr = KERNELARENA__V1__CLOSE_REQUEST__INIT;
  cr.episode_id = (char *)ep;
  rq.request_id = g_rid++;
  rq.body_case = KERNELARENA__V1__REQUEST__BODY_CLOSE;
  rq.close = &cr;
  return call(s, &rq);
}

/* ---- the fake executor */

static Kernelarena__V1__Device g_dev = KERNELARENA__V1__DEVICE__INIT;

static const char *g_worker = "test-host/1/host:0";

static void exec_send(nng_socket e, const Kernelarena__V1__Result *result, uint32_t wait_ms) {
  Kernelarena__V1__ExecRequest er = KERNELARENA__V1__EXEC_REQUEST__INIT;
  Kernelarena__V1__WorkerPoll wp = KERNELARENA__V1__WORKER_POLL__INIT;
  wp.worker_id = (char *)g_worker;
  wp.device = &g_dev;
  wp.result = (Kernelarena__V1__Result *)result;
  wp.wait_ms = wait_ms;
  er.request_id = g_rid++;
  er.body_case = KERNELARENA__V1__EXEC_REQUEST__BODY_POLL;
  er.poll = &wp;
  ka_nt_send_pb(e, &er.base);
}

static Kernelarena__V1__ExecResponse *exec_recv(nng_socket e) {
  nng_msg *m;
  int rv = nng_recvmsg(e, &m, 0);
  CHECK(rv == 0, "executor recv: %s", nng_strerror(rv));
  Kernelarena__V1__ExecResponse *r =
      kernelarena__v1__exec_response__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
  nng_msg_free(m);
  CHECK(r, "undecodable ExecResponse");
  return r;
}

/* Polls and expects a job (returned; free with free_unpacked of *holder). */
static Kernelarena__V1__Job *exec_take(nng_socket e, Kernelarena__V1__ExecResponse **holder) {
  exec_send(e, NULL, 3000);
  Kernelarena__V1__ExecResponse *r = exec_recv(e);
  CHECK(r->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT && r->assignment->job,
        "expected a job, got body %d", r->body_case);
  *holder = r;
  return r->assignment->job;
}

static void exec_expect_empty(nng_socket e) {
  Kernelarena__V1__ExecResponse *r = exec_recv(e);
  CHECK(r->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT && !r->assignment->job,
        "expected an empty assignment, got body %d", r->body_case);
  kernelarena__v1__exec_response__free_unpacked(r, NULL);
}

/* ---- response helpers */

static double component(const Kernelarena__V1__StepResponse *s, const char *key) {
  for (size_t i = 0; i < s->n_reward_components; i++)
    if (!strcmp(s->reward_components[i]->key, key)) return s->reward_components[i]->value;
  CHECK(0, "reward component %s missing", key);
  return 0;
}

static const char *rinfo(const Kernelarena__V1__ResetResponse *r, const char *key) {
  for (size_t i = 0; i < r->n_info; i++)
    if (!strcmp(r->info[i]->key, key)) return r->info[i]->value;
  CHECK(0, "reset info %s missing", key);
  return NULL;
}

static const char *sinfo(const Kernelarena__V1__StepResponse *r, const char *key) {
  for (size_t i = 0; i < r->n_info; i++)
    if (!strcmp(r->info[i]->key, key)) return r->info[i]->value;
  CHECK(0, "step info %s missing", key);
  return NULL;
}

static char *slurp(const char *dir, const char *name) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  char *s = NULL;
  CHECK(ka_read_file(p, 0, &s, NULL) == KA_OK, "cannot read %s", p);
  return s;
}

static void expect_workspace(const char *ws, const char *gelu) {
  DIR *d = opendir(ws);
  CHECK(d, "workspace %s missing", ws);
  int n = 0, seen_src = 0, seen_prompt = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    n++;
    seen_src |= !strcmp(e->d_name, "gelu.c");
    seen_prompt |= !strcmp(e->d_name, "prompt.md");
    CHECK(!strcmp(e->d_name, "gelu.c") || !strcmp(e->d_name, "prompt.md"),
          "unexpected workspace entry %s", e->d_name);
  }
  closedir(d);
  CHECK(n == 2 && seen_src && seen_prompt, "workspace holds %d entries", n);
  char *cur = slurp(ws, "gelu.c");
  CHECK(!strcmp(cur, gelu), "workspace gelu.c changed unexpectedly");
  free(cur);
}

static double now_s(void) {
  return ka_now_s();
}

/* A canned Result: OK with the given speedups, or another status. */
static void make_result(Kernelarena__V1__Result *r, Kernelarena__V1__CaseResult *c,
                        Kernelarena__V1__CaseResult **cv, const char *job_id, int status) {
  kernelarena__v1__result__init(r);
  r->job_id = (char *)job_id;
  r->status = status;
  r->device = &g_dev;
  r->wall_s = 0.5;
  r->compile_s = 0.1;
  if (status == KERNELARENA__V1__STATUS__OK) {
    static const char *names[2] = {"n1M", "n2M"};
    static const double sp[2] = {1.2, 1.3};
    for (int i = 0; i < 2; i++) {
      kernelarena__v1__case_result__init(&c[i]);
      c[i].name = (char *)names[i];
      c[i].correct = 1;
      c[i].max_abs_err = 1e-7;
      c[i].baseline_ms = 2.0 * sp[i];
      c[i].candidate_ms = 2.0;
      c[i].speedup = sp[i];
      c[i].elements = 1 << 20;
      cv[i] = &c[i];
    }
    r->n_cases = 2;
    r->cases = cv;
    r->geomean_speedup = 1.25; /* canned, not sqrt(1.2*1.3): the server must use it */
  } else if (status == KERNELARENA__V1__STATUS__COMPILE_ERROR) {
    r->compile_log = "gelu.c:3: error: expected ';'";
  } else {
    r->message = "runner could not start";
  }
}

/* ---- phase 2: the rest of the protocol, on a second server with small limits */

static Resp *do_simple(nng_socket s, int body_case, void *body) {
  Req rq = KERNELARENA__V1__REQUEST__INIT;
  rq.request_id = g_rid++;
  rq.body_case = body_case;
  switch (body_case) {
    case KERNELARENA__V1__REQUEST__BODY_STATE:
      rq.state = body;
      break;
    case KERNELARENA__V1__REQUEST__BODY_CANCEL:
      rq.cancel = body;
      break;
    case KERNELARENA__V1__REQUEST__BODY_GET_EPISODE:
      rq.get_episode = body;
      break;
    case KERNELARENA__V1__REQUEST__BODY_LIST_EPISODES:
      rq.list_episodes = body;
      break;
    case KERNELARENA__V1__REQUEST__BODY_EVALUATE:
      rq.evaluate = body;
      break;
  }
  return call(s, &rq);
}

static Resp *do_state(nng_socket s, const char *ep) {
  Kernelarena__V1__StateRequest b = KERNELARENA__V1__STATE_REQUEST__INIT;
  b.episode_id = (char *)ep;
  Resp *r = do_simple(s, KERNELARENA__V1__REQUEST__BODY_STATE, &b);
  return r;
}

static Resp *do_cancel(nng_socket s, const char *ep) {
  Kernelarena__V1__CancelRequest b = KERNELARENA__V1__CANCEL_REQUEST__INIT;
  b.episode_id = (char *)ep;
  return do_simple(s, KERNELARENA__V1__REQUEST__BODY_CANCEL, &b);
}

static Resp *do_get(nng_socket s, const char *ep) {
  Kernelarena__V1__GetEpisodeRequest b = KERNELARENA__V1__GET_EPISODE_REQUEST__INIT;
  b.episode_id = (char *)ep;
  return do_simple(s, KERNELARENA__V1__REQUEST__BODY_GET_EPISODE, &b);
}

static void send_eval(nng_socket s, Kernelarena__V1__EvaluateRequest *ev, uint64_t *rid) {
  Req rq = KERNELARENA__V1__REQUEST__INIT;
  rq.request_id = g_rid++;
  rq.body_case = KERNELARENA__V1__REQUEST__BODY_EVALUATE;
  rq.evaluate = ev;
  *rid = rq.request_id;
  ka_nt_send_pb(s, &rq.base);
}

static int state_step(nng_socket s, const char *ep, int *inflight) {
  Resp *r = do_state(s, ep);
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_STATE, "state body %d", r->body_case);
  int st = r->state->step;
  if (inflight) *inflight = r->state->inflight_step;
  free_resp(r);
  return st;
}

static int health_queued(nng_socket s) {
  Resp *r = do_health(s);
  int q = r->health->queued_jobs;
  free_resp(r);
  return q;
}

/* Sends a heartbeat for job_id as worker wid; returns job_wanted. */
static int exec_heartbeat(nng_socket e, const char *wid, const char *job_id) {
  Kernelarena__V1__ExecRequest er = KERNELARENA__V1__EXEC_REQUEST__INIT;
  Kernelarena__V1__WorkerHeartbeat hb = KERNELARENA__V1__WORKER_HEARTBEAT__INIT;
  hb.worker_id = (char *)wid;
  hb.job_id = (char *)job_id;
  er.request_id = g_rid++;
  er.body_case = KERNELARENA__V1__EXEC_REQUEST__BODY_HEARTBEAT;
  er.heartbeat = &hb;
  ka_nt_send_pb(e, &er.base);
  Kernelarena__V1__ExecResponse *r = exec_recv(e);
  CHECK(r->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_HEARTBEAT, "heartbeat body %d",
        r->body_case);
  int wanted = r->heartbeat->job_wanted;
  kernelarena__v1__exec_response__free_unpacked(r, NULL);
  return wanted;
}

static void phase2(const char *bin, const char *tasks) {
  char state[512], env_url[600], exec_url[600], tok[600];
  snprintf(state, sizeof state, "%s/state2", g_tmp);
  snprintf(env_url, sizeof env_url, "ipc://%s/env.ipc", state);
  snprintf(exec_url, sizeof exec_url, "ipc://%s/exec.ipc", state);
  snprintf(tok, sizeof tok, "%s/admin.token", g_tmp);
  CHECK(ka_write_file(tok, "s3cret-token\n", 13) == KA_OK, "write token");
  g_child2 = fork();
  CHECK(g_child2 >= 0, "fork");
  if (g_child2 == 0) {
    execl(bin, bin, "--state", state, "--tasks", tasks, "--contexts", "2", "--max-episodes", "2",
          "--max-queued", "1", "--idle-ttl", "2", "--admin-token-file", tok, "--heartbeat-timeout",
          "1", (char *)NULL);
    perror("exec envserver");
    _exit(127);
  }
  nng_socket a = ka_nt_open_req(env_url), b = ka_nt_open_req(env_url), e = ka_nt_open_req(exec_url),
             e2 = ka_nt_open_req(exec_url);
  exec_send(e, NULL, 100);
  exec_expect_empty(e);
  Resp *r;
  const char *v1 = "/* v1 */\n";

  printf("phase 2: describe reports the limits and methods\n");
  {
    Req rq = KERNELARENA__V1__REQUEST__INIT;
    Kernelarena__V1__DescribeRequest d = KERNELARENA__V1__DESCRIBE_REQUEST__INIT;
    rq.request_id = g_rid++;
    rq.body_case = KERNELARENA__V1__REQUEST__BODY_DESCRIBE;
    rq.describe = &d;
    r = call(a, &rq);
    Kernelarena__V1__DescribeResponse *dr = r->describe;
    CHECK(dr->limits->max_episodes == 2 && dr->limits->max_queued_jobs == 1 &&
              dr->limits->idle_ttl_s == 2 && dr->held_out_scoring && dr->n_methods == 11,
          "describe limits");
    free_resp(r);
  }

  printf("phase 2: an unknown method is UNIMPLEMENTED\n");
  {
    /* request_id 77, then field 99 (varint 1): a method from a newer protocol */
    static const unsigned char m[] = {0x08, 77, 0x98, 0x06, 0x01};
    send_raw(a, m, sizeof m);
    r = ka_nt_recv_resp(a);
    EXPECT_ERROR(r, UNIMPLEMENTED);
    CHECK(r->request_id == 77, "id");
    free_resp(r);
  }

  printf("phase 2: capacity: a third open episode is refused, retryable, nothing lost\n");
  Resp *ra = do_reset(a, "host/gelu", 1, 11, "run", "p2");
  Resp *rb = do_reset(a, "host/gelu", 1, 12, "run", "p2");
  CHECK(ra->body_case == KERNELARENA__V1__RESPONSE__BODY_RESET &&
            rb->body_case == KERNELARENA__V1__RESPONSE__BODY_RESET,
        "two resets");
  const char *epa = ra->reset->episode_id, *epb = rb->reset->episode_id;
  r = do_reset(a, "host/gelu", 1, 13, NULL, NULL);
  EXPECT_ERROR(r, CAPACITY);
  CHECK(r->error->retryable, "CAPACITY must be retryable");
  free_resp(r);
  r = do_health(b);
  CHECK(r->health->open_episodes == 2, "open %d", r->health->open_episodes);
  free_resp(r);

  printf("phase 2: queue capacity: a second job is refused while one is queued\n");
  uint64_t rid;
  send_step(a, epa, 0, "gelu.c", v1, 0, &rid);
  /* wait until the server has queued a's job (a slow machine may take a while) */
  for (int i = 0; i < 100; i++) {
    r = do_health(b);
    int queued = r->health ? r->health->queued_jobs : 0;
    free_resp(r);
    if (queued >= 1) break;
    nng_msleep(50);
  }
  r = do_step(b, epb, 0, "gelu.c", v1, strlen(v1));
  EXPECT_ERROR(r, CAPACITY);
  CHECK(r->error->retryable, "retryable");
  free_resp(r);
  {
    Kernelarena__V1__EvaluateRequest ev = KERNELARENA__V1__EVALUATE_REQUEST__INIT;
    ev.task_id = "host/gelu";
    r = do_simple(b, KERNELARENA__V1__REQUEST__BODY_EVALUATE, &ev);
    EXPECT_ERROR(r, CAPACITY);
    free_resp(r);
  }
  int infl;
  CHECK(state_step(b, epb, &infl) == 0 && infl == 0, "refused step changed episode b");

  printf("phase 2: cancel a queued step: CANCELLED, not counted, idempotent\n");
  CHECK(state_step(b, epa, &infl) == 0 && infl == 1, "a in flight: %d", infl);
  r = do_cancel(b, epa);
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_CANCEL && r->cancel->cancelled &&
            r->cancel->step == 1,
        "cancel");
  free_resp(r);
  r = ka_nt_recv_resp(a);
  CHECK(r->request_id == rid, "cancelled step reply id");
  EXPECT_ERROR(r, CANCELLED);
  free_resp(r);
  r = do_cancel(b, epa);
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_CANCEL && !r->cancel->cancelled,
        "second cancel");
  free_resp(r);
  r = do_cancel(b, "ep-0000000000000000");
  EXPECT_ERROR(r, NOT_FOUND);
  free_resp(r);
  CHECK(state_step(b, epa, &infl) == 0 && infl == 0 && health_queued(b) == 0, "after cancel");
  exec_send(e, NULL, 100); /* the cancelled job is gone */
  exec_expect_empty(e);

  printf("phase 2: a running step's worker is lost; the job is re-dispatched\n");
  send_step(a, epa, 0, "gelu.c", v1, 0, &rid);
  Kernelarena__V1__ExecResponse *holder;
  Kernelarena__V1__Job *job = exec_take(e, &holder);
  char jid[64];
  snprintf(jid, sizeof jid, "%s", job->job_id);
  CHECK(exec_heartbeat(e, g_worker, jid) == 1, "heartbeat: job wanted");
  CHECK(exec_heartbeat(e, g_worker, "ep-x/9") == 0, "heartbeat for another job: not wanted");
  kernelarena__v1__exec_response__free_unpacked(holder, NULL);
  /* worker 1 goes silent; worker 2 polls and gets the same job after the timeout */
  const char *w1 = g_worker;
  g_worker = "test-host/2/host:0";
  double t0 = now_s();
  Kernelarena__V1__ExecResponse *h2 = NULL;
  while (now_s() - t0 < 10) {
    exec_send(e2, NULL, 500);
    h2 = exec_recv(e2);
    if (h2->assignment && h2->assignment->job) break;
    kernelarena__v1__exec_response__free_unpacked(h2, NULL);
    h2 = NULL;
  }
  CHECK(h2 && !strcmp(h2->assignment->job->job_id, jid), "job not re-dispatched");
  {
    Kernelarena__V1__Result res;
    Kernelarena__V1__CaseResult c[2], *cv[2];
    make_result(&res, c, cv, jid, KERNELARENA__V1__STATUS__OK);
    exec_send(e2, &res, 100);
  }
  kernelarena__v1__exec_response__free_unpacked(h2, NULL);
  r = ka_nt_recv_resp(a);
  CHECK(r->request_id == rid && r->body_case == KERNELARENA__V1__RESPONSE__BODY_STEP &&
            r->step->reward == 245.0,
        "re-dispatched step reply");
  free_resp(r);
  exec_expect_empty(e2);
  {
    /* worker 1 comes back with a late result: ignored, nothing recorded twice */
    g_worker = w1;
    Kernelarena__V1__Result res;
    make_result(&res, NULL, NULL, jid, KERNELARENA__V1__STATUS__COMPILE_ERROR);
    exec_send(e, &res, 100);
    exec_expect_empty(e);
  }

  printf("phase 2: a duplicate step is refused without a second evaluation\n");
  r = do_step(a, epa, 0, "gelu.c", v1, strlen(v1));
  EXPECT_ERROR(r, FAILED_PRECONDITION);
  free_resp(r);
  CHECK(health_queued(b) == 0 && state_step(b, epa, NULL) == 1, "duplicate changed something");
  exec_send(e, NULL, 100);
  exec_expect_empty(e);

  printf("phase 2: GetEpisode and ListEpisodes\n");
  r = do_get(b, epa);
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_GET_EPISODE, "get body %d", r->body_case);
  {
    Kernelarena__V1__EpisodeRecord *er = r->get_episode->episode;
    CHECK(!strcmp(er->id, epa) && er->seed == 11 && er->steps == 1 && er->n_step_records == 1 &&
              !strcmp(er->run_id, "p2") && !strcmp(er->env_version, KA_VERSION) &&
              !strcmp(er->task_id, "host/gelu") && *er->task_version,
          "episode record");
    Kernelarena__V1__StepRecord *sr = er->step_records[0];
    CHECK(sr->step == 1 && sr->reward == 245.0 && sr->status == 1 && sr->n_files == 1 &&
              sr->files[0]->content.len == strlen(v1) && sr->n_cases == 2 &&
              sr->n_reward_components >= 6 && !strcmp(sr->worker_id, "test-host/2/host:0"),
          "step record");
  }
  free_resp(r);
  r = do_get(b, "ep-0000000000000000");
  EXPECT_ERROR(r, NOT_FOUND);
  free_resp(r);
  {
    Kernelarena__V1__ListEpisodesRequest l = KERNELARENA__V1__LIST_EPISODES_REQUEST__INIT;
    l.run_id = "p2";
    l.limit = 1;
    r = do_simple(b, KERNELARENA__V1__REQUEST__BODY_LIST_EPISODES, &l);
    CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_LIST_EPISODES &&
              r->list_episodes->n_episodes == 1 && *r->list_episodes->next_page_token &&
              !strcmp(r->list_episodes->episodes[0]->id, epa),
          "list page 1");
    char tokn[32];
    snprintf(tokn, sizeof tokn, "%s", r->list_episodes->next_page_token);
    free_resp(r);
    l.page_token = tokn;
    r = do_simple(b, KERNELARENA__V1__REQUEST__BODY_LIST_EPISODES, &l);
    CHECK(r->list_episodes->n_episodes == 1 && !*r->list_episodes->next_page_token &&
              !strcmp(r->list_episodes->episodes[0]->id, epb),
          "list page 2");
    free_resp(r);
    l.page_token = "x";
    r = do_simple(b, KERNELARENA__V1__REQUEST__BODY_LIST_EPISODES, &l);
    EXPECT_ERROR(r, INVALID_ARGUMENT);
    free_resp(r);
  }

  printf("phase 2: held-out scoring needs the admin token\n");
  {
    Kernelarena__V1__EvaluateRequest ev = KERNELARENA__V1__EVALUATE_REQUEST__INIT;
    ev.episode_id = (char *)epa;
    ev.include_held_out = 1;
    r = do_simple(b, KERNELARENA__V1__REQUEST__BODY_EVALUATE, &ev);
    EXPECT_ERROR(r, PERMISSION_DENIED);
    free_resp(r);
    ev.admin_token = "s3cret-tokeN";
    r = do_simple(b, KERNELARENA__V1__REQUEST__BODY_EVALUATE, &ev);
    EXPECT_ERROR(r, PERMISSION_DENIED);
    free_resp(r);
    CHECK(health_queued(b) == 0, "a refused evaluation was queued");
    ev.admin_token = "s3cret-token";
    send_eval(a, &ev, &rid);
    job = exec_take(e, &holder);
    CHECK(job->include_held_out && !strncmp(job->job_id, "eval-", 5) &&
              job->seed == ka_mix64(11, 1) && job->n_files == 1 &&
              job->files[0]->content.len == strlen(v1),
          "held-out evaluation job");
    Kernelarena__V1__Result res;
    Kernelarena__V1__CaseResult c[3], *cv[3];
    make_result(&res, c, cv, job->job_id, KERNELARENA__V1__STATUS__OK);
    kernelarena__v1__case_result__init(&c[2]);
    c[2].name = "held";
    c[2].held_out = 1;
    c[2].correct = 1;
    c[2].speedup = 2.0;
    cv[2] = &c[2];
    res.n_cases = 3;
    exec_send(e, &res, 100);
    kernelarena__v1__exec_response__free_unpacked(holder, NULL);
    r = ka_nt_recv_resp(a);
    CHECK(r->request_id == rid && r->body_case == KERNELARENA__V1__RESPONSE__BODY_EVALUATE,
          "evaluate body %d", r->body_case);
    Kernelarena__V1__EvaluateResponse *er = r->evaluate;
    int held = 0;
    for (size_t i = 0; i < er->observation->n_cases; i++)
      held += er->observation->cases[i]->held_out;
    double hc = -1, hs = -1;
    for (size_t i = 0; i < er->n_reward_components; i++) {
      if (!strcmp(er->reward_components[i]->key, "held_out_correct"))
        hc = er->reward_components[i]->value;
      if (!strcmp(er->reward_components[i]->key, "held_out_speedup_geomean"))
        hs = er->reward_components[i]->value;
    }
    CHECK(er->reward == 245.0 && held == 1 && hc == 1 && hs == 2.0, "held-out result");
    free_resp(r);
    exec_expect_empty(e);

    printf("phase 2: without the token, held-out cases never come back\n");
    Kernelarena__V1__EvaluateRequest ev2 = KERNELARENA__V1__EVALUATE_REQUEST__INIT;
    Kernelarena__V1__File f = KERNELARENA__V1__FILE__INIT, *fv[1] = {&f};
    ev2.task_id = "host/gelu";
    ev2.seed = 5;
    ev2.has_seed = 1;
    f.path = "gelu.c";
    f.content.data = (uint8_t *)v1;
    f.content.len = strlen(v1);
    ev2.n_files = 1;
    ev2.files = fv;
    send_eval(a, &ev2, &rid);
    job = exec_take(e, &holder);
    CHECK(!job->include_held_out && job->seed == 5, "plain evaluation job");
    make_result(&res, c, cv, job->job_id, KERNELARENA__V1__STATUS__OK);
    cv[2] = &c[2];
    res.n_cases = 3; /* an executor that ran them anyway */
    exec_send(e, &res, 100);
    kernelarena__v1__exec_response__free_unpacked(holder, NULL);
    r = ka_nt_recv_resp(a);
    CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_EVALUATE &&
              r->evaluate->observation->n_cases == 2 && r->evaluate->seed == 5,
          "held-out case leaked");
    for (size_t i = 0; i < r->evaluate->n_reward_components; i++)
      CHECK(strncmp(r->evaluate->reward_components[i]->key, "held_out", 8), "held-out component");
    free_resp(r);
    exec_expect_empty(e);
    f.path = "../x.c";
    r = do_simple(b, KERNELARENA__V1__REQUEST__BODY_EVALUATE, &ev2);
    EXPECT_ERROR(r, INVALID_ARGUMENT);
    free_resp(r);
  }
  CHECK(state_step(b, epa, NULL) == 1, "evaluations changed the episode");

  printf("phase 2: leases: idle episodes are closed by the reaper (idle_ttl)\n");
  nng_msleep(3500);
  r = do_state(b, epb);
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_STATE && r->state->closed &&
            !strcmp(r->state->close_reason, "idle_ttl"),
        "episode b not reaped");
  free_resp(r);
  r = do_step(a, epb, 0, "gelu.c", v1, strlen(v1));
  EXPECT_ERROR(r, FAILED_PRECONDITION);
  free_resp(r);
  r = do_health(b);
  CHECK(r->health->open_episodes == 0, "open %d after reaping", r->health->open_episodes);
  /* reaped episodes are recorded closed in the trace store and leave the server's memory */
  CHECK(r->health->episodes_in_memory == 0, "%d episodes still in memory after reaping",
        r->health->episodes_in_memory);
  free_resp(r);
  r = do_cancel(b, epb);
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_CANCEL && !r->cancel->cancelled,
        "cancel of a reaped episode: nothing to cancel");
  free_resp(r);
  r = do_get(b, epa);
  CHECK(!strcmp(r->get_episode->episode->close_reason, "idle_ttl") &&
            r->get_episode->episode->closed_at > 0 && r->get_episode->episode->steps == 1,
        "reaped episode record");
  free_resp(r);

  free_resp(ra);
  free_resp(rb);
  nng_close(a);
  nng_close(b);
  nng_close(e);
  nng_close(e2);
  CHECK(kill(g_child2, SIGTERM) == 0, "kill");
  int status;
  CHECK(waitpid(g_child2, &status, 0) == g_child2, "waitpid");
  g_child2 = -1;
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "envserver 2 exit status %d", status);
}

/* ---- phase 3: reference prefetches (issue 15; Job.prefetch) */

/* A poll of worker wid that says whether it takes prefetches. */
static void exec_send_pf(nng_socket e, const char *wid, int prefetch,
                         const Kernelarena__V1__Result *result, uint32_t wait_ms) {
  Kernelarena__V1__ExecRequest er = KERNELARENA__V1__EXEC_REQUEST__INIT;
  Kernelarena__V1__WorkerPoll wp = KERNELARENA__V1__WORKER_POLL__INIT;
  wp.worker_id = (char *)wid;
  wp.device = &g_dev;
  wp.result = (Kernelarena__V1__Result *)result;
  wp.wait_ms = wait_ms;
  wp.prefetch = prefetch;
  er.request_id = g_rid++;
  er.body_case = KERNELARENA__V1__EXEC_REQUEST__BODY_POLL;
  er.poll = &wp;
  ka_nt_send_pb(e, &er.base);
}

/* Health's prefetch counters. */
static void health_pf(nng_socket s, long long *queued, long long *sent, long long *dropped) {
  Resp *r = do_health(s);
  *queued = r->health->prefetches_queued;
  *sent = r->health->prefetches_sent;
  *dropped = r->health->prefetches_dropped;
  free_resp(r);
}

/* Reset queues exactly one prefetch per episode, with the episode's seed, that only a
 * worker polling with WorkerPoll.prefetch gets, and only when no job is queued for it: a
 * step queued meanwhile goes first. A prefetch makes the worker hold nothing (its next
 * poll carries no result and loses no job), is never a step (State, Health), and one of
 * an episode closed, or stepped, before a worker was idle is dropped. */
static void phase3(const char *bin, const char *tasks) {
  char state[512], env_url[600], exec_url[600];
  snprintf(state, sizeof state, "%s/state3", g_tmp);
  snprintf(env_url, sizeof env_url, "ipc://%s/env.ipc", state);
  snprintf(exec_url, sizeof exec_url, "ipc://%s/exec.ipc", state);
  g_child2 = fork();
  CHECK(g_child2 >= 0, "fork");
  if (g_child2 == 0) {
    execl(bin, bin, "--state", state, "--tasks", tasks, "--contexts", "2", (char *)NULL);
    perror("exec envserver");
    _exit(127);
  }
  nng_socket a = ka_nt_open_req(env_url), b = ka_nt_open_req(env_url), e = ka_nt_open_req(exec_url);
  const char *wid = "test-host/3/host:0";
  exec_send_pf(e, wid, 0, NULL, 100); /* live, but takes no prefetches yet */
  exec_expect_empty(e);
  long long q, sent, dropped;

  printf("phase 3: Reset queues one prefetch per episode; a worker without the flag gets none\n");
  Resp *r1 = do_reset(a, "host/gelu", 1, 1111, NULL, NULL);
  Resp *r2 = do_reset(a, "host/gelu", 1, 2222, NULL, NULL);
  CHECK(r1->body_case == KERNELARENA__V1__RESPONSE__BODY_RESET &&
            r2->body_case == KERNELARENA__V1__RESPONSE__BODY_RESET,
        "two resets");
  const char *ep1 = r1->reset->episode_id, *ep2 = r2->reset->episode_id;
  health_pf(b, &q, &sent, &dropped);
  CHECK(q == 2 && sent == 0 && dropped == 0, "after two resets: queued %lld sent %lld dropped %lld",
        q, sent, dropped);
  exec_send_pf(e, wid, 0, NULL, 200);
  exec_expect_empty(e);

  printf("phase 3: a step queued behind the prefetches goes first\n");
  uint64_t step_rid;
  const char *src = "/* v1 */\n";
  send_step(b, ep1, 0, "gelu.c", src, 0, &step_rid);
  usleep(100 * 1000); /* the step is queued before the worker polls */
  Kernelarena__V1__ExecResponse *hold;
  exec_send_pf(e, wid, 1, NULL, 3000);
  hold = exec_recv(e);
  CHECK(hold->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT && hold->assignment->job,
        "expected the step's job");
  Kernelarena__V1__Job *job = hold->assignment->job;
  char step_job[128];
  snprintf(step_job, sizeof step_job, "%s/1", ep1);
  CHECK(!job->prefetch && !strcmp(job->job_id, step_job) && job->n_files > 0,
        "the worker got %s (prefetch %d), not the step %s", job->job_id, job->prefetch, step_job);
  Kernelarena__V1__Result res;
  Kernelarena__V1__CaseResult cr[2], *cv[2];
  make_result(&res, cr, cv, step_job, KERNELARENA__V1__STATUS__OK);
  res.attempt = job->attempt;

  printf(
      "phase 3: then the prefetch of the episode still before its first step, once, with "
      "its seed; the stepped episode's is dropped\n");
  exec_send_pf(e, wid, 1, &res, 3000); /* the step's result, and the next poll */
  kernelarena__v1__exec_response__free_unpacked(hold, NULL);
  Resp *sr = ka_nt_recv_resp(b);
  CHECK(sr->request_id == step_rid && sr->body_case == KERNELARENA__V1__RESPONSE__BODY_STEP &&
            sr->step->observation->step == 1,
        "the step's answer (body %d)", sr->body_case);
  free_resp(sr);
  const char *eps[1] = {ep2};
  const uint64_t seeds[1] = {2222};
  uint64_t pf_seed = 0; /* the prefetch's Job.seed: its first step's (es_step_seed) */
  for (int i = 0; i < 1; i++) {
    if (i) exec_send_pf(e, wid, 1, NULL, 3000); /* no result: it holds no job */
    hold = exec_recv(e);
    CHECK(
        hold->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT && hold->assignment->job,
        "expected prefetch %d", i);
    job = hold->assignment->job;
    char want[128];
    snprintf(want, sizeof want, "%s/prefetch", eps[i]);
    CHECK(job->prefetch && !strcmp(job->job_id, want) && !strcmp(job->task_id, "host/gelu") &&
              job->problem_seed == seeds[i] && job->n_files == 0,
          "prefetch %d: %s seed %llu files %zu", i, job->job_id,
          (unsigned long long)job->problem_seed, job->n_files);
    pf_seed = job->seed;
    kernelarena__v1__exec_response__free_unpacked(hold, NULL);
  }
  exec_send_pf(e, wid, 1, NULL, 300); /* no result: it holds no job */
  exec_expect_empty(e);               /* at most one per episode */
  health_pf(b, &q, &sent, &dropped);
  CHECK(q == 2 && sent == 1 && dropped == 1, "queued %lld sent %lld dropped %lld", q, sent,
        dropped);

  printf("phase 3: a step after a prefetch is dispatched as usual\n");
  send_step(b, ep2, 0, "gelu.c", src, 0, &step_rid);
  usleep(100 * 1000);
  exec_send_pf(e, wid, 1, NULL, 3000);
  hold = exec_recv(e);
  CHECK(hold->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT && hold->assignment->job,
        "expected ep2's step");
  job = hold->assignment->job;
  snprintf(step_job, sizeof step_job, "%s/1", ep2);
  CHECK(!job->prefetch && !strcmp(job->job_id, step_job), "ep2's step: %s", job->job_id);
  /* the same seeds as its prefetch, so that every input-seed derivation of an executor
   * (fixed inputs included: Job.seed alone) draws what the prefetch drew */
  CHECK(job->seed == pf_seed && job->problem_seed == 2222,
        "ep2's step: seed %#llx problem seed %llu; its prefetch had seed %#llx",
        (unsigned long long)job->seed, (unsigned long long)job->problem_seed,
        (unsigned long long)pf_seed);
  make_result(&res, cr, cv, step_job, KERNELARENA__V1__STATUS__OK);
  res.attempt = job->attempt;
  exec_send_pf(e, wid, 1, &res, 300);
  kernelarena__v1__exec_response__free_unpacked(hold, NULL);
  sr = ka_nt_recv_resp(b);
  CHECK(sr->request_id == step_rid && sr->body_case == KERNELARENA__V1__RESPONSE__BODY_STEP,
        "ep2's step answer (body %d)", sr->body_case);
  free_resp(sr);
  exec_expect_empty(e);
  Resp *st = do_state(a, ep1);
  CHECK(st->body_case == KERNELARENA__V1__RESPONSE__BODY_STATE && st->state->step == 1,
        "ep1: one step counted, not a prefetch (step %d)", (int)st->state->step);
  free_resp(st);
  st = do_state(a, ep2);
  CHECK(st->body_case == KERNELARENA__V1__RESPONSE__BODY_STATE && st->state->step == 1,
        "ep2: its prefetch is no step (step %d)", (int)st->state->step);
  free_resp(st);

  printf("phase 3: a prefetch of an episode closed before a worker was idle is dropped\n");
  Resp *r3 = do_reset(a, "host/gelu", 1, 3333, NULL, NULL);
  CHECK(r3->body_case == KERNELARENA__V1__RESPONSE__BODY_RESET, "reset 3");
  Resp *cl = do_close(a, r3->reset->episode_id);
  CHECK(cl->body_case == KERNELARENA__V1__RESPONSE__BODY_CLOSE, "close 3");
  free_resp(cl);
  exec_send_pf(e, wid, 1, NULL, 300);
  exec_expect_empty(e);
  health_pf(b, &q, &sent, &dropped);
  CHECK(q == 3 && sent == 1 && dropped == 2, "queued %lld sent %lld dropped %lld", q, sent,
        dropped);
  free_resp(r1);
  free_resp(r2);
  free_resp(r3);
  nng_close(a);
  nng_close(b);
  nng_close(e);
  CHECK(kill(g_child2, SIGTERM) == 0, "kill");
  int status;
  CHECK(waitpid(g_child2, &status, 0) == g_child2, "waitpid");
  g_child2 = -1;
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "envserver 3 exit status %d", status);
}

int main(int argc, char **argv) {
  CHECK(argc == 3, "usage: %s ENVSERVER TASKS_DIR", argv[0]);
  const char *bin = argv[1], *tasks = argv[2];
  atexit(cleanup);
  snprintf(g_tmp, sizeof g_tmp, "/tmp/ka-srvtest-XXXXXX");
  CHECK(mkdtemp(g_tmp), "mkdtemp");
  char state[512], env_url[600], exec_url[600], db[600];
  snprintf(state, sizeof state, "%s/state", g_tmp);
  snprintf(env_url, sizeof env_url, "ipc://%s/env.ipc", state);
  snprintf(exec_url, sizeof exec_url, "ipc://%s/exec.ipc", state);
  snprintf(db, sizeof db, "%s/trace.db", state);

  g_child = fork();
  CHECK(g_child >= 0, "fork");
  if (g_child == 0) {
    /* few contexts, so that parking must open more to keep serving */
    execl(bin, bin, "--state", state, "--tasks", tasks, "--contexts", "2", (char *)NULL);
    perror("exec envserver");
    _exit(127);
  }

  g_dev.backend = "host";
  g_dev.name = "fake host CPU";
  g_dev.arch = "x86_64";
  g_dev.multiprocessors = 8;
  g_dev.warp_size = 1;
  g_dev.memory_bytes = (int64_t)16 << 30;
  g_dev.l2_bytes = (int64_t)32 << 20;
  g_dev.shared_bytes_per_block = 48 << 10;
  g_dev.mem_bandwidth_gbps = 100;

  nng_socket a = ka_nt_open_req(env_url), b = ka_nt_open_req(env_url), e = ka_nt_open_req(exec_url);
  char *baseline = slurp(tasks, "host/gelu/baseline/gelu.c");
  char *prompt_md = slurp(tasks, "host/gelu/prompt.md");

  printf("health and reset before any executor\n");
  Resp *r = do_health(a);
  CHECK(r->health->ok && r->health->executors == 0, "health ok=%d executors=%d", r->health->ok,
        r->health->executors);
  free_resp(r);
  r = do_reset(a, "host/gelu", 1, 7, NULL, NULL);
  EXPECT_ERROR(r, UNAVAILABLE);
  CHECK(r->error->retryable, "no executor yet: UNAVAILABLE must be retryable");
  free_resp(r);

  printf("executor long poll expires with an empty assignment\n");
  double t0 = now_s();
  exec_send(e, NULL, 300);
  exec_expect_empty(e);
  double waited = now_s() - t0;
  CHECK(waited > 0.2 && waited < 5, "poll with wait_ms=300 came back after %.3f s", waited);

  printf("describe, list tasks\n");
  {
    Req rq = KERNELARENA__V1__REQUEST__INIT;
    Kernelarena__V1__DescribeRequest d = KERNELARENA__V1__DESCRIBE_REQUEST__INIT;
    rq.request_id = g_rid++;
    rq.body_case = KERNELARENA__V1__REQUEST__BODY_DESCRIBE;
    rq.describe = &d;
    r = call(a, &rq);
    CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_DESCRIBE, "describe body %d",
          r->body_case);
    Kernelarena__V1__DescribeResponse *dr = r->describe;
    CHECK(!strcmp(dr->protocol_version, "kernelarena.v1"), "protocol %s", dr->protocol_version);
    CHECK(!strcmp(dr->env_version, KA_VERSION), "env_version %s", dr->env_version);
    CHECK(*dr->code_hash, "empty code hash");
    CHECK(dr->n_devices == 1 && !strcmp(dr->devices[0]->backend, "host") &&
              !strcmp(dr->devices[0]->name, "fake host CPU"),
          "devices: %zu", dr->n_devices);
    CHECK(!strcmp(dr->reward_function, "agentkernelarena"), "reward fn %s", dr->reward_function);
    CHECK(dr->n_reward_components >= 4, "components %zu", dr->n_reward_components);
    CHECK(dr->limits && dr->limits->max_file_bytes == 1 << 20 &&
              dr->limits->max_total_bytes == 4 << 20 && dr->limits->max_steps == 10,
          "limits");
    free_resp(r);

    Kernelarena__V1__ListTasksRequest lt = KERNELARENA__V1__LIST_TASKS_REQUEST__INIT;
    rq.request_id = g_rid++;
    rq.body_case = KERNELARENA__V1__REQUEST__BODY_LIST_TASKS;
    rq.list_tasks = &lt;
    r = call(a, &rq);
    CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_LIST_TASKS, "list body %d", r->body_case);
    int found = 0;
    for (size_t i = 0; i < r->list_tasks->n_tasks; i++) {
      Kernelarena__V1__TaskInfo *ti = r->list_tasks->tasks[i];
      if (strcmp(ti->id, "host/gelu")) continue;
      found = 1;
      CHECK(!strcmp(ti->mode, "module") && !strcmp(ti->language, "c"), "host/gelu mode/lang");
      CHECK(ti->n_editable_files == 1 && !strcmp(ti->editable_files[0], "gelu.c"), "editable");
      CHECK(ti->shown_cases == 2 && ti->held_out_cases == 1, "cases %d/%d", ti->shown_cases,
            ti->held_out_cases);
      CHECK(ti->n_backends >= 1 && !strcmp(ti->backends[0], "host"), "backends");
      CHECK(strlen(ti->version) > 0, "version");
    }
    CHECK(found && r->list_tasks->n_tasks >= 3, "host/gelu not listed (%zu tasks)",
          r->list_tasks->n_tasks);
    free_resp(r);
  }

  printf("reset refusals\n");
  r = do_reset(a, "cuda2cuda/gelu", 1, 7, NULL, NULL);
  EXPECT_ERROR(r, UNAVAILABLE);
  CHECK(!r->error->retryable, "executors exist but none has cuda: not retryable");
  CHECK(strstr(r->error->message, "host/gelu") && strstr(r->error->message, "cuda") &&
            strstr(r->error->message, "offer: host"),
        "message: %s", r->error->message);
  free_resp(r);
  r = do_reset(a, "nope/none", 1, 7, NULL, NULL);
  EXPECT_ERROR(r, NOT_FOUND);
  CHECK(!strstr(r->error->message, "host/gelu"), "NOT_FOUND lists tasks: %s", r->error->message);
  free_resp(r);
  r = do_reset(a, "host/gelu", 1, 7, "max_steps", "ten");
  EXPECT_ERROR(r, INVALID_ARGUMENT);
  free_resp(r);
  r = do_reset(a, "host/gelu", 1, 7, "colour", "blue");
  EXPECT_ERROR(r, INVALID_ARGUMENT);
  free_resp(r);

  printf("reset host/gelu seed 7\n");
  Resp *reset = do_reset(a, "host/gelu", 1, 7, "label", "protocol-test");
  CHECK(reset->body_case == KERNELARENA__V1__RESPONSE__BODY_RESET, "reset body %d%s%s",
        reset->body_case, reset->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR ? ": " : "",
        reset->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR ? reset->error->message : "");
  Kernelarena__V1__ResetResponse *rr = reset->reset;
  const char *ep = rr->episode_id;
  CHECK(strlen(ep) == 19 && !strncmp(ep, "ep-", 3), "episode id %s", ep);
  CHECK(rr->seed == 7, "seed %llu", (unsigned long long)rr->seed);
  Kernelarena__V1__Observation *ob = rr->observation;
  CHECK(!strncmp(ob->prompt, prompt_md, strlen(prompt_md)), "prompt does not start with prompt.md");
  CHECK(strstr(ob->prompt, "## Device") && strstr(ob->prompt, "fake host CPU") &&
            strstr(ob->prompt, "## Rules") && strstr(ob->prompt, "120 + 100") &&
            strstr(ob->prompt, "10 steps"),
        "prompt sections missing:\n%s", ob->prompt);
  CHECK(ob->step == 0 && ob->n_files == 1 && !strcmp(ob->files[0]->path, "gelu.c") &&
            ob->files[0]->content.len == strlen(baseline) &&
            !memcmp(ob->files[0]->content.data, baseline, strlen(baseline)),
        "reset files");
  CHECK(ob->device && !strcmp(ob->device->name, "fake host CPU"), "reset device");
  const char *ws = rinfo(rr, "workspace");
  CHECK(!strcmp(rinfo(rr, "max_steps"), "10"), "max_steps info");
  CHECK(strlen(rinfo(rr, "task_version")) > 0, "task_version info");
  expect_workspace(ws, baseline);
  char *ws_prompt = slurp(ws, "prompt.md");
  CHECK(!strcmp(ws_prompt, ob->prompt), "workspace prompt.md differs from the observation");
  free(ws_prompt);

  printf("step refusals change nothing\n");
  const char *v1 =
      "/* v1 */\n#include <math.h>\nvoid gelu_forward(const float *x, float *y, "
      "long long n) { for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f "
      "+ erff(x[i] * 0.70710678f)); }\n";
  r = do_step(a, ep, 0, "other.c", v1, strlen(v1));
  EXPECT_ERROR(r, INVALID_ARGUMENT);
  CHECK(strstr(r->error->message, "other.c") && strstr(r->error->message, "gelu.c"), "%s",
        r->error->message);
  free_resp(r);
  r = do_step(a, ep, 0, "../gelu.c", v1, strlen(v1));
  EXPECT_ERROR(r, INVALID_ARGUMENT);
  free_resp(r);
  r = do_step(a, ep, 0, "prompt.md", v1, strlen(v1));
  EXPECT_ERROR(r, INVALID_ARGUMENT);
  free_resp(r);
  {
    size_t big = 7u << 20; /* under the socket's limit (8 MiB), over a request's (5) */
    char *huge = malloc(big);
    CHECK(huge, "malloc");
    memset(huge, ' ', big);
    r = do_step(a, ep, 0, "gelu.c", huge, big);
    free(huge);
    EXPECT_ERROR(r, RESOURCE_EXHAUSTED);
    free_resp(r);
  }
  r = do_step(a, "ep-0000000000000000", 0, "gelu.c", v1, strlen(v1));
  EXPECT_ERROR(r, NOT_FOUND);
  free_resp(r);
  r = do_step(a, ep, 1, "gelu.c", v1, strlen(v1));
  EXPECT_ERROR(r, FAILED_PRECONDITION);
  free_resp(r);
  {
    static const unsigned char junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0xff, 0x01, 0x02};
    send_raw(a, junk, sizeof junk);
    r = ka_nt_recv_resp(a);
    EXPECT_ERROR(r, MALFORMED);
    free_resp(r);
    send_raw(a, "", 0);
    r = ka_nt_recv_resp(a);
    EXPECT_ERROR(r, MALFORMED);
    free_resp(r);
    /* A valid Step cut in the middle of its file: the request_id still comes back. */
    Req rq;
    Kernelarena__V1__StepRequest sr;
    Kernelarena__V1__File f, *fv[1];
    make_step(&rq, &sr, &f, fv, ep, 0, "gelu.c", v1, strlen(v1));
    rq.request_id = 4242;
    size_t n = kernelarena__v1__request__get_packed_size(&rq);
    uint8_t *buf = malloc(n);
    kernelarena__v1__request__pack(&rq, buf);
    send_raw(a, buf, n - 40);
    free(buf);
    r = ka_nt_recv_resp(a);
    EXPECT_ERROR(r, MALFORMED);
    CHECK(r->request_id == 4242, "truncated request's id came back as %llu",
          (unsigned long long)r->request_id);
    free_resp(r);
  }
  expect_workspace(ws, baseline);
  r = do_health(b);
  CHECK(r->health->open_episodes == 1 && r->health->queued_jobs == 0 &&
            r->health->running_jobs == 0 && r->health->executors == 1,
        "health after refusals: open %d queued %d running %d executors %d",
        r->health->open_episodes, r->health->queued_jobs, r->health->running_jobs,
        r->health->executors);
  free_resp(r);

  printf("step 1: OK with speedup 1.25 while Health answers\n");
  uint64_t rid;
  send_step(a, ep, 0, "gelu.c", v1, 0, &rid);
  nng_msleep(100);
  r = do_health(b); /* the step is parked: no executor has polled */
  CHECK(r->health->queued_jobs == 1 && r->health->running_jobs == 0,
        "health while parked: queued %d running %d", r->health->queued_jobs,
        r->health->running_jobs);
  free_resp(r);
  Kernelarena__V1__ExecResponse *holder;
  Kernelarena__V1__Job *job = exec_take(e, &holder);
  char want_id[64];
  snprintf(want_id, sizeof want_id, "%s/1", ep);
  CHECK(!strcmp(job->job_id, want_id), "job id %s", job->job_id);
  CHECK(!strcmp(job->task_id, "host/gelu") && !strcmp(job->task_version, rinfo(rr, "task_version")),
        "job task");
  CHECK(job->seed == ka_mix64(7, 1), "job seed");
  CHECK(job->n_files == 1 && !strcmp(job->files[0]->path, "gelu.c") &&
            job->files[0]->content.len == strlen(v1) &&
            !memcmp(job->files[0]->content.data, v1, strlen(v1)),
        "job files");
  CHECK(!job->include_held_out && job->timeout_s == 60 && job->warmup == 3 && job->reps == 20,
        "job parameters");
  r = do_health(b);
  CHECK(r->health->queued_jobs == 0 && r->health->running_jobs == 1, "health while running");
  free_resp(r);
  {
    Kernelarena__V1__Result res;
    Kernelarena__V1__CaseResult c[2], *cv[2];
    make_result(&res, c, cv, job->job_id, KERNELARENA__V1__STATUS__OK);
    exec_send(e, &res, 300);
  }
  kernelarena__v1__exec_response__free_unpacked(holder, NULL);
  r = ka_nt_recv_resp(a);
  CHECK(r->request_id == rid, "step reply id");
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_STEP, "step body %d: %s", r->body_case,
        r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR ? r->error->message : "");
  Kernelarena__V1__StepResponse *st = r->step;
  CHECK(st->reward == 245.0, "reward %.6f, want 245", st->reward);
  CHECK(component(st, "compiled") == 1 && component(st, "correct") == 1 &&
            component(st, "speedup_geomean") == 1.25 && component(st, "speedup/n1M") == 1.2 &&
            component(st, "speedup/n2M") == 1.3 && component(st, "status") == 1,
        "components");
  CHECK(!st->terminated && !st->truncated, "terminated/truncated");
  CHECK(st->observation->step == 1 && st->observation->status == KERNELARENA__V1__STATUS__OK &&
            st->observation->n_cases == 2,
        "observation");
  CHECK(st->observation->n_files == 1 && st->observation->files[0]->content.len == strlen(v1),
        "observation files");
  CHECK(!strcmp(sinfo(st, "job_id"), want_id) &&
            !strcmp(sinfo(st, "worker_id"), "test-host/1/host:0"),
        "step info");
  free_resp(r);
  exec_expect_empty(e);
  expect_workspace(ws, v1);

  printf("step 2: a second concurrent step is refused; COMPILE_ERROR scores 0\n");
  const char *v2 = "void gelu_forward(const float *x, float *y, long long n) { oops }\n";
  send_step(a, ep, 1, "gelu.c", v2, 0, &rid);
  nng_msleep(100);
  r = do_step(b, ep, 1, "gelu.c", v2, strlen(v2));
  EXPECT_ERROR(r, FAILED_PRECONDITION);
  free_resp(r);
  job = exec_take(e, &holder);
  snprintf(want_id, sizeof want_id, "%s/2", ep);
  CHECK(!strcmp(job->job_id, want_id), "job id %s", job->job_id);
  CHECK(job->seed == ka_mix64(7, 2), "job seed 2");
  {
    Kernelarena__V1__Result res;
    make_result(&res, NULL, NULL, job->job_id, KERNELARENA__V1__STATUS__COMPILE_ERROR);
    exec_send(e, &res, 200);
  }
  kernelarena__v1__exec_response__free_unpacked(holder, NULL);
  r = ka_nt_recv_resp(a);
  CHECK(r->request_id == rid && r->body_case == KERNELARENA__V1__RESPONSE__BODY_STEP,
        "step 2 body %d", r->body_case);
  st = r->step;
  CHECK(st->reward == 0.0 && component(st, "compiled") == 0 && component(st, "correct") == 0 &&
            component(st, "status") == 2,
        "compile error reward %.3f", st->reward);
  CHECK(st->observation->step == 2 && strstr(st->observation->compile_log, "expected ';'"),
        "compile log");
  free_resp(r);
  exec_expect_empty(e);
  expect_workspace(ws, v2);

  printf("step 3: INFRA_ERROR is a retryable error and is not counted\n");
  send_step(a, ep, 2, "gelu.c", v1, 0, &rid);
  job = exec_take(e, &holder);
  {
    Kernelarena__V1__Result res;
    make_result(&res, NULL, NULL, job->job_id, KERNELARENA__V1__STATUS__INFRA_ERROR);
    exec_send(e, &res, 200);
  }
  kernelarena__v1__exec_response__free_unpacked(holder, NULL);
  r = ka_nt_recv_resp(a);
  EXPECT_ERROR(r, INTERNAL);
  CHECK(r->error->retryable, "INFRA_ERROR must be retryable");
  free_resp(r);
  exec_expect_empty(e);
  expect_workspace(ws, v2);
  r = do_step(a, ep, 3, "gelu.c", v1, strlen(v1));
  EXPECT_ERROR(r, FAILED_PRECONDITION); /* still 2 steps taken */
  free_resp(r);

  printf("step 3 again: the executor polls without the result of the job it holds\n");
  send_step(a, ep, 2, "gelu.c", v1, 0, &rid);
  job = exec_take(e, &holder);
  kernelarena__v1__exec_response__free_unpacked(holder, NULL);
  exec_send(e, NULL, 200); /* as after a restart: the job is lost */
  r = ka_nt_recv_resp(a);
  EXPECT_ERROR(r, INTERNAL);
  CHECK(r->error->retryable && r->request_id == rid, "dropped job reply");
  free_resp(r);
  exec_expect_empty(e);
  expect_workspace(ws, v2);

  printf("step 3 again with a deadline and no executor polling\n");
  send_step(a, ep, 2, "gelu.c", v1, 300, &rid);
  r = ka_nt_recv_resp(a);
  EXPECT_ERROR(r, DEADLINE_EXCEEDED);
  CHECK(r->error->retryable && r->request_id == rid, "deadline reply");
  free_resp(r);
  exec_send(e, NULL, 200); /* the abandoned job is gone from the queue */
  exec_expect_empty(e);
  expect_workspace(ws, v2);

  printf("step limit\n");
  Resp *reset2 = do_reset(a, "host/gelu", 0, 0, "max_steps", "1");
  CHECK(reset2->body_case == KERNELARENA__V1__RESPONSE__BODY_RESET, "reset2");
  const char *ep2 = reset2->reset->episode_id;
  CHECK(strcmp(ep2, ep), "episode ids repeat");
  exec_send(e, NULL, 5000); /* the worker waits first: the step must wake its poll */
  nng_msleep(100);
  t0 = now_s();
  send_step(a, ep2, 0, NULL, NULL, 0, &rid); /* no files: evaluate the baseline */
  holder = exec_recv(e);
  CHECK(holder->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT &&
            holder->assignment->job && now_s() - t0 < 2.0,
        "a parked poll was not handed the new job at once");
  job = holder->assignment->job;
  CHECK(job->n_files == 1 && job->files[0]->content.len == strlen(baseline), "baseline job");
  {
    Kernelarena__V1__Result res;
    Kernelarena__V1__CaseResult c[2], *cv[2];
    make_result(&res, c, cv, job->job_id, KERNELARENA__V1__STATUS__OK);
    exec_send(e, &res, 200);
  }
  kernelarena__v1__exec_response__free_unpacked(holder, NULL);
  r = ka_nt_recv_resp(a);
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_STEP && r->step->truncated,
        "last step must be truncated");
  free_resp(r);
  exec_expect_empty(e);
  r = do_step(a, ep2, 1, NULL, NULL, 0);
  EXPECT_ERROR(r, FAILED_PRECONDITION);
  free_resp(r);

  printf("close\n");
  int steps_before_close = state_step(a, ep, NULL);
  r = do_close(a, ep);
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_CLOSE && r->close->was_open, "close");
  free_resp(r);
  r = do_close(a, ep);
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_CLOSE && !r->close->was_open,
        "close twice");
  free_resp(r);
  r = do_step(a, ep, 2, "gelu.c", v1, strlen(v1));
  EXPECT_ERROR(r, FAILED_PRECONDITION);
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR &&
            strstr(r->error->message, "is closed (closed)"),
        "step of a closed episode names why: %s",
        r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR ? r->error->message : "?");
  free_resp(r);
  /* the closed episode left the server's memory; State reads it from the trace store */
  r = do_state(a, ep);
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_STATE && r->state->closed &&
            !strcmp(r->state->close_reason, "closed") && r->state->step == steps_before_close &&
            steps_before_close >= 1 && r->state->n_files == 0 && r->state->expires_in_s == -1 &&
            !strcmp(r->state->task_id, "host/gelu"),
        "state of a closed episode from the store");
  free_resp(r);
  r = do_close(a, "ep-ffffffffffffffff");
  EXPECT_ERROR(r, NOT_FOUND);
  free_resp(r);
  r = do_state(a, "ep-ffffffffffffffff");
  EXPECT_ERROR(r, NOT_FOUND);
  free_resp(r);
  r = do_health(b);
  CHECK(r->health->open_episodes == 1, "open episodes %d", r->health->open_episodes);
  CHECK(r->health->episodes_in_memory == 1, "episodes in memory %d (the closed one not evicted)",
        r->health->episodes_in_memory);
  free_resp(r);

  printf("close while a step is in flight: the step is cancelled, the episode leaves memory\n");
  {
    Resp *reset3 = do_reset(a, "host/gelu", 0, 0, NULL, NULL);
    CHECK(reset3->body_case == KERNELARENA__V1__RESPONSE__BODY_RESET, "reset3");
    const char *ep3 = reset3->reset->episode_id;
    exec_send(e, NULL, 5000);
    nng_msleep(100);
    send_step(a, ep3, 0, NULL, NULL, 0, &rid);
    Kernelarena__V1__ExecResponse *h3 = exec_recv(e);
    CHECK(h3->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT && h3->assignment->job,
          "in-flight job handed out");
    r = do_close(b, ep3);
    CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_CLOSE && r->close->was_open,
          "close with a step in flight");
    free_resp(r);
    r = ka_nt_recv_resp(a);
    CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR && r->request_id == rid &&
              r->error->code == KERNELARENA__V1__ERROR_CODE__CANCELLED && !r->error->retryable,
          "the in-flight step of the closed episode is answered CANCELLED");
    free_resp(r);
    r = do_health(b);
    CHECK(r->health->open_episodes == 1 && r->health->episodes_in_memory == 1 &&
              r->health->running_jobs == 0,
          "closed with a step in flight: cancelled, evicted (open %d, in memory %d, running %d)",
          r->health->open_episodes, r->health->episodes_in_memory, r->health->running_jobs);
    free_resp(r);
    if (h3->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT && h3->assignment->job) {
      Kernelarena__V1__Result res;
      Kernelarena__V1__CaseResult c[2], *cv[2];
      make_result(&res, c, cv, h3->assignment->job->job_id, KERNELARENA__V1__STATUS__OK);
      exec_send(e, &res, 200);
    }
    kernelarena__v1__exec_response__free_unpacked(h3, NULL);
    exec_expect_empty(e); /* its late result is dropped */
    r = do_health(b);
    CHECK(r->health->open_episodes == 1 && r->health->episodes_in_memory == 1,
          "after the late result: open %d, in memory %d (want 1, 1)", r->health->open_episodes,
          r->health->episodes_in_memory);
    free_resp(r);
    r = do_state(b, ep3);
    CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_STATE && r->state->closed &&
              r->state->step == 0 && !strcmp(r->state->close_reason, "closed"),
          "state of the evicted episode from the store: the cancelled step was not counted");
    free_resp(r);
    r = do_cancel(b, ep3);
    CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_CANCEL && !r->cancel->cancelled,
          "cancel of an evicted episode: nothing to cancel");
    free_resp(r);
    free_resp(reset3);
  }

  printf("executor protocol refusals\n");
  {
    send_raw(e, "\x0a\xff", 2);
    Kernelarena__V1__ExecResponse *er = exec_recv(e);
    CHECK(er->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ERROR &&
              er->error->code == KERNELARENA__V1__ERROR_CODE__MALFORMED,
          "malformed poll");
    kernelarena__v1__exec_response__free_unpacked(er, NULL);
  }

  printf("SIGTERM\n");
  char epid[32];
  snprintf(epid, sizeof epid, "%s", ep);
  free_resp(reset);
  free_resp(reset2);
  nng_close(a);
  nng_close(b);
  nng_close(e);
  CHECK(kill(g_child, SIGTERM) == 0, "kill");
  int status;
  CHECK(waitpid(g_child, &status, 0) == g_child, "waitpid");
  g_child = -1;
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "envserver exit status %d", status);

  printf("trace store\n");
  sqlite3 *sq;
  CHECK(sqlite3_open_v2(db, &sq, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK, "open %s", db);
  sqlite3_stmt *q;
#define QUERY(sql)                                                             \
  CHECK(sqlite3_prepare_v2(sq, sql, -1, &q, NULL) == SQLITE_OK, "%s: %s", sql, \
        sqlite3_errmsg(sq));                                                   \
  sqlite3_bind_text(q, 1, epid, -1, SQLITE_STATIC)
  QUERY(
      "SELECT step, status, reward, geomean_speedup, worker_id, device_name, result_pb "
      "FROM steps WHERE episode_id = ?1 ORDER BY step");
  CHECK(sqlite3_step(q) == SQLITE_ROW, "step 1 row");
  CHECK(sqlite3_column_int(q, 0) == 1 && sqlite3_column_int(q, 1) == 1 &&
            sqlite3_column_double(q, 2) == 245.0 && sqlite3_column_double(q, 3) == 1.25 &&
            !strcmp((const char *)sqlite3_column_text(q, 4), "test-host/1/host:0") &&
            !strcmp((const char *)sqlite3_column_text(q, 5), "fake host CPU"),
        "step 1 values");
  {
    Kernelarena__V1__Result *res = kernelarena__v1__result__unpack(
        NULL, (size_t)sqlite3_column_bytes(q, 6), sqlite3_column_blob(q, 6));
    CHECK(res && res->n_cases == 2 && !strncmp(res->job_id, epid, strlen(epid)), "result_pb");
    kernelarena__v1__result__free_unpacked(res, NULL);
  }
  CHECK(sqlite3_step(q) == SQLITE_ROW, "step 2 row");
  CHECK(sqlite3_column_int(q, 0) == 2 && sqlite3_column_int(q, 1) == 2 &&
            sqlite3_column_double(q, 2) == 0.0,
        "step 2 values");
  CHECK(sqlite3_step(q) == SQLITE_DONE, "more than 2 steps recorded (refused/failed counted?)");
  sqlite3_finalize(q);

  char hex[65];
  ka_sha256_hex(v1, strlen(v1), hex);
  QUERY(
      "SELECT f.path, f.sha256, b.size, b.content FROM step_files f JOIN blobs b "
      "ON b.sha256 = f.sha256 WHERE f.episode_id = ?1 AND f.step = 1");
  CHECK(sqlite3_step(q) == SQLITE_ROW, "step_files row");
  CHECK(!strcmp((const char *)sqlite3_column_text(q, 0), "gelu.c") &&
            !strcmp((const char *)sqlite3_column_text(q, 1), hex) &&
            sqlite3_column_int(q, 2) == (int)strlen(v1) &&
            !memcmp(sqlite3_column_blob(q, 3), v1, strlen(v1)),
        "step_files / blobs content");
  sqlite3_finalize(q);

  QUERY(
      "SELECT value FROM step_components WHERE episode_id = ?1 AND step = 1 AND "
      "key = 'speedup/n1M'");
  CHECK(sqlite3_step(q) == SQLITE_ROW && sqlite3_column_double(q, 0) == 1.2, "component row");
  sqlite3_finalize(q);
  QUERY("SELECT count(*) FROM step_cases WHERE episode_id = ?1 AND step = 1");
  CHECK(sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) == 2, "step_cases rows");
  sqlite3_finalize(q);
  QUERY(
      "SELECT e.seed, e.closed_at IS NOT NULL, e.run_id, r.label, e.max_steps FROM episodes e "
      "JOIN runs r ON r.id = e.run_id WHERE e.id = ?1");
  CHECK(sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int64(q, 0) == 7 &&
            sqlite3_column_int(q, 1) == 1 &&
            !strcmp((const char *)sqlite3_column_text(q, 2), "default") &&
            !strcmp((const char *)sqlite3_column_text(q, 3), "protocol-test") &&
            sqlite3_column_int(q, 4) == 10,
        "episode row");
  sqlite3_finalize(q);
  QUERY("SELECT version FROM schema_version WHERE ?1 IS NOT NULL");
  CHECK(sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) == 3, "schema_version");
  sqlite3_finalize(q);
  sqlite3_close(sq);

  free(baseline);
  free(prompt_md);
  phase2(bin, tasks);
  phase3(bin, tasks);
  printf("server_protocol: all checks passed\n");
  return 0;
}
