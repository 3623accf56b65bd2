/* libFuzzer target: launch-plan parsing (ka_plan_parse), the untrusted launch.yaml an
 * agent submits with an rtc-mode task. The plan is parsed against a real task loaded
 * once from the repository (KA_FUZZ_PLAN_TASK, set by CMake: tasks/hip2hip/topk), so
 * names resolve as they do in the executor. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ka_common.h"
#include "task.h"

static ka_task *g_task;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  char err[1024];
  const char *dir = getenv("KA_FUZZ_PLAN_TASK");
  if (!dir) dir = KA_FUZZ_PLAN_TASK;
  if (ka_task_load(dir, &g_task, err, sizeof err) != KA_OK) {
    fprintf(stderr, "fuzz_plan: %s\n", err);
    abort();
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ka_plan *p = NULL;
  char err[1024] = "";
  int rc = ka_plan_parse(g_task, (const char *)data, size, &p, err, sizeof err);
  if (rc == KA_OK) {
    if (!p) abort();
    ka_plan_free(p);
  } else if (p || !err[0]) {
    abort();
  }
  return 0;
}
