/* envctl agent --task ID --adapter NAME ...: one episode with a coding-agent adapter
 * (docs/agents.md); the episode itself is ec_agent_episode (agent.c). */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agents.h"
#include "envctl.h"
#include "ka_common.h"
#include "ka_opt.h"

/* Sets key=value in an agent config object (value parsed as YAML would be: integers
 * and booleans become numbers and booleans, except for the settings that are always
 * text, e.g. command=true is the shell command `true`). */
int ec_cfg_set(json_t *cfg, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq || eq == kv) return KA_EINVAL;
  char *key = strndup(kv, (size_t)(eq - kv));
  const char *v = eq + 1;
  char *end;
  long long n = strtoll(v, &end, 10);
  json_t *jv;
  /* settings that are always text, whatever they look like ("command=true") */
  static const char *const text_keys[] = {"command", "bin",    "model",          "effort",
                                          "replay",  "reward", "replay_episode", NULL};
  int text = 0;
  for (int i = 0; text_keys[i] && !text; i++) text = !strcmp(key, text_keys[i]);
  if (text)
    jv = json_string(v);
  else if (*v && !*end)
    jv = json_integer(n);
  else if (!strcmp(v, "true") || !strcmp(v, "false"))
    jv = json_boolean(!strcmp(v, "true"));
  else
    jv = json_string(v);
  json_object_set_new(cfg, key, jv);
  free(key);
  return KA_OK;
}

int cmd_agent(int argc, char **argv) {
  static const struct option opts[] = {{"task", required_argument, 0, 't'},
                                       {"adapter", required_argument, 0, 'a'},
                                       {"config", required_argument, 0, 'c'},
                                       {"set", required_argument, 0, 'x'},
                                       {"out", required_argument, 0, 'O'},
                                       {"seed", required_argument, 0, 'S'},
                                       {"max-steps", required_argument, 0, 'n'},
                                       {"reward", required_argument, 0, 'r'},
                                       {"timeout", required_argument, 0, 'o'},
                                       {"held-out", no_argument, 0, 'H'},
                                       {"admin-token-file", required_argument, 0, 'A'},
                                       EC_OPTS_COMMON,
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  json_t *cfg = json_object();
  const char *token_file = NULL;
  char *token = NULL;
  ec_episode_req rq = {.timeout_s = KA_OPT_REQUEST_TIMEOUT_S, .run = "default"};
  uint64_t seed;
  ec_opts o = {0};
  const char *out = NULL;
  char err[1024];
  int c, rc = 2;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (ec_opts_common(c, optarg, &o)) continue;
    switch (c) {
      case 't':
        rq.task = optarg;
        break;
      case 'a':
        json_object_set_new(cfg, "adapter", json_string(optarg));
        break;
      case 'c': {
        json_t *y = ec_yaml_load(optarg, err, sizeof err);
        json_t *a = json_object_get(y, "agent");
        if (!json_is_object(a)) a = y;
        if (!json_is_object(a)) {
          fprintf(stderr, "envctl agent: %s\n", y ? "the config is not a mapping" : err);
          json_decref(y);
          goto out;
        }
        json_object_update(cfg, a);
        json_decref(y);
        break;
      }
      case 'x':
        if (ec_cfg_set(cfg, optarg)) {
          fprintf(stderr, "envctl agent: --set needs KEY=VALUE\n");
          goto out;
        }
        break;
      case 'O':
        out = optarg;
        break;
      case 'S':
        if (ka_opt_u64("envctl agent", "seed", optarg, &seed)) goto out;
        rq.seed = seed;
        rq.has_seed = 1;
        break;
      case 'n':
        if (ka_opt_int("envctl agent", "max-steps", optarg, 1, 1000000, &rq.max_steps)) goto out;
        break;
      case 'r':
        rq.reward = optarg;
        break;
      case 'o':
        if (ka_opt_timeout_s("envctl agent", "timeout", optarg, &rq.timeout_s)) goto out;
        break;
      case 'H':
        rq.held_out = 1;
        break;
      case 'A':
        token_file = optarg;
        break;
      case 'h':
        printf(
            "usage: envctl agent --task ID --adapter NAME [--config FILE] [--set KEY=VALUE]...\n"
            "                    [--out DIR] [--seed S] [--max-steps N] [--reward last|best]\n"
            "                    [--held-out [--admin-token-file PATH]]\n"
            "                    [--server URL] [--tasks DIR] [--backends LIST]\n"
            "                    [--timeout S] [--verbose]\n"
            "Runs one episode with a coding-agent adapter (claude_code, codex, cursor, command,\n"
            "replay) and writes DIR/episode.json, the transcript and every step's files.\n"
            "See docs/agents.md.\n");
        rc = 0;
        goto out;
      default:
        goto out;
    }
  }
  if (!rq.task || optind < argc) {
    fprintf(stderr, "envctl agent: %s\n",
            optind < argc ? "unexpected argument" : "needs --task ID (see `envctl tasks`)");
    goto out;
  }
  /* before any request and before --out is made: nothing is recorded */
  if (ka_adapter_check(cfg, err, sizeof err)) {
    fprintf(stderr, "envctl agent: %s\n", err);
    goto out;
  }
  char tbuf[PATH_MAX];
  o.tasks = ka_tasks_dir(o.tasks, tbuf, sizeof tbuf);
  ec_agent_install_signals();
  ec_embedded emb = {0};
  const char *url = o.server;
  if (!url) {
    if (ec_embedded_start(&o, &emb, err, sizeof err)) {
      fprintf(stderr, "envctl agent: %s\n", err);
      rc = 1;
      goto out;
    }
    url = emb.url;
  }
  /* the server answers before --out is made: an unreachable one leaves nothing behind */
  ka_client *cl;
  if (ec_server_open(url, rq.timeout_s, &cl, err, sizeof err)) {
    fprintf(stderr, "envctl agent: %s\n", err);
    rc = 1;
    goto stop;
  }
  char outbuf[PATH_MAX];
  if (!out) {
    const char *tmp = getenv("TMPDIR");
    snprintf(outbuf, sizeof outbuf, "%s/kernelarena-agent-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(outbuf)) {
      perror("mkdtemp");
      ka_client_close(cl);
      rc = 1;
      goto stop;
    }
    out = outbuf;
  }
  char absout[PATH_MAX];
  ka_mkdirs(out);
  if (!realpath(out, absout)) snprintf(absout, sizeof absout, "%s", out);
  rq.out_dir = absout;
  if (rq.held_out) {
    char tp[PATH_MAX];
    snprintf(tp, sizeof tp, "%s/admin.token", emb.state);
    token = ec_admin_token_load(o.server ? token_file : tp, err, sizeof err);
    if (!token) fprintf(stderr, "envctl agent: held-out scoring: %s\n", err);
    rq.admin_token = token;
  }
  {
    json_t *res = ec_agent_episode(cl, cfg, &rq);
    ka_client_close(cl);
    const char *st = json_string_value(json_object_get(res, "status"));
    printf("episode %s: task %s, adapter %s, %s, %d step%s, reward %.2f (%s step: %lld)\n",
           json_string_value(json_object_get(res, "episode_id"))
               ? json_string_value(json_object_get(res, "episode_id"))
               : "-",
           rq.task, ka_cfg_str(cfg, "adapter", "command"), st,
           (int)json_integer_value(json_object_get(res, "n_steps")),
           json_integer_value(json_object_get(res, "n_steps")) == 1 ? "" : "s",
           json_number_value(json_object_get(res, "reward")),
           json_string_value(json_object_get(res, "reward_mode")),
           (long long)json_integer_value(json_object_get(res, "scored_step")));
    if (json_is_string(json_object_get(res, "error")))
      fprintf(stderr, "envctl agent: %s\n", json_string_value(json_object_get(res, "error")));
    json_t *ho = json_object_get(res, "held_out");
    if (json_is_object(ho)) {
      json_t *hs = json_object_get(ho, "speedup_geomean"), *gap = json_object_get(ho, "gap");
      const char *why = json_string_value(json_object_get(ho, "error"));
      if (!why) why = json_string_value(json_object_get(ho, "reason"));
      printf("held-out: %s", json_string_value(json_object_get(ho, "status")));
      if (json_is_number(hs)) printf(", speedup %.3fx", json_number_value(hs));
      if (json_is_number(gap))
        printf(", gap %.3f (held-out / shown speedup)", json_number_value(gap));
      if (why) printf(" (%s)", why);
      printf("\n");
    }
    printf("results: %s/episode.json\n", absout);
    rc = !strcmp(st, "error") || !strcmp(st, "interrupted") ? 1 : 0;
    json_decref(res);
  }
stop:
  if (!o.server) ec_embedded_stop(&emb, 0);
out:
  if (token) memset(token, 0, strlen(token));
  free(token);
  json_decref(cfg);
  return rc;
}
