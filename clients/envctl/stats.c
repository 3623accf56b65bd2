/* Run folders as data, and the statistics of `envctl compare` and `envctl report`
 * (docs/experiments.md). */
#include "stats.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int st_isdir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int st_isfile(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static char *st_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static double st_num(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Fills one row from its episode.json (NULL when there is none). */
static void st_row(ec_episode_row *w, json_t *ep, double fail_sp) {
  w->status = "missing";
  w->message = "no episode.json (the episode never finished)";
  w->speedup = w->held_speedup = w->held_gap = NAN;
  w->reward = 0;
  w->n_steps = 0;
  w->ok = 0;
  if (ep) {
    const char *s = json_string_value(json_object_get(ep, "status"));
    w->status = s ? s : "unknown";
    double r = st_num(ep, "reward");
    w->reward = isfinite(r) ? r : 0;
    w->n_steps = (int)json_integer_value(json_object_get(ep, "n_steps"));
    double sp = st_num(ep, "speedup");
    w->ok = s && !strcmp(s, "completed") && json_is_true(json_object_get(ep, "correct")) &&
            isfinite(sp) && sp > 0;
    if (w->ok) w->speedup = sp;
    const char *e = json_string_value(json_object_get(ep, "error"));
    json_t *ho = json_object_get(ep, "held_out");
    const char *hs = json_string_value(json_object_get(ho, "status"));
    w->message = e ? e : (hs && strcmp(hs, "ok") ? hs : "");
    if (json_is_object(ho)) {
      double hsp = st_num(ho, "speedup");
      if (!isfinite(hsp)) hsp = st_num(ho, "speedup_geomean");
      if (isfinite(hsp) && hsp > 0) {
        w->held_speedup = hsp;
        double g = st_num(ho, "gap");
        w->held_gap = isfinite(g) ? g : (w->ok ? hsp / w->speedup : NAN);
      }
    }
  }
  w->log_speedup = log(w->ok ? fmax(w->speedup, fail_sp) : fail_sp);
}

/* The folder of one planned episode (ec_episode_row.dir): the run folder's own
 * episodes/<name>@<repeat>/ when it holds episode.json, else the plan's dir pd when that
 * does, else whichever of the two is a folder; NULL when neither is. The string is kept
 * in keep (the run's documents). */
static const char *st_episode_dir(json_t *keep, const char *dir, const char *name, int repeat,
                                  const char *pd) {
  char in[PATH_MAX * 2], f[PATH_MAX * 2 + 16];
  snprintf(in, sizeof in, "%s/episodes/%s@%d", dir, name, repeat);
  const char *pick = NULL;
  snprintf(f, sizeof f, "%s/episode.json", in);
  if (st_isfile(f)) pick = in;
  if (!pick && pd) {
    snprintf(f, sizeof f, "%s/episode.json", pd);
    if (st_isfile(f)) pick = pd;
  }
  if (!pick) pick = st_isdir(in) ? in : pd && st_isdir(pd) ? pd : NULL;
  if (!pick) return NULL;
  json_t *js = json_string(pick);
  if (!js) return NULL;
  json_array_append_new(keep, js);
  return json_string_value(js);
}

int ec_run_load(const char *name, const char *runs_dir, double fail_sp, ec_run_data *out, char *err,
                size_t errlen) {
  memset(out, 0, sizeof *out);
  char dir[PATH_MAX], p[PATH_MAX + 64];
  if (st_isdir(name)) {
    snprintf(dir, sizeof dir, "%s", name);
  } else {
    snprintf(dir, sizeof dir, "%s/%s", runs_dir ? runs_dir : "runs", name);
    if (!st_isdir(dir)) {
      snprintf(err, errlen, "no run '%s' (neither a folder %s nor %s)", name, name, dir);
      return -1;
    }
  }
  snprintf(p, sizeof p, "%s/run.json", dir);
  if (!st_isfile(p)) {
    snprintf(err, errlen, "%s: no run.json (not a run folder of `envctl run`)", dir);
    return -1;
  }
  json_error_t je;
  json_t *run = json_load_file(p, 0, &je);
  if (!run) {
    snprintf(err, errlen, "%s: line %d: %s", p, je.line, je.text);
    return -1;
  }
  json_t *plan = json_object_get(run, "plan");
  if (!json_is_array(plan) || json_array_size(plan) == 0) {
    snprintf(err, errlen, "%s has no plan (no episodes to compare)", p);
    json_decref(run);
    return -1;
  }
  json_t *keep = json_array(); /* run.json, then every episode.json */
  json_array_append_new(keep, run);
  out->json = keep;
  out->dir = st_strdup(dir);
  const char *rid = json_string_value(json_object_get(run, "run"));
  const char *lab = json_string_value(json_object_get(run, "label"));
  const char *base = strrchr(dir, '/');
  out->run = st_strdup(rid ? rid : base ? base + 1 : dir);
  out->label = st_strdup(lab ? lab : out->run);
  out->nrows = json_array_size(plan);
  out->rows = calloc(out->nrows, sizeof *out->rows);
  size_t i;
  json_t *e;
  json_array_foreach(plan, i, e) {
    const char *task = json_string_value(json_object_get(e, "task"));
    json_t *rep = json_object_get(e, "repeat");
    if (!task || !json_is_integer(rep)) {
      snprintf(err, errlen, "%s: plan entry %zu has no task or repeat", p, i);
      ec_run_free(out);
      return -1;
    }
    ec_episode_row *w = &out->rows[i];
    w->task = task;
    w->repeat = (int)json_integer_value(rep);
    /* the episode folder inside this run folder (so a moved run still reads), else the
     * plan's absolute dir */
    char name_[PATH_MAX], ep[PATH_MAX * 2];
    snprintf(name_, sizeof name_, "%s", task);
    for (char *c = name_; *c; c++)
      if (*c == '/') *c = '~';
    snprintf(ep, sizeof ep, "%s/episodes/%s@%d/episode.json", dir, name_, w->repeat);
    const char *pd = json_string_value(json_object_get(e, "dir"));
    if (!st_isfile(ep) && pd) snprintf(ep, sizeof ep, "%s/episode.json", pd);
    json_t *doc = st_isfile(ep) ? json_load_file(ep, 0, &je) : NULL;
    if (doc) json_array_append_new(keep, doc);
    st_row(w, doc, fail_sp);
    w->dir = st_episode_dir(keep, dir, name_, w->repeat, pd);
  }
  snprintf(p, sizeof p, "%s/summary.json", dir);
  json_t *sum = st_isfile(p) ? json_load_file(p, 0, &je) : NULL;
  out->complete = sum && json_is_true(json_object_get(sum, "complete"));
  json_decref(sum);
  return 0;
}

void ec_run_free(ec_run_data *r) {
  free(r->dir);
  free(r->run);
  free(r->label);
  free(r->rows);
  json_decref((json_t *)r->json);
  memset(r, 0, sizeof *r);
}

void ec_bootstrap_mean_ci(const double *x, size_t n, size_t nboot, unsigned long seed, double *lo,
                          double *hi) {
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  gsl_rng_set(rng, seed);
  double *m = malloc(sizeof *m * nboot);
  for (size_t b = 0; b < nboot; b++) {
    double s = 0;
    for (size_t k = 0; k < n; k++) s += x[gsl_rng_uniform_int(rng, n)];
    m[b] = s / (double)n;
  }
  gsl_sort(m, 1, nboot);
  *lo = gsl_stats_quantile_from_sorted_data(m, 1, nboot, 0.025);
  *hi = gsl_stats_quantile_from_sorted_data(m, 1, nboot, 0.975);
  free(m);
  gsl_rng_free(rng);
}

double ec_paired_t_p(const double *d, size_t n, double *t_out) {
  double mean = gsl_stats_mean(d, 1, n);
  double sd = n > 1 ? gsl_stats_sd_m(d, 1, n, mean) : 0;
  /* equal differences (sd 0 up to rounding): no spread to test against */
  if (!(sd > 1e-12 * fmax(1.0, fabs(mean)))) {
    *t_out = mean == 0 ? 0 : copysign(INFINITY, mean);
    return fabs(mean) < 1e-12 ? 1.0 : 0.0;
  }
  double t = mean / (sd / sqrt((double)n));
  *t_out = t;
  return 2 * gsl_cdf_tdist_Q(fabs(t), (double)(n - 1));
}

double ec_wilcoxon_p(const double *d, size_t n, size_t *nz) {
  double *a = malloc(sizeof *a * (n ? n : 1));
  size_t *idx = malloc(sizeof *idx * (n ? n : 1));
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (fabs(d[i]) > 1e-12) a[m++] = fabs(d[i]);
  *nz = m;
  if (m == 0) {
    free(a);
    free(idx);
    return 1.0;
  }
  gsl_sort_index(idx, a, 1, m);
  /* mid-ranks of |d|; ties contribute (t^3 - t) / 48 to the variance reduction */
  double *rank = malloc(sizeof *rank * m), tie = 0;
  for (size_t i = 0; i < m;) {
    size_t j = i;
    while (j + 1 < m && fabs(a[idx[j + 1]] - a[idx[i]]) <= 1e-12) j++;
    double t = (double)(j - i + 1);
    for (size_t k = i; k <= j; k++) rank[idx[k]] = (double)(i + j) / 2 + 1;
    tie += t * t * t - t;
    i = j + 1;
  }
  double wplus = 0;
  for (size_t i = 0, k = 0; i < n; i++)
    if (fabs(d[i]) > 1e-12) {
      if (d[i] > 0) wplus += rank[k];
      k++;
    }
  double nn = (double)m, mu = nn * (nn + 1) / 4;
  double var = nn * (nn + 1) * (2 * nn + 1) / 24 - tie / 48;
  free(a);
  free(idx);
  free(rank);
  if (var <= 0) return 1.0;
  double diff = wplus - mu;
  double z = (fabs(diff) - 0.5 > 0 ? fabs(diff) - 0.5 : 0) / sqrt(var);
  double p = 2 * gsl_cdf_ugaussian_Q(z);
  return p > 1 ? 1 : p;
}

void ec_compare_defaults(ec_compare_opts *o) {
  o->tie_log = log(1.05);
  o->resamples = EC_COMPARE_RESAMPLES;
  o->seed = EC_COMPARE_SEED;
  o->alpha = EC_COMPARE_ALPHA;
}

static void st_side_add(ec_cmp_side *s, const ec_episode_row *w) {
  s->n++;
  s->failed += !w->ok;
  s->reward_sum += w->reward;
  s->log_sum += w->log_speedup;
  s->log_sq += w->log_speedup * w->log_speedup;
}

static double st_side_mean_log(const ec_cmp_side *s) {
  return s->log_sum / s->n;
}

/* Sample variance of the log speedups of the task's repeats; NAN with fewer than 2. */
static double st_side_var(const ec_cmp_side *s) {
  if (s->n < 2) return NAN;
  double m = st_side_mean_log(s), v = (s->log_sq - s->n * m * m) / (s->n - 1);
  return v > 0 ? v : 0;
}

/* Phase 1: the tasks in A's plan order, then B's, each with its episodes of both runs. */
static int st_cmp_tasks(const ec_run_data *a, const ec_run_data *b, ec_comparison *c) {
  c->tasks = calloc(a->nrows + b->nrows + 1, sizeof *c->tasks);
  if (!c->tasks) return -1;
  const ec_run_data *both[2] = {a, b};
  for (int s = 0; s < 2; s++)
    for (size_t i = 0; i < both[s]->nrows; i++) {
      const ec_episode_row *w = &both[s]->rows[i];
      size_t k = 0;
      while (k < c->ntasks && strcmp(c->tasks[k].task, w->task)) k++;
      if (k == c->ntasks) c->tasks[c->ntasks++].task = w->task;
      st_side_add(s ? &c->tasks[k].b : &c->tasks[k].a, w);
    }
  return 0;
}

/* Phase 2: per paired task its deltas and outcome (tie: every episode failed in both
 * runs, or |delta log| < tie_log), counted into wins, ties and losses. */
static void st_cmp_outcomes(ec_comparison *c, double tie_log) {
  for (size_t k = 0; k < c->ntasks; k++) {
    ec_cmp_task *t = &c->tasks[k];
    t->paired = t->a.n && t->b.n;
    t->delta_log = t->delta_reward = NAN;
    if (!t->paired) continue;
    c->npaired++;
    double d = st_side_mean_log(&t->b) - st_side_mean_log(&t->a);
    t->delta_log = d;
    t->delta_reward = t->b.reward_sum / t->b.n - t->a.reward_sum / t->a.n;
    int all_failed = t->a.failed == t->a.n && t->b.failed == t->b.n;
    t->outcome = all_failed || fabs(d) < tie_log ? "tie" : d > 0 ? "win" : "loss";
    if (t->outcome[0] == 'w')
      c->wins++;
    else if (t->outcome[0] == 't')
      c->ties++;
    else
      c->losses++;
  }
}

static const ec_episode_row *st_find(const ec_run_data *r, const char *task, int repeat) {
  for (size_t i = 0; i < r->nrows; i++)
    if (!strcmp(r->rows[i].task, task) && r->rows[i].repeat == repeat) return &r->rows[i];
  return NULL;
}

/* Phase 3: the episode pairs by (task, repeat), in A's plan order. */
static int st_cmp_pairs(const ec_run_data *a, const ec_run_data *b, ec_comparison *c) {
  c->pairs = calloc(a->nrows + 1, sizeof *c->pairs);
  if (!c->pairs) return -1;
  for (size_t i = 0; i < a->nrows; i++) {
    const ec_episode_row *y = st_find(b, a->rows[i].task, a->rows[i].repeat);
    if (y) c->pairs[c->npairs++] = (ec_cmp_pair){&a->rows[i], y};
  }
  return 0;
}

/* Phase 4: means and bootstrap intervals (1+ paired tasks), the paired t-test and the
 * Wilcoxon test (2+), over the paired tasks' deltas. */
static int st_cmp_tests(ec_comparison *c, const ec_compare_opts *o) {
  c->mean_log = c->ci_lo = c->ci_hi = c->t = c->p = c->p_wilcoxon = NAN;
  c->mean_delta_reward = c->reward_lo = c->reward_hi = NAN;
  size_t np = c->npaired;
  if (np == 0) return 0;
  double *d = calloc(np, sizeof *d), *dr = calloc(np, sizeof *dr);
  if (!d || !dr) {
    free(d);
    free(dr);
    return -1;
  }
  for (size_t k = 0, j = 0; k < c->ntasks; k++)
    if (c->tasks[k].paired) d[j] = c->tasks[k].delta_log, dr[j++] = c->tasks[k].delta_reward;
  double mean = 0, mr = 0;
  for (size_t k = 0; k < np; k++) mean += d[k], mr += dr[k];
  c->mean_log = mean / (double)np;
  c->mean_delta_reward = mr / (double)np;
  ec_bootstrap_mean_ci(d, np, (size_t)o->resamples, o->seed, &c->ci_lo, &c->ci_hi);
  ec_bootstrap_mean_ci(dr, np, (size_t)o->resamples, o->seed, &c->reward_lo, &c->reward_hi);
  if (np >= 2) {
    c->p = ec_paired_t_p(d, np, &c->t);
    c->p_wilcoxon = ec_wilcoxon_p(d, np, &c->n_wilcoxon);
  }
  free(d);
  free(dr);
  return 0;
}

/* Pooled run-to-run standard deviation of log speedup between repeats of a task, over
 * the paired tasks with 2+ repeats in one run (side_b: B's, else A's): sqrt(mean of the
 * per-task sample variances); NAN without such a task. *ntasks gets their count, *reps
 * their mean number of repeats. */
static double st_cmp_noise(const ec_comparison *c, int side_b, int *ntasks, double *reps) {
  double vs = 0, rs = 0;
  int k = 0;
  for (size_t i = 0; i < c->ntasks; i++) {
    if (!c->tasks[i].paired) continue;
    const ec_cmp_side *s = side_b ? &c->tasks[i].b : &c->tasks[i].a;
    double v = st_side_var(s);
    if (isnan(v)) continue;
    vs += v;
    rs += s->n;
    k++;
  }
  *ntasks = k;
  *reps = k ? rs / k : 0;
  return k ? sqrt(vs / k) : NAN;
}

/* Phase 5: both runs' noise and the standard error of the mean difference that repeat
 * noise alone would give. */
static void st_cmp_noise_se(ec_comparison *c) {
  double repa, repb;
  c->a_sd = st_cmp_noise(c, 0, &c->a_noise_tasks, &repa);
  c->b_sd = st_cmp_noise(c, 1, &c->b_noise_tasks, &repb);
  c->se_noise = NAN;
  if (c->npaired && (c->a_noise_tasks || c->b_noise_tasks)) {
    double va = c->a_noise_tasks ? c->a_sd * c->a_sd / repa : 0;
    double vb = c->b_noise_tasks ? c->b_sd * c->b_sd / repb : 0;
    c->se_noise = sqrt((va + vb) / (double)c->npaired);
  }
}

/* Phase 6: the verdict (better or worse when p < alpha and the interval excludes 0 on
 * that side) and its line. */
static void st_cmp_verdict(ec_comparison *c, const ec_run_data *a, const ec_run_data *b,
                           double alpha) {
  size_t np = c->npaired;
  c->verdict = "no detectable difference";
  if (np >= 2 && c->p < alpha && c->ci_lo > 0) c->verdict = "better";
  if (np >= 2 && c->p < alpha && c->ci_hi < 0) c->verdict = "worse";
  double r = exp(c->mean_log), lo = exp(c->ci_lo), hi = exp(c->ci_hi);
  if (c->verdict[0] == 'n')
    snprintf(c->verdict_line, sizeof c->verdict_line,
             "verdict: no detectable difference between B (%s) and A (%s)%s: speedup ratio "
             "x%.3f, 95%% CI x%.3f..x%.3f, p = %.3g",
             b->label, a->label, np < 2 ? " (fewer than 2 paired tasks)" : "", r, lo, hi, c->p);
  else
    snprintf(c->verdict_line, sizeof c->verdict_line,
             "verdict: B (%s) is %s than A (%s): speedup ratio x%.3f, 95%% CI x%.3f..x%.3f, "
             "p = %.3g (paired t-test, %zu tasks)",
             b->label, c->verdict, a->label, r, lo, hi, c->p, np);
}

int ec_compare(const ec_run_data *a, const ec_run_data *b, const ec_compare_opts *o,
               ec_comparison *out) {
  ec_compare_opts def;
  if (!o) ec_compare_defaults(&def), o = &def;
  memset(out, 0, sizeof *out);
  if (st_cmp_tasks(a, b, out)) goto oom;
  st_cmp_outcomes(out, o->tie_log);
  if (st_cmp_pairs(a, b, out) || st_cmp_tests(out, o)) goto oom;
  st_cmp_noise_se(out);
  st_cmp_verdict(out, a, b, o->alpha);
  return 0;
oom:
  ec_comparison_free(out);
  return -1;
}

void ec_comparison_free(ec_comparison *c) {
  free(c->tasks);
  free(c->pairs);
  memset(c, 0, sizeof *c);
}
