/* dispatch_test: how envserver hands jobs to executors that come and go (issue 20 item 2,
 * docs/protocol.md "Dispatch"). Starts the real envserver (heartbeat timeout 1 s) and
 * plays several executors, each a REQ socket of its own on the executor endpoint:
 *
 *  1. a lost executor's job is re-dispatched once, with a new dispatch token
 *     (Job.attempt 2); the lost executor's late result (attempt 1) is dropped, and so is
 *     a replay of it after the job came back to the same worker; a heartbeat for the
 *     superseded attempt is told the job is not wanted; the step is recorded once, with
 *     the result of attempt 2, and marked re-dispatched (steps.attempt = 2); Health
 *     counts one re-dispatch and two stale results
 *  2. a job whose second dispatch is lost too fails (retryable, not counted): it is
 *     never dispatched a third time
 *  3. least-busy: with device A (two slots) running a job and device B (one slot) idle,
 *     the next job goes to B, though A's second slot polled first
 *
 *   dispatch_test ENVSERVER_BINARY TASKS_DIR
 * Exits 0, or 1 with a message at the first failed check. */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "ka_common.h"
#include "ka_nng_test.h"
#include "kernelarena.pb-c.h"

typedef Kernelarena__V1__Request Req;
typedef Kernelarena__V1__Response Resp;
typedef Kernelarena__V1__ExecResponse ExecResp;

static pid_t g_child = -1;
static char g_tmp[256];
static uint64_t g_rid = 1;
static Kernelarena__V1__Device g_dev = KERNELARENA__V1__DEVICE__INIT;
static nng_socket g_hs; /* Health requests: a socket of their own (a REQ socket has one
                          request at a time, and the others wait on steps) */

static void cleanup(void) {
  if (g_child > 0) {
    kill(g_child, SIGKILL);
    waitpid(g_child, NULL, 0);
  }
  if (g_tmp[0] && !getenv("KA_KEEP_TMP")) ka_rmtree(g_tmp);
}

/* REQUIRE: plumbing that must work; CHECK: an assertion of the test, printed when met. */
#define REQUIRE(cond, ...)                                                     \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)
#define CHECK(cond, ...)        \
  do {                          \
    REQUIRE(cond, __VA_ARGS__); \
    printf("  ok: ");           \
    printf(__VA_ARGS__);        \
    printf("\n");               \
    fflush(stdout);             \
  } while (0)

/* ---- sockets and messages */

/* The error message of a response, "" when it holds no error (body is a oneof). */
static const char *errmsg(const Resp *r) {
  return r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR ? r->error->message : "";
}

static Resp *call(nng_socket s, Req *rq) {
  rq->request_id = g_rid++;
  ka_nt_send_pb(s, &rq->base);
  return ka_nt_recv_resp(s);
}

static Kernelarena__V1__HealthResponse *health(Resp **holder) {
  Req rq = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__HealthRequest h = KERNELARENA__V1__HEALTH_REQUEST__INIT;
  rq.body_case = KERNELARENA__V1__REQUEST__BODY_HEALTH;
  rq.health = &h;
  *holder = call(g_hs, &rq);
  return (*holder)->health;
}

/* Resets host/gelu and returns the episode id (malloc'd). */
static char *reset(nng_socket s) {
  Req rq = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__ResetRequest rr = KERNELARENA__V1__RESET_REQUEST__INIT;
  rr.task_id = "host/gelu";
  rq.body_case = KERNELARENA__V1__REQUEST__BODY_RESET;
  rq.reset = &rr;
  Resp *r = call(s, &rq);
  REQUIRE(r->body_case == KERNELARENA__V1__RESPONSE__BODY_RESET, "reset: body %d (%s)",
          r->body_case, errmsg(r));
  char *id = strdup(r->reset->episode_id);
  kernelarena__v1__response__free_unpacked(r, NULL);
  return id;
}

/* Sends a Step of the baseline (no files changed) without waiting for its answer. */
static void send_step(nng_socket s, const char *ep, int expected) {
  Req rq = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__StepRequest sr = KERNELARENA__V1__STEP_REQUEST__INIT;
  sr.episode_id = (char *)ep;
  sr.expected_step = expected;
  rq.request_id = g_rid++;
  rq.body_case = KERNELARENA__V1__REQUEST__BODY_STEP;
  rq.step = &sr;
  ka_nt_send_pb(s, &rq.base);
}

/* ---- a fake executor: one worker id on one socket */

typedef struct fake {
  const char *id;
  nng_socket sock;
} fake;

/* A canned OK result of host/gelu's two cases for job_id, dispatch attempt. */
static void make_result(Kernelarena__V1__Result *r, Kernelarena__V1__CaseResult *c,
                        Kernelarena__V1__CaseResult **cv, const char *job_id, uint32_t attempt,
                        double speedup) {
  kernelarena__v1__result__init(r);
  r->job_id = (char *)job_id;
  r->attempt = attempt;
  r->status = KERNELARENA__V1__STATUS__OK;
  r->device = &g_dev;
  r->wall_s = 0.2;
  static const char *names[2] = {"n1M", "n2M"};
  for (int i = 0; i < 2; i++) {
    kernelarena__v1__case_result__init(&c[i]);
    c[i].name = (char *)names[i];
    c[i].correct = 1;
    c[i].baseline_ms = 2.0 * speedup;
    c[i].candidate_ms = 2.0;
    c[i].speedup = speedup;
    c[i].elements = 1 << 20;
    cv[i] = &c[i];
  }
  r->n_cases = 2;
  r->cases = cv;
  r->geomean_speedup = speedup;
}

/* Sends a poll of f (with result, or none), holding wait_ms at most. */
static void poll_send(fake *f, const Kernelarena__V1__Result *result, uint32_t wait_ms) {
  Kernelarena__V1__ExecRequest er = KERNELARENA__V1__EXEC_REQUEST__INIT;
  Kernelarena__V1__WorkerPoll wp = KERNELARENA__V1__WORKER_POLL__INIT;
  wp.worker_id = (char *)f->id;
  wp.device = &g_dev;
  wp.result = (Kernelarena__V1__Result *)result;
  wp.wait_ms = wait_ms;
  wp.heartbeats = 1;
  er.request_id = g_rid++;
  er.body_case = KERNELARENA__V1__EXEC_REQUEST__BODY_POLL;
  er.poll = &wp;
  ka_nt_send_pb(f->sock, &er.base);
}

/* Receives f's poll answer: the job (free with free_unpacked of *holder) or NULL. */
static Kernelarena__V1__Job *poll_recv(fake *f, ExecResp **holder) {
  nng_msg *m;
  int rv = nng_recvmsg(f->sock, &m, 0);
  REQUIRE(rv == 0, "%s: recv: %s", f->id, nng_strerror(rv));
  ExecResp *r = kernelarena__v1__exec_response__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
  nng_msg_free(m);
  REQUIRE(r && r->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT, "%s: body %d",
          f->id, r ? (int)r->body_case : -1);
  *holder = r;
  return r->assignment->job;
}

/* Sends a heartbeat of f for (job_id, attempt); returns job_wanted. */
static int heartbeat(fake *f, const char *job_id, uint32_t attempt) {
  Kernelarena__V1__ExecRequest er = KERNELARENA__V1__EXEC_REQUEST__INIT;
  Kernelarena__V1__WorkerHeartbeat hb = KERNELARENA__V1__WORKER_HEARTBEAT__INIT;
  hb.worker_id = (char *)f->id;
  hb.job_id = (char *)job_id;
  hb.attempt = attempt;
  er.request_id = g_rid++;
  er.body_case = KERNELARENA__V1__EXEC_REQUEST__BODY_HEARTBEAT;
  er.heartbeat = &hb;
  ka_nt_send_pb(f->sock, &er.base);
  nng_msg *m;
  int rv = nng_recvmsg(f->sock, &m, 0);
  REQUIRE(rv == 0, "heartbeat recv: %s", nng_strerror(rv));
  ExecResp *r = kernelarena__v1__exec_response__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
  nng_msg_free(m);
  REQUIRE(r && r->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_HEARTBEAT, "heartbeat body");
  int wanted = r->heartbeat->job_wanted;
  kernelarena__v1__exec_response__free_unpacked(r, NULL);
  return wanted;
}

/* One integer of the trace store (sqlite3 query q), or -1. */
static long long db_int(const char *db, const char *q) {
  sqlite3 *h;
  long long v = -1;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, q, -1, &st, NULL) == SQLITE_OK) {
      if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
      sqlite3_finalize(st);
    } else {
      fprintf(stderr, "sqlite: %s\n", sqlite3_errmsg(h));
    }
  }
  sqlite3_close(h);
  return v;
}

/* ---- the scenarios */

/* 1: lost once, re-dispatched once to the same worker; stale results dropped. */
static void scenario_redispatch(nng_socket cl, fake *x, const char *db) {
  printf("1: a lost executor's job is re-dispatched once; stale results are dropped\n");
  char *ep = reset(cl);
  poll_send(x, NULL, 5000);
  send_step(cl, ep, 0);
  ExecResp *h1;
  Kernelarena__V1__Job *j1 = poll_recv(x, &h1);
  CHECK(j1 && j1->attempt == 1, "first dispatch: job %s attempt %u", j1 ? j1->job_id : "-",
        j1 ? j1->attempt : 0);
  CHECK(heartbeat(x, j1->job_id, 1), "the job is wanted while its dispatch holds");
  nng_msleep(2600); /* silent past the 1 s heartbeat timeout: lost, job re-queued */
  /* its late result (attempt 1) comes with its next poll, which gets the job again */
  Kernelarena__V1__Result res;
  Kernelarena__V1__CaseResult c[2], *cv[2];
  make_result(&res, c, cv, j1->job_id, 1, 3.0);
  poll_send(x, &res, 3000);
  ExecResp *h2;
  Kernelarena__V1__Job *j2 = poll_recv(x, &h2);
  CHECK(j2 && !strcmp(j2->job_id, j1->job_id) && j2->attempt == 2,
        "re-dispatch: the same job with attempt 2 (got %s attempt %u)", j2 ? j2->job_id : "-",
        j2 ? j2->attempt : 0);
  CHECK(!heartbeat(x, j1->job_id, 1), "a heartbeat for the superseded attempt: not wanted");
  CHECK(heartbeat(x, j2->job_id, 2), "a heartbeat for attempt 2: wanted");
  /* a replay of attempt 1's result while it holds attempt 2: dropped, the job kept */
  poll_send(x, &res, 300);
  ExecResp *h3;
  CHECK(poll_recv(x, &h3) == NULL, "the replayed stale result gets no job");
  kernelarena__v1__exec_response__free_unpacked(h3, NULL);
  Resp *hr;
  Kernelarena__V1__HealthResponse *hh = health(&hr);
  CHECK(hh->running_jobs == 1, "the job is still running (attempt 2): running %d",
        hh->running_jobs);
  kernelarena__v1__response__free_unpacked(hr, NULL);
  Kernelarena__V1__Result res2;
  Kernelarena__V1__CaseResult c2[2], *cv2[2];
  make_result(&res2, c2, cv2, j2->job_id, 2, 1.5);
  poll_send(x, &res2, 300);
  Resp *sr = ka_nt_recv_resp(cl);
  CHECK(sr->body_case == KERNELARENA__V1__RESPONSE__BODY_STEP, "the step is answered: body %d (%s)",
        sr->body_case, errmsg(sr));
  CHECK(sr->step->reward > 269.9 && sr->step->reward < 270.1,
        "its reward is attempt 2's (speedup 1.5: 270), got %.2f", sr->step->reward);
  kernelarena__v1__response__free_unpacked(sr, NULL);
  ExecResp *h4;
  CHECK(poll_recv(x, &h4) == NULL, "nothing more for the executor");
  kernelarena__v1__exec_response__free_unpacked(h4, NULL);
  char q[512];
  snprintf(q, sizeof q, "SELECT count(*) FROM steps WHERE episode_id = '%s'", ep);
  CHECK(db_int(db, q) == 1, "the step is recorded once");
  snprintf(q, sizeof q, "SELECT attempt FROM steps WHERE episode_id = '%s' AND step = 1", ep);
  long long att = db_int(db, q);
  CHECK(att == 2, "the record is marked re-dispatched (attempt %lld)", att);
  hh = health(&hr);
  CHECK(hh->redispatched_jobs == 1 && hh->stale_results == 2,
        "Health counts 1 re-dispatch and 2 stale results (got %lld, %lld)",
        (long long)hh->redispatched_jobs, (long long)hh->stale_results);
  kernelarena__v1__response__free_unpacked(hr, NULL);
  kernelarena__v1__exec_response__free_unpacked(h1, NULL);
  kernelarena__v1__exec_response__free_unpacked(h2, NULL);
  free(ep);
}

/* 2: lost twice: failed, never dispatched a third time. */
static void scenario_lost_twice(nng_socket cl, fake *x, fake *y, fake *z, const char *db) {
  printf("2: a job lost on both of its dispatches fails; no third dispatch\n");
  char *ep = reset(cl);
  poll_send(x, NULL, 5000);
  send_step(cl, ep, 0);
  ExecResp *h1, *h2, *h3;
  Kernelarena__V1__Job *j1 = poll_recv(x, &h1);
  CHECK(j1 && j1->attempt == 1, "first dispatch to %s", x->id);
  heartbeat(x, j1->job_id, 1);
  poll_send(y, NULL, 5000);
  Kernelarena__V1__Job *j2 = poll_recv(y, &h2); /* within ~2 s: x is lost after 1 s */
  CHECK(j2 && !strcmp(j2->job_id, j1->job_id) && j2->attempt == 2,
        "second dispatch to %s, attempt 2 (got %u)", y->id, j2 ? j2->attempt : 0);
  heartbeat(y, j2->job_id, 2);
  poll_send(z, NULL, 4000);
  Resp *sr = ka_nt_recv_resp(cl); /* y lost too */
  CHECK(sr->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR && sr->error->retryable,
        "the step fails, retryable: body %d", sr->body_case);
  printf("     %s\n", sr->error->message);
  kernelarena__v1__response__free_unpacked(sr, NULL);
  CHECK(poll_recv(z, &h3) == NULL, "a third executor polling meanwhile gets nothing");
  char q[512];
  snprintf(q, sizeof q, "SELECT count(*) FROM steps WHERE episode_id = '%s'", ep);
  CHECK(db_int(db, q) == 0, "nothing recorded for the failed step");
  kernelarena__v1__exec_response__free_unpacked(h1, NULL);
  kernelarena__v1__exec_response__free_unpacked(h2, NULL);
  kernelarena__v1__exec_response__free_unpacked(h3, NULL);
  free(ep);
}

/* 3: least-busy device first. */
static void scenario_least_busy(nng_socket cl, nng_socket cl2, fake *a0, fake *a1, fake *b) {
  printf("3: least-busy: the idle device B before device A's second slot\n");
  char *e1 = reset(cl), *e2 = reset(cl2);
  poll_send(a0, NULL, 5000);
  nng_msleep(100);
  poll_send(a1, NULL, 5000);
  nng_msleep(100);
  poll_send(b, NULL, 5000);
  nng_msleep(200); /* all three parked, in that order */
  send_step(cl, e1, 0);
  ExecResp *h1, *h2;
  Kernelarena__V1__Job *j1 = poll_recv(a0, &h1);
  CHECK(j1 != NULL, "the first job: the first idle slot (%s)", a0->id);
  heartbeat(a0, j1->job_id, j1->attempt);
  send_step(cl2, e2, 0);
  Kernelarena__V1__Job *j2 = poll_recv(b, &h2);
  CHECK(j2 != NULL, "the second job: %s, whose device is idle (not %s of the busy device)", b->id,
        a1->id);
  Kernelarena__V1__Result r1, r2;
  Kernelarena__V1__CaseResult c1[2], *cv1[2], c2[2], *cv2[2];
  make_result(&r1, c1, cv1, j1->job_id, j1->attempt, 1.0);
  make_result(&r2, c2, cv2, j2->job_id, j2->attempt, 1.0);
  poll_send(a0, &r1, 300);
  poll_send(b, &r2, 300);
  Resp *s1 = ka_nt_recv_resp(cl), *s2 = ka_nt_recv_resp(cl2);
  CHECK(s1->body_case == KERNELARENA__V1__RESPONSE__BODY_STEP &&
            s2->body_case == KERNELARENA__V1__RESPONSE__BODY_STEP,
        "both steps answered");
  ExecResp *h3;
  CHECK(poll_recv(a1, &h3) == NULL, "A's second slot got nothing");
  kernelarena__v1__response__free_unpacked(s1, NULL);
  kernelarena__v1__response__free_unpacked(s2, NULL);
  kernelarena__v1__exec_response__free_unpacked(h1, NULL);
  kernelarena__v1__exec_response__free_unpacked(h2, NULL);
  kernelarena__v1__exec_response__free_unpacked(h3, NULL);
  free(e1);
  free(e2);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s ENVSERVER TASKS_DIR\n", argv[0]);
    return 2;
  }
  atexit(cleanup);
  snprintf(g_tmp, sizeof g_tmp, "/tmp/ka-dispatch-XXXXXX");
  REQUIRE(mkdtemp(g_tmp) != NULL, "mkdtemp");
  char state[512], env_url[600], exec_url[600], db[600];
  snprintf(state, sizeof state, "%s/state", g_tmp);
  snprintf(env_url, sizeof env_url, "ipc://%s/env.ipc", state);
  snprintf(exec_url, sizeof exec_url, "ipc://%s/exec.ipc", state);
  snprintf(db, sizeof db, "%s/trace.db", state);
  g_child = fork();
  REQUIRE(g_child >= 0, "fork");
  if (g_child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the test, however it ends */
    execl(argv[1], argv[1], "--state", state, "--tasks", argv[2], "--heartbeat-timeout", "1",
          (char *)NULL);
    _exit(127);
  }
  g_dev.backend = "host";
  g_dev.name = "fake host CPU";
  g_dev.arch = "x86_64";
  g_dev.multiprocessors = 8;
  g_dev.warp_size = 1;
  g_dev.memory_bytes = (int64_t)16 << 30;
  nng_socket cl = ka_nt_open_req(env_url), cl2 = ka_nt_open_req(env_url);
  g_hs = ka_nt_open_req(env_url);
  fake x = {"hx/1/host:0", ka_nt_open_req(exec_url)}, y = {"hy/2/host:0", ka_nt_open_req(exec_url)};
  fake z = {"hz/3/host:0", ka_nt_open_req(exec_url)};
  fake a0 = {"ha/4/host:0", ka_nt_open_req(exec_url)},
       a1 = {"ha/4/host:0#1", ka_nt_open_req(exec_url)};
  fake b = {"hb/5/host:0", ka_nt_open_req(exec_url)};
  /* every worker registers once (an empty poll), so Reset sees executors */
  fake *all[] = {&x, &y, &z, &a0, &a1, &b};
  for (int i = 0; i < 6; i++) {
    ExecResp *h;
    poll_send(all[i], NULL, 50);
    REQUIRE(poll_recv(all[i], &h) == NULL, "%s registered", all[i]->id);
    kernelarena__v1__exec_response__free_unpacked(h, NULL);
  }
  scenario_redispatch(cl, &x, db);
  scenario_lost_twice(cl, &x, &y, &z, db);
  scenario_least_busy(cl, cl2, &a0, &a1, &b);
  printf("dispatch_test: all checks passed\n");
  return 0;
}
