/* Run folders as data, and the statistics of `envctl compare` (docs/experiments.md). */
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
