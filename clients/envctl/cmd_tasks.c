/* envctl tasks [--server URL] [--tasks DIR]: the task table, from the task folder or
 * from a running server's ListTasks.
 * envctl tasks --prompts [--seed S] [--seeds K] [--all-tasks]: a prompts dataset (JSONL,
 * one row per task and seed) from ListTasks with include_prompts, of --server or of an
 * envserver + gpuexec started for it (docs/python.md, "A prompts dataset"): the tasks a
 * live executor runs (TaskInfo.runnable), or all with --all-tasks. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envctl.h"
#include "ka_common.h"
#include "task.h"

/* One line of the task table (the header when id is NULL); lists are joined with commas. */
static void ec_task_row(const char *id, const char *type, const char *lang, const char *mode,
                        char *const *backends, size_t nbackends, char *const *tags, size_t ntags,
                        int shown, int held) {
  if (!id) {
    printf("%-26s %-10s %-5s %-7s %-10s %-7s %s\n", "TASK", "TYPE", "LANG", "MODE", "BACKENDS",
           "CASES", "TAGS");
    return;
  }
  char be[64] = "", tg[256] = "", cases[32];
  for (size_t b = 0; b < nbackends; b++)
    snprintf(be + strlen(be), sizeof be - strlen(be), "%s%s", b ? "," : "", backends[b]);
  for (size_t g = 0; g < ntags; g++)
    snprintf(tg + strlen(tg), sizeof tg - strlen(tg), "%s%s", g ? "," : "", tags[g]);
  /* a command task's cases are its harness's, known once its baseline has run */
  if (mode && !strcmp(mode, "command"))
    snprintf(cases, sizeof cases, "harness");
  else
    snprintf(cases, sizeof cases, "%d+%d", shown, held);
  printf("%-26s %-10s %-5s %-7s %-10s %-7s %s\n", id, type, lang, mode, be, cases, tg);
}

/* Prints the task table of the folder dir. Returns 0, or 1 when the folder cannot be
 * read or holds no task that loads (printed: a table of none is an error, not a list). */
static int ec_tasks_local(const char *dir) {
  char err[1024];
  ka_registry *r;
  if (ka_registry_load(dir, 1, &r, err, sizeof err)) {
    fprintf(stderr, "envctl: %s\n", err);
    return 1;
  }
  if (r->ntasks == 0) {
    if (r->nskipped)
      fprintf(stderr, "envctl: no tasks loaded from %s (%d skipped: the lines above say why)\n",
              dir, r->nskipped);
    else
      fprintf(stderr,
              "envctl: no tasks loaded from %s (0 skipped: no FAMILY/NAME/task.yaml and no "
              "config.yaml folder in it; docs/tasks.md)\n",
              dir);
    ka_registry_free(r);
    return 1;
  }
  ec_task_row(NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0);
  for (int i = 0; i < r->ntasks; i++) {
    const ka_task *t = r->tasks[i];
    ec_task_row(t->id, t->type, t->language, t->mode, t->backends, (size_t)t->nbackends, t->tags,
                (size_t)t->ntags, t->ncases, t->nheld);
  }
  ka_registry_free(r);
  return 0;
}

static int ec_tasks_remote(ka_client *c, int timeout_ms) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__ListTasksRequest lt = KERNELARENA__V1__LIST_TASKS_REQUEST__INIT;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_LIST_TASKS;
  req.list_tasks = &lt;
  Kernelarena__V1__Response *r;
  char err[512];
  if (ka_client_call(c, &req, timeout_ms, &r, err, sizeof err)) {
    fprintf(stderr, "envctl: tasks: %s\n", err);
    return 1;
  }
  if (r->body_case != KERNELARENA__V1__RESPONSE__BODY_LIST_TASKS) {
    ec_print_error("tasks", r);
    ka_client_free_response(r);
    return 1;
  }
  if (r->list_tasks->n_tasks == 0) {
    fprintf(stderr,
            "envctl: tasks: the server has no tasks (its log names the folders it "
            "skipped)\n");
    ka_client_free_response(r);
    return 1;
  }
  ec_task_row(NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0);
  for (size_t i = 0; i < r->list_tasks->n_tasks; i++) {
    Kernelarena__V1__TaskInfo *t = r->list_tasks->tasks[i];
    ec_task_row(t->id, t->type, t->language, t->mode, t->backends, t->n_backends, t->tags,
                t->n_tags, t->shown_cases, t->held_out_cases);
  }
  ka_client_free_response(r);
  return 0;
}

/* The rows of one task in the prompts dataset, to stdout: one JSON object per seed
 * (seed, seed + 1, ..., nseeds of them). Returns 0, or 1 when a field is not UTF-8. */
static int ec_prompt_rows(const Kernelarena__V1__TaskInfo *t, unsigned long long seed,
                          long nseeds) {
  json_t *row = json_object();
  json_object_set_new(row, "task_id", json_string(t->id));
  json_object_set_new(row, "version", json_string(t->version));
  json_t *prompt = json_string(t->prompt);
  json_t *files = json_object(), *tags = json_array(), *cases = json_array();
  int bad = !prompt;
  for (size_t i = 0; i < t->n_files; i++) {
    json_t *v = json_stringn((const char *)t->files[i]->content.data, t->files[i]->content.len);
    if (!v) {
      fprintf(stderr, "envctl: tasks: %s: %s is not UTF-8 text\n", t->id, t->files[i]->path);
      bad = 1;
      continue;
    }
    json_object_set_new(files, t->files[i]->path, v);
  }
  for (size_t i = 0; i < t->n_tags; i++) json_array_append_new(tags, json_string(t->tags[i]));
  for (size_t i = 0; i < t->n_case_names; i++)
    json_array_append_new(cases, json_string(t->case_names[i]));
  json_object_set_new(row, "prompt", prompt ? prompt : json_null());
  json_object_set_new(row, "files", files);
  json_object_set_new(row, "tags", tags);
  json_object_set_new(row, "case_names", cases);
  json_object_set_new(row, "runnable", json_boolean(t->runnable));
  for (long k = 0; !bad && k < nseeds; k++) {
    json_object_set_new(row, "seed", json_integer((json_int_t)(seed + (unsigned long long)k)));
    char *line = json_dumps(row, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (line) puts(line);
    free(line);
  }
  json_decref(row);
  return bad;
}

static unsigned long long ec_prompts_seed = 1;
static long ec_prompts_nseeds = 1;
static int ec_prompts_all; /* --all-tasks: also tasks no live executor runs */

/* Prints the prompts dataset of the server's tasks (ListTasks with include_prompts). */
static int ec_tasks_prompts(ka_client *c, const ec_opts *o) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__ListTasksRequest lt = KERNELARENA__V1__LIST_TASKS_REQUEST__INIT;
  lt.include_prompts = 1;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_LIST_TASKS;
  req.list_tasks = &lt;
  Kernelarena__V1__Response *r;
  char err[512];
  if (ka_client_call(c, &req, o->timeout_s * 1000, &r, err, sizeof err)) {
    fprintf(stderr, "envctl: tasks: %s\n", err);
    return 1;
  }
  if (r->body_case != KERNELARENA__V1__RESPONSE__BODY_LIST_TASKS) {
    ec_print_error("tasks", r);
    ka_client_free_response(r);
    return 1;
  }
  if (r->list_tasks->n_tasks == 0) {
    if (o->server)
      fprintf(stderr, "envctl: tasks: the server at %s has no tasks: no rows written\n", o->server);
    else
      fprintf(stderr, "envctl: tasks: no tasks loaded from %s: no rows written\n", o->tasks);
    ka_client_free_response(r);
    return 1;
  }
  int rc = 0, left = 0;
  for (size_t i = 0; i < r->list_tasks->n_tasks; i++) {
    const Kernelarena__V1__TaskInfo *t = r->list_tasks->tasks[i];
    if (!t->runnable && !ec_prompts_all) {
      left++;
      continue;
    }
    rc |= ec_prompt_rows(t, ec_prompts_seed, ec_prompts_nseeds);
  }
  if (left && left == (int)r->list_tasks->n_tasks) {
    fprintf(stderr,
            "envctl: tasks: no live executor runs any of the %d tasks: no rows written "
            "(--all-tasks writes them all)\n",
            left);
    rc = 1;
  } else if (left)
    fprintf(stderr,
            "envctl: tasks: %d task%s left out: no live executor runs %s (a Reset would be "
            "refused); --all-tasks includes them, with \"runnable\": false\n",
            left, left == 1 ? "" : "s", left == 1 ? "it" : "them");
  ka_client_free_response(r);
  fflush(stdout);
  return rc;
}

/* Takes --prompts, --all-tasks and --seeds K out of argv (ec_opts_parse knows none of
 * them); returns 1 when --prompts was given, -1 for a bad --seeds (printed). */
static int ec_take_prompt_opts(int *argc, char **argv) {
  int prompts = 0, n = 0;
  for (int i = 0; i < *argc; i++) {
    if (!strcmp(argv[i], "--prompts")) {
      prompts = 1;
    } else if (!strcmp(argv[i], "--all-tasks")) {
      ec_prompts_all = 1;
    } else if (!strcmp(argv[i], "--seeds") || !strncmp(argv[i], "--seeds=", 8)) {
      const char *v = argv[i][7] == '=' ? argv[i] + 8 : (i + 1 < *argc ? argv[++i] : NULL);
      char *end = NULL;
      long k = v ? strtol(v, &end, 10) : 0;
      if (!v || !*v || *end || k < 1 || k > 1000000) {
        fprintf(stderr, "envctl: tasks: --seeds wants a count from 1 to 1000000\n");
        return -1;
      }
      ec_prompts_nseeds = k;
    } else {
      argv[n++] = argv[i];
    }
  }
  *argc = n;
  argv[n] = NULL;
  return prompts;
}

/* Lists the tasks of the server. */
static int ec_tasks_server(ka_client *c, const ec_opts *o) {
  return ec_tasks_remote(c, o->timeout_s * 1000);
}

int cmd_tasks(int argc, char **argv) {
  int prompts = ec_take_prompt_opts(&argc, argv);
  if (prompts < 0) return 2;
  ec_opts o;
  int rc = ec_opts_parse(argc, argv, &o);
  if (rc >= 0) return rc;
  if (prompts) {
    if (o.has_seed) ec_prompts_seed = o.seed;
    return ec_with_server(&o, ec_tasks_prompts);
  }
  if (!o.server) return ec_tasks_local(o.tasks);
  return ec_with_server(&o, ec_tasks_server);
}
