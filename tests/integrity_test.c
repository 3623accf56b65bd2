/* Reward integrity on the host backend (docs/integrity.md): every run of the adversarial
 * manifest (tests/adversarial/manifest.yaml) whose harness is `integrity` is evaluated
 * through the executor's own path (ka_evaluate: worker.c, a real ka-runner, module
 * processes) and must get its expected verdict, with its text in the verdict or its logs;
 * the honest candidate runs first and last and must pass both times; a task whose
 * physics floor the honest candidate cannot reach is FLAGGED; runners that return no
 * verdict, a malformed one or an OK without timings give INFRA_ERROR; and the reward of
 * every verdict is checked (FLAGGED and INFRA_ERROR are never rewarded). Prints a table
 * (run, expected, got, ok) last.
 *
 * usage: integrity_test BIN_DIR SOURCE_DIR [RUN_NAME] */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envserver.h"
#include "gpuexec.h"
#include "ka_common.h"
#include "manifest.h"

/* reward.c's allocation helpers live in server.c; this test links reward.c alone */
void *es_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) abort();
  return q;
}
char *es_xstrdup(const char *s) {
  char *d = strdup(s ? s : "");
  if (!d) abort();
  return d;
}

static int failures;

#define CHECK(cond, ...) \
  do {                   \
    if (cond) {          \
      printf("ok   - "); \
    } else {             \
      printf("FAIL - "); \
      failures++;        \
    }                    \
    printf(__VA_ARGS__); \
    printf("\n");        \
  } while (0)

static const char *st_name(int st) {
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&kernelarena__v1__status__descriptor, st);
  return v ? v->name : "?";
}

/* 1 if text occurs in the result's message, compile or runtime log, or in any case's
 * message or flag. */
static int has_text(const Kernelarena__V1__Result *r, const char *text) {
  if (r->message && strstr(r->message, text)) return 1;
  if (r->compile_log && strstr(r->compile_log, text)) return 1;
  if (r->runtime_log && strstr(r->runtime_log, text)) return 1;
  for (size_t i = 0; i < r->n_cases; i++) {
    if (r->cases[i]->message && strstr(r->cases[i]->message, text)) return 1;
    if (r->cases[i]->flag && strstr(r->cases[i]->flag, text)) return 1;
  }
  return 0;
}

static void evaluate(const ka_exec_config *cfg, const char *task_id, const char *source_path,
                     Kernelarena__V1__Result *res) {
  const ka_task *t = ka_registry_find(cfg->tasks, task_id);
  char *text = NULL;
  size_t len = 0;
  if (!t || ka_read_file(source_path, 1 << 20, &text, &len)) {
    fprintf(stderr, "cannot read %s or find %s\n", source_path, task_id);
    exit(2);
  }
  Kernelarena__V1__File f = KERNELARENA__V1__FILE__INIT, *fp = &f;
  f.path = t->source;
  f.content.data = (uint8_t *)text;
  f.content.len = len;
  Kernelarena__V1__Job job = KERNELARENA__V1__JOB__INIT;
  job.job_id = "integrity";
  job.task_id = (char *)task_id;
  job.task_version = t->version;
  job.seed = 42;
  job.files = &fp;
  job.n_files = 1;
  job.timeout_s = 60;
  job.warmup = 1;
  job.reps = 6;
  Kernelarena__V1__Device dev = KERNELARENA__V1__DEVICE__INIT;
  dev.backend = "host";
  dev.index = 0;
  kernelarena__v1__result__init(res);
  ka_evaluate(cfg, &dev, &job, res);
  ka_evaluate_finish(cfg);
  free(text);
}

/* The reward of a result: FLAGGED gets 0 and flagged=1, INFRA_ERROR is refused. */
static void check_reward(const char *what, const Kernelarena__V1__Result *res) {
  es_reward rw;
  int rc = es_reward_compute(res, &rw);
  if (res->status == KERNELARENA__V1__STATUS__INFRA_ERROR) {
    CHECK(rc != KA_OK, "%s: INFRA_ERROR is refused by the reward, never scored", what);
  } else if (res->status == KERNELARENA__V1__STATUS__FLAGGED) {
    double flagged = -1, sp = -1;
    for (int i = 0; rc == KA_OK && i < rw.n; i++) {
      if (!strcmp(rw.keys[i], "flagged")) flagged = rw.values[i];
      if (!strcmp(rw.keys[i], "speedup_geomean")) sp = rw.values[i];
    }
    CHECK(rc == KA_OK && rw.reward == 0 && flagged == 1 && sp == 0,
          "%s: FLAGGED is never rewarded (reward %.2f, flagged %.0f, speedup %.2f)", what,
          rw.reward, flagged, sp);
  } else if (res->status != KERNELARENA__V1__STATUS__OK) {
    CHECK(rc == KA_OK && rw.reward <= 20.0, "%s: %s gets the failure reward (%.2f)", what,
          st_name(res->status), rw.reward);
  }
  if (rc == KA_OK) es_reward_free(&rw);
}

/* A stand-in for ka-runner: a shell script that reads the job and writes `result_file`
 * (or nothing) to the result channel. */
static void fake_runner(const char *path, const char *result_file) {
  char text[1024];
  snprintf(text, sizeof text, "#!/bin/sh\ncat >/dev/null\n%s%s%s\nexit 0\n",
           result_file ? "cat '" : "", result_file ? result_file : "", result_file ? "' >&3" : "");
  if (ka_write_file(path, text, strlen(text)) || chmod(path, 0755)) exit(2);
}

/* Splits "A|B" into up to two statuses; 0 if a name is not a Status. */
static int parse_expect(const char *text, int st[2]) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", text);
  st[0] = st[1] = 0;
  int k = 0;
  for (char *save = NULL, *tok = strtok_r(buf, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value_by_name(&kernelarena__v1__status__descriptor, tok);
    if (!v || k == 2) return 0;
    st[k++] = v->value;
  }
  return k > 0;
}

/* The baseline's history (ka_baseline_outlier): no verdict before 3 records; a time
 * within 4x of the history's median is no outlier, one 4.5x above or below it is; keys
 * do not mix; the history forgets beyond its last 16 records. */
/* ka_baseline_outlier, then ka_baseline_record, as wk_baseline_check does for a time it
 * does not flag. */
static int hist_step(const char *key, double ms, double *h) {
  int out = ka_baseline_outlier(key, ms, h);
  ka_baseline_record(key, ms);
  return out;
}

static void test_baseline_history(void) {
  double h = -1;
  int first = 0;
  for (int i = 0; i < 3; i++) first |= hist_step("t@v/c/dev:0", 1.0 + 0.01 * i, &h);
  CHECK(!first, "baseline history: no verdict before 3 records");
  CHECK(!hist_step("t@v/c/dev:0", 3.9, &h) && fabs(h - 1.01) < 1e-9,
        "baseline history: 3.9x its median is no outlier (history median %.4f)", h);
  CHECK(hist_step("t@v/c/dev:0", 4.6, &h),
        "baseline history: 4.6x slower is an outlier (history median %.4f)", h);
  CHECK(hist_step("t@v/c/dev:0", 0.2, &h),
        "baseline history: 5x faster is an outlier (history median %.4f)", h);
  CHECK(!hist_step("t@v/other/dev:0", 100.0, &h) && h == 0,
        "baseline history: another case has its own history (history median %.4f)", h);
  for (int i = 0; i < 16; i++) hist_step("t@v/c/dev:0", 10.0, &h);
  CHECK(!hist_step("t@v/c/dev:0", 10.5, &h) && fabs(h - 10.0) < 1e-9,
        "baseline history: the last 16 records count (history median %.4f)", h);
  /* a time that is checked and not recorded (a flagged one) leaves the median alone: 20
   * slowed checks in a row find the same median each time */
  int all = 1;
  for (int i = 0; i < 20; i++) all &= ka_baseline_outlier("t@v/c/dev:0", 100.0, &h) && h == 10.0;
  CHECK(all, "baseline history: a check alone records nothing (median %.4f)", h);
}

int main(int argc, char **argv) {
  test_baseline_history();
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: integrity_test BIN_DIR SOURCE_DIR [RUN_NAME]\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *bin = argv[1], *src = argv[2];
  char mpath[PATH_MAX], err[2048], dir[PATH_MAX];
  snprintf(mpath, sizeof mpath, "%s/tests/adversarial/manifest.yaml", src);
  adv_manifest man;
  if (adv_manifest_load(mpath, &man, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 2;
  }
  char work[] = "/tmp/ka-integrity-XXXXXX";
  if (!mkdtemp(work)) return 2;
  char cmd[8192];
  /* three task roots: host tasks as shipped (gelu with smaller cases, matmul_f32,
   * histogram), the same with
   * the import allow-list opened (allowed_imports: ["*"], for the layers behind it), and
   * a GELU whose bytes expression puts the physics floor far above any real time */
  snprintf(cmd, sizeof cmd,
           "set -e; mkdir -p %s/tasks/host %s/floor/host %s/cache %s/tmp; "
           "cp -r %s/tasks/host/gelu %s/tasks/host/matmul_f32 %s/tasks/host/histogram "
           "%s/tasks/host/; "
           "sed -i 's/n1M, n: 1048576}/n64K, n: 65536}/; s/n2M, n: 2097152}/n128K, n: 131075}/' "
           "%s/tasks/host/gelu/task.yaml; "
           "cp -r %s/tasks/host/gelu %s/floor/host/; cp -r %s/tasks %s/any; "
           "for y in %s/any/host/*/task.yaml; do printf 'allowed_imports: [\"*\"]\\n' >>$y; done; "
           "sed -i 's/^bytes: .*/bytes: \"8 * n * 1000000000\"/' %s/floor/host/gelu/task.yaml",
           work, work, work, work, src, src, src, work, work, work, work, work, work, work, work);
  if (system(cmd) != 0) return 2;
  ka_registry *reg = NULL, *any_reg = NULL, *floor_reg = NULL;
  const char *roots[] = {"tasks", "any", "floor"};
  ka_registry **regs[] = {&reg, &any_reg, &floor_reg};
  for (int i = 0; i < 3; i++) {
    snprintf(dir, sizeof dir, "%s/%s", work, roots[i]);
    if (ka_registry_load(dir, 0, regs[i], err, sizeof err)) {
      fprintf(stderr, "%s\n", err);
      return 2;
    }
  }
  char runner[PATH_MAX], cache[PATH_MAX], tmp[PATH_MAX];
  char absbin[PATH_MAX];
  if (!realpath(bin, absbin)) return 2;
  snprintf(runner, sizeof runner, "%s/ka-runner", absbin);
  snprintf(cache, sizeof cache, "%s/cache", work);
  snprintf(tmp, sizeof tmp, "%s/tmp", work);
  ka_exec_config cfg = {.runner_path = runner, .cache_dir = cache, .tmp_dir = tmp, .tasks = reg};
  ka_exec_config any_cfg = cfg;
  any_cfg.tasks = any_reg;

  /* 1. the manifest's runs, in order (the honest candidate first and last) */
  double honest_sp[2] = {0, 0};
  int nhonest = 0, nruns = 0;
  char table[16384] = "";
  size_t tlen = 0;
  for (int i = 0; i < man.n; i++) {
    const adv_run *e = &man.runs[i];
    if (strcmp(e->harness, "integrity")) continue;
    if (argc == 4 && strcmp(e->name, argv[3])) continue;
    nruns++;
    int want[2];
    CHECK(parse_expect(e->expect, want) && !strcmp(e->backend, "host") && e->timeout_s == 0,
          "%s: a host run with known expected statuses (%s)", e->name, e->expect);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", src, e->file);
    Kernelarena__V1__Result res;
    evaluate(strcmp(e->imports, "any") ? &cfg : &any_cfg, e->task, path, &res);
    int st = (int)res.status;
    int st_ok = st == want[0] || (want[1] && st == want[1]);
    CHECK(st_ok, "%s (%s, imports %s): %s (expected %s) %s", e->name, e->file, e->imports,
          st_name(res.status), e->expect, res.message ? res.message : "");
    int text_ok = !e->text || has_text(&res, e->text);
    if (e->text) CHECK(text_ok, "%s: the verdict or its logs say \"%s\"", e->name, e->text);
    if (e->absent) {
      CHECK(!has_text(&res, e->absent), "%s: the verdict and its logs do not say \"%s\"", e->name,
            e->absent);
      if (has_text(&res, e->absent)) text_ok = 0;
    }
    if (!st_ok || !text_ok || argc == 4)
      printf("%s%s", res.compile_log ? res.compile_log : "",
             res.runtime_log ? res.runtime_log : "");
    if (res.status == KERNELARENA__V1__STATUS__OK) {
      int verified = 1;
      for (size_t k = 0; k < res.n_cases; k++)
        if (res.cases[k]->verified_calls < 1 || res.cases[k]->candidate_wall_ms <= 0) verified = 0;
      CHECK(verified && res.n_cases >= 1, "%s: every case has verified timed calls", e->name);
    }
    if (!strncmp(e->name, "honest", 6) && res.status == KERNELARENA__V1__STATUS__OK && nhonest < 2)
      honest_sp[nhonest++] = res.geomean_speedup;
    if (!strncmp(e->name, "forge_fd", 8))
      CHECK(!(res.runtime_log && strstr(res.runtime_log, "forge_fd: reached")),
            "%s: no descriptor or /proc path of the runner was writable", e->name);
    if (!strcmp(e->name, "timer_patch")) {
      int slow = res.n_cases == 2;
      for (size_t k = 0; k < res.n_cases; k++)
        if (!(res.cases[k]->candidate_ms >= 30.0)) slow = 0;
      CHECK(slow,
            "timer_patch: its 30 ms sleep is in the measured time (the patched clocks "
            "are not the runner's)");
    }
    check_reward(e->name, &res);
    if (tlen < sizeof table - 256)
      tlen += (size_t)snprintf(table + tlen, sizeof table - tlen, "%-18s %-20s %-18s %-15s %s\n",
                               e->name, e->task, e->expect, st_name(res.status),
                               st_ok && text_ok ? "ok" : "MISMATCH");
    ka_result_clear(&res);
  }
  CHECK(nruns > 0, "the manifest has %d runs for this harness", nruns);
  if (argc == 4) { /* one run by name: its work folder goes too */
    adv_manifest_free(&man);
    snprintf(cmd, sizeof cmd, "rm -rf %s", work);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", work);
    return failures ? 1 : 0;
  }
  CHECK(nhonest == 2 && honest_sp[0] > 0 && honest_sp[1] > 0,
        "the honest candidate passes before and after the adversarial ones (speedups %.3f, "
        "%.3f)",
        honest_sp[0], honest_sp[1]);

  /* 2. physics floor: the honest candidate on a task claiming 1e9x the traffic */
  {
    ka_exec_config fc = cfg;
    fc.tasks = floor_reg;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/tests/adversarial/host/honest.c", src);
    Kernelarena__V1__Result res;
    evaluate(&fc, "host/gelu", path, &res);
    CHECK(res.status == KERNELARENA__V1__STATUS__FLAGGED && has_text(&res, "physics floor"),
          "a time below the physics floor: %s (expected FLAGGED) %s", st_name(res.status),
          res.message ? res.message : "");
    int floor_set = res.n_cases >= 1 && res.cases[0]->floor_ms > 0;
    CHECK(floor_set, "the flagged case reports its floor (%.3g ms)",
          res.n_cases ? res.cases[0]->floor_ms : 0.0);
    check_reward("physics floor", &res);
    ka_result_clear(&res);
  }

  /* 3. a missing or malformed verdict is an infrastructure error, never a score */
  {
    char fake[PATH_MAX], garbage[PATH_MAX], okempty[PATH_MAX];
    snprintf(fake, sizeof fake, "%s/fake-runner", work);
    snprintf(garbage, sizeof garbage, "%s/garbage.bin", work);
    snprintf(okempty, sizeof okempty, "%s/ok-empty.bin", work);
    static const char junk[] = "\xff\xff\xff\xff garbage, not a RunnerResult";
    if (ka_write_file(garbage, junk, sizeof junk - 1)) return 2;
    /* a well-formed RunnerResult that says OK but has no cases */
    Kernelarena__V1__RunnerResult rr = KERNELARENA__V1__RUNNER_RESULT__INIT;
    rr.status = KERNELARENA__V1__STATUS__OK;
    uint8_t buf[64];
    size_t n = kernelarena__v1__runner_result__pack(&rr, buf);
    if (ka_write_file(okempty, buf, n)) return 2;
    const char *files[] = {NULL, garbage, okempty};
    const char *what[] = {"no result", "a malformed result", "OK without cases"};
    for (int k = 0; k < 3; k++) {
      fake_runner(fake, files[k]);
      ka_exec_config xc = cfg;
      xc.runner_path = fake;
      char path[PATH_MAX];
      snprintf(path, sizeof path, "%s/tests/adversarial/host/honest.c", src);
      Kernelarena__V1__Result res;
      evaluate(&xc, "host/gelu", path, &res);
      CHECK(res.status == KERNELARENA__V1__STATUS__INFRA_ERROR && res.geomean_speedup == 0,
            "runner returns %s: %s (expected INFRA_ERROR) %s", what[k], st_name(res.status),
            res.message ? res.message : "");
      check_reward(what[k], &res);
      ka_result_clear(&res);
    }
    /* an OOM verdict of the runner reaches the result as OOM and scores as a failure (20,
     * compiled, not correct); a status beyond the known ones is INFRA_ERROR */
    int sts[2] = {KERNELARENA__V1__STATUS__OOM, KERNELARENA__V1__STATUS__OOM + 1};
    for (int k = 0; k < 2; k++) {
      char file[PATH_MAX];
      snprintf(file, sizeof file, "%s/status-%d.bin", work, sts[k]);
      Kernelarena__V1__RunnerResult sr = KERNELARENA__V1__RUNNER_RESULT__INIT;
      sr.status = (Kernelarena__V1__Status)sts[k];
      sr.message = "case n64K: allocating scratch: device out of memory";
      uint8_t sb[256];
      size_t sn = kernelarena__v1__runner_result__pack(&sr, sb);
      if (ka_write_file(file, sb, sn)) return 2;
      fake_runner(fake, file);
      ka_exec_config xc = cfg;
      xc.runner_path = fake;
      char path[PATH_MAX];
      snprintf(path, sizeof path, "%s/tests/adversarial/host/honest.c", src);
      Kernelarena__V1__Result res;
      evaluate(&xc, "host/gelu", path, &res);
      int want = k ? KERNELARENA__V1__STATUS__INFRA_ERROR : KERNELARENA__V1__STATUS__OOM;
      CHECK((int)res.status == want, "runner says status %d: %s (expected %s)", sts[k],
            st_name(res.status), st_name(want));
      es_reward rw;
      int rrc = es_reward_compute(&res, &rw);
      if (!k) {
        double compiled = -1, correct = -1;
        for (int q = 0; rrc == KA_OK && q < rw.n; q++) {
          if (!strcmp(rw.keys[q], "compiled")) compiled = rw.values[q];
          if (!strcmp(rw.keys[q], "correct")) correct = rw.values[q];
        }
        CHECK(rrc == KA_OK && rw.reward == 20.0 && compiled == 1 && correct == 0,
              "OOM scores as a failure: reward %.2f, compiled %.0f, correct %.0f", rw.reward,
              compiled, correct);
      } else {
        CHECK(rrc != KA_OK, "an unknown status is never scored");
      }
      if (rrc == KA_OK) es_reward_free(&rw);
      ka_result_clear(&res);
    }
  }

  ka_registry_free(reg);
  ka_registry_free(any_reg);
  ka_registry_free(floor_reg);
  adv_manifest_free(&man);
  snprintf(cmd, sizeof cmd, "rm -rf %s", work);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", work);
  printf("\n%-18s %-20s %-18s %-15s %s\n%s", "run", "task", "expected", "got", "ok", table);
  printf("honest speedup before / after the adversarial runs: %.3f / %.3f\n", honest_sp[0],
         honest_sp[1]);
  if (failures == 0) printf("integrity: all checks passed\n");
  return failures ? 1 : 0;
}
