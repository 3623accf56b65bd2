/* es_log: one line to stderr per event, unless --quiet. */
#include <stdarg.h>
#include <stdio.h>

#include "envserver.h"

void es_log(const es_server *s, const char *fmt, ...) {
  if (s->cfg.quiet) return;
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "envserver: %s\n", line);
}
