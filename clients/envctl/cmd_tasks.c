/* envctl tasks [--server URL] [--tasks DIR]: the task table, from the task folder or
 * from a running server's ListTasks. */
#include <stdio.h>
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
  snprintf(cases, sizeof cases, "%d+%d", shown, held);
  printf("%-26s %-10s %-5s %-7s %-10s %-7s %s\n", id, type, lang, mode, be, cases, tg);
}

static int ec_tasks_local(const char *dir) {
  char err[1024];
  ka_registry *r;
  if (ka_registry_load(dir, 1, &r, err, sizeof err)) {
    fprintf(stderr, "envctl: %s\n", err);
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
  ec_task_row(NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0);
  for (size_t i = 0; i < r->list_tasks->n_tasks; i++) {
    Kernelarena__V1__TaskInfo *t = r->list_tasks->tasks[i];
    ec_task_row(t->id, t->type, t->language, t->mode, t->backends, t->n_backends, t->tags,
                t->n_tags, t->shown_cases, t->held_out_cases);
  }
  ka_client_free_response(r);
  return 0;
}

/* Lists the tasks of the server. */
static int ec_tasks_server(ka_client *c, const ec_opts *o) {
  return ec_tasks_remote(c, o->timeout_s * 1000);
}

int cmd_tasks(int argc, char **argv) {
  ec_opts o;
  int rc = ec_opts_parse(argc, argv, &o);
  if (rc >= 0) return rc;
  if (!o.server) return ec_tasks_local(o.tasks);
  return ec_with_server(&o, ec_tasks_server);
}
