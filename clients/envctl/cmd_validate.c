/* `envctl validate`: runs ka-validate, found beside the envctl executable (as the
 * embedded envserver and gpuexec are), with the same arguments. ka-validate evaluates
 * baselines through the executor's code (gpuexec/validate/validate.c), which envctl does not
 * link. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "envctl.h"
#include "ka_common.h"

int cmd_validate(int argc, char **argv) {
  char exe[PATH_MAX], path[PATH_MAX + 16];
  if (ka_exe_dir(exe, sizeof exe)) {
    fprintf(stderr, "envctl: validate: cannot find the executable's folder\n");
    return 2;
  }
  snprintf(path, sizeof path, "%s/ka-validate", exe);
  argv[0] = path;
  fflush(NULL);
  execv(path, argv);
  fprintf(stderr, "envctl: validate: cannot start %s: %s\n", path, strerror(errno));
  return 2;
}
