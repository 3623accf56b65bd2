/* `envctl report RUN [RUN...] -o report.html`: one self-contained HTML file (inline CSS,
 * inline SVG charts drawn here, a few lines of inline JS for the table search; no
 * external URLs) from run folders of `envctl run` (docs/experiments.md). */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ka_opt.h"
#include "stats.h"

#define RP_MAX_RUNS 8

/* Run colours (the "category10" palette of d3/matplotlib); tests count their pixels. */
static const char *const rp_color[RP_MAX_RUNS] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                  "#9467bd", "#8c564b", "#e377c2", "#17becf"};

/* Chart backgrounds, one faint colour per chart, so that a screenshot test finds each
 * chart's area (tests/report_render.sh). */
#define RP_BG_HIST "#fbfbf2"
#define RP_BG_SPEEDUP "#f2fbfb"
#define RP_BG_SCATTER "#fbf2fb"
#define RP_BG_HELD "#f2f2fb"

static void rp_svg_open(FILE *f, const char *id, double w, double h, const char *bg) {
  fprintf(f,
          "<svg id=%s width=%g height=%g viewBox=\"0 0 %g %g\">\n<rect width=%g height=%g "
          "fill=\"%s\" />\n",
          id, w, h, w, h, w, h, bg);
}

/* Writes s with &, <, >, " and ' escaped for HTML text and attribute values. */
static void rp_esc(FILE *f, const char *s) {
  for (; s && *s; s++) switch (*s) {
      case '&':
        fputs("&amp;", f);
        break;
      case '<':
        fputs("&lt;", f);
        break;
      case '>':
        fputs("&gt;", f);
        break;
      case '"':
        fputs("&quot;", f);
        break;
      case '\'':
        fputs("&#39;", f);
        break;
      default:
        fputc(*s, f);
    }
}

typedef struct rp_cell {
  int n, failed, held_n;
  double log_sum, held_gap_sum;
  double log_min, log_max; /* over the repeats (failures at the failure speedup) */
} rp_cell;

/* The tasks of all runs (first-seen order) and, per run and task, its episodes. */
typedef struct rp_data {
  ec_run_data *runs;
  int nruns;
  const char **tasks;
  int ntasks;
  rp_cell *cell; /* [run * ntasks + task] */
  int any_held;
  ec_comparison cmp[RP_MAX_RUNS]; /* [r]: run r against run 0, for r >= 1 */
  char here[PATH_MAX];            /* the report's folder (canonical): links start here */
} rp_data;

static rp_cell *rp_at(const rp_data *d, int run, int task) {
  return &d->cell[run * d->ntasks + task];
}

static double rp_geo(const rp_cell *c) {
  return c->n ? exp(c->log_sum / c->n) : NAN;
}

static void rp_index(rp_data *d) {
  size_t total = 0;
  for (int r = 0; r < d->nruns; r++) total += d->runs[r].nrows;
  d->tasks = calloc(total ? total : 1, sizeof *d->tasks);
  for (int r = 0; r < d->nruns; r++)
    for (size_t i = 0; i < d->runs[r].nrows; i++) {
      int k = 0;
      while (k < d->ntasks && strcmp(d->tasks[k], d->runs[r].rows[i].task)) k++;
      if (k == d->ntasks) d->tasks[d->ntasks++] = d->runs[r].rows[i].task;
    }
  d->cell = calloc((size_t)(d->nruns * d->ntasks) + 1, sizeof *d->cell);
  for (int r = 0; r < d->nruns; r++)
    for (size_t i = 0; i < d->runs[r].nrows; i++) {
      const ec_episode_row *w = &d->runs[r].rows[i];
      int k = 0;
      while (strcmp(d->tasks[k], w->task)) k++;
      rp_cell *c = rp_at(d, r, k);
      c->log_min = c->n ? fmin(c->log_min, w->log_speedup) : w->log_speedup;
      c->log_max = c->n ? fmax(c->log_max, w->log_speedup) : w->log_speedup;
      c->n++;
      c->failed += !w->ok;
      c->log_sum += w->log_speedup;
      if (isfinite(w->held_gap)) {
        c->held_n++;
        c->held_gap_sum += w->held_gap;
        d->any_held = 1;
      }
    }
}

static void rp_legend(FILE *f, const rp_data *d) {
  fputs("<div class=legend>", f);
  for (int r = 0; r < d->nruns; r++) {
    fprintf(f, "<span><i style=\"background:%s\"></i>", rp_color[r]);
    rp_esc(f, d->runs[r].label);
    fputs(" (", f);
    rp_esc(f, d->runs[r].run);
    fputs(")</span>", f);
  }
  fputs("</div>\n", f);
}

/* Histogram of episode rewards, one bar per run in each of up to 12 equal bins over
 * [0, max reward]. */
static void rp_hist(FILE *f, const rp_data *d) {
  enum { NBMAX = 12 };
  double mx = 1;
  for (int r = 0; r < d->nruns; r++)
    for (size_t i = 0; i < d->runs[r].nrows; i++) mx = fmax(mx, d->runs[r].rows[i].reward);
  /* bin width: the smallest 1, 2, 2.5 or 5 x 10^k giving at most NBMAX bins */
  double p10 = pow(10, floor(log10(mx / NBMAX))), bwv = 10 * p10;
  const double nice[] = {1, 2, 2.5, 5, 10};
  for (int i = 0; i < 5; i++)
    if (nice[i] * p10 * NBMAX >= mx) {
      bwv = nice[i] * p10;
      break;
    }
  int NB = (int)ceil(mx / bwv - 1e-9);
  if (NB < 1) NB = 1;
  if (NB > NBMAX) NB = NBMAX;
  mx = NB * bwv;
  int cnt[RP_MAX_RUNS][NBMAX] = {{0}}, top = 1;
  for (int r = 0; r < d->nruns; r++)
    for (size_t i = 0; i < d->runs[r].nrows; i++) {
      int b = (int)(d->runs[r].rows[i].reward / mx * NB);
      if (b >= NB) b = NB - 1;
      if (b < 0) b = 0;
      if (++cnt[r][b] > top) top = cnt[r][b];
    }
  const double W = 720, H = 280, L = 50, R = 10, T = 10, B = 40;
  double pw = W - L - R, ph = H - T - B, bw = pw / NB;
  rp_svg_open(f, "chart-hist", W, H, RP_BG_HIST);
  for (int y = 0; y <= 4; y++) {
    double v = top * y / 4.0, yy = T + ph - ph * y / 4.0;
    fprintf(f,
            "<line x1=%g y1=%.1f x2=%g y2=%.1f class=grid /><text x=%g y=%.1f class=ax "
            "text-anchor=end>%.3g</text>\n",
            L, yy, W - R, yy, L - 4, yy + 4, v);
  }
  for (int b = 0; b < NB; b++) {
    double gw = bw * 0.8 / d->nruns;
    for (int r = 0; r < d->nruns; r++) {
      double h = ph * cnt[r][b] / top;
      if (cnt[r][b])
        fprintf(f,
                "<rect x=%.1f y=%.1f width=%.1f height=%.1f fill=\"%s\"><title>%d episodes"
                "</title></rect>\n",
                L + b * bw + bw * 0.1 + r * gw, T + ph - h, gw, h, rp_color[r], cnt[r][b]);
    }
    fprintf(f, "<text x=%.1f y=%g class=ax text-anchor=middle>%.3g</text>\n", L + b * bw,
            H - B + 16, mx * b / NB);
  }
  fprintf(f, "<text x=%g y=%g class=ax text-anchor=end>%.3g</text>\n", W - R, H - B + 16, mx);
  fprintf(f, "<text x=%g y=%g class=lab text-anchor=middle>reward</text>\n", L + pw / 2, H - 4);
  fputs("</svg>\n", f);
}

/* The error bar of one (run, task) with 2+ repeats: a whisker from the smallest to the
 * largest speedup over the repeats, centred on the bar at height y, with end caps. */
static void rp_whisker(FILE *f, const rp_cell *c, double xlo, double xhi, double y) {
  fprintf(f,
          "<g class=err><title>x%.3g..x%.3g over %d repeats</title><line x1=%.1f y1=%.1f "
          "x2=%.1f y2=%.1f /><line x1=%.1f y1=%.1f x2=%.1f y2=%.1f /><line x1=%.1f y1=%.1f "
          "x2=%.1f y2=%.1f /></g>\n",
          exp(c->log_min), exp(c->log_max), c->n, xlo, y, xhi, y, xlo, y - 4, xlo, y + 4, xhi,
          y - 4, xhi, y + 4);
}

/* Speedup per task: horizontal bars from the baseline (x1) on a log axis, one per run,
 * each with its error bar (rp_whisker) when the task has 2+ repeats in that run. */
static void rp_speedups(FILE *f, const rp_data *d, double fail_sp) {
  double lo = fail_sp, hi = 2;
  for (int r = 0; r < d->nruns; r++)
    for (int k = 0; k < d->ntasks; k++) {
      const rp_cell *c = rp_at(d, r, k);
      if (!c->n) continue;
      lo = fmin(lo, exp(c->log_min));
      hi = fmax(hi, exp(c->log_max));
    }
  double l0 = floor(log2(lo) - 1e-9), l1 = ceil(log2(hi) + 1e-9);
  const double W = 720, L = 200, R = 60, T = 10, B = 36, bh = 12;
  double gh = bh * d->nruns + 8, H = T + B + gh * d->ntasks, pw = W - L - R;
#define RP_X(v) (L + pw * (log2(v) - l0) / (l1 - l0))
  rp_svg_open(f, "chart-speedup", W, H, RP_BG_SPEEDUP);
  for (double e = l0; e <= l1 + 1e-9; e += 1) {
    double x = RP_X(pow(2, e));
    fprintf(f,
            "<line x1=%.1f y1=%g x2=%.1f y2=%g class=grid /><text x=%.1f y=%g class=ax "
            "text-anchor=middle>x%.3g</text>\n",
            x, T, x, H - B, x, H - B + 14, pow(2, e));
  }
  for (int k = 0; k < d->ntasks; k++) {
    double y0 = T + k * gh;
    fprintf(f, "<text x=%g y=%.1f class=ax text-anchor=end>", L - 6, y0 + gh / 2 + 3);
    rp_esc(f, d->tasks[k]);
    fputs("</text>\n", f);
    for (int r = 0; r < d->nruns; r++) {
      const rp_cell *c = rp_at(d, r, k);
      if (!c->n) continue;
      double g = rp_geo(c), x1 = RP_X(1), xv = RP_X(g);
      fprintf(f,
              "<rect x=%.1f y=%.1f width=%.1f height=%g fill=\"%s\"%s><title>x%.3g, %d of %d "
              "episodes failed</title></rect>\n",
              fmin(x1, xv), y0 + 4 + r * bh, fmax(fabs(xv - x1), 1), bh - 2, rp_color[r],
              c->failed ? " fill-opacity=0.5" : "", g, c->failed, c->n);
      double xr = fmax(x1, xv);
      if (c->n >= 2) {
        double xlo = RP_X(exp(c->log_min)), xhi = RP_X(exp(c->log_max));
        rp_whisker(f, c, xlo, xhi, y0 + 4 + r * bh + (bh - 2) / 2);
        xr = fmax(xr, xhi);
      }
      fprintf(f, "<text x=%.1f y=%.1f class=val>x%.3g%s</text>\n", xr + 3, y0 + 4 + r * bh + bh - 3,
              g, c->failed ? "*" : "");
    }
  }
  fprintf(f, "<line x1=%.1f y1=%g x2=%.1f y2=%g class=base />\n", RP_X(1), T, RP_X(1), H - B);
  fprintf(f,
          "<text x=%g y=%g class=lab text-anchor=middle>speedup over the baseline (log axis)"
          "</text>\n",
          L + pw / 2, H - 4);
  fputs("</svg>\n", f);
#undef RP_X
}

/* Each later run against the first, per task: scatter of speedups (log-log) with the
 * diagonal y = x (above it: the later run is faster). */
static void rp_scatter(FILE *f, const rp_data *d, double fail_sp) {
  double lo = fail_sp, hi = 2;
  for (int r = 0; r < d->nruns; r++)
    for (int k = 0; k < d->ntasks; k++) {
      double g = rp_geo(rp_at(d, r, k));
      if (isfinite(g)) lo = fmin(lo, g), hi = fmax(hi, g);
    }
  double l0 = floor(log2(lo) - 1e-9), l1 = ceil(log2(hi) + 1e-9);
  const double S = 420, M = 50;
  double pw = S - 2 * M;
#define RP_P(v) (pw * (log2(v) - l0) / (l1 - l0))
  rp_svg_open(f, "chart-scatter", S, S, RP_BG_SCATTER);
  for (double e = l0; e <= l1 + 1e-9; e += 1) {
    double p = RP_P(pow(2, e));
    fprintf(f,
            "<line x1=%.1f y1=%g x2=%.1f y2=%g class=grid /><line x1=%g y1=%.1f x2=%g y2=%.1f "
            "class=grid /><text x=%.1f y=%g class=ax text-anchor=middle>x%.3g</text><text "
            "x=%g y=%.1f class=ax text-anchor=end>x%.3g</text>\n",
            M + p, M, M + p, S - M, M, S - M - p, S - M, S - M - p, M + p, S - M + 14, pow(2, e),
            M - 4, S - M - p + 4, pow(2, e));
  }
  fprintf(f, "<line x1=%g y1=%g x2=%g y2=%g class=diag />\n", M, S - M, S - M, M);
  for (int r = 1; r < d->nruns; r++)
    for (int k = 0; k < d->ntasks; k++) {
      const rp_cell *a = rp_at(d, 0, k), *b = rp_at(d, r, k);
      if (!a->n || !b->n) continue;
      fprintf(f, "<circle cx=%.1f cy=%.1f r=6 fill=\"%s\"><title>", M + RP_P(rp_geo(a)),
              S - M - RP_P(rp_geo(b)), rp_color[r]);
      rp_esc(f, d->tasks[k]);
      fprintf(f, ": x%.3g against x%.3g</title></circle>\n", rp_geo(b), rp_geo(a));
    }
  fprintf(f, "<text x=%g y=%g class=lab text-anchor=middle>", S / 2, S - 8);
  rp_esc(f, d->runs[0].label);
  fputs(" (speedup)</text>\n", f);
  fprintf(f, "<text x=12 y=%g class=lab text-anchor=middle transform=\"rotate(-90 12 %g)\">", S / 2,
          S / 2);
  fputs("later runs (speedup)</text>\n</svg>\n", f);
#undef RP_P
}

/* Held-out gap (held-out speedup / shown speedup) per task and run: bars on a linear
 * axis with a line at 1 (no gap). */
static void rp_held(FILE *f, const rp_data *d) {
  double hi = 1.2;
  for (int r = 0; r < d->nruns; r++)
    for (int k = 0; k < d->ntasks; k++) {
      const rp_cell *c = rp_at(d, r, k);
      if (c->held_n) hi = fmax(hi, c->held_gap_sum / c->held_n);
    }
  hi = ceil(hi * 5) / 5;
  const double W = 720, L = 200, R = 60, T = 10, B = 36, bh = 12;
  double gh = bh * d->nruns + 8, H = T + B + gh * d->ntasks, pw = W - L - R;
  rp_svg_open(f, "chart-heldout", W, H, RP_BG_HELD);
  for (int i = 0; i <= 4; i++) {
    double v = hi * i / 4, x = L + pw * v / hi;
    fprintf(f,
            "<line x1=%.1f y1=%g x2=%.1f y2=%g class=grid /><text x=%.1f y=%g class=ax "
            "text-anchor=middle>%.3g</text>\n",
            x, T, x, H - B, x, H - B + 14, v);
  }
  for (int k = 0; k < d->ntasks; k++) {
    double y0 = T + k * gh;
    fprintf(f, "<text x=%g y=%.1f class=ax text-anchor=end>", L - 6, y0 + gh / 2 + 3);
    rp_esc(f, d->tasks[k]);
    fputs("</text>\n", f);
    for (int r = 0; r < d->nruns; r++) {
      const rp_cell *c = rp_at(d, r, k);
      if (!c->held_n) continue;
      double g = c->held_gap_sum / c->held_n;
      fprintf(f,
              "<rect x=%g y=%.1f width=%.1f height=%g fill=\"%s\"><title>gap %.3g (%d "
              "episodes)</title></rect><text x=%.1f y=%.1f class=val>%.3g</text>\n",
              L, y0 + 4 + r * bh, pw * g / hi, bh - 2, rp_color[r], g, c->held_n,
              L + pw * g / hi + 3, y0 + 4 + r * bh + bh - 3, g);
    }
  }
  fprintf(f, "<line x1=%.1f y1=%g x2=%.1f y2=%g class=base />\n", L + pw / hi, T, L + pw / hi,
          H - B);
  fprintf(f,
          "<text x=%g y=%g class=lab text-anchor=middle>held-out speedup / shown speedup"
          "</text>\n</svg>\n",
          L + pw / 2, H - 4);
}

static void rp_num(FILE *f, double v, const char *fmt) {
  if (isfinite(v))
    fprintf(f, fmt, v);
  else
    fputs("&ndash;", f);
}

/* Writes path as the body of a relative URL: every byte but A-Z a-z 0-9 - . _ ~ / @
 * percent-encoded (so a ':', '#', '?', '%', space or quote in a file name can neither
 * end the attribute nor make the link absolute). */
static void rp_url(FILE *f, const char *path) {
  for (const unsigned char *c = (const unsigned char *)path; *c; c++)
    if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
        strchr("-._~/@", *c))
      fputc(*c, f);
    else
      fprintf(f, "%%%02X", *c);
}

/* The relative path from folder `from` to `to`, both absolute and canonical (realpath),
 * into buf: "../" for each of from's components past the common prefix, then the rest
 * of to; "." when they are the same folder. */
static void rp_relpath(const char *from, const char *to, char *buf, size_t n) {
  size_t k = 0, common = 0;
  for (; from[k] && to[k] && from[k] == to[k]; k++)
    if (from[k] == '/') common = k;
  if ((from[k] == 0 || from[k] == '/') && (to[k] == 0 || to[k] == '/')) common = k;
  size_t len = 0;
  buf[0] = 0;
  for (const char *c = from + common; *c; c++)
    if (*c != '/' && (c == from + common || c[-1] == '/'))
      len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "../");
  const char *rest = to + common;
  while (*rest == '/') rest++;
  if (len < n) snprintf(buf + len, n - len, "%s", *rest ? rest : len ? "" : ".");
  len = strlen(buf);
  if (len > 1 && buf[len - 1] == '/') buf[len - 1] = 0;
}

static int rp_exists(const char *dir, const char *name, int want_dir) {
  char p[PATH_MAX * 2];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return stat(p, &st) == 0 && (want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

/* One link, <a href="REL/NAME">TEXT</a>, to a file or folder (NAME ending in /) of the
 * episode folder. */
static void rp_link(FILE *f, const char *rel, const char *name, const char *text) {
  fputs("<a href=\"", f);
  rp_url(f, rel);
  fputc('/', f);
  rp_url(f, name);
  fputs("\">", f);
  rp_esc(f, text);
  fputs("</a> ", f);
}

static int rp_step_cmp(const struct dirent **a, const struct dirent **b) {
  long x = atol((*a)->d_name), y = atol((*b)->d_name);
  return x < y ? -1 : x > y;
}

static int rp_is_step(const struct dirent *e) {
  return e->d_name[0] && strspn(e->d_name, "0123456789") == strlen(e->d_name);
}

static int rp_is_file(const struct dirent *e) {
  return e->d_name[0] != '.';
}

/* Links to the step folders steps/<n>/ of episode folder dir, in step order. */
static void rp_step_links(FILE *f, const char *dir, const char *rel) {
  char p[PATH_MAX * 2], name[300], text[300];
  snprintf(p, sizeof p, "%s/steps", dir);
  struct dirent **e = NULL;
  int n = scandir(p, &e, rp_is_step, rp_step_cmp);
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "steps/%s/", e[i]->d_name);
    snprintf(text, sizeof text, "step %s", e[i]->d_name);
    if (rp_exists(dir, name, 1)) rp_link(f, rel, name, text);
    free(e[i]);
  }
  free(e);
}

/* Links to the files of final/ (the scored step's files: the final kernel), by name. */
static void rp_final_links(FILE *f, const char *dir, const char *rel) {
  char p[PATH_MAX * 2], name[300];
  snprintf(p, sizeof p, "%s/final", dir);
  struct dirent **e = NULL;
  int n = scandir(p, &e, rp_is_file, alphasort);
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "final/%s", e[i]->d_name);
    if (rp_exists(dir, name, 0)) rp_link(f, rel, name, name);
    free(e[i]);
  }
  free(e);
}

/* The files cell of an episode's row: links, relative to the report's folder, to what
 * its episode folder holds of episode.json, steps.jsonl, the step folders, the final
 * kernel, the transcript and agent.stderr (docs/agents.md, "The run folder"); only to
 * what exists, so that no link dangles. */
static void rp_files(FILE *f, const rp_data *d, const ec_episode_row *w) {
  char real[PATH_MAX], rel[PATH_MAX * 2];
  if (!w->dir || !realpath(w->dir, real)) {
    fputs("&ndash;", f);
    return;
  }
  rp_relpath(d->here, real, rel, sizeof rel);
  static const char *const top[] = {"episode.json", "steps.jsonl"};
  static const char *const logs[] = {"transcript.jsonl", "transcript.txt", "agent.stderr"};
  for (int i = 0; i < 2; i++)
    if (rp_exists(real, top[i], 0)) rp_link(f, rel, top[i], top[i]);
  rp_step_links(f, real, rel);
  rp_final_links(f, real, rel);
  for (int i = 0; i < 3; i++)
    if (rp_exists(real, logs[i], 0)) rp_link(f, rel, logs[i], logs[i]);
}

static void rp_table(FILE *f, const rp_data *d) {
  fputs(
      "<input id=q type=search placeholder=\"search episodes (task, status, message...)\">\n"
      "<table id=eps><thead><tr><th>run</th><th>task</th><th>repeat</th><th>status</th>"
      "<th>correct</th><th>reward</th><th>speedup</th><th>steps</th><th>held-out speedup"
      "</th><th>held-out gap</th><th>message</th><th>files</th></tr></thead><tbody>\n",
      f);
  for (int r = 0; r < d->nruns; r++)
    for (size_t i = 0; i < d->runs[r].nrows; i++) {
      const ec_episode_row *w = &d->runs[r].rows[i];
      fprintf(f, "<tr class=%s><td><i style=\"background:%s\"></i>", w->ok ? "ok" : "fail",
              rp_color[r]);
      rp_esc(f, d->runs[r].label);
      fputs("</td><td>", f);
      rp_esc(f, w->task);
      fprintf(f, "</td><td>%d</td><td>", w->repeat);
      rp_esc(f, w->status);
      fprintf(f, "</td><td>%s</td><td>%.1f</td><td>", w->ok ? "yes" : "no", w->reward);
      rp_num(f, w->speedup, "x%.3g");
      fprintf(f, "</td><td>%d</td><td>", w->n_steps);
      rp_num(f, w->held_speedup, "x%.3g");
      fputs("</td><td>", f);
      rp_num(f, w->held_gap, "%.3g");
      fputs("</td><td>", f);
      rp_esc(f, w->message);
      fputs("</td><td class=files>", f);
      rp_files(f, d, w);
      fputs("</td></tr>\n", f);
    }
  fputs("</tbody></table>\n", f);
}

/* Each later run against the first (ec_compare with compare's defaults): a row per run
 * with the verdict, the speedup ratio and its 95% interval, both tests' p-values and the
 * wins, ties and losses; then each comparison's verdict line as compare prints it. */
static void rp_compare(FILE *f, const rp_data *d) {
  fputs("<h2>Each run against the first</h2>\n", f);
  if (d->nruns < 2) {
    fputs(
        "<p class=note id=no-compare>One run: give two or more runs to compare each with "
        "the first.</p>\n",
        f);
    return;
  }
  fprintf(f,
          "<p class=note>As <code>envctl compare FIRST RUN</code> computes it with its "
          "defaults: paired by task; the speedup ratio is the geometric mean over tasks of "
          "the run's speedup over the first's, its 95%% interval a percentile bootstrap over "
          "tasks (%d resamples, seed %lu); better or worse when p &lt; %.2g and the "
          "interval excludes x1.</p>\n",
          EC_COMPARE_RESAMPLES, EC_COMPARE_SEED, EC_COMPARE_ALPHA);
  fputs(
      "<table id=cmp class=sum><thead><tr><th>run</th><th>against</th><th>verdict</th>"
      "<th>speedup ratio</th><th>95% CI</th><th>paired t-test p</th><th>Wilcoxon p</th>"
      "<th>wins / ties / losses</th><th>paired tasks</th></tr></thead><tbody>\n",
      f);
  for (int r = 1; r < d->nruns; r++) {
    const ec_comparison *c = &d->cmp[r];
    fprintf(f, "<tr id=cmp-%d class=\"%s\"><td><i style=\"background:%s\"></i>", r,
            c->verdict[0] == 'n' ? "same" : c->verdict, rp_color[r]);
    rp_esc(f, d->runs[r].label);
    fputs("</td><td>", f);
    rp_esc(f, d->runs[0].label);
    fputs("</td><td class=v>", f);
    rp_esc(f, c->verdict);
    fputs("</td><td class=ratio>", f);
    rp_num(f, exp(c->mean_log), "x%.3f");
    fputs("</td><td class=ci>", f);
    rp_num(f, exp(c->ci_lo), "x%.3f");
    fputs("..", f);
    rp_num(f, exp(c->ci_hi), "x%.3f");
    fputs("</td><td class=p>", f);
    rp_num(f, c->p, "%.3g");
    fputs("</td><td class=pw>", f);
    rp_num(f, c->p_wilcoxon, "%.3g");
    fprintf(f, "</td><td class=wtl>%d / %d / %d</td><td class=np>%zu</td></tr>\n", c->wins, c->ties,
            c->losses, c->npaired);
  }
  fputs("</tbody></table>\n", f);
  for (int r = 1; r < d->nruns; r++) {
    fprintf(f, "<p class=verdict id=verdict-%d>", r);
    rp_esc(f, d->cmp[r].verdict_line);
    fputs("</p>\n", f);
  }
}

static void rp_summary(FILE *f, const rp_data *d, double fail_sp) {
  fputs(
      "<table class=sum><thead><tr><th>run</th><th>label</th><th>episodes</th><th>failed"
      "</th><th>mean reward</th><th>geomean speedup (failures as the floor)</th><th>complete"
      "</th></tr></thead><tbody>\n",
      f);
  for (int r = 0; r < d->nruns; r++) {
    const ec_run_data *x = &d->runs[r];
    int failed = 0;
    double rs = 0, ls = 0;
    for (size_t i = 0; i < x->nrows; i++) {
      failed += !x->rows[i].ok;
      rs += x->rows[i].reward;
      ls += x->rows[i].log_speedup;
    }
    fprintf(f, "<tr><td><i style=\"background:%s\"></i>", rp_color[r]);
    rp_esc(f, x->run);
    fputs("</td><td>", f);
    rp_esc(f, x->label);
    fprintf(f, "</td><td>%zu</td><td>%d</td><td>%.1f</td><td>x%.3g</td><td>%s</td></tr>\n",
            x->nrows, failed, rs / x->nrows, exp(ls / x->nrows), x->complete ? "yes" : "no");
  }
  fprintf(f,
          "</tbody></table>\n<p class=note>A failed episode (error, no steps, incorrect, "
          "interrupted, missing) counts with its reward (0 when missing) and as speedup x%.2g "
          "in every aggregate; speedups below x%.2g are raised to it.</p>\n",
          fail_sp, fail_sp);
}

static const char rp_css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;"
    "text-align:left;font-size:13px}th{background:#f3f3f3}tr.fail td{background:#fff4f4}"
    "i{display:inline-block;width:10px;height:10px;margin-right:6px}"
    ".legend span{margin-right:18px}.note{color:#666;font-size:12px}"
    "svg{display:block;margin:6px 0}svg .grid{stroke:#e6e6e6}svg .base{stroke:#555;"
    "stroke-dasharray:4 3}svg .diag{stroke:#888;stroke-dasharray:5 4}"
    "svg .ax{font-size:11px;fill:#555}svg .lab{font-size:12px;fill:#333}"
    "svg .val{font-size:10px;fill:#333}svg .err line{stroke:#222;stroke-width:1.2}"
    "#q{width:360px;padding:4px;margin:6px 0}tr.better td{background:#f1fbf1}"
    "tr.worse td{background:#fff4f4}.verdict{font-weight:600}td.files a{margin-right:2px}";

static const char rp_js[] =
    "document.getElementById('q').addEventListener('input',function(){"
    "var q=this.value.toLowerCase();"
    "document.querySelectorAll('#eps tbody tr').forEach(function(r){"
    "r.style.display=r.textContent.toLowerCase().indexOf(q)<0?'none':'';});});";

static void rp_usage(FILE *f) {
  fprintf(f,
          "usage: envctl report RUN [RUN...] -o report.html [options]\n"
          "  one self-contained HTML file (no external references) with the charts of the\n"
          "  runs (folders of `envctl run`, or run ids under --runs-dir), each later run\n"
          "  compared with the first, and every episode linked to its files (links relative\n"
          "  to FILE's folder: move the report and the run folders together)\n"
          "  -o, --output FILE       where to write the report (required)\n"
          "  --runs-dir DIR          where run ids are looked up (default runs)\n"
          "  --title TEXT            the report's title\n"
          "  --failure-speedup F     speedup a failed episode counts as (default %.2g)\n",
          EC_FAILURE_SPEEDUP);
}

/* What the command line asked for. */
typedef struct rp_args {
  const char *out, *runs_dir, *title;
  double fail_sp;
  char **runs; /* nruns names */
  int nruns;
} rp_args;

/* Parses argv into *a. Returns -1 to go on, else the exit code (0 after --help, 2 for a
 * usage error, its message printed). */
static int rp_parse(int argc, char **argv, rp_args *a) {
  static const struct option opts[] = {
      {"output", required_argument, 0, 'o'}, {"runs-dir", required_argument, 0, 'd'},
      {"title", required_argument, 0, 't'},  {"failure-speedup", required_argument, 0, 'f'},
      {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
  *a = (rp_args){.runs_dir = "runs", .fail_sp = EC_FAILURE_SPEEDUP};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
    switch (c) {
      case 'o':
        a->out = optarg;
        break;
      case 'd':
        a->runs_dir = optarg;
        break;
      case 't':
        a->title = optarg;
        break;
      case 'f':
        if (ka_opt_fraction("envctl report", "failure-speedup", optarg, &a->fail_sp)) return 2;
        break;
      case 'h':
        rp_usage(stdout);
        return 0;
      default:
        rp_usage(stderr);
        return 2;
    }
  }
  a->nruns = argc - optind;
  a->runs = argv + optind;
  if (!a->out || a->nruns < 1 || a->nruns > RP_MAX_RUNS) {
    fprintf(stderr, "envctl report: needs 1 to %d runs and -o FILE\n", RP_MAX_RUNS);
    rp_usage(stderr);
    return 2;
  }
  return -1;
}

/* Loads the runs, indexes their tasks and compares each later run with the first.
 * Returns 0, or 1 with the reason printed. */
static int rp_load(const rp_args *a, rp_data *d) {
  char err[4300];
  d->runs = calloc((size_t)a->nruns, sizeof(ec_run_data));
  if (!d->runs) {
    fprintf(stderr, "envctl report: out of memory\n");
    return 1;
  }
  d->nruns = a->nruns;
  for (int r = 0; r < a->nruns; r++)
    if (ec_run_load(a->runs[r], a->runs_dir, a->fail_sp, &d->runs[r], err, sizeof err)) {
      fprintf(stderr, "envctl report: %s\n", err);
      return 1;
    }
  rp_index(d);
  for (int r = 1; r < d->nruns; r++)
    if (ec_compare(&d->runs[0], &d->runs[r], NULL, &d->cmp[r])) {
      fprintf(stderr, "envctl report: out of memory\n");
      return 1;
    }
  return 0;
}

/* The whole page, section by section. */
static void rp_page(FILE *f, const rp_data *d, const rp_args *a) {
  const char *title = a->title ? a->title : "kernelarena report";
  fputs("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>", f);
  rp_esc(f, title);
  fprintf(f, "</title>\n<style>%s</style></head><body>\n<h1>", rp_css);
  rp_esc(f, title);
  time_t now = time(NULL);
  char when[64];
  strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  fprintf(f, "</h1>\n<p class=note>%d run(s), %d task(s); written %s by envctl report.</p>\n",
          d->nruns, d->ntasks, when);
  rp_summary(f, d, a->fail_sp);
  rp_compare(f, d);
  fputs("<h2>Score distribution</h2>\n", f);
  rp_legend(f, d);
  rp_hist(f, d);
  fprintf(f,
          "<h2>Speedup per task</h2>\n<p class=note>Bars: the geometric mean over repeats; * "
          "and pale: includes failed episodes. Error bars (tasks with 2+ repeats): the "
          "smallest to the largest speedup over the repeats, a failure at x%.2g. Dashed "
          "line: the baseline (x1).</p>\n",
          a->fail_sp);
  rp_legend(f, d);
  rp_speedups(f, d, a->fail_sp);
  fputs("<h2>Run against run, per task</h2>\n", f);
  if (d->nruns >= 2) {
    fputs(
        "<p class=note>x: the first run's speedup; y: each later run's (its colour). Above "
        "the diagonal: the later run is faster on that task.</p>\n",
        f);
    rp_legend(f, d);
    rp_scatter(f, d, a->fail_sp);
  } else {
    fputs("<p class=note id=no-scatter>One run: give two or more runs for this chart.</p>\n", f);
  }
  fputs("<h2>Held-out gap</h2>\n", f);
  if (d->any_held) {
    fputs(
        "<p class=note>Held-out speedup / shown speedup of the final kernel (1: no gap; "
        "below 1: slower on the held-out cases).</p>\n",
        f);
    rp_legend(f, d);
    rp_held(f, d);
  } else {
    fputs(
        "<p class=note id=no-heldout>No episode of these runs has held-out results (run "
        "with <code>held_out: true</code> on a server that scores held-out cases).</p>\n",
        f);
  }
  fputs(
      "<h2>Episodes</h2>\n<p class=note>Files: links to the episode's folder in its run "
      "folder, relative to this report's folder (move the report and the run folders "
      "together and they still work).</p>\n",
      f);
  rp_table(f, d);
  fprintf(f, "<script>%s</script>\n</body></html>\n", rp_js);
}

/* Writes the page to OUT.tmp and renames it to OUT, so that a failed report leaves no
 * partial file; d->here gets OUT's folder (where the links start). Returns 0, or 1 with
 * the reason printed. */
static int rp_write(rp_data *d, const rp_args *a) {
  char tmp[PATH_MAX + 8], folder[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s.tmp", a->out);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    fprintf(stderr, "envctl report: cannot write %s: %s\n", tmp, strerror(errno));
    return 1;
  }
  snprintf(folder, sizeof folder, "%s", a->out);
  char *slash = strrchr(folder, '/');
  if (!slash)
    snprintf(folder, sizeof folder, ".");
  else if (slash == folder)
    folder[1] = 0;
  else
    *slash = 0;
  if (!realpath(folder, d->here)) {
    fprintf(stderr, "envctl report: %s: %s\n", folder, strerror(errno));
    fclose(f);
    remove(tmp);
    return 1;
  }
  rp_page(f, d, a);
  if (fclose(f) || rename(tmp, a->out)) {
    fprintf(stderr, "envctl report: cannot write %s: %s\n", a->out, strerror(errno));
    remove(tmp);
    return 1;
  }
  fprintf(stderr, "envctl report: wrote %s (%d runs, %d tasks)\n", a->out, d->nruns, d->ntasks);
  return 0;
}

static void rp_free(rp_data *d) {
  for (int r = 0; r < d->nruns; r++) {
    ec_run_free(&d->runs[r]);
    ec_comparison_free(&d->cmp[r]);
  }
  free(d->runs);
  free(d->tasks);
  free(d->cell);
}

int cmd_report(int argc, char **argv) {
  rp_args a;
  int rc = rp_parse(argc, argv, &a);
  if (rc >= 0) return rc;
  rp_data d = {0};
  rc = rp_load(&a, &d);
  if (!rc) rc = rp_write(&d, &a);
  rp_free(&d);
  return rc;
}
