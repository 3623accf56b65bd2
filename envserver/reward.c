/* The reward: the AgentKernelArena score and its components.
 *
 *   COMPILE_ERROR                      -> 0
 *   INCORRECT, RUNTIME_ERROR, TIMEOUT,
 *   OOM                                -> 20
 *   OK                                 -> 120 + 100 x geomean_speedup
 *   FLAGGED                            -> 0 (measurement fault or integrity violation:
 *                                        never rewarded; docs/integrity.md)
 *
 * geomean_speedup is the executor's geometric mean over the shown cases of
 * baseline_ms / candidate_ms. The components are always returned so that a trainer can
 * build its own scalar. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envserver.h"

const char *const es_reward_component_keys[] = {
    "compiled", "correct", "speedup_geomean", "status", "flagged", "speedup/<case>",
};
const int es_reward_ncomponent_keys =
    (int)(sizeof es_reward_component_keys / sizeof es_reward_component_keys[0]);

static void reward_add(es_reward *rw, const char *key, double value) {
  rw->keys = es_xrealloc(rw->keys, sizeof *rw->keys * (size_t)(rw->n + 1));
  rw->values = es_xrealloc(rw->values, sizeof *rw->values * (size_t)(rw->n + 1));
  rw->keys[rw->n] = es_xstrdup(key);
  rw->values[rw->n] = value;
  rw->n++;
}

int es_reward_compute(const es_pb_result *r, es_reward *out) {
  memset(out, 0, sizeof *out);
  int compiled, correct, flagged = 0;
  switch (r->status) {
    case KERNELARENA__V1__STATUS__COMPILE_ERROR:
      compiled = 0, correct = 0, out->reward = 0.0;
      break;
    case KERNELARENA__V1__STATUS__INCORRECT:
    case KERNELARENA__V1__STATUS__RUNTIME_ERROR:
    case KERNELARENA__V1__STATUS__TIMEOUT:
    case KERNELARENA__V1__STATUS__OOM:
      compiled = 1, correct = 0, out->reward = 20.0;
      break;
    case KERNELARENA__V1__STATUS__OK:
      compiled = 1, correct = 1;
      break;
    case KERNELARENA__V1__STATUS__FLAGGED: /* no speedup of it counts, however large */
      compiled = 1, correct = 0, flagged = 1, out->reward = 0.0;
      break;
    default: /* INFRA_ERROR, STATUS_UNSPECIFIED or a status this server does not know */
      return KA_EINVAL;
  }
  /* A speedup that is not a positive finite number scores as none at all. */
  double geo = r->geomean_speedup;
  if (!correct || !isfinite(geo) || geo < 0) geo = 0;
  if (correct) out->reward = 120.0 + 100.0 * geo;
  reward_add(out, "compiled", compiled);
  reward_add(out, "correct", correct);
  reward_add(out, "speedup_geomean", geo);
  reward_add(out, "status", (double)r->status);
  reward_add(out, "flagged", flagged);
  for (size_t i = 0; i < r->n_cases; i++) {
    const Kernelarena__V1__CaseResult *c = r->cases[i];
    if (c->held_out || !c->name) continue;
    char key[300];
    snprintf(key, sizeof key, "speedup/%s", c->name);
    double sp = correct && isfinite(c->speedup) && c->speedup > 0 ? c->speedup : 0;
    reward_add(out, key, sp);
  }
  return KA_OK;
}

void es_reward_free(es_reward *rw) {
  for (int i = 0; i < rw->n; i++) free(rw->keys[i]);
  free(rw->keys);
  free(rw->values);
  memset(rw, 0, sizeof *rw);
}
