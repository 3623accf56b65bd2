/* envctl export: episodes from the trace store as JSONL, one episode a line.
 *
 *   envctl export --server URL (--run R | --episode E) [--no-files] [--timeout S]
 *
 * Reads through the protocol (ListEpisodes, GetEpisode), so it works against any running
 * envserver. Each line: id, run, label, task, task_version, seed, max_steps,
 * env_version, code_hash, device, created_at, closed_at, close_reason, truncated, and
 * steps: per step the submitted files (the complete editable set), the observation
 * (status, compile_log, runtime_log, message, cases), reward, reward components,
 * terminated, truncated and timing (created_at, wall_s, compile_s, worker). File contents
 * are UTF-8 strings when valid UTF-8, else {"base64": ...}. */
#include <getopt.h>
#include <math.h>
#include <mbedtls/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "envctl.h"
#include "ka_common.h"
#include "ka_opt.h"

/* A double as JSON: null for NaN or infinity (JSON has neither). */
static json_t *ex_real(double v) {
  return isfinite(v) ? json_real(v) : json_null();
}

/* File content: a string if it is valid UTF-8 without NUL, else {"base64": "..."}
 * (RFC 4648 base64, mbedtls's encoder). */
static json_t *ex_content(const ProtobufCBinaryData *d) {
  if (!memchr(d->data, 0, d->len)) {
    json_t *s = json_stringn((const char *)d->data, d->len); /* NULL if not UTF-8 */
    if (s) return s;
  }
  size_t n = (d->len + 2) / 3 * 4 + 1, olen = 0;
  unsigned char *o = malloc(n);
  if (!o) return json_null();
  json_t *r = mbedtls_base64_encode(o, n, &olen, d->data, d->len) == 0
                  ? json_pack("{s:s}", "base64", (const char *)o)
                  : json_null();
  free(o);
  return r;
}

static json_t *ec_episode_json(const Kernelarena__V1__EpisodeRecord *e) {
  json_t *steps = json_array();
  for (size_t i = 0; i < e->n_step_records; i++) {
    const Kernelarena__V1__StepRecord *s = e->step_records[i];
    json_t *files = json_object(), *comps = json_object(), *cases = json_array();
    for (size_t k = 0; k < s->n_files; k++)
      json_object_set_new(files, s->files[k]->path, ex_content(&s->files[k]->content));
    for (size_t k = 0; k < s->n_reward_components; k++)
      json_object_set_new(comps, s->reward_components[k]->key,
                          ex_real(s->reward_components[k]->value));
    for (size_t k = 0; k < s->n_cases; k++) {
      const Kernelarena__V1__CaseResult *c = s->cases[k];
      json_array_append_new(
          cases, json_pack("{s:s, s:b, s:o, s:o, s:o, s:o, s:o, s:s}", "name", c->name, "correct",
                           c->correct, "max_abs_err", ex_real(c->max_abs_err), "max_rel_err",
                           ex_real(c->max_rel_err), "baseline_ms", ex_real(c->baseline_ms),
                           "candidate_ms", ex_real(c->candidate_ms), "speedup", ex_real(c->speedup),
                           "message", c->message));
    }
    json_t *obs = json_pack("{s:i, s:s, s:s, s:s, s:s, s:o}", "step", s->step, "status",
                            ka_status_name(s->status), "compile_log", s->compile_log, "runtime_log",
                            s->runtime_log, "message", s->message, "cases", cases);
    json_t *timing = json_pack("{s:o, s:o, s:o, s:s, s:s}", "created_at", ex_real(s->created_at),
                               "wall_s", ex_real(s->wall_s), "compile_s", ex_real(s->compile_s),
                               "worker_id", s->worker_id, "device", s->device_name);
    json_array_append_new(
        steps,
        json_pack("{s:i, s:o, s:o, s:o, s:o, s:b, s:b, s:o}", "step", s->step, "files", files,
                  "observation", obs, "reward", ex_real(s->reward), "reward_components", comps,
                  "terminated", s->terminated, "truncated", s->truncated, "timing", timing));
  }
  int truncated = e->steps >= e->max_steps || !strcmp(e->close_reason, "idle_ttl");
  return json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:i, s:s, s:s, s:s, s:o, s:o, s:s, s:b, s:o}",
                   "id", e->id, "run", e->run_id, "label", e->run_label, "task", e->task_id,
                   "task_version", e->task_version, "seed", (json_int_t)e->seed, "max_steps",
                   e->max_steps, "env_version", e->env_version, "code_hash", e->code_hash, "device",
                   e->device_name, "created_at", ex_real(e->created_at), "closed_at",
                   e->closed_at > 0 ? json_real(e->closed_at) : json_null(), "close_reason",
                   e->close_reason, "truncated", truncated, "steps", steps);
}

/* Prints one episode as a JSON line. Returns 0 or 1. */
static int ex_one(ka_client *c, const char *id, int omit_files, int timeout_ms) {
  Kernelarena__V1__Response *r;
  if (ec_get_episode(c, id, omit_files, timeout_ms, &r)) return 1;
  json_t *j = ec_episode_json(r->get_episode->episode);
  ka_client_free_response(r);
  if (!j) {
    fprintf(stderr, "envctl: export %s: cannot build JSON\n", id);
    return 1;
  }
  int rc = json_dumpf(j, stdout, JSON_COMPACT | JSON_ENSURE_ASCII) != 0;
  fputc('\n', stdout);
  json_decref(j);
  return rc;
}

int cmd_export(int argc, char **argv) {
  static const struct option opts[] = {{"server", required_argument, 0, 's'},
                                       {"run", required_argument, 0, 'r'},
                                       {"episode", required_argument, 0, 'e'},
                                       {"no-files", no_argument, 0, 'n'},
                                       {"timeout", required_argument, 0, 'o'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *server = NULL, *run = NULL, *episode = NULL;
  int omit = 0, timeout_s = KA_OPT_EXPORT_TIMEOUT_S, ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
      case 's':
        server = optarg;
        break;
      case 'r':
        run = optarg;
        break;
      case 'e':
        episode = optarg;
        break;
      case 'n':
        omit = 1;
        break;
      case 'o':
        if (ka_opt_timeout_s("envctl", "timeout", optarg, &timeout_s)) return 2;
        break;
      case 'h':
        printf(
            "usage: envctl export --server URL (--run R | --episode E) [--no-files]\n"
            "  writes JSONL to stdout, one episode a line (docs/trace-store.md)\n");
        return 0;
      default:
        return 2;
    }
  }
  if (!server || (!run == !episode) || optind < argc) {
    fprintf(stderr, "envctl: export needs --server URL and one of --run R or --episode E\n");
    return 2;
  }
  ka_client *c;
  char err[512];
  if (ec_server_open(server, timeout_s, &c, err, sizeof err)) {
    fprintf(stderr, "envctl: %s\n", err);
    return 1;
  }
  int rc = 0, n = 0;
  if (episode) {
    rc = ex_one(c, episode, omit, timeout_s * 1000);
    n = !rc;
  } else {
    char token[64] = "";
    do {
      Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
      Kernelarena__V1__ListEpisodesRequest l = KERNELARENA__V1__LIST_EPISODES_REQUEST__INIT;
      l.run_id = (char *)run;
      l.limit = 500;
      l.page_token = token;
      req.body_case = KERNELARENA__V1__REQUEST__BODY_LIST_EPISODES;
      req.list_episodes = &l;
      Kernelarena__V1__Response *r;
      if (ka_client_call(c, &req, timeout_s * 1000, &r, err, sizeof err)) {
        fprintf(stderr, "envctl: list episodes: %s\n", err);
        rc = 1;
        break;
      }
      if (r->body_case != KERNELARENA__V1__RESPONSE__BODY_LIST_EPISODES) {
        rc = ec_print_error("list episodes", r);
        ka_client_free_response(r);
        break;
      }
      for (size_t i = 0; i < r->list_episodes->n_episodes && !rc; i++, n++)
        rc = ex_one(c, r->list_episodes->episodes[i]->id, omit, timeout_s * 1000);
      snprintf(token, sizeof token, "%s", r->list_episodes->next_page_token);
      ka_client_free_response(r);
    } while (!rc && token[0]);
  }
  fflush(stdout);
  fprintf(stderr, "envctl: exported %d episode%s\n", n, n == 1 ? "" : "s");
  ka_client_close(c);
  return rc;
}
