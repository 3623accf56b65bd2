/* Evaluate: a stateless one-shot evaluation (task + files -> result), outside any
 * episode and never recorded in the trace store.
 *
 * Two forms (docs/protocol.md):
 *   - task_id + files (over the task's baseline) + seed: the job seed is the seed;
 *   - episode_id + step: the complete editable set of that recorded step (0: the last),
 *     evaluated with that step's job seed, ka_mix64(episode seed, step), and the
 *     episode's seed as the problem seed, so that on the executor process that ran the
 *     episode the correctness trial draws the inputs its steps had (envctl replay).
 * reproducible (admin token) leaves the executor's secrets out of every seed: the
 * inputs, poison and verified calls then follow from the job seed alone, so the same
 * Evaluate repeats its inputs on any executor (docs/integrity.md, "Reproducible
 * evaluations"); the timings are measured again.
 * include_held_out runs the held-out cases too and reports them; it needs the server's
 * admin token (--admin-token / <state>/admin.token), compared in constant time. A
 * Step never includes held-out cases, so an agent that only knows the server address and
 * an episode id cannot see them. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "envserver.h"

/* Constant-time comparison of two NUL-terminated strings (the length leaks, the
 * content does not). */
static int ev_token_eq(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  unsigned char d = na != nb;
  for (size_t i = 0; i < na; i++) d |= (unsigned char)(a[i] ^ b[i % (nb ? nb : 1)]);
  return d == 0 && nb > 0;
}

/* The task's baseline editable files with the request's files replacing them.
 * Returns KA_OK, or an error with resp filled. */
static int ev_files(es_server *s, const ka_task *t, const Kernelarena__V1__EvaluateRequest *rq,
                    es_arena *a, es_pb_response *resp, es_fileset *set) {
  size_t total = 0;
  for (size_t i = 0; i < rq->n_files; i++) {
    const char *p = rq->files[i]->path;
    if (!ka_path_is_safe(p) || !ka_task_is_editable(t, p)) {
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, 0,
                     "file '%s' is not an editable file of %s", es_arena_quote(a, p), t->id);
      return KA_EINVAL;
    }
    for (size_t j = 0; j < i; j++)
      if (!strcmp(rq->files[j]->path, p)) {
        es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, 0,
                       "file '%s' appears twice", es_arena_quote(a, p));
        return KA_EINVAL;
      }
    if (rq->files[i]->content.len > ES_MAX_FILE_BYTES) {
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__RESOURCE_EXHAUSTED, 0,
                     "file '%s' is %zu bytes; the limit is %zu bytes per file",
                     es_arena_quote(a, p), rq->files[i]->content.len, ES_MAX_FILE_BYTES);
      return KA_ETOOBIG;
    }
    total += rq->files[i]->content.len;
  }
  if (total > ES_MAX_TOTAL_BYTES) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__RESOURCE_EXHAUSTED, 0,
                   "the files total %zu bytes; the limit is %zu bytes", total, ES_MAX_TOTAL_BYTES);
    return KA_ETOOBIG;
  }
  for (int i = 0; i < t->neditable; i++) {
    char src[PATH_MAX];
    char *data = NULL;
    size_t len = 0;
    ka_task_baseline_path(t, t->editable[i], src, sizeof src);
    int rc = ka_read_file(src, ES_MAX_FILE_BYTES, &data, &len);
    if (rc) {
      es_log(s, "evaluate %s: reading %s: %s", t->id, src, ka_strerror(rc));
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1,
                     "cannot read the baseline of %s", t->id);
      es_fileset_free(set);
      return rc;
    }
    es_fileset_put(set, t->editable[i], data, len);
    free(data);
  }
  for (size_t i = 0; i < rq->n_files; i++)
    es_fileset_put(set, rq->files[i]->path, rq->files[i]->content.data, rq->files[i]->content.len);
  if (es_fileset_bytes(set) > ES_MAX_TOTAL_BYTES) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__RESOURCE_EXHAUSTED, 0,
                   "the editable files would total %zu bytes; the limit is %zu bytes",
                   es_fileset_bytes(set), ES_MAX_TOTAL_BYTES);
    es_fileset_free(set);
    return KA_ETOOBIG;
  }
  return KA_OK;
}

int es_eval_admit(es_server *s, const Kernelarena__V1__EvaluateRequest *rq, es_arena *a,
                  es_pb_response *resp, es_job **job_out) {
  *job_out = NULL;
  if ((rq->include_held_out || rq->reproducible) &&
      (!s->cfg.admin_token || !ev_token_eq(rq->admin_token, s->cfg.admin_token))) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__PERMISSION_DENIED, 0,
                   "%s needs the server's admin token%s",
                   rq->include_held_out ? "held-out scoring" : "a reproducible evaluation",
                   s->cfg.admin_token ? "" : " (this server has none configured)");
    return KA_EINVAL;
  }
  const ka_task *t = NULL;
  uint64_t seed = rq->seed, problem_seed = 0; /* 0: the seed */
  es_fileset set = {0};
  char err[512] = "";
  if (*rq->episode_id) {
    if (*rq->task_id || rq->n_files) {
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, 0,
                     "give either episode_id (+ step) or task_id (+ files), not both");
      return KA_EINVAL;
    }
    if (rq->step < 0) {
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, 0,
                     "step must be 0 (the last recorded step) or a recorded step number");
      return KA_EINVAL;
    }
    Kernelarena__V1__EpisodeRecord *er = NULL;
    int rc = es_store_get_episode(s->store, rq->episode_id, 0, 1, a, &er, err, sizeof err);
    int step = 0;
    if (rc == KA_OK)
      rc = es_store_step_files(s->store, rq->episode_id, rq->step, &set, &step, err, sizeof err);
    if (rc == KA_ENOENT) {
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__NOT_FOUND, 0,
                     er ? "episode %s has no recorded step %d" : "unknown episode '%s'",
                     es_arena_quote(a, rq->episode_id), (int)rq->step);
      return rc;
    }
    if (rc) {
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1, "%s", err);
      return rc;
    }
    t = ka_registry_find(s->reg, er->task_id);
    if (!t) {
      es_fileset_free(&set);
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__NOT_FOUND, 0,
                     "task %s of episode %s is not loaded on this server", er->task_id, er->id);
      return KA_ENOENT;
    }
    seed = es_step_seed(er->seed, step);
    problem_seed = er->seed; /* the episode's correctness inputs, as its steps had */
  } else {
    t = ka_registry_find(s->reg, rq->task_id);
    if (!t) {
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__NOT_FOUND, 0, "unknown task '%s'%s",
                     es_arena_quote(a, rq->task_id), es_skip_why(a, s->reg, rq->task_id));
      return KA_ENOENT;
    }
    if (!rq->has_seed && es_random(&seed, sizeof seed)) {
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1, "getrandom failed");
      return KA_ESYS;
    }
    int rc = ev_files(s, t, rq, a, resp, &set);
    if (rc) return rc;
  }
  unsigned char rnd[8];
  if (es_random(rnd, sizeof rnd)) {
    es_fileset_free(&set);
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1, "getrandom failed");
    return KA_ESYS;
  }
  char id[32];
  snprintf(id, sizeof id, "eval-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3],
           rnd[4], rnd[5], rnd[6], rnd[7]);

  pthread_mutex_lock(&s->mtx);
  double now = ka_now_s();
  int live = 0, any = 0;
  for (const es_worker *w = s->jobs.workers; w; w = w->next) {
    if (!w->device || !es_worker_live(w, now)) continue;
    any = 1;
    live |= es_device_runs(t, w->device);
  }
  int rc = KA_OK;
  if (!live) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__UNAVAILABLE, !any,
                   "no live executor offers a backend of task %s", t->id);
    rc = KA_EUNAVAIL;
  } else if (s->jobs.nqueued >= s->cfg.max_queued) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__CAPACITY, 1,
                   "%d evaluations are queued (the limit); retry later", s->jobs.nqueued);
    rc = KA_EUNAVAIL;
  }
  if (rc) {
    pthread_mutex_unlock(&s->mtx);
    es_fileset_free(&set);
    return rc;
  }
  es_job *job = es_job_new_eval(t, id, seed, &set, rq->include_held_out);
  if (problem_seed) job->problem_seed = problem_seed;
  job->reproducible = rq->reproducible;
  job->enqueued_at = now;
  es_jobs_enqueue(&s->jobs, job);
  *job_out = job;
  return KA_OK; /* mtx stays held */
}

static Kernelarena__V1__EvaluateResponse__RewardComponentsEntry *ev_comp(es_arena *a, const char *k,
                                                                         double v) {
  return es_pb_entry_num(
      a, &kernelarena__v1__evaluate_response__reward_components_entry__descriptor, k, v);
}

static Kernelarena__V1__EvaluateResponse__InfoEntry *ev_info(es_arena *a, const char *k,
                                                             const char *v) {
  return es_pb_entry_str(a, &kernelarena__v1__evaluate_response__info_entry__descriptor, k, v);
}

void es_eval_finish(es_server *s, es_job *job, const es_pb_result *r, const char *worker_id,
                    nng_msg **reply, void **waiter_out) {
  *reply = NULL;
  *waiter_out = NULL;
  es_arena a = {0};
  es_pb_response resp = KERNELARENA__V1__RESPONSE__INIT;
  es_reward rw;
  if (es_reward_compute(r, &rw) != KA_OK) {
    es_reply_error(
        &a, &resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1,
        "the executor could not evaluate %s (%s): %s; retry it", job->id,
        r->status == KERNELARENA__V1__STATUS__INFRA_ERROR ? "INFRA_ERROR" : "no valid status",
        *r->message ? r->message : "no message");
  } else {
    Kernelarena__V1__EvaluateResponse *er = es_arena_alloc(&a, sizeof *er);
    kernelarena__v1__evaluate_response__init(er);
    Kernelarena__V1__Observation *ob = es_arena_alloc(&a, sizeof *ob);
    kernelarena__v1__observation__init(ob);
    ob->files = es_fileset_to_pb(&a, &job->files, &ob->n_files);
    ob->status = r->status;
    ob->compile_log = r->compile_log;
    ob->runtime_log = r->runtime_log;
    ob->cases = es_arena_alloc(&a, sizeof *ob->cases * (r->n_cases + 1));
    int nheld = 0, held_ok = 1;
    double held_log = 0;
    for (size_t i = 0; i < r->n_cases; i++) {
      const Kernelarena__V1__CaseResult *c = r->cases[i];
      if (c->held_out) {
        if (!job->include_held_out) continue; /* never shown without the token */
        nheld++;
        held_ok &= c->correct && isfinite(c->speedup) && c->speedup > 0;
        if (held_ok) held_log += log(c->speedup);
      }
      ob->cases[ob->n_cases++] = r->cases[i];
    }
    ob->device = r->device;
    ob->telemetry = r->telemetry;
    ob->message = r->message;
    er->observation = ob;
    er->reward = rw.reward;
    er->seed = job->seed;
    er->reward_components = es_arena_alloc(&a, sizeof *er->reward_components * (size_t)(rw.n + 3));
    for (int i = 0; i < rw.n; i++)
      er->reward_components[er->n_reward_components++] = ev_comp(&a, rw.keys[i], rw.values[i]);
    if (job->include_held_out) {
      int ok = nheld > 0 && held_ok;
      er->reward_components[er->n_reward_components++] = ev_comp(&a, "held_out_correct", ok);
      er->reward_components[er->n_reward_components++] =
          ev_comp(&a, "held_out_speedup_geomean", ok ? exp(held_log / nheld) : 0.0);
    }
    er->n_info = 8;
    er->info = es_arena_alloc(&a, sizeof *er->info * er->n_info);
    er->info[0] = ev_info(&a, "job_id", job->id);
    er->info[1] = ev_info(&a, "wall_s", es_arena_printf(&a, "%.3f", r->wall_s));
    er->info[2] = ev_info(&a, "worker_id", worker_id);
    er->info[3] = ev_info(&a, "compile_s", es_arena_printf(&a, "%.3f", r->compile_s));
    er->info[4] = ev_info(&a, "task_id", job->task->id);
    er->info[5] = ev_info(&a, "task_version", job->task->version);
    er->info[6] = ev_info(&a, "seed", es_arena_printf(&a, "%" PRIu64, job->seed));
    er->info[7] = ev_info(&a, "reproducible", job->reproducible ? "true" : "false");
    resp.body_case = KERNELARENA__V1__RESPONSE__BODY_EVALUATE;
    resp.evaluate = er;
  }
  pthread_mutex_lock(&s->mtx);
  void *waiter = job->waiter;
  job->waiter = NULL;
  if (waiter) {
    resp.request_id = es_server_waiter_take(s, waiter);
    *reply = es_encode(&resp.base);
    *waiter_out = waiter;
  }
  pthread_mutex_unlock(&s->mtx);
  es_log(s, "evaluate %s (%s): %s", job->id, job->task->id, es_status_name((int)r->status));
  es_arena_free(&a);
  es_reward_free(&rw);
  es_job_free(job);
}
