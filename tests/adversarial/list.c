/* adversarial_list MANIFEST HARNESS [ROOT]: prints the runs of one harness of the adversarial
 * manifest (manifest.h), in file order, one per line, tab-separated:
 *   name file plan task backend imports timeout_s expect text
 * with "-" for no plan (the task's baseline plan) and no text, and timeout_s 0 for the
 * task's own deadline. Checks every expected status against kernelarena.proto's Status names.
 * With ROOT (the repository root), also checks that every run's file and plan exist.
 * Exit 0; 2 on a bad manifest, an unknown status or a missing file. For the shell harnesses, which
 * run on machines that need no YAML reader of their own. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernelarena.pb-c.h"
#include "manifest.h"

static int status_ok(const char *expect) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", expect);
  for (char *save = NULL, *tok = strtok_r(buf, "|", &save); tok; tok = strtok_r(NULL, "|", &save))
    if (!protobuf_c_enum_descriptor_get_value_by_name(&kernelarena__v1__status__descriptor, tok))
      return 0;
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: adversarial_list MANIFEST HARNESS [ROOT]\n");
    return 2;
  }
  adv_manifest m;
  char err[512];
  if (adv_manifest_load(argv[1], &m, err, sizeof err)) {
    fprintf(stderr, "adversarial_list: %s\n", err);
    return 2;
  }
  int rc = 0;
  for (int i = 0; i < m.n; i++) {
    const adv_run *r = &m.runs[i];
    if (!status_ok(r->expect)) {
      fprintf(stderr, "adversarial_list: %s: unknown status in '%s'\n", r->name, r->expect);
      rc = 2;
      continue;
    }
    for (int k = 0; argc == 4 && k < 2; k++) {
      const char *f = k ? r->plan : r->file;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[3], f ? f : "");
      if (f && access(path, R_OK) != 0) {
        fprintf(stderr, "adversarial_list: %s: %s is missing\n", r->name, path);
        rc = 2;
      }
    }
    if (strcmp(r->harness, argv[2])) continue;
    printf("%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r->name, r->file, r->plan ? r->plan : "-",
           r->task, r->backend, r->imports, r->timeout_s, r->expect,
           r->text && *r->text ? r->text : "-");
  }
  adv_manifest_free(&m);
  return rc;
}
