/* envctl step [--workspace DIR] [--server URL] [--episode ID] [--json]: inside an
 * agent's workspace, submits its editable files as one step (docs/agents.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent.h"
#include "envctl.h"
#include "ka_common.h"
#include "ka_opt.h"

int cmd_step(int argc, char **argv) {
  static const struct option opts[] = {{"workspace", required_argument, 0, 'w'},
                                       {"server", required_argument, 0, 's'},
                                       {"episode", required_argument, 0, 'e'},
                                       {"timeout", required_argument, 0, 'o'},
                                       {"json", no_argument, 0, 'j'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *ws = NULL, *server = NULL, *episode = NULL;
  int as_json = 0, timeout_s = KA_OPT_REQUEST_TIMEOUT_S, c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'w':
        ws = optarg;
        break;
      case 's':
        server = optarg;
        break;
      case 'e':
        episode = optarg;
        break;
      case 'j':
        as_json = 1;
        break;
      case 'o':
        if (ka_opt_timeout_s("envctl step", "timeout", optarg, &timeout_s)) return 2;
        break;
      case 'h':
        printf(
            "usage: envctl step [--workspace DIR] [--server URL] [--episode ID] [--json]\n"
            "Submits the editable files of the workspace as one step of the episode and\n"
            "prints the result (also written to .kernelarena/last_result.json).\n"
            "Defaults: $KA_WORKSPACE or the current folder, $KA_SERVER, $KA_EPISODE,\n"
            "$KA_FILES, else .kernelarena/episode.json in the workspace.\n");
        return 0;
      default:
        return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "envctl step: unexpected argument '%s'\n", argv[optind]);
    return 2;
  }
  char err[1024];
  ec_step_target t;
  if (ec_step_target_load(ws, server, episode, &t, err, sizeof err)) {
    fprintf(stderr, "envctl step: %s\n", err);
    return 2;
  }
  t.timeout_s = timeout_s;
  json_t *r;
  int rc = ec_step_submit(&t, &r, err, sizeof err);
  ec_step_target_free(&t);
  if (rc) {
    fprintf(stderr, "envctl step: %s\n", err);
    return 1;
  }
  if (as_json) {
    json_dumpf(r, stdout, JSON_INDENT(2));
    printf("\n");
  } else {
    char *s = ec_step_summary(r);
    fputs(s, stdout);
    free(s);
  }
  json_decref(r);
  return 0;
}
