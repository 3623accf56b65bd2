/* `envctl compare RUN_A RUN_B`: paired comparison of two runs of `envctl run`, task by
 * task, with a bootstrap interval, a paired test and a verdict (docs/experiments.md). */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ka_opt.h"
#include "stats.h"

static void cmp_usage(FILE *f) {
  fprintf(f,
          "usage: envctl compare RUN_A RUN_B [options]\n"
          "  compares run B against run A (folders of `envctl run`), task by task\n"
          "  --runs-dir DIR          where run ids are looked up (default runs)\n"
          "  --json                  print the comparison as JSON\n"
          "  --failure-speedup F     speedup a failed episode counts as, and the floor of\n"
          "                          every speedup (default %.2g)\n"
          "  --tie-log T             |delta log speedup| below T is a tie (default log 1.05)\n"
          "  --resamples N           bootstrap resamples (default %d)\n"
          "  --seed S                bootstrap seed (default %lu)\n",
          EC_FAILURE_SPEEDUP, EC_COMPARE_RESAMPLES, EC_COMPARE_SEED);
}

/* What the command line asked for. */
typedef struct cmp_args {
  const char *runs_dir, *run_a, *run_b;
  int as_json;
  double fail_sp;
  ec_compare_opts o;
} cmp_args;

/* Parses argv into *a. Returns -1 to go on, else the exit code (0 after --help, 2 for a
 * usage error, its message printed). */
static int cmp_parse(int argc, char **argv, cmp_args *a) {
  static const struct option opts[] = {{"runs-dir", required_argument, 0, 'd'},
                                       {"json", no_argument, 0, 'j'},
                                       {"failure-speedup", required_argument, 0, 'f'},
                                       {"tie-log", required_argument, 0, 't'},
                                       {"resamples", required_argument, 0, 'r'},
                                       {"seed", required_argument, 0, 'S'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  *a = (cmp_args){.runs_dir = "runs", .fail_sp = EC_FAILURE_SPEEDUP};
  ec_compare_defaults(&a->o);
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'd':
        a->runs_dir = optarg;
        break;
      case 'j':
        a->as_json = 1;
        break;
      case 'f':
        if (ka_opt_fraction("envctl compare", "failure-speedup", optarg, &a->fail_sp)) return 2;
        break;
      case 't':
        if (ka_opt_double("envctl compare", "tie-log", optarg, 0, 1e6, &a->o.tie_log)) return 2;
        break;
      case 'r':
        if (ka_opt_int("envctl compare", "resamples", optarg, 100, 100000000, &a->o.resamples))
          return 2;
        break;
      case 'S':
        if (ka_opt_u64("envctl compare", "seed", optarg, &a->o.seed)) return 2;
        break;
      case 'h':
        cmp_usage(stdout);
        return 0;
      default:
        cmp_usage(stderr);
        return 2;
    }
  }
  if (argc - optind != 2) {
    fprintf(stderr, "envctl compare: needs two runs, RUN_A and RUN_B\n");
    cmp_usage(stderr);
    return 2;
  }
  a->run_a = argv[optind];
  a->run_b = argv[optind + 1];
  return -1;
}

static double cmp_mean_log(const ec_cmp_side *s) {
  return s->log_sum / s->n;
}

static int cmp_failed(const ec_run_data *r) {
  int failed = 0;
  for (size_t i = 0; i < r->nrows; i++) failed += !r->rows[i].ok;
  return failed;
}

static json_t *cmp_num(double v) {
  return isfinite(v) ? json_real(v) : json_null();
}

static json_t *cmp_side_json(const ec_cmp_side *s) {
  return json_pack("{s:i, s:i, s:f, s:f, s:f}", "episodes", s->n, "failed", s->failed,
                   "mean_reward", s->reward_sum / s->n, "mean_log_speedup", cmp_mean_log(s),
                   "geomean_speedup", exp(cmp_mean_log(s)));
}

static json_t *cmp_run_json(const ec_run_data *r) {
  return json_pack("{s:s, s:s, s:s, s:i, s:i, s:b}", "run", r->run, "label", r->label, "dir",
                   r->dir, "episodes", (int)r->nrows, "failed", cmp_failed(r), "complete",
                   r->complete);
}

/* tasks[] (the paired ones) and unpaired_tasks[] of the JSON document. */
static void cmp_tasks_json(const ec_comparison *c, json_t **tasks, json_t **unpaired) {
  *tasks = json_array();
  *unpaired = json_array();
  for (size_t k = 0; k < c->ntasks; k++) {
    const ec_cmp_task *t = &c->tasks[k];
    if (!t->paired) {
      json_array_append_new(
          *unpaired, json_pack("{s:s, s:s}", "task", t->task, "only_in", t->a.n ? "A" : "B"));
      continue;
    }
    json_array_append_new(
        *tasks,
        json_pack("{s:s, s:o, s:o, s:f, s:f, s:f, s:s}", "task", t->task, "a", cmp_side_json(&t->a),
                  "b", cmp_side_json(&t->b), "delta_reward", t->delta_reward, "delta_log_speedup",
                  t->delta_log, "speedup_ratio", exp(t->delta_log), "outcome", t->outcome));
  }
}

/* episodes[] of the JSON document: the pairs by (task, repeat). */
static json_t *cmp_pairs_json(const ec_comparison *c) {
  json_t *eps = json_array();
  for (size_t i = 0; i < c->npairs; i++) {
    const ec_episode_row *a = c->pairs[i].a, *b = c->pairs[i].b;
    json_array_append_new(
        eps,
        json_pack("{s:s, s:i, s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:f}", "task", a->task, "repeat",
                  a->repeat, "a_status", a->status, "b_status", b->status, "a_reward", a->reward,
                  "b_reward", b->reward, "a_log_speedup", a->log_speedup, "b_log_speedup",
                  b->log_speedup, "delta_reward", b->reward - a->reward, "delta_log_speedup",
                  b->log_speedup - a->log_speedup));
  }
  return eps;
}

/* The comparison as one JSON document (schema kernelarena.compare.v1) on stdout. */
static void cmp_print_json(const cmp_args *g, const ec_run_data *ra, const ec_run_data *rb,
                           const ec_comparison *c) {
  json_t *tasks, *unpaired;
  cmp_tasks_json(c, &tasks, &unpaired);
  size_t np = c->npaired;
  json_t *out = json_pack(
      "{s:s, s:o, s:o, s:{s:f, s:f, s:i, s:I, s:f}, s:o, s:o, s:o, s:i, s:i, s:i, s:i, "
      "s:o, s:o, s:[o, o], s:[o, o], s:o, s:i, s:o, s:o, s:i, s:o, s:[o, o], "
      "s:{s:o, s:i, s:o, s:i, s:o}, s:s, s:s}",
      "schema", "kernelarena.compare.v1", "a", cmp_run_json(ra), "b", cmp_run_json(rb), "settings",
      "failure_speedup", g->fail_sp, "tie_log", g->o.tie_log, "resamples", g->o.resamples, "seed",
      (json_int_t)g->o.seed, "alpha", g->o.alpha, "tasks", tasks, "episodes", cmp_pairs_json(c),
      "unpaired_tasks", unpaired, "paired_tasks", (int)np, "wins", c->wins, "ties", c->ties,
      "losses", c->losses, "mean_log_ratio", cmp_num(c->mean_log), "speedup_ratio",
      cmp_num(exp(c->mean_log)), "ci", cmp_num(c->ci_lo), cmp_num(c->ci_hi), "ratio_ci",
      cmp_num(exp(c->ci_lo)), cmp_num(exp(c->ci_hi)), "t", cmp_num(c->t), "df",
      np >= 2 ? (int)np - 1 : 0, "p", cmp_num(c->p), "p_wilcoxon", cmp_num(c->p_wilcoxon),
      "n_wilcoxon", (int)c->n_wilcoxon, "mean_delta_reward", cmp_num(c->mean_delta_reward),
      "delta_reward_ci", cmp_num(c->reward_lo), cmp_num(c->reward_hi), "noise", "a_sd",
      cmp_num(c->a_sd), "a_tasks", c->a_noise_tasks, "b_sd", cmp_num(c->b_sd), "b_tasks",
      c->b_noise_tasks, "se_mean_diff", cmp_num(c->se_noise), "verdict", c->verdict, "verdict_line",
      c->verdict_line);
  json_dumpf(out, stdout, JSON_INDENT(2));
  fputc('\n', stdout);
  json_decref(out);
}

/* Text: the runs, then a row per paired task and the tasks that are not paired. */
static void cmp_print_tasks(const cmp_args *g, const ec_run_data *ra, const ec_run_data *rb,
                            const ec_comparison *c) {
  const ec_run_data *rr[2] = {ra, rb};
  for (int s = 0; s < 2; s++)
    printf("%c: %s (run %s, %zu episodes, %d failed%s)\n", s ? 'B' : 'A', rr[s]->label, rr[s]->run,
           rr[s]->nrows, cmp_failed(rr[s]), rr[s]->complete ? "" : ", run not complete");
  printf("\n%-28s %9s %9s %9s %10s %10s %8s  %s\n", "TASK", "REWARD_A", "REWARD_B", "dREWARD",
         "SPEEDUP_A", "SPEEDUP_B", "dLOG", "B vs A");
  for (size_t k = 0; k < c->ntasks; k++) {
    const ec_cmp_task *x = &c->tasks[k];
    if (!x->paired) continue;
    char sa[32], sb[32];
    snprintf(sa, sizeof sa, "x%.3g%s", exp(cmp_mean_log(&x->a)), x->a.failed ? "*" : "");
    snprintf(sb, sizeof sb, "x%.3g%s", exp(cmp_mean_log(&x->b)), x->b.failed ? "*" : "");
    printf("%-28s %9.1f %9.1f %+9.1f %10s %10s %+8.3f  %s\n", x->task, x->a.reward_sum / x->a.n,
           x->b.reward_sum / x->b.n, x->delta_reward, sa, sb, x->delta_log, x->outcome);
  }
  printf(
      "(speedups: geometric mean over repeats; * = includes failed episodes, counted "
      "as x%.2g)\n",
      g->fail_sp);
  for (size_t i = 0; i < c->ntasks; i++)
    if (!c->tasks[i].paired)
      printf("not paired (only in %s): %s\n", c->tasks[i].a.n ? "A" : "B", c->tasks[i].task);
}

/* Text: the summary lines (outcomes, interval, tests, noise) and the verdict line. */
static void cmp_print_summary(const cmp_args *g, const ec_comparison *c) {
  size_t np = c->npaired;
  printf(
      "\nwins %d, ties %d, losses %d of %zu tasks (B against A; tie: both failed every "
      "repeat, or |dLOG| < %.3g)\n",
      c->wins, c->ties, c->losses, np, g->o.tie_log);
  if (np) {
    printf(
        "mean log speedup ratio (B/A): %+.4f = x%.3f; 95%% percentile bootstrap CI "
        "[%+.4f, %+.4f] = x%.3f..x%.3f (%ld resamples over tasks, seed %lu)\n",
        c->mean_log, exp(c->mean_log), c->ci_lo, c->ci_hi, exp(c->ci_lo), exp(c->ci_hi),
        (long)g->o.resamples, (unsigned long)g->o.seed);
    printf("mean reward delta (B-A): %+.2f; 95%% CI [%+.2f, %+.2f]\n", c->mean_delta_reward,
           c->reward_lo, c->reward_hi);
  }
  if (np >= 2)
    printf(
        "paired t-test: t = %.3g, df = %zu, p = %.3g; Wilcoxon signed-rank (normal "
        "approximation, %zu nonzero): p = %.3g\n",
        c->t, np - 1, c->p, c->n_wilcoxon, c->p_wilcoxon);
  if (c->a_noise_tasks || c->b_noise_tasks)
    printf(
        "run-to-run noise (sd of log speedup between repeats): A %.3g (%d tasks), "
        "B %.3g (%d tasks); noise alone gives the mean difference a s.e. of %.3g\n",
        c->a_sd, c->a_noise_tasks, c->b_sd, c->b_noise_tasks, c->se_noise);
  else
    printf("run-to-run noise: unknown (no task has 2+ repeats in either run)\n");
  printf("%s\n", c->verdict_line);
}

int cmd_compare(int argc, char **argv) {
  cmp_args g;
  int rc = cmp_parse(argc, argv, &g);
  if (rc >= 0) return rc;
  ec_run_data ra, rb;
  char err[4300];
  if (ec_run_load(g.run_a, g.runs_dir, g.fail_sp, &ra, err, sizeof err)) {
    fprintf(stderr, "envctl compare: run A: %s\n", err);
    return 1;
  }
  if (ec_run_load(g.run_b, g.runs_dir, g.fail_sp, &rb, err, sizeof err)) {
    fprintf(stderr, "envctl compare: run B: %s\n", err);
    ec_run_free(&ra);
    return 1;
  }
  ec_comparison c;
  rc = 0;
  if (ec_compare(&ra, &rb, &g.o, &c)) {
    fprintf(stderr, "envctl compare: out of memory\n");
    rc = 1;
  } else if (g.as_json) {
    cmp_print_json(&g, &ra, &rb, &c);
  } else {
    cmp_print_tasks(&g, &ra, &rb, &c);
    cmp_print_summary(&g, &c);
  }
  ec_comparison_free(&c);
  ec_run_free(&ra);
  ec_run_free(&rb);
  return rc;
}
