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

/* Defaults, all stated in the output and in docs/experiments.md. */
#define CMP_RESAMPLES 10000
#define CMP_SEED 20261129UL
#define CMP_ALPHA 0.05

/* One run's episodes of one task. */
typedef struct cmp_side {
  int n, failed;
  double reward_sum, log_sum, log_sq;
} cmp_side;

typedef struct cmp_task {
  const char *task;
  cmp_side a, b;
} cmp_task;

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
          EC_FAILURE_SPEEDUP, CMP_RESAMPLES, CMP_SEED);
}

static void cmp_add(cmp_side *s, const ec_episode_row *w) {
  s->n++;
  s->failed += !w->ok;
  s->reward_sum += w->reward;
  s->log_sum += w->log_speedup;
  s->log_sq += w->log_speedup * w->log_speedup;
}

static double cmp_mean_log(const cmp_side *s) {
  return s->log_sum / s->n;
}

/* Sample variance of the log speedups of the task's repeats; NAN with fewer than 2. */
static double cmp_var(const cmp_side *s) {
  if (s->n < 2) return NAN;
  double m = cmp_mean_log(s), v = (s->log_sq - s->n * m * m) / (s->n - 1);
  return v > 0 ? v : 0;
}

static const ec_episode_row *cmp_find(const ec_run_data *r, const char *task, int repeat) {
  for (size_t i = 0; i < r->nrows; i++)
    if (!strcmp(r->rows[i].task, task) && r->rows[i].repeat == repeat) return &r->rows[i];
  return NULL;
}

static json_t *cmp_side_json(const cmp_side *s) {
  return json_pack("{s:i, s:i, s:f, s:f, s:f}", "episodes", s->n, "failed", s->failed,
                   "mean_reward", s->reward_sum / s->n, "mean_log_speedup", cmp_mean_log(s),
                   "geomean_speedup", exp(cmp_mean_log(s)));
}

static json_t *cmp_run_json(const ec_run_data *r) {
  int failed = 0;
  for (size_t i = 0; i < r->nrows; i++) failed += !r->rows[i].ok;
  return json_pack("{s:s, s:s, s:s, s:i, s:i, s:b}", "run", r->run, "label", r->label, "dir",
                   r->dir, "episodes", (int)r->nrows, "failed", failed, "complete", r->complete);
}

static json_t *cmp_num(double v) {
  return isfinite(v) ? json_real(v) : json_null();
}

/* Pooled run-to-run standard deviation of log speedup between repeats of a task:
 * sqrt(mean of the per-task sample variances) over tasks with 2+ repeats. */
static double cmp_noise(const cmp_task *t, size_t nt, int side_b, int *ntasks, double *reps) {
  double vs = 0, rs = 0;
  int k = 0;
  for (size_t i = 0; i < nt; i++) {
    const cmp_side *s = side_b ? &t[i].b : &t[i].a;
    double v = cmp_var(s);
    if (isnan(v)) continue;
    vs += v;
    rs += s->n;
    k++;
  }
  *ntasks = k;
  *reps = k ? rs / k : 0;
  return k ? sqrt(vs / k) : NAN;
}

int cmd_compare(int argc, char **argv) {
  static const struct option opts[] = {{"runs-dir", required_argument, 0, 'd'},
                                       {"json", no_argument, 0, 'j'},
                                       {"failure-speedup", required_argument, 0, 'f'},
                                       {"tie-log", required_argument, 0, 't'},
                                       {"resamples", required_argument, 0, 'r'},
                                       {"seed", required_argument, 0, 'S'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *runs_dir = "runs";
  int as_json = 0, c;
  double fail_sp = EC_FAILURE_SPEEDUP, tie = log(1.05);
  int resamples = CMP_RESAMPLES;
  uint64_t seed = CMP_SEED;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'd':
        runs_dir = optarg;
        break;
      case 'j':
        as_json = 1;
        break;
      case 'f':
        if (ka_opt_fraction("envctl compare", "failure-speedup", optarg, &fail_sp)) return 2;
        break;
      case 't':
        if (ka_opt_double("envctl compare", "tie-log", optarg, 0, 1e6, &tie)) return 2;
        break;
      case 'r':
        if (ka_opt_int("envctl compare", "resamples", optarg, 100, 100000000, &resamples)) return 2;
        break;
      case 'S':
        if (ka_opt_u64("envctl compare", "seed", optarg, &seed)) return 2;
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
  ec_run_data ra, rb;
  char err[4300];
  if (ec_run_load(argv[optind], runs_dir, fail_sp, &ra, err, sizeof err)) {
    fprintf(stderr, "envctl compare: run A: %s\n", err);
    return 1;
  }
  if (ec_run_load(argv[optind + 1], runs_dir, fail_sp, &rb, err, sizeof err)) {
    fprintf(stderr, "envctl compare: run B: %s\n", err);
    ec_run_free(&ra);
    return 1;
  }

  /* tasks in A's plan order, then B's; each with its episodes of both runs */
  cmp_task *tk = calloc(ra.nrows + rb.nrows, sizeof *tk);
  size_t nt = 0;
  const ec_run_data *both[2] = {&ra, &rb};
  for (int s = 0; s < 2; s++)
    for (size_t i = 0; i < both[s]->nrows; i++) {
      const ec_episode_row *w = &both[s]->rows[i];
      size_t k = 0;
      while (k < nt && strcmp(tk[k].task, w->task)) k++;
      if (k == nt) tk[nt++].task = w->task;
      cmp_add(s ? &tk[k].b : &tk[k].a, w);
    }
  /* paired tasks (in both plans) first, in order; the others are listed apart */
  cmp_task *pt = calloc(nt ? nt : 1, sizeof *pt);
  size_t np = 0;
  json_t *unpaired = json_array();
  for (size_t k = 0; k < nt; k++) {
    if (tk[k].a.n && tk[k].b.n)
      pt[np++] = tk[k];
    else
      json_array_append_new(
          unpaired, json_pack("{s:s, s:s}", "task", tk[k].task, "only_in", tk[k].a.n ? "A" : "B"));
  }

  double *d = calloc(np ? np : 1, sizeof *d), *dr = calloc(np ? np : 1, sizeof *dr);
  int wins = 0, ties = 0, losses = 0;
  json_t *jtasks = json_array();
  for (size_t k = 0; k < np; k++) {
    const cmp_task *t = &pt[k];
    d[k] = cmp_mean_log(&t->b) - cmp_mean_log(&t->a);
    dr[k] = t->b.reward_sum / t->b.n - t->a.reward_sum / t->a.n;
    int all_failed = t->a.failed == t->a.n && t->b.failed == t->b.n;
    const char *outcome = all_failed || fabs(d[k]) < tie ? "tie" : d[k] > 0 ? "win" : "loss";
    if (!strcmp(outcome, "win"))
      wins++;
    else if (!strcmp(outcome, "tie"))
      ties++;
    else
      losses++;
    json_array_append_new(jtasks, json_pack("{s:s, s:o, s:o, s:f, s:f, s:f, s:s}", "task", t->task,
                                            "a", cmp_side_json(&t->a), "b", cmp_side_json(&t->b),
                                            "delta_reward", dr[k], "delta_log_speedup", d[k],
                                            "speedup_ratio", exp(d[k]), "outcome", outcome));
  }
  /* episode pairs by (task, repeat) */
  json_t *jeps = json_array();
  for (size_t i = 0; i < ra.nrows; i++) {
    const ec_episode_row *a = &ra.rows[i], *b = cmp_find(&rb, a->task, a->repeat);
    if (!b) continue;
    json_array_append_new(
        jeps,
        json_pack("{s:s, s:i, s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:f}", "task", a->task, "repeat",
                  a->repeat, "a_status", a->status, "b_status", b->status, "a_reward", a->reward,
                  "b_reward", b->reward, "a_log_speedup", a->log_speedup, "b_log_speedup",
                  b->log_speedup, "delta_reward", b->reward - a->reward, "delta_log_speedup",
                  b->log_speedup - a->log_speedup));
  }

  double mean = NAN, lo = NAN, hi = NAN, t = NAN, p = NAN, pw = NAN, mr = NAN, rlo = NAN, rhi = NAN;
  size_t nw = 0;
  if (np >= 1) {
    mean = 0;
    mr = 0;
    for (size_t k = 0; k < np; k++) mean += d[k], mr += dr[k];
    mean /= (double)np;
    mr /= (double)np;
    ec_bootstrap_mean_ci(d, np, (size_t)resamples, seed, &lo, &hi);
    ec_bootstrap_mean_ci(dr, np, (size_t)resamples, seed, &rlo, &rhi);
  }
  if (np >= 2) {
    p = ec_paired_t_p(d, np, &t);
    pw = ec_wilcoxon_p(d, np, &nw);
  }
  int na, nb;
  double repa, repb;
  double sa = cmp_noise(pt, np, 0, &na, &repa), sb = cmp_noise(pt, np, 1, &nb, &repb);
  /* standard error of the mean difference that repeat noise alone would give */
  double se_noise = NAN;
  if (np && (na || nb)) {
    double va = na ? sa * sa / repa : 0, vb = nb ? sb * sb / repb : 0;
    se_noise = sqrt((va + vb) / (double)np);
  }
  const char *verdict = "no detectable difference";
  if (np >= 2 && p < CMP_ALPHA && lo > 0) verdict = "better";
  if (np >= 2 && p < CMP_ALPHA && hi < 0) verdict = "worse";
  char line[512];
  if (!strcmp(verdict, "no detectable difference"))
    snprintf(line, sizeof line,
             "verdict: no detectable difference between B (%s) and A (%s)%s: speedup ratio "
             "x%.3f, 95%% CI x%.3f..x%.3f, p = %.3g",
             rb.label, ra.label, np < 2 ? " (fewer than 2 paired tasks)" : "", exp(mean), exp(lo),
             exp(hi), p);
  else
    snprintf(line, sizeof line,
             "verdict: B (%s) is %s than A (%s): speedup ratio x%.3f, 95%% CI x%.3f..x%.3f, "
             "p = %.3g (paired t-test, %zu tasks)",
             rb.label, verdict, ra.label, exp(mean), exp(lo), exp(hi), p, np);

  if (as_json) {
    json_t *out = json_pack(
        "{s:s, s:o, s:o, s:{s:f, s:f, s:i, s:I, s:f}, s:o, s:o, s:o, s:i, s:i, s:i, s:i, "
        "s:o, s:o, s:[o, o], s:[o, o], s:o, s:i, s:o, s:o, s:i, s:o, s:[o, o], "
        "s:{s:o, s:i, s:o, s:i, s:o}, s:s, s:s}",
        "schema", "kernelarena.compare.v1", "a", cmp_run_json(&ra), "b", cmp_run_json(&rb),
        "settings", "failure_speedup", fail_sp, "tie_log", tie, "resamples", (int)resamples, "seed",
        (json_int_t)seed, "alpha", CMP_ALPHA, "tasks", jtasks, "episodes", jeps, "unpaired_tasks",
        unpaired, "paired_tasks", (int)np, "wins", wins, "ties", ties, "losses", losses,
        "mean_log_ratio", cmp_num(mean), "speedup_ratio", cmp_num(exp(mean)), "ci", cmp_num(lo),
        cmp_num(hi), "ratio_ci", cmp_num(exp(lo)), cmp_num(exp(hi)), "t", cmp_num(t), "df",
        np >= 2 ? (int)np - 1 : 0, "p", cmp_num(p), "p_wilcoxon", cmp_num(pw), "n_wilcoxon",
        (int)nw, "mean_delta_reward", cmp_num(mr), "delta_reward_ci", cmp_num(rlo), cmp_num(rhi),
        "noise", "a_sd", cmp_num(sa), "a_tasks", na, "b_sd", cmp_num(sb), "b_tasks", nb,
        "se_mean_diff", cmp_num(se_noise), "verdict", verdict, "verdict_line", line);
    json_dumpf(out, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
    json_decref(out);
  } else {
    json_decref(jeps);
    json_decref(unpaired);
    const ec_run_data *rr[2] = {&ra, &rb};
    for (int s = 0; s < 2; s++) {
      int f = 0;
      for (size_t i = 0; i < rr[s]->nrows; i++) f += !rr[s]->rows[i].ok;
      printf("%c: %s (run %s, %zu episodes, %d failed%s)\n", s ? 'B' : 'A', rr[s]->label,
             rr[s]->run, rr[s]->nrows, f, rr[s]->complete ? "" : ", run not complete");
    }
    printf("\n%-28s %9s %9s %9s %10s %10s %8s  %s\n", "TASK", "REWARD_A", "REWARD_B", "dREWARD",
           "SPEEDUP_A", "SPEEDUP_B", "dLOG", "B vs A");
    size_t k;
    json_t *jt;
    json_array_foreach(jtasks, k, jt) {
      const cmp_task *x = &pt[k];
      char sa_[32], sb_[32];
      snprintf(sa_, sizeof sa_, "x%.3g%s", exp(cmp_mean_log(&x->a)), x->a.failed ? "*" : "");
      snprintf(sb_, sizeof sb_, "x%.3g%s", exp(cmp_mean_log(&x->b)), x->b.failed ? "*" : "");
      printf("%-28s %9.1f %9.1f %+9.1f %10s %10s %+8.3f  %s\n", x->task, x->a.reward_sum / x->a.n,
             x->b.reward_sum / x->b.n, dr[k], sa_, sb_, d[k],
             json_string_value(json_object_get(jt, "outcome")));
    }
    printf(
        "(speedups: geometric mean over repeats; * = includes failed episodes, counted "
        "as x%.2g)\n",
        fail_sp);
    for (size_t i = 0; i < nt; i++)
      if (!(tk[i].a.n && tk[i].b.n))
        printf("not paired (only in %s): %s\n", tk[i].a.n ? "A" : "B", tk[i].task);
    printf(
        "\nwins %d, ties %d, losses %d of %zu tasks (B against A; tie: both failed every "
        "repeat, or |dLOG| < %.3g)\n",
        wins, ties, losses, np, tie);
    if (np) {
      printf(
          "mean log speedup ratio (B/A): %+.4f = x%.3f; 95%% percentile bootstrap CI "
          "[%+.4f, %+.4f] = x%.3f..x%.3f (%ld resamples over tasks, seed %lu)\n",
          mean, exp(mean), lo, hi, exp(lo), exp(hi), (long)resamples, (unsigned long)seed);
      printf("mean reward delta (B-A): %+.2f; 95%% CI [%+.2f, %+.2f]\n", mr, rlo, rhi);
    }
    if (np >= 2)
      printf(
          "paired t-test: t = %.3g, df = %zu, p = %.3g; Wilcoxon signed-rank (normal "
          "approximation, %zu nonzero): p = %.3g\n",
          t, np - 1, p, nw, pw);
    if (na || nb)
      printf(
          "run-to-run noise (sd of log speedup between repeats): A %s%.3g (%d tasks), "
          "B %s%.3g (%d tasks); noise alone gives the mean difference a s.e. of %.3g\n",
          "", sa, na, "", sb, nb, se_noise);
    else
      printf("run-to-run noise: unknown (no task has 2+ repeats in either run)\n");
    printf("%s\n", line);
    json_decref(jtasks);
  }
  free(d);
  free(dr);
  free(pt);
  free(tk);
  ec_run_free(&ra);
  ec_run_free(&rb);
  return 0;
}
