/* The adversarial manifest (tests/adversarial/manifest.yaml): which submission runs on
 * which task and backend, through which harness, and the verdict it must get.
 * Read with libyaml; used by tests/integrity_test.c and the adversarial_list tool that
 * the shell scripts (tests/sandbox_faults.sh and the H200 scripts in tests/device) read. */
#ifndef KA_ADV_MANIFEST_H
#define KA_ADV_MANIFEST_H

#include <stddef.h>

/* One run of one file. Strings are owned by the manifest; optional ones are NULL. */
typedef struct adv_run {
  char *name;    /* unique id */
  char *file;    /* submitted source, relative to the repository root */
  char *plan;    /* rtc: launch plan relative to the root; NULL: the task's baseline plan */
  char *task;    /* task id, e.g. host/gelu */
  char *backend; /* host or cuda */
  char *harness; /* integrity, sandbox_faults, integrity_h200, sandbox_h200 */
  char *imports; /* task (default) or any */
  char *expect;  /* a status name, or two joined by '|' */
  char *text;    /* must occur in the verdict or its logs; NULL: nothing asked */
  char *absent;  /* must not occur there (a leak the run reports); NULL: nothing asked */
  char *why;     /* description */
  int timeout_s; /* > 0: run on a copy of the task with this deadline; 0: the task's */
} adv_run;

typedef struct adv_manifest {
  adv_run *runs;
  int n;
} adv_manifest;

/* Loads the manifest at path into *m (zeroed first). Checks that every run has name,
 * file, task, backend, harness and expect, that imports is task or any, and that names
 * are unique. Returns 0, or -1 with the file, line and reason in err (nothing is kept:
 * *m is empty). */
int adv_manifest_load(const char *path, adv_manifest *m, char *err, size_t errlen);

/* Frees what adv_manifest_load allocated; an empty manifest is a no-op. */
void adv_manifest_free(adv_manifest *m);

#endif
