/* envctl replay: re-evaluates every recorded step of an episode and prints the recorded
 * reward beside the new one, to show whether the verdicts hold on the hardware at hand
 * (a re-measurement on fresh inputs, not a reproduction of the recorded ones).
 *
 *   envctl replay --server URL EPISODE [--timeout S]
 *
 * Done client-side: GetEpisode for the record, then one Evaluate{episode_id, step} per
 * step (the server evaluates that step's recorded files with that step's job seed, so the
 * inputs are the same; nothing is recorded). Exit 0 when every step re-evaluated with the
 * same status, 1 otherwise. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envctl.h"
#include "ka_common.h"
#include "ka_opt.h"

int cmd_replay(int argc, char **argv) {
  static const struct option opts[] = {{"server", required_argument, 0, 's'},
                                       {"timeout", required_argument, 0, 'o'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *server = NULL;
  int timeout_s = KA_OPT_REQUEST_TIMEOUT_S, ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
      case 's':
        server = optarg;
        break;
      case 'o':
        if (ka_opt_timeout_s("envctl", "timeout", optarg, &timeout_s)) return 2;
        break;
      case 'h':
        printf("usage: envctl replay --server URL EPISODE\n");
        return 0;
      default:
        return 2;
    }
  }
  if (!server || optind != argc - 1) {
    fprintf(stderr, "envctl: replay needs --server URL and one EPISODE id\n");
    return 2;
  }
  const char *id = argv[optind];
  ka_client *c;
  char err[512];
  if (ka_client_open(server, &c, err, sizeof err)) {
    fprintf(stderr, "envctl: %s\n", err);
    return 1;
  }
  Kernelarena__V1__Response *ep;
  if (ec_get_episode(c, id, 1, timeout_s * 1000, &ep)) {
    ka_client_close(c);
    return 1;
  }
  const Kernelarena__V1__EpisodeRecord *e = ep->get_episode->episode;
  printf("episode %s: task %s, seed %llu, %d step%s recorded on %s\n", e->id, e->task_id,
         (unsigned long long)e->seed, e->steps, e->steps == 1 ? "" : "s",
         *e->device_name ? e->device_name : "?");
  printf("%-5s %-14s %-14s %10s %10s %9s\n", "STEP", "RECORDED", "NOW", "REWARD", "NEW", "DIFF");
  int rc = 0;
  for (size_t i = 0; i < e->n_step_records; i++) {
    const Kernelarena__V1__StepRecord *s = e->step_records[i];
    Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
    Kernelarena__V1__EvaluateRequest ev = KERNELARENA__V1__EVALUATE_REQUEST__INIT;
    ev.episode_id = (char *)id;
    ev.step = s->step;
    req.body_case = KERNELARENA__V1__REQUEST__BODY_EVALUATE;
    req.evaluate = &ev;
    Kernelarena__V1__Response *r;
    if (ka_client_call(c, &req, timeout_s * 1000, &r, err, sizeof err)) {
      fprintf(stderr, "envctl: replay step %d: %s\n", s->step, err);
      rc = 1;
      break;
    }
    if (r->body_case != KERNELARENA__V1__RESPONSE__BODY_EVALUATE) {
      ec_print_error("replay", r);
      ka_client_free_response(r);
      rc = 1;
      break;
    }
    const Kernelarena__V1__EvaluateResponse *x = r->evaluate;
    int same = x->observation->status == s->status;
    rc |= !same;
    printf("%-5d %-14s %-14s %10.3f %10.3f %+9.3f%s\n", s->step, ka_status_name(s->status),
           ka_status_name(x->observation->status), s->reward, x->reward, x->reward - s->reward,
           same ? "" : "  status differs");
    ka_client_free_response(r);
  }
  ka_client_free_response(ep);
  ka_client_close(c);
  return rc;
}
