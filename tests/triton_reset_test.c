/* triton_reset_test: a triton task needs an executor that compiles language triton.
 * Starts the real envserver on a temporary state folder with the repository's tasks and
 * plays fake executors on its executor endpoint:
 *   1. a cuda device whose executor does not list triton (Device.languages empty: gpuexec
 *      found no Python with triton): Reset of triton2triton/gelu is UNAVAILABLE, not
 *      retryable, and says why (the language, --triton-python); Reset of cuda2cuda/gelu
 *      still succeeds on that device; a step of a triton episode is never handed to it;
 *   2. a second cuda device that lists triton: Reset succeeds, and the step's job goes to
 *      that executor.
 *   triton_reset_test ENVSERVER_BINARY TASKS_DIR
 * Exits 0 on success, 1 with a message on the first failure. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "ka_common.h"
#include "ka_nng_test.h"
#include "kernelarena.pb-c.h"

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

typedef Kernelarena__V1__Request Req;
typedef Kernelarena__V1__Response Resp;

static pid_t g_child = -1;
static char g_tmp[256];
static uint64_t g_rid = 1;

static void cleanup(void) {
  if (g_child > 0) {
    kill(g_child, SIGTERM);
    waitpid(g_child, NULL, 0);
  }
  if (g_tmp[0]) ka_rmtree(g_tmp);
}

static Resp *call(nng_socket s, Req *rq) {
  ka_nt_send_pb(s, &rq->base);
  return ka_nt_recv_resp(s);
}

static Resp *do_reset(nng_socket s, const char *task) {
  Req rq = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__ResetRequest rr = KERNELARENA__V1__RESET_REQUEST__INIT;
  rr.task_id = (char *)task;
  rr.seed = 7;
  rr.has_seed = 1;
  rq.request_id = g_rid++;
  rq.body_case = KERNELARENA__V1__REQUEST__BODY_RESET;
  rq.reset = &rr;
  return call(s, &rq);
}

/* Sends a step of episode ep with no changed file (the baseline), without waiting. */
static void send_step(nng_socket s, const char *ep) {
  Req rq = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__StepRequest sr = KERNELARENA__V1__STEP_REQUEST__INIT;
  sr.episode_id = (char *)ep;
  sr.expected_step = 0;
  rq.request_id = g_rid++;
  rq.body_case = KERNELARENA__V1__REQUEST__BODY_STEP;
  rq.step = &sr;
  ka_nt_send_pb(s, &rq.base);
}

/* One poll of a fake executor; returns the response (caller frees). */
static Kernelarena__V1__ExecResponse *poll_once(nng_socket e, const char *worker,
                                                Kernelarena__V1__Device *dev, uint32_t wait_ms) {
  Kernelarena__V1__ExecRequest er = KERNELARENA__V1__EXEC_REQUEST__INIT;
  Kernelarena__V1__WorkerPoll wp = KERNELARENA__V1__WORKER_POLL__INIT;
  wp.worker_id = (char *)worker;
  wp.device = dev;
  wp.wait_ms = wait_ms;
  er.request_id = g_rid++;
  er.body_case = KERNELARENA__V1__EXEC_REQUEST__BODY_POLL;
  er.poll = &wp;
  ka_nt_send_pb(e, &er.base);
  nng_msg *m;
  int rv = nng_recvmsg(e, &m, 0);
  CHECK(rv == 0, "executor recv: %s", nng_strerror(rv));
  Kernelarena__V1__ExecResponse *r =
      kernelarena__v1__exec_response__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
  nng_msg_free(m);
  CHECK(r, "undecodable ExecResponse");
  return r;
}

static int has_job(const Kernelarena__V1__ExecResponse *r) {
  return r->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT && r->assignment->job;
}

static void fake_cuda(Kernelarena__V1__Device *d, int index) {
  kernelarena__v1__device__init(d);
  d->backend = "cuda";
  d->index = index;
  d->name = "fake NVIDIA H200";
  d->arch = "sm_90";
  d->multiprocessors = 132;
  d->warp_size = 32;
  d->memory_bytes = (int64_t)141 << 30;
  d->l2_bytes = (int64_t)60 << 20;
  d->shared_bytes_per_block = 48 << 10;
  d->max_threads_per_block = 1024;
  d->mem_bandwidth_gbps = 4800;
}

int main(int argc, char **argv) {
  CHECK(argc == 3, "usage: %s ENVSERVER TASKS_DIR", argv[0]);
  atexit(cleanup);
  snprintf(g_tmp, sizeof g_tmp, "/tmp/ka-tritonreset-XXXXXX");
  CHECK(mkdtemp(g_tmp), "mkdtemp");
  char state[512], env_url[600], exec_url[600];
  snprintf(state, sizeof state, "%s/state", g_tmp);
  snprintf(env_url, sizeof env_url, "ipc://%s/env.ipc", state);
  snprintf(exec_url, sizeof exec_url, "ipc://%s/exec.ipc", state);
  g_child = fork();
  CHECK(g_child >= 0, "fork");
  if (g_child == 0) {
    execl(argv[1], argv[1], "--state", state, "--tasks", argv[2], (char *)NULL);
    perror("exec envserver");
    _exit(127);
  }
  nng_socket c = ka_nt_open_req(env_url), e1 = ka_nt_open_req(exec_url),
             e2 = ka_nt_open_req(exec_url);

  /* 1. a cuda executor without triton */
  Kernelarena__V1__Device plain, tri;
  fake_cuda(&plain, 0);
  Kernelarena__V1__ExecResponse *er = poll_once(e1, "fake/1/cuda:0", &plain, 100);
  CHECK(!has_job(er), "no job yet");
  kernelarena__v1__exec_response__free_unpacked(er, NULL);
  Resp *r = do_reset(c, "triton2triton/gelu");
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR &&
            r->error->code == KERNELARENA__V1__ERROR_CODE__UNAVAILABLE && !r->error->retryable,
        "reset of a triton task without a triton executor: body %d", r->body_case);
  CHECK(
      strstr(r->error->message, "language triton") && strstr(r->error->message, "--triton-python"),
      "the refusal says why: %s", r->error->message);
  printf("ok: triton task refused at reset: %s\n", r->error->message);
  kernelarena__v1__response__free_unpacked(r, NULL);
  r = do_reset(c, "cuda2cuda/gelu");
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_RESET, "cuda2cuda/gelu resets: body %d",
        r->body_case);
  printf("ok: a cuda task still resets on that executor\n");
  kernelarena__v1__response__free_unpacked(r, NULL);

  /* 2. a second executor whose device lists triton */
  fake_cuda(&tri, 1);
  char *langs[] = {"triton"};
  tri.languages = langs;
  tri.n_languages = 1;
  er = poll_once(e2, "fake/2/cuda:1", &tri, 100);
  CHECK(!has_job(er), "no job yet for the triton executor");
  kernelarena__v1__exec_response__free_unpacked(er, NULL);
  r = do_reset(c, "triton2triton/gelu");
  CHECK(r->body_case == KERNELARENA__V1__RESPONSE__BODY_RESET,
        "triton reset with a triton "
        "executor: body %d (%s)",
        r->body_case,
        r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR ? r->error->message : "");
  char *ep = strdup(r->reset->episode_id);
  printf("ok: triton task resets where an executor has triton (%s)\n", ep);
  kernelarena__v1__response__free_unpacked(r, NULL);
  /* Describe lists that device with its languages (copied, not borrowed: base.c) */
  Req dq = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__DescribeRequest dr = KERNELARENA__V1__DESCRIBE_REQUEST__INIT;
  dq.request_id = g_rid++;
  dq.body_case = KERNELARENA__V1__REQUEST__BODY_DESCRIBE;
  dq.describe = &dr;
  r = call(c, &dq);
  int listed = 0;
  for (size_t i = 0;
       r->body_case == KERNELARENA__V1__RESPONSE__BODY_DESCRIBE && i < r->describe->n_devices;
       i++) {
    const Kernelarena__V1__Device *d = r->describe->devices[i];
    listed |= d->n_languages == 1 && !strcmp(d->languages[0], "triton");
  }
  CHECK(listed, "Describe lists the device with languages [triton] (body %d)", r->body_case);
  printf("ok: Describe lists the triton device's languages\n");
  kernelarena__v1__response__free_unpacked(r, NULL);
  send_step(c, ep);
  /* the executor without triton polls first and must get nothing; the other gets it */
  er = poll_once(e1, "fake/1/cuda:0", &plain, 500);
  CHECK(!has_job(er), "the triton job went to the executor without triton");
  kernelarena__v1__exec_response__free_unpacked(er, NULL);
  er = poll_once(e2, "fake/2/cuda:1", &tri, 3000);
  CHECK(has_job(er) && !strcmp(er->assignment->job->task_id, "triton2triton/gelu"),
        "the triton executor gets the step's job");
  printf("ok: the step's job goes to the executor with triton\n");
  kernelarena__v1__exec_response__free_unpacked(er, NULL);
  free(ep);
  printf("triton_reset: all checks passed\n");
  return 0;
}
