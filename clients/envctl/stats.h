/* Run folders as data, and the statistics of `envctl compare` and `envctl report`
 * (docs/experiments.md). Reads only the run folder (docs/agents.md, "The run folder"):
 * run.json's plan and each planned episode's episode.json; no server is needed. */
#ifndef KA_ENVCTL_STATS_H
#define KA_ENVCTL_STATS_H

#include <stddef.h>

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

#endif
