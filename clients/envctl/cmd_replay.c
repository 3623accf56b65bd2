/* envctl replay: re-evaluates every recorded step of an episode and prints the recorded
 * reward beside the new one, to show whether the verdicts hold on the hardware at hand
 * (a re-measurement: the correctness inputs repeat on the executor process that ran the
 * episode, the timed calls' inputs are new; with --reproducible every input follows from
 * the seeds alone).
 *
 *   envctl replay --server URL EPISODE [--timeout S] [--reproducible]
 *
 * Done client-side: GetEpisode for the record, then one Evaluate{episode_id, step} per
 * step (the server evaluates that step's recorded files with that step's job seed and
 * the episode's problem seed; nothing is recorded). --reproducible asks for reproducible
 * Evaluates (the admin token from $KA_ADMIN_TOKEN or --admin-token-file): every input
 * from the seeds alone, so two such replays see the same inputs on any executor.
 * Exit 0 when every step re-evaluated with the same status, 1 otherwise. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envctl.h"
#include "ka_common.h"
#include "ka_opt.h"

/* The admin token for --reproducible: the first line of path, else $KA_ADMIN_TOKEN.
 * 0, or 2 with the reason printed. */
static int ec_replay_token(const char *path, char *out, size_t len) {
  if (path) {
    char *buf = NULL;
    size_t n = 0;
    int rc = ka_read_file(path, 4096, &buf, &n);
    if (rc) {
      fprintf(stderr, "envctl: replay: cannot read %s: %s\n", path, ka_strerror(rc));
      return 2;
    }
    /* white space around it dropped, as envserver reads the same file */
    const char *b = buf;
    while (*b && strchr(" \t\r\n", *b)) b++;
    size_t k = strlen(b);
    while (k && strchr(" \t\r\n", b[k - 1])) k--;
    snprintf(out, len, "%.*s", (int)k, b);
    free(buf);
  } else if (getenv("KA_ADMIN_TOKEN")) {
    snprintf(out, len, "%s", getenv("KA_ADMIN_TOKEN"));
  }
  if (!*out) {
    fprintf(stderr,
            "envctl: replay --reproducible needs the admin token ($KA_ADMIN_TOKEN or "
            "--admin-token-file PATH)\n");
    return 2;
  }
  return 0;
}

int cmd_replay(int argc, char **argv) {
  static const struct option opts[] = {
      {"server", required_argument, 0, 's'}, {"timeout", required_argument, 0, 'o'},
      {"reproducible", no_argument, 0, 'r'}, {"admin-token-file", required_argument, 0, 'A'},
      {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
  const char *server = NULL, *token_file = NULL;
  int timeout_s = KA_OPT_REQUEST_TIMEOUT_S, ch, reproducible = 0;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
      case 's':
        server = optarg;
        break;
      case 'o':
        if (ka_opt_timeout_s("envctl", "timeout", optarg, &timeout_s)) return 2;
        break;
      case 'r':
        reproducible = 1;
        break;
      case 'A':
        token_file = optarg;
        break;
      case 'h':
        printf(
            "usage: envctl replay --server URL EPISODE [--timeout S] [--reproducible\n"
            "                     [--admin-token-file PATH]]\n"
            "  --reproducible  reproducible Evaluates (the server's admin token: $KA_ADMIN_TOKEN\n"
            "                  or --admin-token-file): inputs from the recorded seeds alone\n");
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
  char token[256] = "";
  if (reproducible && ec_replay_token(token_file, token, sizeof token)) return 2;
  ka_client *c;
  char err[512];
  if (ec_server_open(server, timeout_s, &c, err, sizeof err)) {
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
    ev.reproducible = reproducible;
    ev.admin_token = token;
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
