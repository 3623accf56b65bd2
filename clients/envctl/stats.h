/* Run folders as data, and the statistics of `envctl compare` and `envctl report`
 * (docs/experiments.md). Reads only the run folder (docs/agents.md, "The run folder"):
 * run.json's plan and each planned episode's episode.json; no server is needed. */
#ifndef KA_ENVCTL_STATS_H
#define KA_ENVCTL_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Default speedup that a failed episode counts as (and the floor of every speedup) in
 * the log-speedup statistics: a failure is as good as a kernel at half the baseline's
 * speed, no better. docs/experiments.md says why. */
#define EC_FAILURE_SPEEDUP 0.5

/* One planned episode of a run. Strings are owned by the ec_runset. */
typedef struct ec_episode_row {
  const char *task;
  int repeat;
  const char *status; /* episode.json status, or "missing" when there is none */
  int ok;             /* completed, correct, and a positive finite speedup */
  double reward;      /* episode.json reward; 0 when missing */
  double speedup;     /* the scored step's speedup; NAN when not ok */
  double log_speedup; /* log(max(speedup, fail_sp)) when ok, log(fail_sp) when not */
  int n_steps;
  double held_speedup; /* held-out speedup of the final kernel; NAN when not scored */
  double held_gap;     /* held-out speedup / shown speedup; NAN when not scored */
  const char *message; /* error or held-out status text; "" when none */
  const char *dir;     /* the episode folder: the run folder's episodes/<task>@<repeat>/
                          when it exists, else the plan's dir when that exists; NULL when
                          neither does */
} ec_episode_row;

/* One run: its plan's episodes in plan order. */
typedef struct ec_run_data {
  char *dir;   /* the run folder */
  char *run;   /* run id */
  char *label; /* run label */
  ec_episode_row *rows;
  size_t nrows;
  int complete; /* summary.json "complete" (0 when absent) */
  void *json;   /* private: the parsed documents the strings point into */
} ec_run_data;

/* Loads a run: name is a run folder (holding run.json), or a run id under runs_dir.
 * fail_sp is the failure speedup (EC_FAILURE_SPEEDUP unless told). Episodes without an
 * episode.json (or unreadable) are rows with status "missing" and ok = 0: a failure,
 * never dropped. Returns 0, or -1 with the reason in err (no such run, no run.json, no
 * plan, unreadable JSON). The caller frees with ec_run_free. Not thread-safe per run. */
int ec_run_load(const char *name, const char *runs_dir, double fail_sp, ec_run_data *out, char *err,
                size_t errlen);
/* Frees what ec_run_load made; safe on a zeroed struct. */
void ec_run_free(ec_run_data *r);

/* Percentile bootstrap 95% interval of the mean of x[0..n) (Efron & Tibshirani 1993,
 * ch. 13): nboot resamples of size n drawn with replacement by GSL's MT19937 seeded with
 * seed; the 2.5% and 97.5% quantiles of the resample means. n >= 1. */
void ec_bootstrap_mean_ci(const double *x, size_t n, size_t nboot, unsigned long seed, double *lo,
                          double *hi);

/* Two-sided paired t-test of mean(d) = 0 over n >= 2 differences (Student 1908): t =
 * mean / (sd / sqrt(n)), n-1 degrees of freedom, p from GSL's t distribution. When all
 * differences are equal, p = 1 if they are 0 and 0 otherwise (t is infinite). */
double ec_paired_t_p(const double *d, size_t n, double *t_out);

/* Two-sided Wilcoxon signed-rank test of d (Wilcoxon 1945): zero differences dropped,
 * tied |d| get mid-ranks, normal approximation with tie and continuity correction.
 * Returns p (1 when no nonzero difference remains); *nz gets the count used. */
double ec_wilcoxon_p(const double *d, size_t n, size_t *nz);

/* Defaults of ec_compare (ec_compare_defaults), stated in compare's output and in
 * docs/experiments.md. The tie threshold's default is log 1.05. */
#define EC_COMPARE_RESAMPLES 10000
#define EC_COMPARE_SEED 20261129UL
#define EC_COMPARE_ALPHA 0.05

/* Settings of a comparison. The failure speedup is not here: it was applied when the
 * runs were loaded (ec_run_load). */
typedef struct ec_compare_opts {
  double tie_log; /* a task's |delta log speedup| below it is a tie */
  int resamples;  /* bootstrap resamples, >= 1 */
  uint64_t seed;  /* bootstrap seed */
  double alpha;   /* significance level of the verdict */
} ec_compare_opts;

/* Sets o to the defaults: tie log 1.05, EC_COMPARE_RESAMPLES, EC_COMPARE_SEED,
 * EC_COMPARE_ALPHA. */
void ec_compare_defaults(ec_compare_opts *o);

/* One run's episodes of one task. */
typedef struct ec_cmp_side {
  int n, failed;     /* episodes, failed episodes */
  double reward_sum; /* sum of the episodes' rewards */
  double log_sum;    /* sum of their log speedups (failures at the failure speedup) */
  double log_sq;     /* sum of the squared log speedups */
} ec_cmp_side;

/* One task of a comparison, with both runs' episodes of it. */
typedef struct ec_cmp_task {
  const char *task;    /* owned by the runs */
  ec_cmp_side a, b;    /* a.n == 0 (b.n == 0): not in A's (B's) plan */
  int paired;          /* in both plans */
  double delta_log;    /* paired: mean log speedup of B minus A's; NAN otherwise */
  double delta_reward; /* paired: mean reward of B minus A's; NAN otherwise */
  const char *outcome; /* paired: "win", "tie" or "loss" (B against A); NULL otherwise */
} ec_cmp_task;

/* Two episodes of the same (task, repeat), one per run; the rows belong to the runs. */
typedef struct ec_cmp_pair {
  const ec_episode_row *a, *b;
} ec_cmp_pair;

/* The paired comparison of run B against run A (docs/experiments.md, "What is compared").
 * Numbers that do not exist are NAN: the means and intervals without a paired task, the
 * tests with fewer than 2, a run's noise without a paired task of 2+ repeats. */
typedef struct ec_comparison {
  ec_cmp_task *tasks;     /* every task: A's plan order, then those only in B's */
  size_t ntasks, npaired; /* tasks; tasks in both plans */
  ec_cmp_pair *pairs;     /* episodes paired by (task, repeat), in A's plan order */
  size_t npairs;
  int wins, ties, losses;      /* over the paired tasks */
  double mean_log;             /* mean over paired tasks of delta_log; exp: the speedup ratio */
  double ci_lo, ci_hi;         /* its percentile bootstrap 95% interval (log) */
  double mean_delta_reward;    /* mean over paired tasks of delta_reward */
  double reward_lo, reward_hi; /* its bootstrap 95% interval */
  double t, p;                 /* paired t-test of delta_log: t statistic, two-sided p */
  double p_wilcoxon;           /* Wilcoxon signed-rank p */
  size_t n_wilcoxon;           /* nonzero deltas it used */
  double a_sd, b_sd;           /* run-to-run noise: pooled sd of log speedup over repeats */
  int a_noise_tasks, b_noise_tasks; /* paired tasks with 2+ repeats behind a_sd, b_sd */
  double se_noise;                  /* s.e. of mean_log that that noise alone gives */
  const char *verdict;              /* "better", "worse" or "no detectable difference" (static) */
  char verdict_line[512];           /* compare's last line: "verdict: ..." */
} ec_comparison;

/* Compares run b against run a under o (NULL: the defaults): pairs tasks and episodes,
 * per-task deltas and outcomes, bootstrap intervals, paired t-test, Wilcoxon, noise and
 * verdict, as `envctl compare` prints them. out points into a and b (task names, rows):
 * free out with ec_comparison_free before them. Returns 0, or -1 when memory runs out
 * (out is then zeroed). Reads a and b only: several comparisons may run at once. */
int ec_compare(const ec_run_data *a, const ec_run_data *b, const ec_compare_opts *o,
               ec_comparison *out);
/* Frees what ec_compare made; safe on a zeroed struct. */
void ec_comparison_free(ec_comparison *c);

#endif
