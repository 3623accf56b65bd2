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

const char *es_status_name(int status) {
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&kernelarena__v1__status__descriptor, status);
  return v ? v->name : "?";
}
