/* client_kaclient_test: libkaclient against the real envserver, with this test playing
 * the executor (canned Results), as in server_protocol_test.
 *
 *   client_kaclient_test ENVSERVER_BINARY TASKS_DIR
 *
 * Checks: ka_client_open_timeout fails in time on a dead address and leaves nothing
 * open; health, reset, state, step, evaluate, close through the typed functions; 8 steps
 * of 8 episodes in flight at once from one thread (ka_client_start / ka_call_wait), each
 * answered to its own call; a server Error arrives as a response (ka_response_error)
 * and changes nothing; a call on a closed episode is refused. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "data.h"
#include "ka_common.h"
#include "kaclient.h"

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static pid_t g_child = -1;
static char g_tmp[256];

static void cleanup(void) {
  if (g_child > 0) {
    kill(g_child, SIGKILL);
    waitpid(g_child, NULL, 0);
  }
  if (g_tmp[0]) ka_rmtree(g_tmp);
}

static Kernelarena__V1__Device g_dev = KERNELARENA__V1__DEVICE__INIT;

/* One executor poll: sends result (may be NULL), returns the assignment's job id
 * (malloc'd) or NULL. */
static char *exec_poll(nng_socket e, const char *done_job, int status) {
  Kernelarena__V1__ExecRequest er = KERNELARENA__V1__EXEC_REQUEST__INIT;
  Kernelarena__V1__WorkerPoll wp = KERNELARENA__V1__WORKER_POLL__INIT;
  Kernelarena__V1__Result res = KERNELARENA__V1__RESULT__INIT;
  wp.worker_id = "kaclient-test/1/host:0";
  wp.device = &g_dev;
  wp.wait_ms = 2000;
  if (done_job) {
    res.job_id = (char *)done_job;
    res.status = status;
    res.device = &g_dev;
    res.compile_log = "broken";
    wp.result = &res;
  }
  er.request_id = 1;
  er.body_case = KERNELARENA__V1__EXEC_REQUEST__BODY_POLL;
  er.poll = &wp;
  size_t n = kernelarena__v1__exec_request__get_packed_size(&er);
  nng_msg *m;
  CHECK(nng_msg_alloc(&m, n) == 0, "alloc");
  kernelarena__v1__exec_request__pack(&er, nng_msg_body(m));
  CHECK(nng_sendmsg(e, m, 0) == 0, "exec send");
  CHECK(nng_recvmsg(e, &m, 0) == 0, "exec recv");
  Kernelarena__V1__ExecResponse *r =
      kernelarena__v1__exec_response__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
  nng_msg_free(m);
  CHECK(r && r->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT, "assignment");
  char *id = r->assignment->job ? strdup(r->assignment->job->job_id) : NULL;
  kernelarena__v1__exec_response__free_unpacked(r, NULL);
  return id;
}

int main(int argc, char **argv) {
  CHECK(argc == 3, "usage: %s ENVSERVER TASKS_DIR", argv[0]);
  atexit(cleanup);
  snprintf(g_tmp, sizeof g_tmp, "/tmp/ka-kactest-XXXXXX");
  CHECK(mkdtemp(g_tmp), "mkdtemp");
  char state[512], env_url[600], exec_url[600], err[512];
  snprintf(state, sizeof state, "%s/state", g_tmp);
  snprintf(env_url, sizeof env_url, "ipc://%s/env.ipc", state);
  snprintf(exec_url, sizeof exec_url, "ipc://%s/exec.ipc", state);

  printf("open with a connect timeout on a dead address\n");
  ka_client *c = NULL;
  double t0 = ka_now_s();
  int rc = ka_client_open_timeout(env_url, 300, &c, err, sizeof err);
  CHECK(rc == KA_ETIMEDOUT && c == NULL && ka_now_s() - t0 < 5, "rc %d: %s", rc, err);

  g_child = fork();
  CHECK(g_child >= 0, "fork");
  if (g_child == 0) {
    execl(argv[1], argv[1], "--state", state, "--tasks", argv[2], "--quiet", (char *)NULL);
    _exit(127);
  }
  g_dev.backend = "host";
  g_dev.name = "fake host";
  CHECK(ka_client_open_timeout(env_url, 10000, &c, err, sizeof err) == KA_OK, "open: %s", err);
  nng_socket e;
  CHECK(nng_req0_open(&e) == 0, "req");
  nng_socket_set_ms(e, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
  nng_socket_set_ms(e, NNG_OPT_RECVTIMEO, 10000);
  CHECK(nng_dial(e, exec_url, NULL, 0) == 0, "dial exec");
  free(exec_poll(e, NULL, 0)); /* registers the executor (empty assignment after 2 s) */

  printf("reset 8 episodes, then 8 steps in flight from one thread\n");
  Kernelarena__V1__Response *r;
  enum { N = 8 };
  char *ep[N];
  const char *k[] = {"run"}, *v[] = {"kaclient"};
  for (int i = 0; i < N; i++) {
    CHECK(ka_client_reset(c, "host/gelu", 1, 100 + i, k, v, 1, 5000, &r, err, sizeof err) == KA_OK,
          "reset: %s", err);
    CHECK(!ka_response_error(r) && r->reset->seed == (uint64_t)(100 + i), "reset %d", i);
    ep[i] = strdup(r->reset->episode_id);
    ka_client_free_response(r);
  }
  ka_call *calls[N];
  Kernelarena__V1__File f = KERNELARENA__V1__FILE__INIT, *fv[1] = {&f};
  f.path = "gelu.c";
  f.content.data = (uint8_t *)"int broken(";
  f.content.len = 11;
  for (int i = 0; i < N; i++) {
    Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
    Kernelarena__V1__StepRequest sr = KERNELARENA__V1__STEP_REQUEST__INIT;
    sr.episode_id = ep[i];
    sr.n_files = 1;
    sr.files = fv;
    req.body_case = KERNELARENA__V1__REQUEST__BODY_STEP;
    req.step = &sr;
    CHECK(ka_client_start(c, &req, 30000, &calls[i], err, sizeof err) == KA_OK, "start: %s", err);
  }
  CHECK(ka_client_health(c, 5000, &r, err, sizeof err) == KA_OK, "health: %s", err);
  CHECK(r->health->open_episodes == N && r->health->queued_jobs + r->health->running_jobs <= N,
        "health while in flight");
  ka_client_free_response(r);
  char *job = exec_poll(e, NULL, 0);
  for (int i = 0; i < N; i++) {
    CHECK(job, "job %d", i);
    char *next = exec_poll(e, job, KERNELARENA__V1__STATUS__COMPILE_ERROR);
    free(job);
    job = next;
  }
  CHECK(!job, "a job too many");
  for (int i = 0; i < N; i++) {
    CHECK(ka_call_wait(calls[i], &r, err, sizeof err) == KA_OK, "wait %d: %s", i, err);
    CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_STEP && r->step->reward == 0 &&
              r->step->observation->step == 1,
          "step %d body %d", i, r->body_case);
    ka_client_free_response(r);
  }

  printf("state; a refused step changes nothing; evaluate; close\n");
  CHECK(ka_client_step(c, ep[0], 0, fv, 1, 5000, &r, err, sizeof err) == KA_OK, "%s", err);
  const Kernelarena__V1__Error *er = ka_response_error(r);
  CHECK(er && er->code == KERNELARENA__V1__ERROR_CODE__FAILED_PRECONDITION, "duplicate step");
  ka_client_free_response(r);
  CHECK(ka_client_state(c, ep[0], 5000, &r, err, sizeof err) == KA_OK, "%s", err);
  CHECK(r->state->step == 1 && r->state->inflight_step == 0 && !r->state->closed, "state");
  ka_client_free_response(r);
  {
    Kernelarena__V1__EvaluateRequest ev = KERNELARENA__V1__EVALUATE_REQUEST__INIT;
    Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
    ev.episode_id = ep[0];
    ev.step = 1;
    req.body_case = KERNELARENA__V1__REQUEST__BODY_EVALUATE;
    req.evaluate = &ev;
    ka_call *call;
    CHECK(ka_client_start(c, &req, 30000, &call, err, sizeof err) == KA_OK, "%s", err);
    job = exec_poll(e, NULL, 0);
    CHECK(job && !strncmp(job, "eval-", 5), "evaluate job");
    free(exec_poll(e, job, KERNELARENA__V1__STATUS__COMPILE_ERROR));
    free(job);
    CHECK(ka_call_wait(call, &r, err, sizeof err) == KA_OK, "%s", err);
    CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_EVALUATE &&
              r->evaluate->seed == ka_mix64(100, 1) &&
              r->evaluate->observation->status == KERNELARENA__V1__STATUS__COMPILE_ERROR,
          "evaluate");
    ka_client_free_response(r);
  }
  CHECK(ka_client_close_episode(c, ep[0], 5000, &r, err, sizeof err) == KA_OK, "%s", err);
  CHECK(r->close->was_open, "close");
  ka_client_free_response(r);
  CHECK(ka_client_step(c, ep[0], 1, fv, 1, 5000, &r, err, sizeof err) == KA_OK, "%s", err);
  CHECK(ka_response_error(r) &&
            ka_response_error(r)->code == KERNELARENA__V1__ERROR_CODE__FAILED_PRECONDITION,
        "step after close");
  ka_client_free_response(r);
  CHECK(!strcmp(ka_status_name(1), "OK") && !strcmp(ka_error_code_name(9), "CAPACITY"), "names");
  for (int i = 0; i < N; i++) free(ep[i]);
  ka_client_close(c);
  nng_close(e);
  printf("client_kaclient: all checks passed\n");
  return 0;
}
