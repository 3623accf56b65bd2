/* `envctl step`: submit the workspace's editable files as one step of an episode.
 *
 * Used by coding agents from inside their workspace; the adapter sets KA_SERVER,
 * KA_EPISODE, KA_WORKSPACE and KA_FILES and writes .kernelarena/episode.json. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "envctl.h"
#include "ka_common.h"
#include "ka_opt.h"

json_t *ec_json_num(double x) {
  return isfinite(x) ? json_real(x) : json_null();
}

void ec_step_target_free(ec_step_target *t) {
  for (int i = 0; i < t->nfiles; i++) free(t->files[i]);
  t->nfiles = 0;
}

static void ec_add_file(ec_step_target *t, const char *name, size_t n) {
  if (t->nfiles >= EC_MAX_FILES || n == 0) return;
  char *s = strndup(name, n);
  if (s) t->files[t->nfiles++] = s;
}

int ec_step_target_load(const char *ws, const char *server, const char *episode, ec_step_target *t,
                        char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  t->timeout_s = KA_OPT_REQUEST_TIMEOUT_S;
  if (!ws) ws = getenv("KA_WORKSPACE");
  if (ws && *ws)
    snprintf(t->workspace, sizeof t->workspace, "%s", ws);
  else if (!getcwd(t->workspace, sizeof t->workspace))
    return ka_seterr(err, errlen, KA_EINVAL, "getcwd: %s", strerror(errno));
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/.kernelarena/episode.json", t->workspace);
  json_error_t je;
  json_t *st = json_load_file(path, 0, &je); /* optional */
  if (!server) server = getenv("KA_SERVER");
  if ((!server || !*server) && st) server = json_string_value(json_object_get(st, "server"));
  if (!episode) episode = getenv("KA_EPISODE");
  if ((!episode || !*episode) && st) episode = json_string_value(json_object_get(st, "episode"));
  if (server) snprintf(t->server, sizeof t->server, "%s", server);
  if (episode) snprintf(t->episode, sizeof t->episode, "%s", episode);
  const char *fl = getenv("KA_FILES");
  if (fl && *fl) {
    for (const char *p = fl; *p;) {
      size_t n = strcspn(p, " \t\n");
      ec_add_file(t, p, n);
      p += n;
      p += strspn(p, " \t\n");
    }
  } else if (st) {
    json_t *a = json_object_get(st, "files");
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
      if (json_is_string(v)) ec_add_file(t, json_string_value(v), strlen(json_string_value(v)));
    }
  }
  if (st) t->step = (int)json_integer_value(json_object_get(st, "step"));
  json_decref(st);
  if (!t->server[0] || !t->episode[0] || t->nfiles == 0) {
    int rc = ka_seterr(err, errlen, KA_EINVAL,
                       "no %s: set KA_SERVER, KA_EPISODE and KA_FILES, or run in a workspace "
                       "prepared by an adapter (%s not found)",
                       !t->server[0]    ? "server"
                       : !t->episode[0] ? "episode"
                                        : "editable files",
                       path);
    ec_step_target_free(t);
    return rc;
  }
  return KA_OK;
}

json_t *ec_case_json(const Kernelarena__V1__CaseResult *c) {
  return json_pack("{s:s, s:b, s:o, s:o, s:I, s:I, s:o, s:o, s:o, s:s}", "name",
                   c->name ? c->name : "", "correct", c->correct, "max_abs_err",
                   ec_json_num(c->max_abs_err), "max_rel_err", ec_json_num(c->max_rel_err),
                   "mismatches", (json_int_t)c->mismatches, "elements", (json_int_t)c->elements,
                   "baseline_ms", ec_json_num(c->baseline_ms), "candidate_ms",
                   ec_json_num(c->candidate_ms), "speedup", ec_json_num(c->speedup), "message",
                   c->message ? c->message : "");
}

json_t *ec_step_json(const Kernelarena__V1__StepResponse *s) {
  const Kernelarena__V1__Observation *o = s->observation;
  json_t *comp = json_object(), *info = json_object(), *cases = json_array();
  double compiled = 0, correct = 0, geo = NAN;
  for (size_t i = 0; i < s->n_reward_components; i++) {
    const char *k = s->reward_components[i]->key;
    double v = s->reward_components[i]->value;
    json_object_set_new(comp, k, ec_json_num(v));
    if (!strcmp(k, "compiled")) compiled = v;
    if (!strcmp(k, "correct")) correct = v;
    if (!strcmp(k, "speedup_geomean")) geo = v;
  }
  for (size_t i = 0; i < s->n_info; i++)
    json_object_set_new(info, s->info[i]->key, json_string(s->info[i]->value));
  int status = o ? (int)o->status : 0;
  if (o)
    for (size_t i = 0; i < o->n_cases; i++) json_array_append_new(cases, ec_case_json(o->cases[i]));
  if (status != KERNELARENA__V1__STATUS__OK) geo = NAN;
  return json_pack("{s:i, s:o, s:s, s:b, s:b, s:o, s:b, s:b, s:s, s:s, s:s, s:o, s:o, s:o}", "step",
                   o ? o->step : 0, "reward", ec_json_num(s->reward), "status",
                   ka_status_name(status), "compiled", compiled > 0, "correct", correct > 0,
                   "speedup_geomean", ec_json_num(geo), "terminated", s->terminated, "truncated",
                   s->truncated, "message", o && o->message ? o->message : "", "compile_log",
                   o && o->compile_log ? o->compile_log : "", "runtime_log",
                   o && o->runtime_log ? o->runtime_log : "", "cases", cases, "components", comp,
                   "info", info);
}

char *ec_step_summary(const json_t *r) {
  ka_sb sb = {0};
  ka_sb_printf(&sb, "step %d: status %s, compiled %s, correct %s, reward %.2f",
               (int)json_integer_value(json_object_get(r, "step")),
               json_string_value(json_object_get(r, "status")),
               json_is_true(json_object_get(r, "compiled")) ? "yes" : "no",
               json_is_true(json_object_get(r, "correct")) ? "yes" : "no",
               json_number_value(json_object_get(r, "reward")));
  json_t *g = json_object_get(r, "speedup_geomean");
  if (json_is_number(g)) ka_sb_printf(&sb, ", speedup %.3fx", json_number_value(g));
  if (json_is_true(json_object_get(r, "truncated")))
    ka_sb_puts(&sb, " (step limit reached: no more steps)");
  ka_sb_puts(&sb, "\n");
  const char *msg = json_string_value(json_object_get(r, "message"));
  if (msg && *msg) ka_sb_printf(&sb, "  %s\n", msg);
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(r, "cases"), i, c) {
    ka_sb_printf(&sb,
                 "  case %s: %s, max_abs_err %.3g, baseline %.4f ms, candidate %.4f ms, %.3fx\n",
                 json_string_value(json_object_get(c, "name")),
                 json_is_true(json_object_get(c, "correct")) ? "correct" : "INCORRECT",
                 json_number_value(json_object_get(c, "max_abs_err")),
                 json_number_value(json_object_get(c, "baseline_ms")),
                 json_number_value(json_object_get(c, "candidate_ms")),
                 json_number_value(json_object_get(c, "speedup")));
    const char *m = json_string_value(json_object_get(c, "message"));
    if (m && *m && !json_is_true(json_object_get(c, "correct"))) ka_sb_printf(&sb, "    %s\n", m);
  }
  const char *logs[2] = {"compile_log", "runtime_log"};
  for (int k = 0; k < 2; k++) {
    const char *l = json_string_value(json_object_get(r, logs[k]));
    if (l && *l) ka_sb_printf(&sb, "  %s:\n%.4000s\n", logs[k], l);
  }
  return ka_sb_take(&sb);
}

/* Rewrites the state file with the new step count (other keys kept). */
static void ec_state_set_step(const ec_step_target *t) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/.kernelarena/episode.json", t->workspace);
  json_error_t je;
  json_t *st = json_load_file(path, 0, &je);
  if (!st) return;
  json_object_set_new(st, "step", json_integer(t->step));
  json_dump_file(st, path, JSON_INDENT(2));
  json_decref(st);
}

/* The editable files of a step as the request carries them (ec_step_read_files). */
typedef struct ec_step_files {
  Kernelarena__V1__File fm[EC_MAX_FILES];
  Kernelarena__V1__File *fp[EC_MAX_FILES]; /* fp[i] = &fm[i] */
  char *bufs[EC_MAX_FILES];                /* the contents (owned) */
  int n;
} ec_step_files;

/* Reads the editable files of t present in its workspace into f (zeroed); a missing
 * file is left out (it keeps its current contents on the server). Returns KA_OK, or
 * KA_EINVAL with the reason in err when one cannot be read. The caller frees f's
 * buffers (bufs[0..n-1]) either way. */
static int ec_step_read_files(const ec_step_target *t, ec_step_files *f, char *err, size_t errlen) {
  for (int i = 0; i < t->nfiles; i++) {
    char p[PATH_MAX + 300];
    snprintf(p, sizeof p, "%s/%s", t->workspace, t->files[i]);
    size_t len;
    int r = ka_read_file(p, 0, &f->bufs[f->n], &len);
    if (r == KA_ENOENT) continue; /* keeps its current contents on the server */
    if (r) return ka_seterr(err, errlen, KA_EINVAL, "cannot read %s: %s", p, ka_strerror(r));
    kernelarena__v1__file__init(&f->fm[f->n]);
    f->fm[f->n].path = t->files[i];
    f->fm[f->n].content.data = (uint8_t *)f->bufs[f->n];
    f->fm[f->n].content.len = len;
    f->fp[f->n] = &f->fm[f->n];
    f->n++;
  }
  return KA_OK;
}

/* Checks that something can listen at t->server: an ipc:// address needs its socket
 * file. Returns KA_OK, or KA_EUNAVAIL with the reason in err. */
static int ec_step_check_server(const ec_step_target *t, char *err, size_t errlen) {
  /* an ipc:// socket whose file is gone has no one behind it: said at once (the request
   * would wait 30 s for a server that never comes: the step proxy of an agent run that
   * has ended, new user 2026-12-01) */
  struct stat sst;
  if (!strncmp(t->server, "ipc://", 6) && stat(t->server + 6, &sst) != 0)
    return ka_seterr(err, errlen, KA_EUNAVAIL,
                     "nothing listens at %s (no such socket file): the agent run that served "
                     "this workspace has ended, or the server is not started",
                     t->server);
  return KA_OK;
}

/* Asks the server c for the state of t's episode (State, 30 s): its step count goes
 * into t->step and *have_state becomes 1; a server without State leaves both. Returns
 * KA_OK, the call's error, or KA_ESTATE (reason in err) when the episode is closed or
 * unknown. */
static int ec_step_state(ka_client *c, ec_step_target *t, int *have_state, char *err,
                         size_t errlen) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__StateRequest sr = KERNELARENA__V1__STATE_REQUEST__INIT;
  sr.episode_id = t->episode;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_STATE;
  req.state = &sr;
  Kernelarena__V1__Response *r;
  int rc;
  if ((rc = ka_client_call(c, &req, 30000, &r, err, errlen))) return rc;
  if (r->body_case == KERNELARENA__V1__RESPONSE__BODY_STATE) {
    *have_state = 1;
    t->step = r->state->step;
    if (r->state->closed)
      rc = ka_seterr(err, errlen, KA_ESTATE, "step refused: episode %s is closed (%s)", t->episode,
                     r->state->close_reason ? r->state->close_reason : "closed");
  } else if (r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR &&
             r->error->code == KERNELARENA__V1__ERROR_CODE__NOT_FOUND) {
    rc = ka_seterr(err, errlen, KA_ESTATE, "step refused: NOT_FOUND: %s",
                   r->error->message ? r->error->message : "unknown episode");
  }
  ka_client_free_response(r);
  return rc;
}

/* Sends the files f as the step t->step of t's episode to the server c (t->timeout_s);
 * without have_state a FAILED_PRECONDITION naming the server's step count is retried
 * once with that count. Returns KA_OK with *result (ec_step_json; the caller owns it)
 * and t->step the new count, the call's error, or KA_ESTATE (reason in err) when the
 * step is refused. */
static int ec_step_send(ka_client *c, ec_step_target *t, ec_step_files *f, int have_state,
                        json_t **result, char *err, size_t errlen) {
  int rc = KA_OK;
  for (int attempt = 0; attempt < 2; attempt++) {
    Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
    Kernelarena__V1__StepRequest st = KERNELARENA__V1__STEP_REQUEST__INIT;
    st.episode_id = t->episode;
    st.expected_step = t->step;
    st.files = f->fp;
    st.n_files = (size_t)f->n;
    req.body_case = KERNELARENA__V1__REQUEST__BODY_STEP;
    req.step = &st;
    Kernelarena__V1__Response *r;
    if ((rc = ka_client_call(c, &req, t->timeout_s * 1000, &r, err, errlen))) break;
    if (r->body_case == KERNELARENA__V1__RESPONSE__BODY_STEP) {
      *result = ec_step_json(r->step);
      t->step = r->step->observation ? r->step->observation->step : t->step + 1;
      ka_client_free_response(r);
      rc = KA_OK;
      break;
    }
    int taken = -1;
    const char *m = r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR && r->error->message
                        ? r->error->message
                        : "";
    const char *p = strstr(m, " has taken ");
    if (attempt == 0 && !have_state && r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR &&
        r->error->code == KERNELARENA__V1__ERROR_CODE__FAILED_PRECONDITION && p &&
        sscanf(p, " has taken %d", &taken) == 1 && taken != t->step) {
      t->step = taken; /* the state file was behind: retry once with the server's count */
      ka_client_free_response(r);
      continue;
    }
    rc = ka_seterr(err, errlen, KA_ESTATE, "step refused: %s: %s",
                   r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR
                       ? ka_error_code_name(r->error->code)
                       : "unexpected response",
                   m);
    ka_client_free_response(r);
    break;
  }
  return rc;
}

/* Records a step made in t's workspace: result as .kernelarena/last_result.json and
 * the new step count in the state file. Write errors are ignored. */
static void ec_step_record(const ec_step_target *t, const json_t *result) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/.kernelarena", t->workspace);
  ka_mkdirs(path);
  snprintf(path, sizeof path, "%s/.kernelarena/last_result.json", t->workspace);
  json_dump_file(result, path, JSON_INDENT(2));
  ec_state_set_step(t);
}

/* One step of the workspace of t (agent.h): read the files, check the server, its
 * State, the Step, then record it in the workspace. */
int ec_step_submit(ec_step_target *t, json_t **result, char *err, size_t errlen) {
  *result = NULL;
  ec_step_files f = {0};
  int rc = ec_step_read_files(t, &f, err, errlen);
  if (rc || (rc = ec_step_check_server(t, err, errlen))) goto out;
  ka_client *c;
  if ((rc = ka_client_open(t->server, &c, err, errlen))) goto out;
  /* the episode's real step count, from State; servers (or proxies) without State get
   * the state file's count, corrected once from the refusal message in ec_step_send */
  int have_state = 0;
  rc = ec_step_state(c, t, &have_state, err, errlen);
  if (rc == KA_OK) rc = ec_step_send(c, t, &f, have_state, result, err, errlen);
  ka_client_close(c);
  if (rc == KA_OK) ec_step_record(t, *result);
out:
  for (int i = 0; i < f.n; i++) free(f.bufs[i]);
  return rc;
}
