/* Agent adapters: run a coding-agent CLI inside an episode's workspace.
 *
 * One episode: Reset; write the workspace (editable files, prompt.md,
 * .kernelarena/episode.json); start a step proxy (an nng REP socket that forwards the
 * agent's Step requests for this episode to the server and records every result); run
 * the CLI in its own process group with a time limit, stdout kept as the transcript;
 * kill the group; optionally submit the final workspace; Close; write episode.json.
 * The proxy is why the recorded steps can be trusted: the agent never writes them.
 * Adapters: claude_code, codex, cursor, command, replay (docs/agents.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml.h>

#include "agent.h"
#include "agents.h"
#include "envctl.h"
#include "ka_common.h"

volatile sig_atomic_t ec_agent_interrupted;

/* ------------------------------------------------------------------ YAML -> JSON */

static json_t *ec_yaml_scalar(const yaml_event_t *ev) {
  const char *s = (const char *)ev->data.scalar.value;
  size_t n = ev->data.scalar.length;
  if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
    if (!strcmp(s, "true") || !strcmp(s, "True")) return json_true();
    if (!strcmp(s, "false") || !strcmp(s, "False")) return json_false();
    if (!strcmp(s, "null") || !strcmp(s, "~") || n == 0) return json_null();
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s && !*end && !errno) return json_integer(v);
    double d = strtod(s, &end);
    if (*s && !*end && isfinite(d)) return json_real(d);
  }
  return json_stringn(s, n);
}

/* Parses one node whose first event is ev (consumed); returns NULL on error. */
static json_t *ec_yaml_node(yaml_parser_t *p, yaml_event_t *ev, char *err, size_t errlen) {
  if (ev->type == YAML_SCALAR_EVENT) return ec_yaml_scalar(ev);
  if (ev->type == YAML_ALIAS_EVENT) {
    ka_seterr(err, errlen, KA_EPARSE, "line %zu: YAML aliases are not supported",
              ev->start_mark.line + 1);
    return NULL;
  }
  int is_map = ev->type == YAML_MAPPING_START_EVENT;
  if (!is_map && ev->type != YAML_SEQUENCE_START_EVENT) {
    ka_seterr(err, errlen, KA_EPARSE, "line %zu: unexpected YAML event", ev->start_mark.line + 1);
    return NULL;
  }
  json_t *out = is_map ? json_object() : json_array();
  for (;;) {
    yaml_event_t e;
    if (!yaml_parser_parse(p, &e)) {
      ka_seterr(err, errlen, KA_EPARSE, "line %zu: %s", p->problem_mark.line + 1,
                p->problem ? p->problem : "YAML error");
      json_decref(out);
      return NULL;
    }
    if (e.type == YAML_MAPPING_END_EVENT || e.type == YAML_SEQUENCE_END_EVENT) {
      yaml_event_delete(&e);
      return out;
    }
    if (is_map) {
      if (e.type != YAML_SCALAR_EVENT) {
        ka_seterr(err, errlen, KA_EPARSE, "line %zu: mapping keys must be scalars",
                  e.start_mark.line + 1);
        yaml_event_delete(&e);
        json_decref(out);
        return NULL;
      }
      char *key = strndup((const char *)e.data.scalar.value, e.data.scalar.length);
      yaml_event_delete(&e);
      yaml_event_t ve;
      if (!key || !yaml_parser_parse(p, &ve)) {
        free(key);
        ka_seterr(err, errlen, KA_EPARSE, "line %zu: %s", p->problem_mark.line + 1,
                  p->problem ? p->problem : "YAML error");
        json_decref(out);
        return NULL;
      }
      json_t *v = ec_yaml_node(p, &ve, err, errlen);
      yaml_event_delete(&ve);
      if (!v) {
        free(key);
        json_decref(out);
        return NULL;
      }
      json_object_set_new(out, key, v);
      free(key);
    } else {
      json_t *v = ec_yaml_node(p, &e, err, errlen);
      yaml_event_delete(&e);
      if (!v) {
        json_decref(out);
        return NULL;
      }
      json_array_append_new(out, v);
    }
  }
}

json_t *ec_yaml_load(const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    ka_seterr(err, errlen, KA_ENOENT, "%s: %s", path, strerror(errno));
    return NULL;
  }
  yaml_parser_t p;
  yaml_parser_initialize(&p);
  yaml_parser_set_input_file(&p, f);
  json_t *out = NULL;
  char e2[512] = "";
  for (;;) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&p, &ev)) {
      snprintf(e2, sizeof e2, "line %zu: %s", p.problem_mark.line + 1,
               p.problem ? p.problem : "YAML error");
      break;
    }
    int t = ev.type;
    if (t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT || t == YAML_SCALAR_EVENT) {
      out = ec_yaml_node(&p, &ev, e2, sizeof e2);
      yaml_event_delete(&ev);
      break;
    }
    yaml_event_delete(&ev);
    if (t == YAML_STREAM_END_EVENT) {
      out = json_object(); /* empty file */
      break;
    }
  }
  yaml_parser_delete(&p);
  fclose(f);
  if (!out) ka_seterr(err, errlen, KA_EPARSE, "%s: %s", path, e2);
  return out;
}

/* ------------------------------------------------------------------ step proxy */

typedef struct ec_proxy {
  nng_socket sock;
  pthread_t thr;
  atomic_int stop;
  ka_client *up; /* the real server */
  const char *episode;
  const char *out_dir;
  int timeout_s;
  double t0;
  int steps;       /* counted steps of the episode */
  atomic_int busy; /* a request is being forwarded */
  json_t *records;
  char dir[64];
  char url[128];
} ec_proxy;

static void ec_proxy_reply(ec_proxy *p, Kernelarena__V1__Response *r) {
  size_t n = kernelarena__v1__response__get_packed_size(r);
  nng_msg *m;
  if (nng_msg_alloc(&m, n)) return;
  kernelarena__v1__response__pack(r, nng_msg_body(m));
  if (nng_sendmsg(p->sock, m, 0)) nng_msg_free(m);
}

static void ec_proxy_refuse(ec_proxy *p, uint64_t request_id, int code, const char *msg) {
  Kernelarena__V1__Response r = KERNELARENA__V1__RESPONSE__INIT;
  Kernelarena__V1__Error e = KERNELARENA__V1__ERROR__INIT;
  e.code = code;
  e.message = (char *)msg;
  r.request_id = request_id;
  r.body_case = KERNELARENA__V1__RESPONSE__BODY_ERROR;
  r.error = &e;
  ec_proxy_reply(p, &r);
}

/* Saves the submitted files of step n under out_dir/steps/<n>/. */
static void ec_save_step_files(const char *out_dir, int n, const Kernelarena__V1__StepRequest *s) {
  char d[PATH_MAX];
  snprintf(d, sizeof d, "%s/steps/%d", out_dir, n);
  ka_mkdirs(d);
  for (size_t i = 0; i < s->n_files; i++) {
    if (!ka_path_is_safe(s->files[i]->path)) continue;
    char f[PATH_MAX + 300];
    snprintf(f, sizeof f, "%s/%s", d, s->files[i]->path);
    ka_write_file(f, s->files[i]->content.data, s->files[i]->content.len);
  }
}

static void ec_proxy_record(ec_proxy *p, json_t *rec) {
  json_array_append(p->records, rec);
  char f[PATH_MAX];
  snprintf(f, sizeof f, "%s/steps.jsonl", p->out_dir);
  FILE *fp = fopen(f, "a");
  if (fp) {
    json_dumpf(rec, fp, JSON_COMPACT);
    fputc('\n', fp);
    fclose(fp);
  }
}

static void ec_proxy_handle(ec_proxy *p, Kernelarena__V1__Request *rq) {
  char err[512];
  if (rq->body_case == KERNELARENA__V1__REQUEST__BODY_HEALTH) {
    Kernelarena__V1__Response *r;
    if (ka_client_call(p->up, rq, 10000, &r, err, sizeof err)) {
      ec_proxy_refuse(p, rq->request_id, KERNELARENA__V1__ERROR_CODE__UNAVAILABLE, err);
      return;
    }
    ec_proxy_reply(p, r);
    ka_client_free_response(r);
    return;
  }
  if (rq->body_case == KERNELARENA__V1__REQUEST__BODY_STATE) {
    Kernelarena__V1__Response *r;
    if (strcmp(rq->state->episode_id, p->episode)) {
      snprintf(err, sizeof err, "this workspace belongs to episode %s, not %s", p->episode,
               rq->state->episode_id);
      ec_proxy_refuse(p, rq->request_id, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, err);
    } else if (ka_client_call(p->up, rq, 30000, &r, err, sizeof err)) {
      ec_proxy_refuse(p, rq->request_id, KERNELARENA__V1__ERROR_CODE__UNAVAILABLE, err);
    } else {
      ec_proxy_reply(p, r);
      ka_client_free_response(r);
    }
    return;
  }
  if (rq->body_case != KERNELARENA__V1__REQUEST__BODY_STEP) {
    ec_proxy_refuse(p, rq->request_id, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT,
                    "inside an agent episode only Step (envctl step), State of this episode "
                    "and Health are allowed");
    return;
  }
  if (strcmp(rq->step->episode_id, p->episode)) {
    snprintf(err, sizeof err, "this workspace belongs to episode %s, not %s", p->episode,
             rq->step->episode_id);
    ec_proxy_refuse(p, rq->request_id, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, err);
    return;
  }
  rq->step->expected_step = p->steps; /* the proxy knows the count; agents need not */
  rq->deadline_ms = 0;
  double t = ka_now_s() - p->t0;
  Kernelarena__V1__Response *r;
  if (ka_client_call(p->up, rq, p->timeout_s * 1000, &r, err, sizeof err)) {
    ec_proxy_refuse(p, rq->request_id, KERNELARENA__V1__ERROR_CODE__UNAVAILABLE, err);
    return;
  }
  if (r->body_case == KERNELARENA__V1__RESPONSE__BODY_STEP) {
    p->steps++;
    ec_save_step_files(p->out_dir, p->steps, rq->step);
    json_t *rec = ec_step_json(r->step);
    json_object_set_new(rec, "t_s", json_real(t));
    json_object_set_new(rec, "by", json_string(p->stop ? "adapter" : "agent"));
    ec_proxy_record(p, rec);
    json_decref(rec);
  }
  ec_proxy_reply(p, r);
  ka_client_free_response(r);
}

static void *ec_proxy_main(void *arg) {
  ec_proxy *p = arg;
  while (atomic_load(&p->stop) < 2) {
    nng_msg *m;
    int rv = nng_recvmsg(p->sock, &m, 0);
    if (rv == NNG_ETIMEDOUT) continue;
    if (rv) break;
    Kernelarena__V1__Request *rq =
        kernelarena__v1__request__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
    nng_msg_free(m);
    if (!rq) {
      ec_proxy_refuse(p, 0, KERNELARENA__V1__ERROR_CODE__MALFORMED, "undecodable request");
      continue;
    }
    atomic_store(&p->busy, 1);
    ec_proxy_handle(p, rq);
    atomic_store(&p->busy, 0);
    kernelarena__v1__request__free_unpacked(rq, NULL);
  }
  return NULL;
}

static int ec_proxy_start(ec_proxy *p, ka_client *up, const char *episode, const char *out_dir,
                          int timeout_s, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  p->up = up;
  p->episode = episode;
  p->out_dir = out_dir;
  p->timeout_s = timeout_s;
  p->records = json_array();
  p->t0 = ka_now_s();
  snprintf(p->dir, sizeof p->dir, "/tmp/ka-agent-XXXXXX"); /* short: ipc paths are <108 */
  if (!mkdtemp(p->dir)) return ka_seterr(err, errlen, KA_ESYS, "mkdtemp: %s", strerror(errno));
  snprintf(p->url, sizeof p->url, "ipc://%s/step.ipc", p->dir);
  int rv;
  if ((rv = nng_rep0_open(&p->sock)) || (rv = nng_listen(p->sock, p->url, NULL, 0))) {
    ka_rmtree(p->dir);
    return ka_seterr(err, errlen, KA_EIO, "step proxy %s: %s", p->url, nng_strerror(rv));
  }
  nng_socket_set_ms(p->sock, NNG_OPT_RECVTIMEO, 200);
  nng_socket_set_size(p->sock, NNG_OPT_RECVMAXSZ, 128u << 20);
  if (pthread_create(&p->thr, NULL, ec_proxy_main, p)) {
    nng_close(p->sock);
    ka_rmtree(p->dir);
    return ka_seterr(err, errlen, KA_ESYS, "pthread_create failed");
  }
  return KA_OK;
}

static void ec_proxy_stop(ec_proxy *p) {
  atomic_store(&p->stop, 2);
  pthread_join(p->thr, NULL);
  nng_close(p->sock);
  ka_rmtree(p->dir);
  json_decref(p->records);
}

/* ------------------------------------------------------------------ held-out scoring */

char *ec_admin_token_load(const char *file, char *err, size_t errlen) {
  char *tok = NULL;
  if (file) {
    if (ka_read_file(file, 4096, &tok, NULL) != KA_OK) {
      ka_seterr(err, errlen, KA_ENOENT, "cannot read the admin token file %s", file);
      return NULL;
    }
  } else if (getenv("KA_ADMIN_TOKEN")) {
    tok = strdup(getenv("KA_ADMIN_TOKEN"));
  }
  if (!tok) {
    ka_seterr(err, errlen, KA_ENOENT, "no admin token (--admin-token-file or KA_ADMIN_TOKEN)");
    return NULL;
  }
  char *b = tok, *e = tok + strlen(tok);
  while (*b && strchr(" \t\r\n", *b)) b++;
  while (e > b && strchr(" \t\r\n", e[-1])) *--e = 0;
  memmove(tok, b, strlen(b) + 1);
  if (!*tok) {
    free(tok);
    ka_seterr(err, errlen, KA_EINVAL, "the admin token is empty");
    return NULL;
  }
  return tok;
}

static double ec_eval_comp(const Kernelarena__V1__EvaluateResponse *e, const char *key) {
  for (size_t i = 0; i < e->n_reward_components; i++)
    if (!strcmp(e->reward_components[i]->key, key)) return e->reward_components[i]->value;
  return NAN;
}

/* Scores recorded step `step` of the episode on the task's held-out cases: an admin
 * Evaluate{episode_id, step, include_held_out} (docs/protocol.md), which re-evaluates the
 * step's files with the step's own job seed. Returns episode.json's held_out record (new
 * reference): status ok (every held-out case correct), incorrect, skipped (the task has
 * no held-out cases) or error; eval_status, correct, speedup_geomean (held-out cases,
 * null unless correct), shown_speedup_geomean (the shown cases of the same evaluation,
 * null unless OK), gap = speedup_geomean / shown_speedup_geomean (null unless both are
 * positive), cases[] (the held-out cases only), step, job_id. */
static json_t *ec_held_out_score(ka_client *c, const char *episode, int step, const char *token,
                                 int timeout_s) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__EvaluateRequest ev = KERNELARENA__V1__EVALUATE_REQUEST__INIT;
  ev.episode_id = (char *)episode;
  ev.step = step;
  ev.include_held_out = 1;
  ev.admin_token = (char *)token;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_EVALUATE;
  req.evaluate = &ev;
  Kernelarena__V1__Response *r;
  char err[1024];
  if (ka_client_call(c, &req, timeout_s * 1000, &r, err, sizeof err))
    return json_pack("{s:s, s:i, s:s}", "status", "error", "step", step, "error", err);
  if (r->body_case != KERNELARENA__V1__RESPONSE__BODY_EVALUATE) {
    snprintf(err, sizeof err, "held-out Evaluate: %s: %s",
             r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR
                 ? ka_error_code_name(r->error->code)
                 : "unexpected response",
             r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR && r->error->message
                 ? r->error->message
                 : "");
    ka_client_free_response(r);
    return json_pack("{s:s, s:i, s:s}", "status", "error", "step", step, "error", err);
  }
  const Kernelarena__V1__EvaluateResponse *e = r->evaluate;
  const Kernelarena__V1__Observation *o = e->observation;
  int st = o ? (int)o->status : 0;
  json_t *cases = json_array();
  for (size_t i = 0; o && i < o->n_cases; i++)
    if (o->cases[i]->held_out) json_array_append_new(cases, ec_case_json(o->cases[i]));
  int correct = ec_eval_comp(e, "held_out_correct") > 0;
  double held = correct ? ec_eval_comp(e, "held_out_speedup_geomean") : NAN;
  double shown = st == KERNELARENA__V1__STATUS__OK ? ec_eval_comp(e, "speedup_geomean") : NAN;
  double gap = isfinite(held) && held > 0 && isfinite(shown) && shown > 0 ? held / shown : NAN;
  const char *status = "incorrect";
  if (correct)
    status = "ok";
  else if (st == KERNELARENA__V1__STATUS__OK && json_array_size(cases) == 0)
    status = "skipped";
  const char *job = NULL;
  for (size_t i = 0; i < e->n_info; i++)
    if (!strcmp(e->info[i]->key, "job_id")) job = e->info[i]->value;
  json_t *out =
      json_pack("{s:s, s:s, s:i, s:b, s:o, s:o, s:o, s:o, s:s}", "status", status, "eval_status",
                ka_status_name(st), "step", step, "correct", correct, "speedup_geomean",
                ec_json_num(held), "shown_speedup_geomean", ec_json_num(shown), "gap",
                ec_json_num(gap), "cases", cases, "job_id", job ? job : "");
  if (!strcmp(status, "skipped"))
    json_object_set_new(out, "reason", json_string("the task has no held-out cases"));
  if (o && o->message && *o->message) json_object_set_new(out, "message", json_string(o->message));
  ka_client_free_response(r);
  return out;
}

/* ------------------------------------------------------------------ one episode */

static const char *ec_reset_info(const Kernelarena__V1__ResetResponse *r, const char *key) {
  for (size_t i = 0; i < r->n_info; i++)
    if (!strcmp(r->info[i]->key, key)) return r->info[i]->value;
  return NULL;
}

/* 1 if the workspace's editable files differ from the last submitted ones. */
static int ec_workspace_changed(const char *ws, const char *out_dir, int last_step,
                                const ec_step_target *t) {
  if (last_step == 0) return 1;
  for (int i = 0; i < t->nfiles; i++) {
    char a[PATH_MAX * 2], b[PATH_MAX * 2];
    snprintf(a, sizeof a, "%s/%s", ws, t->files[i]);
    snprintf(b, sizeof b, "%s/steps/%d/%s", out_dir, last_step, t->files[i]);
    char *x = NULL, *y = NULL;
    size_t lx = 0, ly = 0;
    int rx = ka_read_file(a, 0, &x, &lx), ry = ka_read_file(b, 0, &y, &ly);
    int diff = rx != ry || (rx == KA_OK && (lx != ly || memcmp(x, y, lx)));
    free(x), free(y);
    if (diff) return 1;
  }
  return 0;
}

/* Fills the score fields of res from the recorded steps: reward of the last or the
 * best step, that step's number, status, correctness and speedup. */
static void ec_score(json_t *res, json_t *steps, int best) {
  size_t i, pick = (size_t)-1;
  json_t *s;
  double top = -INFINITY;
  json_array_foreach(steps, i, s) {
    double r = json_number_value(json_object_get(s, "reward"));
    if (!best || r > top) top = r, pick = i;
  }
  if (pick == (size_t)-1) {
    json_object_set_new(res, "reward", json_real(0));
    json_object_set_new(res, "scored_step", json_null());
    json_object_set_new(res, "correct", json_false());
    json_object_set_new(res, "speedup", json_null());
    json_object_set_new(res, "step_status", json_null());
    return;
  }
  s = json_array_get(steps, pick);
  json_object_set(res, "reward", json_object_get(s, "reward"));
  json_object_set(res, "scored_step", json_object_get(s, "step"));
  json_object_set(res, "correct", json_object_get(s, "correct"));
  json_object_set(res, "speedup", json_object_get(s, "speedup_geomean"));
  json_object_set(res, "step_status", json_object_get(s, "status"));
  double bestr = -INFINITY;
  json_array_foreach(steps, i, s) bestr =
      fmax(bestr, json_number_value(json_object_get(s, "reward")));
  json_object_set_new(res, "best_reward", json_real(bestr));
}

/* The submit callback of adapters that play steps themselves (ka_adapter_ops.play):
 * one step of the workspace, through the step proxy. ctx is the ec_step_target. */
static int ec_play_submit(void *ctx, int *done, char *err, size_t errlen) {
  json_t *r;
  int rc = ec_step_submit(ctx, &r, err, errlen);
  if (rc) return rc;
  *done = json_is_true(json_object_get(r, "truncated"));
  json_decref(r);
  return KA_OK;
}

/* Resets the episode of rq with options max_steps, run and label. Returns KA_OK with
 * *rr (a Reset response; caller frees), or an error with the reason in err. */
static int ec_agent_reset(ka_client *c, const ec_episode_req *rq, int max_steps,
                          Kernelarena__V1__Response **rr, char *err, size_t errlen) {
  char steps_buf[32];
  snprintf(steps_buf, sizeof steps_buf, "%d", max_steps);
  Kernelarena__V1__ResetRequest__OptionsEntry opt[3], *optp[3];
  const char *keys[3] = {"max_steps", "run", "label"};
  const char *vals[3] = {steps_buf, rq->run, rq->label};
  Kernelarena__V1__ResetRequest rs = KERNELARENA__V1__RESET_REQUEST__INIT;
  for (int i = 0; i < 3; i++) {
    if (!vals[i] || !*vals[i]) continue;
    kernelarena__v1__reset_request__options_entry__init(&opt[rs.n_options]);
    opt[rs.n_options].key = (char *)keys[i];
    opt[rs.n_options].value = (char *)vals[i];
    optp[rs.n_options] = &opt[rs.n_options];
    rs.n_options++;
  }
  rs.options = optp;
  rs.task_id = (char *)rq->task;
  rs.seed = rq->seed;
  rs.has_seed = rq->has_seed;
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_RESET;
  req.reset = &rs;
  int rc = ka_client_call(c, &req, rq->timeout_s * 1000, rr, err, errlen);
  if (rc) return rc;
  Kernelarena__V1__Response *r = *rr;
  if (r->body_case == KERNELARENA__V1__RESPONSE__BODY_RESET) return KA_OK;
  int is_err = r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR;
  ka_seterr(err, errlen, KA_ESTATE, "reset: %s: %s",
            is_err ? ka_error_code_name(r->error->code) : "unexpected response",
            is_err ? r->error->message : "");
  ka_client_free_response(r);
  *rr = NULL;
  return KA_ESTATE;
}

/* Copies the files of recorded step `step` (out_dir/steps/<step>/) to out_dir/final/. */
static void ec_copy_final(const char *out_dir, int step) {
  char from[PATH_MAX + 32], to[PATH_MAX + 32];
  snprintf(from, sizeof from, "%s/steps/%d", out_dir, step);
  snprintf(to, sizeof to, "%s/final", out_dir);
  DIR *d = opendir(from);
  struct dirent *de;
  ka_mkdirs(to);
  while (d && (de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    char a[PATH_MAX * 2], b[PATH_MAX * 2];
    snprintf(a, sizeof a, "%s/%s", from, de->d_name);
    snprintf(b, sizeof b, "%s/%s", to, de->d_name);
    char *x;
    size_t lx;
    if (ka_read_file(a, 0, &x, &lx) == KA_OK) ka_write_file(b, x, lx), free(x);
  }
  if (d) closedir(d);
}

/* episode.json's held_out record for the scored step of res (new reference): skipped
 * without a step or after an interruption, an error without an admin token, else
 * ec_held_out_score's. */
static json_t *ec_held_out_record(ka_client *c, const json_t *res, const ec_episode_req *rq) {
  json_t *ss = json_object_get(res, "scored_step");
  if (!json_is_integer(ss))
    return json_pack("{s:s, s:s}", "status", "skipped", "reason", "no final kernel (no step)");
  if (ec_agent_interrupted)
    return json_pack("{s:s, s:s}", "status", "skipped", "reason", "interrupted");
  if (!rq->admin_token)
    return json_pack("{s:s, s:s}", "status", "error", "error",
                     "no admin token (give --admin-token-file or set KA_ADMIN_TOKEN when "
                     "using --server)");
  return ec_held_out_score(c, json_string_value(json_object_get(res, "episode_id")),
                           (int)json_integer_value(ss), rq->admin_token, rq->timeout_s);
}

/* What ec_agent_cli starts the agent's CLI with. */
typedef struct ec_cli_run {
  const ka_adapter_ops *ad;
  const json_t *cfg;       /* the agent config */
  const char *ws;          /* the workspace */
  const char *prompt;      /* the task prompt */
  const char *prompt_path; /* the workspace's prompt.md: the CLI's stdin */
  const char *episode;
  const char *task;
  const char *files;   /* the editable files, space-separated (KA_FILES) */
  const char *out_dir; /* the episode folder: transcript, agent.stderr, mcp.json */
  int timeout_s;       /* the agent's time limit */
  ec_proxy *px;        /* the step proxy (its address is the agent's KA_SERVER) */
} ec_cli_run;

/* Runs the CLI of adapter r->ad in the workspace through the agents' process runner:
 * the MCP config when the config asks for it, the command line (recorded in agent.argv,
 * a prompt argument as "<prompt>"), the agent's environment (KA_SERVER = the proxy,
 * KA_EPISODE, KA_WORKSPACE, KA_PROMPT_FILE, KA_TASK, KA_FILES, KA_PROMPT, envctl's folder
 * first on PATH), then the result into agent (exit_code, timed_out, interrupted, wall_s,
 * timeout_s, transcript, stderr) and the transcript's tokens into usage and *cost. A CLI
 * that could not be started is said in cli_err. Returns KA_OK, or KA_EINVAL when the
 * command line cannot be built (reason in err; nothing started). */
static int ec_agent_cli(const ec_cli_run *r, json_t *agent, json_t *usage, double *cost,
                        char *cli_err, size_t cli_errlen, char *err, size_t errlen) {
  char mcp_path[PATH_MAX + 32] = "", exe[PATH_MAX] = "";
  ka_exe_dir(exe, sizeof exe);
  if (ka_cfg_bool(r->cfg, "mcp", 0)) {
    snprintf(mcp_path, sizeof mcp_path, "%s/mcp.json", r->out_dir);
    char envctl_path[PATH_MAX + 16];
    snprintf(envctl_path, sizeof envctl_path, "%s/envctl", exe);
    json_t *m =
        json_pack("{s:{s:{s:s, s:s, s:[s, s, s], s:{s:s, s:s}}}}", "mcpServers", "kernelarena",
                  "type", "stdio", "command", envctl_path, "args", "mcp", "--workspace", r->ws,
                  "env", "KA_SERVER", r->px->url, "KA_EPISODE", r->episode);
    json_dump_file(m, mcp_path, JSON_INDENT(2));
    json_decref(m);
  }
  ka_argv av = {0};
  ka_agent_ctx actx = {
      .workspace = r->ws, .prompt = r->prompt, .mcp_config = mcp_path[0] ? mcp_path : NULL};
  if (r->ad->argv(r->cfg, &actx, &av, err, errlen)) return KA_EINVAL;
  /* environment of the agent */
  char e_srv[700], e_ep[200], e_ws[PATH_MAX + 16], e_pf[PATH_MAX + 32], e_task[300], e_path[16384],
      e_files[4096];
  char *e_prompt = malloc(strlen(r->prompt) + 16);
  snprintf(e_srv, sizeof e_srv, "KA_SERVER=%s", r->px->url);
  snprintf(e_ep, sizeof e_ep, "KA_EPISODE=%s", r->episode);
  snprintf(e_ws, sizeof e_ws, "KA_WORKSPACE=%s", r->ws);
  snprintf(e_pf, sizeof e_pf, "KA_PROMPT_FILE=%s", r->prompt_path);
  snprintf(e_task, sizeof e_task, "KA_TASK=%s", r->task);
  snprintf(e_files, sizeof e_files, "KA_FILES=%s", r->files);
  const char *path = getenv("PATH");
  snprintf(e_path, sizeof e_path, "PATH=%s:%s", exe, path ? path : "/usr/bin:/bin");
  sprintf(e_prompt, "KA_PROMPT=%s", r->prompt);
  char *env[] = {e_srv, e_ep, e_ws, e_pf, e_task, e_files, e_path, e_prompt, NULL};
  const char *tname = r->ad->transcript ? r->ad->transcript(r->cfg) : "transcript.jsonl";
  char tpath[PATH_MAX + 32], epath[PATH_MAX + 32];
  snprintf(tpath, sizeof tpath, "%s/%s", r->out_dir, tname);
  snprintf(epath, sizeof epath, "%s/agent.stderr", r->out_dir);
  json_t *cmdline = json_array();
  for (int i = 0; i < av.n; i++)
    json_array_append_new(
        cmdline, json_string(i == av.n - 1 && r->ad->prompt_last_arg ? "<prompt>" : av.v[i]));
  json_object_set_new(agent, "argv", cmdline);
  ka_agent_proc proc = {.argv = av.v,
                        .cwd = r->ws,
                        .env = env,
                        .stdin_path = r->prompt_path,
                        .stdout_path = tpath,
                        .stderr_path = epath,
                        .timeout_s = r->timeout_s,
                        .grace_s = 2,
                        .interrupted = &ec_agent_interrupted};
  ka_agent_proc_result pr;
  r->px->t0 = ka_now_s();
  int rc = ka_agent_run(&proc, &pr);
  free(e_prompt);
  ka_argv_free(&av);
  if (rc) json_object_set_new(agent, "error", json_string("fork failed"));
  json_object_set_new(agent, "exit_code", json_integer(pr.exit_code));
  json_object_set_new(agent, "timed_out", json_boolean(pr.timed_out));
  json_object_set_new(agent, "interrupted", json_boolean(pr.interrupted));
  json_object_set_new(agent, "wall_s", json_real(pr.wall_s));
  json_object_set_new(agent, "timeout_s", json_integer(r->timeout_s));
  json_object_set_new(agent, "transcript", json_string(tname));
  json_object_set_new(agent, "stderr", json_string("agent.stderr"));
  *cost = ka_transcript_usage(tpath, usage, agent);
  if (pr.exit_code == 126 || pr.exit_code == 127) /* the shell's "cannot execute" codes */
    snprintf(cli_err, cli_errlen, "the agent CLI could not be started (exit %d; see %s)",
             pr.exit_code, epath);
  return KA_OK;
}

/* What the phases of one agent episode after its Reset share (ec_agent_steps). */
typedef struct ec_episode_run {
  ka_client *c;
  const json_t *cfg; /* the agent config */
  const ec_episode_req *rq;
  const Kernelarena__V1__ResetResponse *reset;
  const ka_adapter_ops *ad;
  int max_steps;
  char ws[PATH_MAX];               /* the workspace, out_dir/workspace */
  char prompt_path[PATH_MAX + 64]; /* its prompt.md */
  ka_sb files_env;                 /* the editable files, space-separated */
  ec_proxy px;                     /* the step proxy */
  ec_step_target tgt;              /* the proxy as `envctl step` sees it */
  json_t *agent;                   /* episode.json's agent record */
  json_t *usage;                   /* the transcript's tokens */
  double cost;                     /* USD; NAN: not known */
  char cli_err[PATH_MAX + 128];    /* the CLI could not be started; "" otherwise */
} ec_episode_run;

/* The start of episode.json's record (new reference): schema, run, label, task, repeat,
 * adapter, agent config, reward mode, max_steps, started_at. The reward mode of rq (the
 * run or the command line) wins over the agent config's; *best is 1 for "best", and
 * *max_steps is rq's when set, else the config's (default 20). */
static json_t *ec_agent_record_new(const json_t *agent_cfg, const ec_episode_req *rq, int *best,
                                   int *max_steps) {
  const char *adapter = ka_cfg_str(agent_cfg, "adapter", "command");
  /* the run's (or the command line's) reward mode wins over the agent config's */
  *best = !strcmp(rq->reward ? rq->reward : ka_cfg_str(agent_cfg, "reward", "last"), "best");
  *max_steps = rq->max_steps > 0 ? rq->max_steps : ka_cfg_int(agent_cfg, "max_steps", 20);
  double started = ka_wall_s();
  return json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:O, s:s, s:i, s:f}", "schema",
                   "kernelarena.episode.v1", "run", rq->run ? rq->run : "default", "label",
                   rq->label ? rq->label : "", "task", rq->task, "repeat", rq->repeat, "adapter",
                   adapter, "agent_config", agent_cfg, "reward_mode", *best ? "best" : "last",
                   "max_steps", *max_steps, "started_at", started);
}

/* Records what the Reset response reset says of the episode in res: episode_id, seed,
 * task_version and the device (when the observation names one). */
static void ec_agent_record_reset(json_t *res, const Kernelarena__V1__ResetResponse *reset) {
  const Kernelarena__V1__Observation *obs = reset->observation;
  json_object_set_new(res, "episode_id", json_string(reset->episode_id));
  json_object_set_new(res, "seed", json_integer((json_int_t)reset->seed));
  const char *tv = ec_reset_info(reset, "task_version");
  json_object_set_new(res, "task_version", json_string(tv ? tv : ""));
  if (obs->device && obs->device->name)
    json_object_set_new(res, "device",
                        json_pack("{s:s, s:s, s:s}", "name", obs->device->name, "backend",
                                  obs->device->backend ? obs->device->backend : "", "arch",
                                  obs->device->arch ? obs->device->arch : ""));
}

/* Makes the workspace r->ws afresh (out_dir/workspace, with .kernelarena/) holding the
 * observation's files and prompt.md (r->prompt_path), and lists the files in
 * r->files_env. Returns the list of file paths (new reference). Write errors are
 * ignored. */
static json_t *ec_agent_workspace(ec_episode_run *r) {
  const Kernelarena__V1__Observation *obs = r->reset->observation;
  char p[PATH_MAX + 64];
  snprintf(r->ws, sizeof r->ws, "%s/workspace", r->rq->out_dir);
  ka_rmtree(r->ws);
  snprintf(p, sizeof p, "%s/.kernelarena", r->ws);
  ka_mkdirs(p);
  json_t *flist = json_array();
  for (size_t i = 0; i < obs->n_files; i++) {
    snprintf(p, sizeof p, "%s/%s", r->ws, obs->files[i]->path);
    ka_write_file(p, obs->files[i]->content.data, obs->files[i]->content.len);
    json_array_append_new(flist, json_string(obs->files[i]->path));
    ka_sb_printf(&r->files_env, "%s%s", i ? " " : "", obs->files[i]->path);
  }
  snprintf(r->prompt_path, sizeof r->prompt_path, "%s/prompt.md", r->ws);
  ka_write_file(r->prompt_path, obs->prompt, strlen(obs->prompt));
  return flist;
}

/* Writes the workspace's .kernelarena/episode.json (what `envctl step` reads): the step
 * proxy's address, the episode, the task, the editable files flist and step 0. */
static void ec_agent_write_state(const ec_episode_run *r, json_t *flist) {
  char p[PATH_MAX + 64];
  json_t *state = json_pack("{s:s, s:s, s:s, s:O, s:i}", "server", r->px.url, "episode",
                            r->reset->episode_id, "task", r->rq->task, "files", flist, "step", 0);
  snprintf(p, sizeof p, "%s/.kernelarena/episode.json", r->ws);
  json_dump_file(state, p, JSON_INDENT(2));
  json_decref(state);
}

/* Lets an adapter that plays steps itself (ad->play) play the episode through the step
 * proxy, recording its error, wall_s, exit_code 0 and timed_out false in r->agent.
 * err (errlen bytes) is scratch space, left empty. */
static void ec_agent_play(ec_episode_run *r, char *err, size_t errlen) {
  double t0 = ka_now_s();
  if (r->ad->play(r->cfg, r->tgt.workspace, r->tgt.files, r->tgt.nfiles, ec_play_submit, &r->tgt,
                  &ec_agent_interrupted, err, errlen))
    json_object_set_new(r->agent, "error", json_string(err));
  err[0] = 0;
  json_object_set_new(r->agent, "wall_s", json_real(ka_now_s() - t0));
  json_object_set_new(r->agent, "exit_code", json_integer(0));
  json_object_set_new(r->agent, "timed_out", json_false());
}

/* Runs the agent: ec_agent_play for adapters that play themselves, else its CLI
 * (ec_agent_cli, with the config's timeout_s, default 1800 s). Returns KA_OK, or
 * KA_EINVAL when the CLI's command line cannot be built (reason in err). */
static int ec_agent_act(ec_episode_run *r, char *err, size_t errlen) {
  if (r->ad->play) {
    ec_agent_play(r, err, errlen);
    return KA_OK;
  }
  ec_cli_run run = {.ad = r->ad,
                    .cfg = r->cfg,
                    .ws = r->ws,
                    .prompt = r->reset->observation->prompt,
                    .prompt_path = r->prompt_path,
                    .episode = r->reset->episode_id,
                    .task = r->rq->task,
                    .files = r->files_env.s ? r->files_env.s : "",
                    .out_dir = r->rq->out_dir,
                    .timeout_s = ka_cfg_int(r->cfg, "timeout_s", 1800),
                    .px = &r->px};
  return ec_agent_cli(&run, r->agent, r->usage, &r->cost, r->cli_err, sizeof r->cli_err, err,
                      errlen);
}

/* 1 when the final workspace is evaluated as one more step: not interrupted, the CLI
 * started, the adapter asks for final evaluation, steps are left, and the config's
 * final_eval is "always", or "if_changed" (the default) with the workspace changed
 * since the last step. */
static int ec_agent_wants_final(const ec_episode_run *r) {
  const char *final_eval = ka_cfg_str(r->cfg, "final_eval", "if_changed");
  return !ec_agent_interrupted && !r->cli_err[0] && r->ad->final_eval &&
         r->px.steps < r->max_steps &&
         (!strcmp(final_eval, "always") ||
          (!strcmp(final_eval, "if_changed") &&
           ec_workspace_changed(r->ws, r->rq->out_dir, r->px.steps, &r->tgt)));
}

/* Submits the final workspace as the adapter's step (the proxy keeps serving), a
 * failure recorded as final_eval_error in r->agent. err (errlen bytes) is scratch
 * space, left empty. Returns 1 when the step was made, else 0. */
static int ec_agent_final_step(ec_episode_run *r, char *err, size_t errlen) {
  int done = 0;
  atomic_store(&r->px.stop, 1); /* marks the step as the adapter's; the proxy keeps serving */
  json_t *res;
  r->tgt.step = r->px.steps;
  if (ec_step_submit(&r->tgt, &res, err, errlen) == KA_OK) {
    done = 1;
    json_decref(res);
  } else {
    json_object_set_new(r->agent, "final_eval_error", json_string(err));
  }
  err[0] = 0;
  return done;
}

/* Stops the step proxy p once its last step is recorded, closes its socket and removes
 * its folder. Returns its step records (new reference). */
static json_t *ec_proxy_finish(ec_proxy *p) {
  /* the proxy only stops once the last step is recorded */
  atomic_store(&p->stop, 2);
  pthread_join(p->thr, NULL);
  p->stop = 2;
  json_t *steps = json_incref(p->records);
  nng_close(p->sock);
  ka_rmtree(p->dir);
  json_decref(p->records);
  return steps;
}

/* The episode after its Reset (r: c, cfg, rq, reset, ad and max_steps set, the rest
 * zeroed): workspace, step proxy, the agent, the last step it started, the final
 * evaluation; records final_eval and agent in res. Returns the step records (new
 * reference), or NULL with the reason in err when the proxy, the step target or the
 * CLI's command line could not be set up. */
static json_t *ec_agent_steps(ec_episode_run *r, json_t *res, char *err, size_t errlen) {
  json_t *flist = ec_agent_workspace(r);
  if (ec_proxy_start(&r->px, r->c, r->reset->episode_id, r->rq->out_dir, r->rq->timeout_s, err,
                     errlen)) {
    json_decref(flist);
    ka_sb_free(&r->files_env);
    return NULL;
  }
  ec_agent_write_state(r, flist);
  json_decref(flist);
  if (ec_step_target_load(r->ws, r->px.url, r->reset->episode_id, &r->tgt, err, errlen)) {
    ec_proxy_stop(&r->px);
    ka_sb_free(&r->files_env);
    return NULL;
  }
  r->tgt.timeout_s = r->rq->timeout_s;
  r->agent = json_object();
  r->usage = json_object();
  r->cost = NAN;
  int rc = ec_agent_act(r, err, errlen);
  ka_sb_free(&r->files_env);
  if (rc) {
    ec_step_target_free(&r->tgt);
    ec_proxy_stop(&r->px);
    json_decref(r->agent), json_decref(r->usage);
    return NULL;
  }
  /* a step the agent started before it ended is still recorded (the proxy finishes it) */
  for (double until = ka_now_s() + r->rq->timeout_s;
       atomic_load(&r->px.busy) && ka_now_s() < until;)
    usleep(20000);
  /* the final workspace, if the agent changed it after its last step */
  int final_done = ec_agent_wants_final(r) && ec_agent_final_step(r, err, errlen);
  json_object_set_new(res, "final_eval", json_boolean(final_done));
  json_t *steps = ec_proxy_finish(&r->px);
  ec_step_target_free(&r->tgt);
  json_object_set_new(r->agent, "usage", r->usage);
  json_object_set_new(r->agent, "cost_usd", ec_json_num(r->cost));
  json_object_set_new(res, "agent", r->agent);
  if (r->cli_err[0]) snprintf(err, errlen, "%s", r->cli_err);
  return steps;
}

/* Completes res once the episode is over: the steps (none: NULL) and their count, the
 * score, the status (error with err when set, interrupted, completed or no_steps), the
 * scored step's files copied to final/, the held-out record (rq->held_out), finished_at;
 * then writes out_dir/episode.json. Takes ownership of steps. */
static void ec_agent_conclude(ka_client *c, json_t *res, json_t *steps, int best, const char *err,
                              const ec_episode_req *rq) {
  if (!steps) steps = json_array();
  json_object_set_new(res, "steps", steps);
  json_object_set_new(res, "n_steps", json_integer((json_int_t)json_array_size(steps)));
  ec_score(res, steps, best);
  if (err[0]) {
    json_object_set_new(res, "status", json_string("error"));
    json_object_set_new(res, "error", json_string(err));
  } else if (ec_agent_interrupted) {
    json_object_set_new(res, "status", json_string("interrupted"));
  } else {
    json_object_set_new(res, "status",
                        json_string(json_array_size(steps) ? "completed" : "no_steps"));
  }
  /* the scored step's files are the episode's final kernel */
  json_t *ss = json_object_get(res, "scored_step");
  if (json_is_integer(ss)) ec_copy_final(rq->out_dir, (int)json_integer_value(ss));
  /* held-out scoring of the final kernel (the scored step), after Close: nothing the
   * agent can still do reaches it */
  json_object_set_new(res, "held_out", rq->held_out ? ec_held_out_record(c, res, rq) : json_null());
  json_object_set_new(res, "finished_at", json_real(ka_wall_s()));
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/episode.json", rq->out_dir);
  json_dump_file(res, path, JSON_INDENT(2));
}

/* One agent episode (agent.h says what it records): the record, Reset, the episode's
 * steps (ec_agent_steps), Close, then the result (ec_agent_conclude). */
json_t *ec_agent_episode(ka_client *c, const json_t *agent_cfg, const ec_episode_req *rq) {
  char err[1024] = "";
  int best, max_steps;
  json_t *res = ec_agent_record_new(agent_cfg, rq, &best, &max_steps);
  json_t *steps = NULL;
  ka_mkdirs(rq->out_dir);
  Kernelarena__V1__Response *rr;
  /* a config that cannot run fails here, before Reset: no episode on the server */
  if (!ka_adapter_check(agent_cfg, err, sizeof err) &&
      !ec_agent_reset(c, rq, max_steps, &rr, err, sizeof err)) {
    ec_agent_record_reset(res, rr->reset);
    ec_episode_run r = {.c = c,
                        .cfg = agent_cfg,
                        .rq = rq,
                        .reset = rr->reset,
                        /* known: checked above */
                        .ad = ka_adapter_find(ka_cfg_str(agent_cfg, "adapter", "command")),
                        .max_steps = max_steps};
    steps = ec_agent_steps(&r, res, err, sizeof err);
    ec_close_episode(c, rr->reset->episode_id, 30000);
    ka_client_free_response(rr);
  }
  ec_agent_conclude(c, res, steps, best, err, rq);
  return res;
}

/* ------------------------------------------------------------------ envctl agent */

static void ec_agent_on_signal(int sig) {
  ec_agent_interrupted = sig;
}

void ec_agent_install_signals(void) {
  struct sigaction sa = {.sa_handler = ec_agent_on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
}
