/* The executor's half of command tasks (common/task_command.h): one evaluation runs the
 * task's compile, correctness and performance commands in a sandboxed copy of the task
 * folder and scores their reports by the seed system's rules (docs/tasks.md). */
#ifndef KA_COMMAND_H
#define KA_COMMAND_H

#include "gpuexec.h"
#include "kernelarena.pb-c.h"
#include "task.h"

/* The integrity level of every command task's result (docs/integrity.md). */
#define KA_INTEGRITY_TASK_HARNESS "task-harness"

/* Evaluates job (a command task t, t->command set) on dev and fills *res, which the caller
 * initialised (job_id and device may already be set). The baseline's per-case times are
 * measured once per (task version, device) and kept in this process. Never fails: a fault
 * of the submission is its verdict (COMPILE_ERROR, INCORRECT, RUNTIME_ERROR, TIMEOUT,
 * FLAGGED), a fault of ours or of the task's own baseline is INFRA_ERROR. Thread safe. */
void ka_command_evaluate(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                         const Kernelarena__V1__Job *job, const ka_task *t,
                         Kernelarena__V1__Result *res);

/* One timed case of a performance report. */
typedef struct ka_cmd_case {
  char name[128];
  double ms;      /* the candidate's (the code in the folder's) time, ms */
  double base_ms; /* the report's own baseline time (ori_time), ms; 0 if none */
} ka_cmd_case;

/* Parses a performance report (JSON text) by the seed system's rules: a list of cases, an
 * object with a `cases` or `results` list, or one object (one case); each case's time is
 * the first present of execution_time_ms, timing_ms.mean, opt_time (with ori_time as the
 * report's baseline), time_ms, mean_ms, latency_ms. A case that gives only host
 * wall-clock keys (any key with "wall", host_time_ms, elapsed_s) is refused. Fills
 * out[0..max) and returns the count (>= 1), or -1 with the reason in why. Pure. */
int ka_cmd_parse_perf(const char *text, size_t len, ka_cmd_case *out, int max, char *why,
                      size_t whylen);

#endif
