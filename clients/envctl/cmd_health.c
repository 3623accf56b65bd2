/* envctl health --server URL: one Health request, printed as key=value pairs. */
#include <stdio.h>

#include "envctl.h"
#include "ka_common.h"

static int ec_health(ka_client *c, const ec_opts *o) {
  int timeout_ms = o->timeout_s * 1000;
  Kernelarena__V1__Response *r;
  char err[512];
  if (ec_health_call(c, timeout_ms, &r, err, sizeof err)) {
    fprintf(stderr, "envctl: health: %s\n", err);
    return 1;
  }
  if (r->body_case != KERNELARENA__V1__RESPONSE__BODY_HEALTH) {
    ec_print_error("health", r);
    ka_client_free_response(r);
    return 1;
  }
  printf(
      "ok=%d executors=%d devices=%d queued=%d running=%d open_episodes=%d uptime_s=%.1f "
      "redispatched=%lld stale_results=%lld prefetches_queued=%lld prefetches_sent=%lld "
      "prefetches_dropped=%lld\n",
      r->health->ok, r->health->executors, r->health->devices, r->health->queued_jobs,
      r->health->running_jobs, r->health->open_episodes, r->health->uptime_s,
      (long long)r->health->redispatched_jobs, (long long)r->health->stale_results,
      (long long)r->health->prefetches_queued, (long long)r->health->prefetches_sent,
      (long long)r->health->prefetches_dropped);
  ka_client_free_response(r);
  return 0;
}

int cmd_health(int argc, char **argv) {
  ec_opts o;
  int rc = ec_opts_parse(argc, argv, &o);
  if (rc >= 0) return rc;
  if (!o.server) {
    fprintf(stderr, "envctl: health needs --server URL\n");
    return 2;
  }
  return ec_with_server(&o, ec_health);
}
