/* libFuzzer target: the task loader (ka_task_load) on a fuzzed task.yaml.
 *
 * Each input is written as task.yaml into a private temporary task folder that also
 * holds prompt.md and a baseline/ with the file names the seed tasks use, so that inputs
 * close to a real task get past the file checks into the whole schema. A load that
 * succeeds is freed; one that fails must leave a message in err. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ka_common.h"
#include "task.h"

static char g_dir[256];

static void write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (len && fwrite(data, 1, len, f) != len) abort();
  fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *tmp = getenv("TMPDIR"); /* fuzz/run.sh points it at a folder it removes */
  snprintf(g_dir, sizeof g_dir, "%s/ka-fuzz-task-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(g_dir)) abort();
  char p[512];
  snprintf(p, sizeof p, "%s/prompt.md", g_dir);
  write_file(p, "# fuzz\n", 7);
  snprintf(p, sizeof p, "%s/baseline", g_dir);
  if (ka_mkdirs(p)) abort();
  static const char *names[] = {"copy.c",     "gelu.c",      "gelu.cu", "gelu.hip", "kernel.cu",
                                "kernel.hip", "launch.yaml", "a.c",     "x.cu",     "topk.hip"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    snprintf(p, sizeof p, "%s/baseline/%s", g_dir, names[i]);
    write_file(p, "/* */\n", 6);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char p[512];
  snprintf(p, sizeof p, "%s/task.yaml", g_dir);
  write_file(p, data, size);
  ka_task *t = NULL;
  char err[1024] = "";
  int rc = ka_task_load(g_dir, &t, err, sizeof err);
  if (rc == KA_OK) {
    if (!t) abort();
    ka_task_free(t);
  } else if (t || !err[0]) {
    abort(); /* a failed load leaves nothing behind and says why */
  }
  return 0;
}
