/* `envctl run --config FILE [--resume RUN]`: every selected task x repeat as one agent
 * episode, several in parallel, into runs/<RUN>/ (docs/agents.md: run configs and the run
 * folder). A run that was interrupted is finished by --resume without repeating the
 * episodes that have a final result. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agents.h"
#include "envctl.h"
#include "ka_common.h"
#include "ka_opt.h"

typedef struct ec_run {
  const char *dir; /* runs/<RUN>, absolute */
  const char *url;
  const json_t *cfg; /* the whole config */
  json_t *plan;      /* [{task, repeat, seed, dir}] */
  pthread_mutex_t mu;
  size_t next; /* next plan index to start */
  int done, failed, skipped, running, total;
  double reward_sum;
  int tty;
  int timeout_s;
  const char *admin_token; /* held-out scoring; NULL: none */
} ec_run;

/* Seed of (task, repeat) under a base seed: FNV-1a 64 of the task id mixed with the
 * repeat index (FNV: http://www.isthe.com/chongo/tech/comp/fnv/), so two runs of the
 * same config give each task and repeat the same episode seed (paired comparisons). */
static unsigned long long ec_episode_seed(unsigned long long base, const char *task, int repeat) {
  unsigned long long h = 1469598103934665603ULL;
  for (const char *p = task; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  h ^= base + 0x9e3779b97f4a7c15ULL * (unsigned long long)(repeat + 1);
  h ^= h >> 31;
  return h & 0x7fffffffffffffffULL;
}

/* 1 if task matches one selector: "all" or "*", an exact id, or any parent folder of
 * the id given as "a/b", "a/b/" or "a/b/" followed by "*" (a family is the first level;
 * command tasks nest deeper, e.g. triton2triton/vllm/NAME). */
static int ec_task_selected(const char *task, const json_t *sel) {
  size_t i;
  json_t *v;
  json_array_foreach(sel, i, v) {
    const char *s = json_string_value(v);
    if (!s) continue;
    if (!strcmp(s, "all") || !strcmp(s, "*") || !strcmp(s, task)) return 1;
    size_t n = strlen(s);
    if (n >= 2 && !strcmp(s + n - 2, "/*"))
      n -= 2;
    else if (n >= 1 && s[n - 1] == '/')
      n -= 1;
    if (n && !memchr(s, '*', n) && !strncmp(task, s, n) && task[n] == '/') return 1;
  }
  return 0;
}

/* The task ids of the server (ListTasks), in its order. */
static json_t *ec_server_tasks(ka_client *c, char *err, size_t errlen) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__ListTasksRequest lt = KERNELARENA__V1__LIST_TASKS_REQUEST__INIT;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_LIST_TASKS;
  req.list_tasks = &lt;
  Kernelarena__V1__Response *r;
  if (ka_client_call(c, &req, 30000, &r, err, errlen)) return NULL;
  if (r->body_case != KERNELARENA__V1__RESPONSE__BODY_LIST_TASKS) {
    ka_seterr(err, errlen, KA_EUNAVAIL, "ListTasks refused");
    ka_client_free_response(r);
    return NULL;
  }
  json_t *out = json_array();
  for (size_t i = 0; i < r->list_tasks->n_tasks; i++)
    json_array_append_new(out, json_string(r->list_tasks->tasks[i]->id));
  ka_client_free_response(r);
  return out;
}

/* Live executors (Health), at least 1. */
static int ec_server_executors(ka_client *c) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__HealthRequest h = KERNELARENA__V1__HEALTH_REQUEST__INIT;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_HEALTH;
  req.health = &h;
  Kernelarena__V1__Response *r;
  char err[256];
  int n = 1;
  if (ka_client_call(c, &req, 10000, &r, err, sizeof err) == KA_OK) {
    if (r->body_case == KERNELARENA__V1__RESPONSE__BODY_HEALTH && r->health->executors > 1)
      n = r->health->executors;
    ka_client_free_response(r);
  }
  return n;
}

/* A final result exists for the episode folder (resume skips it): completed, no_steps
 * or error with a reset refusal are final; interrupted or missing are not. */
static json_t *ec_finished_result(const char *dir) {
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/episode.json", dir);
  json_error_t je;
  json_t *r = json_load_file(p, 0, &je);
  const char *st = json_string_value(json_object_get(r, "status"));
  if (st && (!strcmp(st, "completed") || !strcmp(st, "no_steps"))) return r;
  json_decref(r);
  return NULL;
}

static void ec_progress(ec_run *r, const json_t *res, const char *task, int repeat) {
  /* caller holds r->mu */
  int finished = r->done + r->skipped;
  double mean = r->done ? r->reward_sum / r->done : 0;
  if (r->tty) {
    int width = 30, fill = r->total ? finished * width / r->total : width;
    fprintf(stderr, "\r[%.*s%*s] %d/%d episodes, %d running, %d failed, mean reward %.1f ", fill,
            "##############################", width - fill, "", finished, r->total, r->running,
            r->failed, mean);
    if (finished == r->total) fputc('\n', stderr);
  } else if (res) {
    fprintf(stderr, "[%d/%d] %s #%d: %s, reward %.2f, %lld steps\n", finished, r->total, task,
            repeat, json_string_value(json_object_get(res, "status")),
            json_number_value(json_object_get(res, "reward")),
            (long long)json_integer_value(json_object_get(res, "n_steps")));
  }
  fflush(stderr);
}

/* The client is opened only once there is an episode to run: a connection closed before
 * its first request (a worker with nothing left to do) can hit nng 1.5.2's listener bug
 * (nanomsg/nng#1518: a peer that disconnects during the connection handshake stops the
 * server's listener for good, and every later client hangs). */
static void *ec_run_worker(void *arg) {
  ec_run *r = arg;
  char err[512];
  ka_client *c = NULL;
  const json_t *agent = json_object_get(r->cfg, "agent");
  for (;;) {
    pthread_mutex_lock(&r->mu);
    if (ec_agent_interrupted || r->next >= json_array_size(r->plan)) {
      pthread_mutex_unlock(&r->mu);
      break;
    }
    json_t *e = json_array_get(r->plan, r->next++);
    r->running++;
    pthread_mutex_unlock(&r->mu);
    if (!c && ka_client_open(r->url, &c, err, sizeof err)) {
      fprintf(stderr, "envctl run: %s\n", err); /* the episode stays unfinished (a failure) */
      pthread_mutex_lock(&r->mu);
      r->running--;
      pthread_mutex_unlock(&r->mu);
      return NULL;
    }
    const char *task = json_string_value(json_object_get(e, "task"));
    int repeat = (int)json_integer_value(json_object_get(e, "repeat"));
    ec_episode_req rq = {
        .task = task,
        .has_seed = 1,
        .seed = (unsigned long long)json_integer_value(json_object_get(e, "seed")),
        .run = json_string_value(json_object_get(r->cfg, "run")),
        .label = json_string_value(json_object_get(r->cfg, "label")),
        .repeat = repeat,
        .out_dir = json_string_value(json_object_get(e, "dir")),
        .max_steps = (int)json_integer_value(json_object_get(r->cfg, "max_steps")),
        .reward = json_string_value(json_object_get(r->cfg, "reward")),
        .held_out = json_is_true(json_object_get(r->cfg, "held_out")),
        .admin_token = r->admin_token,
        .timeout_s = r->timeout_s,
    };
    json_t *res = ec_agent_episode(c, agent, &rq);
    const char *st = json_string_value(json_object_get(res, "status"));
    pthread_mutex_lock(&r->mu);
    r->running--;
    if (strcmp(st, "interrupted")) {
      r->done++;
      r->reward_sum += json_number_value(json_object_get(res, "reward"));
      if (strcmp(st, "completed") || !json_is_true(json_object_get(res, "correct"))) r->failed++;
      char p[PATH_MAX];
      snprintf(p, sizeof p, "%s/results.jsonl", r->dir);
      FILE *f = fopen(p, "a");
      if (f) {
        json_t *line = json_pack(
            "{s:s, s:i, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "task", task, "repeat", repeat,
            "status", json_object_get(res, "status"), "reward", json_object_get(res, "reward"),
            "correct", json_object_get(res, "correct"), "speedup", json_object_get(res, "speedup"),
            "n_steps", json_object_get(res, "n_steps"), "episode_id",
            json_object_get(res, "episode_id") ? json_object_get(res, "episode_id") : json_null(),
            "seed", json_object_get(e, "seed"), "dir", json_object_get(e, "dir"));
        json_dumpf(line, f, JSON_COMPACT);
        fputc('\n', f);
        fclose(f);
        json_decref(line);
      }
    }
    ec_progress(r, res, task, repeat);
    pthread_mutex_unlock(&r->mu);
    json_decref(res);
  }
  ka_client_close(c);
  return NULL;
}

/* Aggregates the episode.json of every planned episode into summary.json; episodes
 * without a final result count as failures with reward 0 (never left out). */
static json_t *ec_run_summary(const ec_run *r) {
  size_t i;
  json_t *e, *tasks = json_object();
  int n = 0, failed = 0, correct = 0;
  double rsum = 0, lsum = 0;
  int nlog = 0;
  json_array_foreach(r->plan, i, e) {
    const char *task = json_string_value(json_object_get(e, "task"));
    json_t *res = ec_finished_result(json_string_value(json_object_get(e, "dir")));
    double reward = res ? json_number_value(json_object_get(res, "reward")) : 0;
    int ok = res && !strcmp(json_string_value(json_object_get(res, "status")), "completed") &&
             json_is_true(json_object_get(res, "correct"));
    json_t *sp = json_object_get(res, "speedup");
    n++;
    rsum += reward;
    failed += !ok;
    correct += ok;
    if (ok && json_is_number(sp) && json_number_value(sp) > 0) {
      lsum += log(json_number_value(sp));
      nlog++;
    }
    json_t *t = json_object_get(tasks, task);
    if (!t) {
      t = json_pack("{s:i, s:i, s:f, s:[]}", "episodes", 0, "failed", 0, "reward_sum", 0.0,
                    "rewards");
      json_object_set_new(tasks, task, t);
    }
    json_object_set_new(t, "episodes",
                        json_integer(json_integer_value(json_object_get(t, "episodes")) + 1));
    json_object_set_new(t, "failed",
                        json_integer(json_integer_value(json_object_get(t, "failed")) + !ok));
    json_array_append_new(json_object_get(t, "rewards"), json_real(reward));
    json_decref(res);
  }
  const char *k;
  json_object_foreach(tasks, k, e) {
    double s = 0;
    size_t j;
    json_t *v;
    json_array_foreach(json_object_get(e, "rewards"), j, v) s += json_number_value(v);
    json_object_set_new(e, "mean_reward",
                        json_real(s / (double)json_array_size(json_object_get(e, "rewards"))));
    json_object_del(e, "reward_sum");
  }
  return json_pack("{s:s, s:O, s:O, s:i, s:i, s:i, s:f, s:o, s:o}", "schema",
                   "kernelarena.run-summary.v1", "run", json_object_get(r->cfg, "run"), "label",
                   json_object_get(r->cfg, "label"), "episodes", n, "correct", correct, "failed",
                   failed, "mean_reward", n ? rsum / n : 0.0, "geomean_speedup_correct",
                   nlog ? json_real(exp(lsum / nlog)) : json_null(), "tasks", tasks);
}

int cmd_run(int argc, char **argv) {
  static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                       {"resume", required_argument, 0, 'R'},
                                       {"runs-dir", required_argument, 0, 'd'},
                                       {"jobs", required_argument, 0, 'j'},
                                       {"timeout", required_argument, 0, 'o'},
                                       {"admin-token-file", required_argument, 0, 'A'},
                                       EC_OPTS_COMMON,
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *config = NULL, *resume = NULL, *runs_dir = "runs", *token_file = NULL;
  char *token = NULL;
  int jobs = 0, c, timeout_s = KA_OPT_REQUEST_TIMEOUT_S;
  ec_opts o = {0};
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (ec_opts_common(c, optarg, &o)) continue;
    switch (c) {
      case 'c':
        config = optarg;
        break;
      case 'R':
        resume = optarg;
        break;
      case 'd':
        runs_dir = optarg;
        break;
      case 'j':
        if (ka_opt_int("envctl run", "jobs", optarg, 1, 64, &jobs)) return 2;
        break;
      case 'o':
        if (ka_opt_timeout_s("envctl run", "timeout", optarg, &timeout_s)) return 2;
        break;
      case 'A':
        token_file = optarg;
        break;
      case 'h':
        printf(
            "usage: envctl run --config FILE [--runs-dir DIR] [--jobs N] [--server URL]\n"
            "       envctl run --resume RUN  [--runs-dir DIR] [--jobs N] [--server URL]\n"
            "       (held_out: true with --server: --admin-token-file PATH or KA_ADMIN_TOKEN)\n"
            "Runs every selected task x repeat of the config as an agent episode into\n"
            "DIR/<RUN>/ (default runs/); --resume finishes an interrupted run (RUN: its id or\n"
            "folder) without repeating finished episodes. See docs/agents.md.\n");
        return 0;
      default:
        return 2;
    }
  }
  if ((!config) == (!resume) || optind < argc) {
    fprintf(stderr, "envctl run: give either --config FILE or --resume RUN\n");
    return 2;
  }
  char err[1024], dir[PATH_MAX];
  json_t *cfg;
  if (config) {
    cfg = ec_yaml_load(config, err, sizeof err);
    if (!cfg || !json_is_object(cfg)) {
      fprintf(stderr, "envctl run: %s\n", cfg ? "the config is not a mapping" : err);
      json_decref(cfg);
      return 2;
    }
    json_t *agent = json_object_get(cfg, "agent");
    const char *ad = json_string_value(json_object_get(agent, "adapter"));
    if (!json_is_object(agent) || !ad || !ka_adapter_find(ad)) {
      fprintf(stderr, "envctl run: %s: agent.adapter must be one of %s\n", config,
              ka_adapter_names());
      json_decref(cfg);
      return 2;
    }
    /* an agent that cannot run (no command, no recording, CLI not installed) is refused
     * before the run folder exists, not recorded as every episode failing */
    if (ka_adapter_check(agent, err, sizeof err)) {
      fprintf(stderr, "envctl run: %s: agent: %s\n", config, err);
      json_decref(cfg);
      return 2;
    }
    json_t *sel = json_object_get(cfg, "tasks");
    if (json_is_string(sel)) json_object_set_new(cfg, "tasks", json_pack("[O]", sel));
    if (!json_is_array(json_object_get(cfg, "tasks"))) {
      fprintf(stderr, "envctl run: %s: tasks: a list of task ids, families or all\n", config);
      json_decref(cfg);
      return 2;
    }
    const char *rw = json_string_value(json_object_get(cfg, "reward"));
    if (rw && strcmp(rw, "last") && strcmp(rw, "best")) {
      fprintf(stderr, "envctl run: %s: reward: last or best\n", config);
      json_decref(cfg);
      return 2;
    }
    if (!json_is_string(json_object_get(cfg, "label")))
      json_object_set_new(cfg, "label", json_string("run"));
    if (!json_is_string(json_object_get(cfg, "run"))) {
      char id[200];
      time_t now = time(NULL);
      struct tm tm;
      gmtime_r(&now, &tm);
      char stamp[32];
      strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
      snprintf(id, sizeof id, "%.150s-%s-%d", json_string_value(json_object_get(cfg, "label")),
               stamp, (int)getpid());
      for (char *p = id; *p; p++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-", *p))
          *p = '_';
      json_object_set_new(cfg, "run", json_string(id));
    }
    snprintf(dir, sizeof dir, "%s/%s", runs_dir, json_string_value(json_object_get(cfg, "run")));
    struct stat st;
    if (stat(dir, &st) == 0) {
      fprintf(stderr, "envctl run: %s exists; use --resume %s to finish it\n", dir,
              json_string_value(json_object_get(cfg, "run")));
      json_decref(cfg);
      return 2;
    }
  } else {
    struct stat st;
    if (stat(resume, &st) == 0 && S_ISDIR(st.st_mode))
      snprintf(dir, sizeof dir, "%s", resume);
    else
      snprintf(dir, sizeof dir, "%s/%s", runs_dir, resume);
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/run.json", dir);
    json_error_t je;
    json_t *run = json_load_file(p, 0, &je);
    cfg = json_incref(json_object_get(run, "config"));
    json_decref(run);
    if (!cfg) {
      fprintf(stderr, "envctl run: --resume %s: no run folder with run.json at %s\n", resume, dir);
      return 2;
    }
    if (ka_adapter_check(json_object_get(cfg, "agent"), err, sizeof err)) {
      fprintf(stderr, "envctl run: --resume %s: agent: %s\n", resume, err);
      json_decref(cfg);
      return 2;
    }
  }

  char tbuf[PATH_MAX];
  o.tasks = ka_tasks_dir(o.tasks, tbuf, sizeof tbuf);
  ec_agent_install_signals();
  ec_embedded emb = {0};
  const char *url = o.server;
  int rc = 1;
  if (!url) {
    fprintf(stderr, "envctl run: starting envserver and gpuexec (tasks: %s)...\n", o.tasks);
    if (ec_embedded_start(&o, &emb, err, sizeof err)) {
      fprintf(stderr, "envctl run: %s\n", err);
      json_decref(cfg);
      return 1;
    }
    url = emb.url;
  }
  if (json_is_true(json_object_get(cfg, "held_out"))) {
    /* embedded: the token envctl wrote into the server's private state folder */
    char tp[PATH_MAX];
    snprintf(tp, sizeof tp, "%s/admin.token", emb.state);
    token = ec_admin_token_load(o.server ? token_file : tp, err, sizeof err);
    if (!token)
      fprintf(stderr, "envctl run: held-out scoring: %s; held_out records the error\n", err);
  }
  ka_client *cl;
  if (ec_server_open(url, timeout_s, &cl, err, sizeof err)) {
    fprintf(stderr, "envctl run: %s\n", err);
    goto out;
  }
  /* made once the server answers: an unreachable server leaves no empty run folder */
  ka_mkdirs(dir);
  char absdir[PATH_MAX];
  if (!realpath(dir, absdir)) snprintf(absdir, sizeof absdir, "%s", dir);
  json_t *plan = NULL;
  if (resume) {
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/run.json", absdir);
    json_error_t je;
    json_t *run = json_load_file(p, 0, &je);
    plan = json_incref(json_object_get(run, "plan"));
    json_decref(run);
  } else {
    json_t *all = ec_server_tasks(cl, err, sizeof err);
    if (!all) {
      fprintf(stderr, "envctl run: %s\n", err);
      ka_client_close(cl);
      goto out;
    }
    int repeats = json_is_integer(json_object_get(cfg, "repeats"))
                      ? (int)json_integer_value(json_object_get(cfg, "repeats"))
                      : 1;
    unsigned long long base = (unsigned long long)json_integer_value(json_object_get(cfg, "seed"));
    plan = json_array();
    size_t i;
    json_t *t;
    /* selectors naming no task of the server still run (and fail at reset) so that a
     * missing task is a counted failure, not a silently smaller run */
    json_t *sel = json_object_get(cfg, "tasks");
    json_t *chosen = json_array();
    json_array_foreach(all, i, t) if (ec_task_selected(json_string_value(t), sel))
        json_array_append(chosen, t);
    json_array_foreach(sel, i, t) {
      const char *s = json_string_value(t);
      if (s && strchr(s, '/') && !strchr(s, '*') && s[strlen(s) - 1] != '/') {
        size_t j;
        json_t *u;
        int found = 0;
        size_t n = strlen(s); /* an id, or a parent folder of a chosen id */
        json_array_foreach(chosen, j, u) found |=
            !strncmp(json_string_value(u), s, n) && strchr("/", json_string_value(u)[n]);
        if (!found) json_array_append(chosen, t);
      }
    }
    json_array_foreach(chosen, i, t) {
      for (int k = 0; k < repeats; k++) {
        char d[PATH_MAX + 300], name[300];
        snprintf(name, sizeof name, "%s", json_string_value(t));
        for (char *p = name; *p; p++)
          if (*p == '/') *p = '~';
        snprintf(d, sizeof d, "%s/episodes/%s@%d", absdir, name, k);
        json_array_append_new(
            plan, json_pack("{s:O, s:i, s:I, s:s}", "task", t, "repeat", k, "seed",
                            (json_int_t)ec_episode_seed(base, json_string_value(t), k), "dir", d));
      }
    }
    json_decref(chosen);
    json_decref(all);
    json_t *run = json_pack("{s:s, s:O, s:O, s:f, s:O, s:O}", "schema", "kernelarena.run.v1", "run",
                            json_object_get(cfg, "run"), "label", json_object_get(cfg, "label"),
                            "created_at", ka_wall_s(), "config", cfg, "plan", plan);
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/run.json", absdir);
    json_dump_file(run, p, JSON_INDENT(2));
    json_decref(run);
    if (config) {
      char *y;
      size_t yl;
      if (ka_read_file(config, 0, &y, &yl) == KA_OK) {
        snprintf(p, sizeof p, "%s/config.yaml", absdir);
        ka_write_file(p, y, yl);
        free(y);
      }
    }
  }
  /* asked even when not needed: every connection completes a request before it closes
   * (see ec_run_worker), and on resume nothing else has been asked yet */
  int executors = ec_server_executors(cl);
  if (jobs < 1)
    jobs = json_is_integer(json_object_get(cfg, "parallel"))
               ? (int)json_integer_value(json_object_get(cfg, "parallel"))
               : executors;
  if (jobs < 1) jobs = 1;
  ka_client_close(cl);

  ec_run r = {.dir = absdir,
              .url = url,
              .cfg = cfg,
              .tty = isatty(2),
              .timeout_s = timeout_s,
              .admin_token = token};
  pthread_mutex_init(&r.mu, NULL);
  /* resume: keep the finished episodes, run the rest */
  json_t *todo = json_array();
  size_t i;
  json_t *e;
  json_array_foreach(plan, i, e) {
    json_t *res = ec_finished_result(json_string_value(json_object_get(e, "dir")));
    if (res) {
      r.skipped++;
      json_decref(res);
    } else {
      json_array_append(todo, e);
    }
  }
  r.plan = todo;
  r.total = (int)json_array_size(plan);
  printf("run %s: %s, %d episodes (%d already finished), %d in parallel\n",
         json_string_value(json_object_get(cfg, "run")), absdir, r.total, r.skipped, jobs);
  fflush(stdout);
  pthread_t th[64];
  if (jobs > 64) jobs = 64;
  int started = 0;
  for (int k = 0; k < jobs; k++)
    if (pthread_create(&th[k], NULL, ec_run_worker, &r) == 0) started++;
  for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
  ec_run sum = r;
  sum.plan = plan;
  json_t *summary = ec_run_summary(&sum);
  json_object_set_new(summary, "complete", json_boolean(!ec_agent_interrupted));
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/summary.json", absdir);
  json_dump_file(summary, p, JSON_INDENT(2));
  printf("run %s: %lld episodes, %lld correct, %lld failed, mean reward %.2f%s\n",
         json_string_value(json_object_get(cfg, "run")),
         (long long)json_integer_value(json_object_get(summary, "episodes")),
         (long long)json_integer_value(json_object_get(summary, "correct")),
         (long long)json_integer_value(json_object_get(summary, "failed")),
         json_number_value(json_object_get(summary, "mean_reward")),
         ec_agent_interrupted ? " (interrupted: finish with --resume)" : "");
  printf("results: %s\n", absdir);
  json_decref(summary);
  json_decref(todo);
  json_decref(plan);
  pthread_mutex_destroy(&r.mu);
  rc = ec_agent_interrupted ? 130 : 0;
out:
  if (!o.server) ec_embedded_stop(&emb, 0);
  if (token) memset(token, 0, strlen(token));
  free(token);
  json_decref(cfg);
  return rc;
}
