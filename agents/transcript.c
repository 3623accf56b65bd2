/* Tokens and cost of an agent session, read from its transcript (agents.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents.h"

/* Adds the integer v to o[key] (when v is an integer). */
static void transcript_add_int(json_t *o, const char *key, json_t *v) {
  if (!json_is_integer(v)) return;
  json_t *cur = json_object_get(o, key);
  json_object_set_new(o, key, json_integer(json_integer_value(cur) + json_integer_value(v)));
}

double ka_transcript_usage(const char *path, json_t *usage, json_t *agent) {
  FILE *f = fopen(path, "r");
  if (!f) return NAN;
  double cost = NAN;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int events = 0;
  while ((n = getline(&line, &cap, f)) > 0) {
    json_error_t je;
    json_t *ev = json_loadb(line, (size_t)n, 0, &je);
    if (!json_is_object(ev)) {
      json_decref(ev);
      continue;
    }
    events++;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (!type) type = "";
    if (!strcmp(type, "system") && json_is_string(json_object_get(ev, "model")))
      json_object_set(agent, "model_reported", json_object_get(ev, "model"));
    if (!strcmp(type, "result")) { /* Claude Code and cursor-agent: totals of the session */
      json_t *u = json_object_get(ev, "usage");
      transcript_add_int(usage, "input_tokens", json_object_get(u, "input_tokens"));
      transcript_add_int(usage, "output_tokens", json_object_get(u, "output_tokens"));
      transcript_add_int(usage, "cache_read_input_tokens",
                         json_object_get(u, "cache_read_input_tokens"));
      transcript_add_int(usage, "cache_creation_input_tokens",
                         json_object_get(u, "cache_creation_input_tokens"));
      json_t *c = json_object_get(ev, "total_cost_usd");
      if (json_is_number(c)) cost = (isnan(cost) ? 0 : cost) + json_number_value(c);
      if (json_is_integer(json_object_get(ev, "num_turns")))
        json_object_set(agent, "num_turns", json_object_get(ev, "num_turns"));
      json_object_set_new(agent, "result_is_error",
                          json_boolean(json_is_true(json_object_get(ev, "is_error"))));
      if (json_is_string(json_object_get(ev, "subtype")))
        json_object_set(agent, "result_subtype", json_object_get(ev, "subtype"));
    } else if (!strcmp(type, "turn.completed") || !strcmp(type, "turn.failed")) { /* codex */
      json_t *u = json_object_get(ev, "usage");
      transcript_add_int(usage, "input_tokens", json_object_get(u, "input_tokens"));
      transcript_add_int(usage, "cached_input_tokens", json_object_get(u, "cached_input_tokens"));
      transcript_add_int(usage, "output_tokens", json_object_get(u, "output_tokens"));
      if (!strcmp(type, "turn.failed")) json_object_set_new(agent, "result_is_error", json_true());
    }
    json_decref(ev);
  }
  free(line);
  fclose(f);
  json_object_set_new(agent, "transcript_events", json_integer(events));
  return cost;
}
