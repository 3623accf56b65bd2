/* Requests and replies that several envctl commands share (envctl.h). */
#include <stdio.h>
#include <string.h>

#include "envctl.h"
#include "ka_common.h"
#include "ka_opt.h"

int ec_print_error(const char *what, const Kernelarena__V1__Response *r) {
  if (r && r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR)
    fprintf(stderr, "envctl: %s: %s: %s%s\n", what, ka_error_code_name(r->error->code),
            r->error->message, r->error->retryable ? " (retryable)" : "");
  else
    fprintf(stderr, "envctl: %s: unexpected response\n", what);
  return 1;
}

int ec_health_call(ka_client *c, int timeout_ms, Kernelarena__V1__Response **out, char *err,
                   size_t errlen) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__HealthRequest h = KERNELARENA__V1__HEALTH_REQUEST__INIT;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_HEALTH;
  req.health = &h;
  return ka_client_call(c, &req, timeout_ms, out, err, errlen);
}

void ec_close_episode(ka_client *c, const char *id, int timeout_ms) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__CloseRequest cl = KERNELARENA__V1__CLOSE_REQUEST__INIT;
  cl.episode_id = (char *)id;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_CLOSE;
  req.close = &cl;
  Kernelarena__V1__Response *r;
  char err[256];
  if (ka_client_call(c, &req, timeout_ms, &r, err, sizeof err) == KA_OK) ka_client_free_response(r);
}

int ec_get_episode(ka_client *c, const char *id, int omit_files, int timeout_ms,
                   Kernelarena__V1__Response **out) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__GetEpisodeRequest g = KERNELARENA__V1__GET_EPISODE_REQUEST__INIT;
  g.episode_id = (char *)id;
  g.omit_files = omit_files;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_GET_EPISODE;
  req.get_episode = &g;
  char err[512];
  if (ka_client_call(c, &req, timeout_ms, out, err, sizeof err)) {
    fprintf(stderr, "envctl: get episode %s: %s\n", id, err);
    return 1;
  }
  if ((*out)->body_case != KERNELARENA__V1__RESPONSE__BODY_GET_EPISODE) {
    ec_print_error(id, *out);
    ka_client_free_response(*out);
    *out = NULL;
    return 1;
  }
  return 0;
}

int ec_server_open(const char *url, int timeout_s, ka_client **out, char *err, size_t errlen) {
  int wait_ms = timeout_s > 0 && timeout_s < KA_OPT_CONNECT_TIMEOUT_S
                    ? timeout_s * 1000
                    : KA_OPT_CONNECT_TIMEOUT_S * 1000;
  char why[512];
  int rc = ka_client_open_timeout(url, wait_ms, out, why, sizeof why);
  if (rc == KA_ETIMEDOUT)
    return ka_seterr(err, errlen, rc,
                     "cannot reach an envserver at %s: no answer within %d s. Is it running? "
                     "Start one (envserver --state DIR --tasks DIR, and gpuexec --server "
                     "ipc://DIR/exec.ipc), or leave out --server to start one for this command",
                     url, wait_ms / 1000);
  if (rc) return ka_seterr(err, errlen, rc, "cannot connect to %s: %s", url, why);
  return KA_OK;
}
