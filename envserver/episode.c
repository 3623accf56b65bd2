/* Episodes: the table of episodes, their workspaces and prompts, and the Reset, Step
 * and Close methods.
 *
 * An episode's current editable files live in memory (es_episode.files) and are
 * mirrored into its workspace, <state>/workspaces/<episode_id>/, which holds those files
 * and prompt.md and nothing else (never the reference, the held-out cases or
 * task.yaml). A step's files reach the workspace only when the step is counted, so a
 * refused, failed (INFRA_ERROR) or abandoned step leaves the workspace as it was.
 *
 * The table holds open episodes, and closed ones until the trace store has recorded the
 * close and no step is in flight; then they are freed (ep_evict) and the trace store
 * answers for them (es_ep_answer_stored). A job points at its episode without reference
 * counting: an episode with ep->inflight set is never evicted, and every path that ends a
 * job (es_ep_step_finish, es_ep_step_abort) clears inflight before it evicts. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"
#include "envserver.h"

#define EP_MIN_BUCKETS 1024
#define EP_LIST_MAX 20 /* tasks named in an UNAVAILABLE message */

/* ---- the episode table (mtx held) */

static size_t ep_hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (size_t)h;
}

es_episode *es_ep_find(es_server *s, const char *id) {
  if (!s->ep_nbuckets || !id) return NULL;
  for (es_episode *e = s->ep_buckets[ep_hash(id) % s->ep_nbuckets]; e; e = e->hnext)
    if (!strcmp(e->id, id)) return e;
  return NULL;
}

static void ep_insert(es_server *s, es_episode *ep) {
  if (s->nepisodes + 1 > 2 * (int)s->ep_nbuckets) {
    size_t nb = s->ep_nbuckets ? 2 * s->ep_nbuckets : EP_MIN_BUCKETS;
    es_episode **b = es_xcalloc(nb, sizeof *b);
    for (size_t i = 0; i < s->ep_nbuckets; i++) {
      es_episode *e = s->ep_buckets[i];
      while (e) {
        es_episode *nx = e->hnext;
        size_t k = ep_hash(e->id) % nb;
        e->hnext = b[k];
        b[k] = e;
        e = nx;
      }
    }
    free(s->ep_buckets);
    s->ep_buckets = b;
    s->ep_nbuckets = nb;
  }
  size_t k = ep_hash(ep->id) % s->ep_nbuckets;
  ep->hnext = s->ep_buckets[k];
  s->ep_buckets[k] = ep;
  s->nepisodes++;
}

static void ep_free(es_episode *ep) {
  free(ep->id);
  free(ep->run_id);
  free(ep->workspace);
  es_fileset_free(&ep->files);
  free(ep);
}

/* Removes a closed episode whose close the trace store has recorded and that has no step in
 * flight from the table, and frees it (mtx held).
 * Closed episodes live on in the trace store only: State, Step and Close of one find
 * it there (ep_stored), so the table holds open episodes and the server's memory does not
 * grow with every episode it has served. */
static void ep_evict(es_server *s, es_episode *ep) {
  if (!ep || !ep->closed || !ep->close_recorded || ep->inflight) return;
  es_episode **pp = &s->ep_buckets[ep_hash(ep->id) % s->ep_nbuckets];
  while (*pp && *pp != ep) pp = &(*pp)->hnext;
  if (!*pp) return;
  *pp = ep->hnext;
  s->nepisodes--;
  ep_free(ep);
}

/* An episode that is not in the table (closed and evicted, or recorded by an earlier run
 * of the server) read from the trace store, without mtx (the store has its own lock and
 * may wait on a transaction). Returns KA_OK with the record in arena memory, KA_ENOENT
 * (no such episode) or KA_EIO (the store could not be read; the reason in err). */
static int ep_stored(es_server *s, es_arena *a, const char *id,
                     Kernelarena__V1__EpisodeRecord **rec, char *err, size_t errlen) {
  *rec = NULL;
  if (!id || !*id || !s->store) return KA_ENOENT;
  return es_store_get_episode(s->store, id, 0, 1, a, rec, err, errlen);
}

/* The close reason of a stored episode: its recorded one, or (never closed in the store:
 * the server that ran it stopped first) "not open on this server". */
static const char *ep_stored_reason(const Kernelarena__V1__EpisodeRecord *rec) {
  return rec->close_reason && *rec->close_reason && rec->closed_at > 0 ? rec->close_reason
                                                                       : "not open on this server";
}

void es_ep_table_free(es_server *s) {
  for (size_t i = 0; i < s->ep_nbuckets; i++) {
    es_episode *e = s->ep_buckets[i];
    while (e) {
      es_episode *nx = e->hnext;
      ep_free(e);
      e = nx;
    }
  }
  free(s->ep_buckets);
  s->ep_buckets = NULL;
  s->ep_nbuckets = 0;
  s->nepisodes = s->nopen = 0;
}

/* ---- helpers */

/* "a, b or c" */
static void ep_join_or(ka_sb *sb, char *const *v, int n) {
  for (int i = 0; i < n; i++) {
    if (i) ka_sb_puts(sb, i == n - 1 ? " or " : ", ");
    ka_sb_puts(sb, v[i]);
  }
}

static void ep_bytes(ka_sb *sb, int64_t b) {
  if (b >= (int64_t)1 << 30)
    ka_sb_printf(sb, "%.1f GiB", (double)b / (1 << 30));
  else if (b >= (int64_t)1 << 20)
    ka_sb_printf(sb, "%.1f MiB", (double)b / (1 << 20));
  else if (b >= 1024)
    ka_sb_printf(sb, "%.0f KiB", (double)b / 1024);
  else
    ka_sb_printf(sb, "%" PRId64 " bytes", b);
}

/* Writes data to dir/path through a temporary file and rename(2), so that a reader
 * never sees half a file. Creates parent folders of nested paths. */
static int ep_write(const char *dir, const char *path, const void *data, size_t len) {
  char full[PATH_MAX], tmp[PATH_MAX + 16];
  if (snprintf(full, sizeof full, "%s/%s", dir, path) >= (int)sizeof full) return KA_ERANGE;
  char *slash = strrchr(full, '/');
  if (slash > full + strlen(dir)) {
    *slash = 0;
    int rc = ka_mkdirs(full);
    *slash = '/';
    if (rc) return rc;
  }
  snprintf(tmp, sizeof tmp, "%s.ka-tmp", full);
  errno = 0;
  int rc = ka_write_file(tmp, data, len);
  if (rc == KA_OK && rename(tmp, full) != 0) rc = KA_EIO;
  if (rc) {
    int e = errno;
    unlink(tmp);
    errno = e; /* for ep_strerror: ENOSPC is named as such */
  }
  return rc;
}

/* The text of an ep_write failure: the system's reason (errno, e.g. "No space left on
 * device") when there is one, else ka_strerror(rc). Call right after the failure. */
static const char *ep_strerror(int rc) {
  return rc == KA_EIO && errno ? strerror(errno) : ka_strerror(rc);
}

void es_ep_workspace_remove(es_server *s, const char *id) {
  char ws[PATH_MAX];
  if (!id || !*id || strchr(id, '/') || !strcmp(id, ".") || !strcmp(id, "..")) return;
  snprintf(ws, sizeof ws, "%s/workspaces/%s", s->cfg.state_dir, id);
  if (access(ws, F_OK) == 0 && ka_rmtree(ws) != KA_OK)
    es_log(s, "episode %s: cannot remove its workspace %s", id, ws);
}

static void ep_prompt_device(ka_sb *sb, const es_pb_device *d);
static void ep_prompt_rules(ka_sb *sb, const ka_task *t, int max_steps);

/* The observation's prompt: the task's prompt.md, the device (none when d is NULL), the
 * rules. */
static char *ep_prompt(const ka_task *t, const es_pb_device *d, int max_steps) {
  ka_sb sb = {0};
  ka_sb_puts(&sb, t->prompt);
  if (sb.len && sb.s[sb.len - 1] != '\n') ka_sb_puts(&sb, "\n");
  if (d) ep_prompt_device(&sb, d);
  ep_prompt_rules(&sb, t, max_steps);
  return ka_sb_take(&sb);
}

/* The prompt's Device section: the executor's device facts. */
static void ep_prompt_device(ka_sb *sb, const es_pb_device *d) {
  ka_sb_puts(sb, "\n## Device\n\n");
  ka_sb_printf(sb, "Your code is evaluated on: %s (backend %s, arch %s%s%s).\n",
               d->name && *d->name ? d->name : "unnamed device", d->backend,
               d->arch && *d->arch ? d->arch : "unknown", d->driver && *d->driver ? ", " : "",
               d->driver ? d->driver : "");
  ka_sb_printf(sb, "- warp size: %d threads\n", d->warp_size);
  ka_sb_printf(sb, "- multiprocessors: %d\n", d->multiprocessors);
  if (d->max_threads_per_block > 0)
    ka_sb_printf(sb, "- max threads per block: %d\n", d->max_threads_per_block);
  ka_sb_puts(sb, "- memory: ");
  ep_bytes(sb, d->memory_bytes);
  ka_sb_puts(sb, "\n- L2 cache: ");
  ep_bytes(sb, d->l2_bytes);
  ka_sb_puts(sb, "\n- shared memory per block: ");
  ep_bytes(sb, d->shared_bytes_per_block);
  if (d->mem_bandwidth_gbps > 0)
    ka_sb_printf(sb, "\n- theoretical memory bandwidth: %.0f GB/s\n", d->mem_bandwidth_gbps);
  else
    ka_sb_puts(sb, "\n- theoretical memory bandwidth: unknown\n");
  if (d->clock_mhz > 0) ka_sb_printf(sb, "- clock: %d MHz\n", d->clock_mhz);
}

/* The prompt's Rules section: editable files, what a step does, the reward, the step limit. */
static void ep_prompt_rules(ka_sb *sb, const ka_task *t, int max_steps) {
  ka_sb_puts(sb, "\n## Rules\n\n- You may change only ");
  ka_sb_puts(sb, t->neditable == 1 ? "this file: " : "these files: ");
  for (int i = 0; i < t->neditable; i++) ka_sb_printf(sb, "%s`%s`", i ? ", " : "", t->editable[i]);
  ka_sb_puts(sb, ". A step that names any other file is refused and changes nothing.\n");
  if (t->command) { /* a command task: its own scripts judge (docs/tasks.md) */
    ka_sb_printf(sb,
                 "- Every step runs the task's own compile, correctness and performance "
                 "commands on your files, in a sandbox without network; a command that "
                 "changes any other file of the task is flagged (reward 0). A command is "
                 "stopped at its deadline; an evaluation after %.0f s.\n"
                 "- Reward: 0 if it does not compile; 20 if a check fails, it crashes or it "
                 "runs out of time; otherwise 120 + 100 x speedup, where speedup is the mean "
                 "over the timed cases of baseline time / your time.\n",
                 t->timeout_s);
    ka_sb_printf(sb, "- The episode allows at most %d step%s.\n", max_steps,
                 max_steps == 1 ? "" : "s");
    return;
  }
  ka_sb_printf(sb,
               "- Each step sends the files you changed (the others keep their current "
               "contents; at most %zu KiB per file and %zu KiB per step). Every step "
               "compiles them, runs each shown case on fresh random inputs and checks every "
               "output element against a trusted reference, then times the baseline and "
               "your version interleaved (%d warm-up and %d timed calls per case; the median "
               "counts). An evaluation is stopped after %.0f s.\n",
               ES_MAX_FILE_BYTES / 1024, ES_MAX_TOTAL_BYTES / 1024, es_job_warmup(), es_job_reps(),
               t->timeout_s);
  ka_sb_puts(sb,
             "- Reward: 0 if the code does not compile; 20 if it compiles but an output is "
             "wrong, it crashes or it runs out of time; otherwise 120 + 100 x speedup, where "
             "speedup is the geometric mean over the shown cases of baseline time / your "
             "time.\n");
  ka_sb_printf(sb, "- The episode allows at most %d step%s.\n", max_steps,
               max_steps == 1 ? "" : "s");
}

static Kernelarena__V1__ResetResponse__InfoEntry *ep_rinfo(es_arena *a, const char *k,
                                                           const char *v) {
  return es_pb_entry_str(a, &kernelarena__v1__reset_response__info_entry__descriptor, k, v);
}

static Kernelarena__V1__StepResponse__InfoEntry *ep_sinfo(es_arena *a, const char *k,
                                                          const char *v) {
  return es_pb_entry_str(a, &kernelarena__v1__step_response__info_entry__descriptor, k, v);
}

static int ep_run_id_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 128) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          strchr("._:/-", *s)))
      return 0;
  return 1;
}

/* ---- Reset */

/* Finds a live device for t (mtx held), preferring the task's backend order. When
 * there is none, writes the UNAVAILABLE message into *why and sets *retryable. */
static const es_worker *ep_pick_device(es_server *s, const ka_task *t, double now, ka_sb *why,
                                       int *retryable) {
  for (int b = 0; b < t->nbackends; b++)
    for (const es_worker *w = s->jobs.workers; w; w = w->next)
      if (w->device && es_worker_live(w, now) && !strcmp(w->device->backend, t->backends[b]) &&
          es_device_runs(t, w->device))
        return w;
  /* a device of the backend whose executor lacks the language (triton) */
  for (const es_worker *w = s->jobs.workers; w; w = w->next)
    if (w->device && es_worker_live(w, now) && es_task_has_backend(t, w->device->backend)) {
      ka_sb_printf(why,
                   "task %s is in language %s, which the connected %s executors cannot "
                   "compile: start gpuexec where a Python has triton (scripts/"
                   "install-python-deps.sh; gpuexec --triton-python PATH)",
                   t->id, t->language, w->device->backend);
      *retryable = 0;
      return NULL;
    }
  /* Nothing fits: say what would, what is here, and which tasks run here. */
  char *offered[16];
  int noff = 0;
  for (const es_worker *w = s->jobs.workers; w; w = w->next) {
    if (!w->device || !es_worker_live(w, now)) continue;
    int seen = 0;
    for (int i = 0; i < noff; i++) seen |= !strcmp(offered[i], w->device->backend);
    if (!seen && noff < 16) offered[noff++] = w->device->backend;
  }
  ka_sb_printf(why, "task %s needs a ", t->id);
  ep_join_or(why, t->backends, t->nbackends);
  ka_sb_puts(why, " device; ");
  if (!noff) {
    ka_sb_puts(why, "no executor is connected (start gpuexec, or wait for one to poll)");
    *retryable = 1;
    return NULL;
  }
  *retryable = 0;
  ka_sb_puts(why, "the connected executors offer: ");
  for (int i = 0; i < noff; i++) ka_sb_printf(why, "%s%s", i ? ", " : "", offered[i]);
  ka_sb_puts(why, ". Tasks that run here: ");
  int listed = 0;
  for (int i = 0; i < s->reg->ntasks; i++) {
    const ka_task *o = s->reg->tasks[i];
    int fits = 0;
    for (int k = 0; k < noff; k++) fits |= es_task_has_backend(o, offered[k]);
    if (!fits) continue;
    if (listed == EP_LIST_MAX) {
      ka_sb_puts(why, ", ...");
      break;
    }
    ka_sb_printf(why, "%s%s", listed ? ", " : "", o->id);
    listed++;
  }
  if (!listed) ka_sb_puts(why, "none");
  return NULL;
}

/* A Reset admitted against --max-episodes ended without opening an episode. */
static void ep_reset_done(es_server *s) {
  pthread_mutex_lock(&s->mtx);
  s->nresetting--;
  pthread_mutex_unlock(&s->mtx);
}

void es_ep_reset(es_server *s, const Kernelarena__V1__ResetRequest *rq, es_arena *a,
                 es_pb_response *resp) {
  const ka_task *t = ka_registry_find(s->reg, rq->task_id);
  if (!t) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__NOT_FOUND, 0, "unknown task '%s'%s",
                   es_arena_quote(a, rq->task_id), es_skip_why(a, s->reg, rq->task_id));
    return;
  }
  int max_steps = s->cfg.max_steps;
  const char *label = "", *run = ES_DEFAULT_RUN;
  for (size_t i = 0; i < rq->n_options; i++) {
    const char *k = rq->options[i]->key, *v = rq->options[i]->value;
    if (!strcmp(k, "max_steps")) {
      char *end;
      errno = 0;
      long n = strtol(v, &end, 10);
      if (errno || end == v || *end || n < 1 || n > ES_MAX_STEPS_CAP) {
        es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, 0,
                       "option max_steps='%s' must be an integer from 1 to %d",
                       es_arena_quote(a, v), ES_MAX_STEPS_CAP);
        return;
      }
      max_steps = (int)n;
    } else if (!strcmp(k, "label")) {
      if (strlen(v) > 256) {
        es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, 0,
                       "option label is longer than 256 bytes");
        return;
      }
      label = v;
    } else if (!strcmp(k, "run")) {
      if (!ep_run_id_ok(v)) {
        es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, 0,
                       "option run='%s' must be 1 to 128 characters from A-Z a-z 0-9 . _ : / -",
                       es_arena_quote(a, v));
        return;
      }
      run = v;
    } else {
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, 0,
                     "unknown option '%s' (recognised: max_steps, label, run)",
                     es_arena_quote(a, k));
      return;
    }
  }

  /* A device of a live executor that can run the task; its facts go into the prompt. */
  pthread_mutex_lock(&s->mtx);
  /* Resets in progress count against the limit: the workspace and store I/O below run
   * unlocked, and concurrent Resets must not pass it. */
  if (s->nopen + s->nresetting >= s->cfg.max_episodes) {
    int lim = s->cfg.max_episodes;
    pthread_mutex_unlock(&s->mtx);
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__CAPACITY, 1,
                   "%d episodes are open or opening (the limit); close some and retry", lim);
    return;
  }
  ka_sb why = {0};
  int retryable = 0;
  const es_worker *w = ep_pick_device(s, t, ka_now_s(), &why, &retryable);
  es_pb_device *dev = w ? es_device_to_arena(a, w->device) : NULL;
  if (dev) s->nresetting++; /* released by ep_reset_done on every path below */
  pthread_mutex_unlock(&s->mtx);
  if (!dev) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__UNAVAILABLE, retryable, "%s",
                   why.s ? why.s : "");
    ka_sb_free(&why);
    return;
  }
  ka_sb_free(&why);

  uint64_t seed = rq->seed;
  unsigned char rnd[8];
  if (!rq->has_seed) {
    if (es_random(&seed, sizeof seed)) goto sysfail;
  }
  if (es_random(rnd, sizeof rnd)) goto sysfail;
  char id[20];
  snprintf(id, sizeof id, "ep-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3],
           rnd[4], rnd[5], rnd[6], rnd[7]);

  /* The workspace: the baseline's editable files and the prompt, nothing else. */
  char ws[PATH_MAX];
  snprintf(ws, sizeof ws, "%s/workspaces/%s", s->cfg.state_dir, id);
  es_fileset files = {0};
  char *prompt = ep_prompt(t, dev, max_steps);
  char err[512] = "";
  errno = 0;
  int rc = access(ws, F_OK) == 0 ? KA_ESTATE : ka_mkdirs(ws);
  if (rc && rc != KA_ESTATE) snprintf(err, sizeof err, "creating %s: %s", ws, ep_strerror(rc));
  for (int i = 0; rc == KA_OK && i < t->neditable; i++) {
    char src[PATH_MAX];
    char *data = NULL;
    size_t len = 0;
    ka_task_baseline_path(t, t->editable[i], src, sizeof src);
    rc = ka_read_file(src, ES_MAX_FILE_BYTES, &data, &len);
    if (rc) {
      snprintf(err, sizeof err, "reading %s: %s", src, ka_strerror(rc));
      break;
    }
    es_fileset_put(&files, t->editable[i], data, len);
    free(data);
    rc = ep_write(ws, t->editable[i], files.v[files.n - 1].data, len);
    if (rc) snprintf(err, sizeof err, "writing %s/%s: %s", ws, t->editable[i], ep_strerror(rc));
  }
  if (rc == KA_OK && !ka_task_is_editable(t, "prompt.md")) {
    rc = ep_write(ws, "prompt.md", prompt, strlen(prompt));
    if (rc) snprintf(err, sizeof err, "writing %s/prompt.md: %s", ws, ep_strerror(rc));
  }
  double created = ka_wall_s();
  if (rc == KA_OK) {
    es_episode_rec rec = {.id = id,
                          .run_id = run,
                          .run_label = label,
                          .task_id = t->id,
                          .task_version = t->version,
                          .workspace = ws,
                          .seed = seed,
                          .max_steps = max_steps,
                          .created_at = created};
    rc = es_store_add_episode(s->store, &rec, err, sizeof err);
  }
  if (rc) {
    if (rc != KA_ESTATE)
      ka_rmtree(ws);
    else
      snprintf(err, sizeof err, "episode id %s collides with an existing workspace", id);
    es_log(s, "reset %s: %s", t->id, err);
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1, "reset failed: %s", err);
    es_fileset_free(&files);
    free(prompt);
    ep_reset_done(s);
    return;
  }

  es_episode *ep = es_xcalloc(1, sizeof *ep);
  ep->id = es_xstrdup(id);
  ep->task = t;
  ep->run_id = es_xstrdup(run);
  ep->seed = seed;
  ep->max_steps = max_steps;
  ep->created_at = created;
  ep->last_active = ka_now_s();
  ep->workspace = es_xstrdup(ws);

  Kernelarena__V1__ResetResponse *rr = es_arena_alloc(a, sizeof *rr);
  kernelarena__v1__reset_response__init(rr);
  Kernelarena__V1__Observation *ob = es_arena_alloc(a, sizeof *ob);
  kernelarena__v1__observation__init(ob);
  ob->prompt = es_arena_strdup(a, prompt);
  ob->files = es_fileset_to_pb(a, &files, &ob->n_files);
  ob->step = 0;
  ob->status = KERNELARENA__V1__STATUS__STATUS_UNSPECIFIED;
  ob->device = dev;
  rr->episode_id = es_arena_strdup(a, id);
  rr->observation = ob;
  rr->seed = seed;
  char ms[16];
  snprintf(ms, sizeof ms, "%d", max_steps);
  rr->n_info = 5;
  rr->info = es_arena_alloc(a, sizeof *rr->info * rr->n_info);
  rr->info[0] = ep_rinfo(a, "workspace", ws);
  rr->info[1] = ep_rinfo(a, "task_version", t->version);
  rr->info[2] = ep_rinfo(a, "max_steps", ms);
  rr->info[3] = ep_rinfo(a, "run", run);
  rr->info[4] = ep_rinfo(a, "device", dev->name);
  resp->body_case = KERNELARENA__V1__RESPONSE__BODY_RESET;
  resp->reset = rr;
  free(prompt);

  ep->files = files;
  pthread_mutex_lock(&s->mtx);
  ep_insert(s, ep);
  s->nopen++;
  s->nresetting--;
  /* the first step's correctness inputs and references, computed ahead by an idle worker
   * (issue 15); a command task has none, and seed 0 gives each step inputs of its own */
  if (!t->command && seed) es_prefetch_push(&s->jobs, id, t, seed);
  pthread_mutex_unlock(&s->mtx);
  es_log(s, "reset %s: episode %s, seed %" PRIu64 ", run %s", t->id, id, seed, run);
  return;

sysfail:
  es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1, "getrandom failed: %s",
                 strerror(errno));
  ep_reset_done(s);
}

/* ---- Step */

/* "a, b" into arena memory: the task's editable files. */
static const char *ep_editable_list(es_arena *a, const ka_task *t) {
  ka_sb sb = {0};
  for (int i = 0; i < t->neditable; i++) ka_sb_printf(&sb, "%s%s", i ? ", " : "", t->editable[i]);
  const char *r = es_arena_strdup(a, sb.s);
  ka_sb_free(&sb);
  return r;
}

int es_ep_step_admit(es_server *s, const Kernelarena__V1__StepRequest *rq, es_arena *a,
                     es_pb_response *resp, es_episode **ep_out, es_job **job_out) {
  *ep_out = NULL;
  *job_out = NULL;
  es_episode *ep = es_ep_find(s, rq->episode_id);
  if (!ep) { /* the caller asks the trace store (es_ep_answer_stored) after unlocking */
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__NOT_FOUND, 0, "unknown episode '%s'",
                   es_arena_quote(a, rq->episode_id));
    return KA_ENOENT;
  }
  if (ep->closed) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__FAILED_PRECONDITION, 0,
                   "episode %s is closed", ep->id);
    return KA_ESTATE;
  }
  if (ep->inflight) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__FAILED_PRECONDITION, 0,
                   "step %d of episode %s is still being evaluated; one step at a time",
                   ep->inflight->step, ep->id);
    return KA_ESTATE;
  }
  if (rq->expected_step != ep->steps) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__FAILED_PRECONDITION, 0,
                   "expected_step is %d but episode %s has taken %d step%s; nothing was "
                   "evaluated",
                   (int)rq->expected_step, ep->id, ep->steps, ep->steps == 1 ? "" : "s");
    return KA_ESTATE;
  }
  if (ep->steps >= ep->max_steps) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__FAILED_PRECONDITION, 0,
                   "episode %s has reached its step limit (%d)", ep->id, ep->max_steps);
    return KA_ESTATE;
  }
  const ka_task *t = ep->task;
  for (size_t i = 0; i < rq->n_files; i++) {
    const char *p = rq->files[i]->path;
    if (!ka_path_is_safe(p) || !ka_task_is_editable(t, p)) {
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, 0,
                     "file '%s' may not be changed; the editable files of %s are: %s",
                     es_arena_quote(a, p), t->id, ep_editable_list(a, t));
      return KA_EINVAL;
    }
    for (size_t j = 0; j < i; j++)
      if (!strcmp(rq->files[j]->path, p)) {
        es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INVALID_ARGUMENT, 0,
                       "file '%s' appears twice in the step", p);
        return KA_EINVAL;
      }
  }
  size_t total = 0;
  for (size_t i = 0; i < rq->n_files; i++) {
    size_t len = rq->files[i]->content.len;
    if (len > ES_MAX_FILE_BYTES) {
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__RESOURCE_EXHAUSTED, 0,
                     "file '%s' is %zu bytes; the limit is %zu bytes per file", rq->files[i]->path,
                     len, ES_MAX_FILE_BYTES);
      return KA_ETOOBIG;
    }
    total += len;
  }
  if (total > ES_MAX_TOTAL_BYTES) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__RESOURCE_EXHAUSTED, 0,
                   "the step's files total %zu bytes; the limit is %zu bytes per step", total,
                   ES_MAX_TOTAL_BYTES);
    return KA_ETOOBIG;
  }
  if (s->jobs.nqueued >= s->cfg.max_queued) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__CAPACITY, 1,
                   "%d evaluations are queued (the limit); retry later", s->jobs.nqueued);
    return KA_EUNAVAIL;
  }
  /* The complete editable set: the current files with the submitted ones replacing. */
  es_fileset set = {0};
  es_fileset_copy(&set, &ep->files);
  for (size_t i = 0; i < rq->n_files; i++)
    es_fileset_put(&set, rq->files[i]->path, rq->files[i]->content.data, rq->files[i]->content.len);
  if (es_fileset_bytes(&set) > ES_MAX_TOTAL_BYTES) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__RESOURCE_EXHAUSTED, 0,
                   "the editable files would total %zu bytes; the limit is %zu bytes",
                   es_fileset_bytes(&set), ES_MAX_TOTAL_BYTES);
    es_fileset_free(&set);
    return KA_ETOOBIG;
  }
  int step = ep->steps + 1;
  es_job *job = es_job_new(ep, step, es_step_seed(ep->seed, step), &set);
  job->enqueued_at = ka_now_s();
  es_jobs_enqueue(&s->jobs, job);
  ep->inflight = job;
  ep->last_active = job->enqueued_at;
  *ep_out = ep;
  *job_out = job;
  return KA_OK;
}

void *es_ep_step_abort(es_server *s, es_job *job) {
  es_episode *ep = job->ep;
  void *waiter = job->waiter;
  job->waiter = NULL;
  if (ep && ep->inflight == job) {
    ep->inflight = NULL;
    ep->last_active = ka_now_s();
    ep_evict(s, ep); /* closed while the step was in flight */
  }
  es_job_free(job);
  return waiter;
}

/* The StepResponse of a counted step (mtx held; cur = the episode's files now). */
static void ep_step_response(es_arena *a, es_pb_response *resp, const es_episode *ep,
                             const es_job *job, const es_pb_result *r, const es_reward *rw,
                             const es_fileset *cur, const char *worker_id, const char *note) {
  Kernelarena__V1__StepResponse *sr = es_arena_alloc(a, sizeof *sr);
  kernelarena__v1__step_response__init(sr);
  Kernelarena__V1__Observation *ob = es_arena_alloc(a, sizeof *ob);
  kernelarena__v1__observation__init(ob);
  ob->files = es_fileset_to_pb(a, cur, &ob->n_files);
  ob->step = ep->steps;
  ob->status = r->status;
  ob->compile_log = r->compile_log;
  ob->runtime_log = r->runtime_log;
  ob->cases = es_arena_alloc(a, sizeof *ob->cases * (r->n_cases + 1));
  for (size_t i = 0; i < r->n_cases; i++)
    if (!r->cases[i]->held_out) ob->cases[ob->n_cases++] = r->cases[i];
  ob->device = r->device;
  ob->telemetry = r->telemetry;
  ob->message =
      note ? es_arena_printf(a, "%s%s%s", r->message, *r->message ? "; " : "", note) : r->message;
  sr->observation = ob;
  sr->reward = rw->reward;
  sr->n_reward_components = (size_t)rw->n;
  sr->reward_components = es_arena_alloc(a, sizeof *sr->reward_components * (size_t)(rw->n + 1));
  for (int i = 0; i < rw->n; i++)
    sr->reward_components[i] =
        es_pb_entry_num(a, &kernelarena__v1__step_response__reward_components_entry__descriptor,
                        rw->keys[i], rw->values[i]);
  sr->terminated = 0;
  sr->truncated = ep->steps >= ep->max_steps;
  /* command tasks: their own scripts judge them (docs/integrity.md, task-harness) */
  sr->n_info = ep->task->command ? 5 : 4;
  sr->info = es_arena_alloc(a, sizeof *sr->info * sr->n_info);
  sr->info[0] = ep_sinfo(a, "job_id", job->id);
  sr->info[1] = ep_sinfo(a, "wall_s", es_arena_printf(a, "%.3f", r->wall_s));
  sr->info[2] = ep_sinfo(a, "worker_id", worker_id);
  sr->info[3] = ep_sinfo(a, "compile_s", es_arena_printf(a, "%.3f", r->compile_s));
  if (ep->task->command) sr->info[4] = ep_sinfo(a, "integrity", "task-harness");
  resp->body_case = KERNELARENA__V1__RESPONSE__BODY_STEP;
  resp->step = sr;
}

void es_ep_step_finish(es_server *s, es_job *job, const es_pb_result *result, const char *worker_id,
                       nng_msg **reply, void **waiter_out) {
  *reply = NULL;
  *waiter_out = NULL;
  es_reward rw;
  char err[512] = "", note[600] = "";
  int counted = 0;
  int rc = es_reward_compute(result, &rw);
  if (rc) {
    snprintf(
        err, sizeof err, "the executor could not evaluate step %d (%s): %s", job->step,
        result->status == KERNELARENA__V1__STATUS__INFRA_ERROR ? "INFRA_ERROR" : "no valid status",
        *result->message ? result->message : "no message");
  } else {
    es_step_rec rec = {.episode_id = job->ep->id,
                       .step = job->step,
                       .created_at = ka_wall_s(),
                       .result = result,
                       .reward = &rw,
                       .files = &job->files,
                       .worker_id = worker_id,
                       .attempt = job->dispatches};
    char serr[400];
    if (es_store_add_step(s->store, &rec, serr, sizeof serr) != KA_OK) {
      snprintf(err, sizeof err, "step %d could not be recorded: %s", job->step, serr);
    } else {
      counted = 1;
      /* The workspace is only a mirror: a failure to update it is reported, not fatal. */
      pthread_mutex_lock(&s->mtx);
      int closed = job->ep->closed; /* its workspace is removed once the close is recorded */
      pthread_mutex_unlock(&s->mtx);
      for (int i = 0; !closed && i < job->files.n; i++) {
        const es_file *f = &job->files.v[i];
        int wrc = ep_write(job->ep->workspace, f->path, f->data, f->len);
        if (wrc && !*note)
          snprintf(note, sizeof note, "warning: the workspace copy of %s was not updated (%s)",
                   f->path, ep_strerror(wrc));
      }
    }
  }
  if (!counted) es_log(s, "episode %s: %s", job->ep->id, err);

  es_arena a = {0};
  es_pb_response resp = KERNELARENA__V1__RESPONSE__INIT;
  pthread_mutex_lock(&s->mtx);
  es_episode *ep = job->ep;
  void *waiter = job->waiter;
  job->waiter = NULL;
  ep->inflight = NULL;
  ep->last_active = ka_now_s();
  if (counted) {
    ep->steps = job->step;
    const es_fileset *cur = &job->files;
    if (!ep->closed) {
      es_fileset tmp = ep->files;
      ep->files = job->files;
      job->files = tmp;
      cur = &ep->files;
    }
    ep_step_response(&a, &resp, ep, job, result, &rw, cur, worker_id, *note ? note : NULL);
  } else {
    es_reply_error(&a, &resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1,
                   "%s; the step was not counted, retry it", err);
  }
  if (waiter) {
    resp.request_id = es_server_waiter_take(s, waiter);
    *reply = es_encode(&resp.base);
    *waiter_out = waiter;
  }
  char epid[64];
  snprintf(epid, sizeof epid, "%s", ep->id);
  ep_evict(s, ep); /* closed while the step was in flight */
  pthread_mutex_unlock(&s->mtx);
  if (counted)
    es_log(s, "episode %s step %d: %s, reward %.3f", epid, job->step,
           es_status_name((int)result->status), rw.reward);
  es_arena_free(&a);
  es_reward_free(&rw);
  es_job_free(job);
}

/* ---- ListTasks' prompts */

int es_ep_task_prompt(es_server *s, const ka_task *t, es_arena *a, Kernelarena__V1__TaskInfo *ti,
                      char *err, size_t errlen) {
  pthread_mutex_lock(&s->mtx);
  ka_sb why = {0};
  int retryable = 0;
  const es_worker *w = ep_pick_device(s, t, ka_now_s(), &why, &retryable);
  es_pb_device *dev = w ? es_device_to_arena(a, w->device) : NULL;
  pthread_mutex_unlock(&s->mtx);
  ka_sb_free(&why);
  char *prompt = ep_prompt(t, dev, s->cfg.max_steps);
  ti->prompt = es_arena_strdup(a, prompt);
  free(prompt);
  ti->files = es_arena_alloc(a, sizeof *ti->files * (size_t)(t->neditable + 1));
  for (int i = 0; i < t->neditable; i++) {
    char src[PATH_MAX];
    char *data = NULL;
    size_t len = 0;
    ka_task_baseline_path(t, t->editable[i], src, sizeof src);
    int rc = ka_read_file(src, ES_MAX_FILE_BYTES, &data, &len);
    if (rc) {
      snprintf(err, errlen, "reading %s: %s", src, ka_strerror(rc));
      return rc;
    }
    Kernelarena__V1__File *f = es_arena_alloc(a, sizeof *f);
    kernelarena__v1__file__init(f);
    f->path = t->editable[i];
    f->content.len = len;
    f->content.data = es_arena_alloc(a, len + 1);
    memcpy(f->content.data, data, len);
    free(data);
    ti->files[ti->n_files++] = f;
  }
  return KA_OK;
}

/* ---- Close */

void es_ep_close(es_server *s, const Kernelarena__V1__CloseRequest *rq, es_arena *a,
                 es_pb_response *resp) {
  pthread_mutex_lock(&s->mtx);
  es_episode *ep = es_ep_find(s, rq->episode_id);
  if (!ep) {
    pthread_mutex_unlock(&s->mtx);
    es_ep_answer_stored(s, ES_ASK_CLOSE, rq->episode_id, a, resp);
    return;
  }
  int was_open = !ep->closed;
  /* closed before, but its close never reached the trace store: record it now */
  int record = was_open || !ep->close_recorded;
  const char *reason = ep->closed ? ep->close_reason : "closed";
  char id[32];
  snprintf(id, sizeof id, "%s", ep->id);
  if (was_open) {
    ep->closed = 1;
    ep->close_reason = "closed";
    s->nopen--;
    es_fileset_free(&ep->files);
  }
  pthread_mutex_unlock(&s->mtx);
  if (record) {
    char err[400];
    if (es_store_close_episode(s->store, id, ka_wall_s(), reason, err, sizeof err)) {
      /* Closed here but not recorded: say so (a retry records it and answers
       * was_open = false, Close being idempotent). */
      es_log(s, "close %s: %s", id, err);
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1,
                     "episode %s is closed but its close could not be recorded: %s; retry Close",
                     id, err);
      return;
    }
    pthread_mutex_lock(&s->mtx);
    es_ep_close_recorded(s, id);
    pthread_mutex_unlock(&s->mtx);
    es_ep_workspace_remove(s, id);
  }
  Kernelarena__V1__CloseResponse *cr = es_arena_alloc(a, sizeof *cr);
  kernelarena__v1__close_response__init(cr);
  cr->was_open = was_open;
  resp->body_case = KERNELARENA__V1__RESPONSE__BODY_CLOSE;
  resp->close = cr;
}

/* ---- State, Cancel, the idle reaper */

void es_ep_state(es_server *s, const Kernelarena__V1__StateRequest *rq, es_arena *a,
                 es_pb_response *resp) {
  pthread_mutex_lock(&s->mtx);
  es_episode *ep = es_ep_find(s, rq->episode_id);
  if (!ep) {
    pthread_mutex_unlock(&s->mtx);
    es_ep_answer_stored(s, ES_ASK_STATE, rq->episode_id, a, resp);
    return;
  }
  double now = ka_now_s();
  Kernelarena__V1__StateResponse *sr = es_arena_alloc(a, sizeof *sr);
  kernelarena__v1__state_response__init(sr);
  sr->episode_id = es_arena_strdup(a, ep->id);
  sr->task_id = es_arena_strdup(a, ep->task->id);
  sr->task_version = es_arena_strdup(a, ep->task->version);
  sr->seed = ep->seed;
  sr->step = ep->steps;
  sr->max_steps = ep->max_steps;
  sr->closed = ep->closed;
  sr->close_reason = es_arena_strdup(a, ep->closed ? ep->close_reason : "");
  sr->inflight_step = ep->inflight ? ep->inflight->step : 0;
  sr->files = es_fileset_to_pb(a, &ep->files, &sr->n_files);
  sr->run_id = es_arena_strdup(a, ep->run_id);
  sr->idle_s = ep->inflight ? 0 : now - ep->last_active;
  if (ep->closed || s->cfg.idle_ttl_s <= 0)
    sr->expires_in_s = -1;
  else
    sr->expires_in_s = s->cfg.idle_ttl_s - (now - ep->last_active); /* in flight: since queued */
  if (!ep->closed) ep->last_active = ep->inflight ? ep->last_active : now;
  pthread_mutex_unlock(&s->mtx);
  resp->body_case = KERNELARENA__V1__RESPONSE__BODY_STATE;
  resp->state = sr;
}

/* Cancels ep's step in flight, queued or running (mtx held): detaches the job, frees it
 * and returns its waiter (NULL when none), *step the cancelled step; returns NULL with
 * *step = 0 when nothing is in flight or its result is being recorded (too late). */
static void *ep_cancel_inflight(es_server *s, es_episode *ep, int *step) {
  es_job *job = ep->inflight;
  *step = 0;
  if (!job || job->state == ES_JOB_COMPLETING) return NULL;
  if (job->state == ES_JOB_QUEUED)
    es_jobs_unqueue(&s->jobs, job);
  else
    es_jobs_detach(&s->jobs, job->worker);
  *step = job->step;
  return es_ep_step_abort(s, job);
}

void *es_ep_cancel(es_server *s, const Kernelarena__V1__CancelRequest *rq, es_arena *a,
                   es_pb_response *resp) {
  es_episode *ep = es_ep_find(s, rq->episode_id);
  if (!ep) { /* the caller asks the trace store (es_ep_answer_stored) after unlocking */
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__NOT_FOUND, 0, "unknown episode '%s'",
                   es_arena_quote(a, rq->episode_id));
    return NULL;
  }
  Kernelarena__V1__CancelResponse *cr = es_arena_alloc(a, sizeof *cr);
  kernelarena__v1__cancel_response__init(cr);
  resp->body_case = KERNELARENA__V1__RESPONSE__BODY_CANCEL;
  resp->cancel = cr;
  int step;
  void *waiter = ep_cancel_inflight(s, ep, &step);
  cr->cancelled = step > 0;
  cr->step = step;
  return waiter;
}

void es_ep_answer_stored(es_server *s, es_ep_ask ask, const char *id, es_arena *a,
                         es_pb_response *resp) {
  Kernelarena__V1__EpisodeRecord *rec;
  char err[400] = "";
  int rc = ep_stored(s, a, id, &rec, err, sizeof err);
  if (rc == KA_ENOENT) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__NOT_FOUND, 0, "unknown episode '%s'",
                   es_arena_quote(a, id));
    return;
  }
  if (rc != KA_OK) {
    es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1,
                   "episode '%s' is not open and the trace store could not be read: %s; retry",
                   es_arena_quote(a, id), err);
    return;
  }
  const char *reason = ep_stored_reason(rec);
  switch (ask) {
    case ES_ASK_STEP:
      es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__FAILED_PRECONDITION, 0,
                     "episode %s is closed (%s)", rec->id, reason);
      return;
    case ES_ASK_CANCEL: {
      Kernelarena__V1__CancelResponse *cr = es_arena_alloc(a, sizeof *cr);
      kernelarena__v1__cancel_response__init(cr);
      resp->body_case = KERNELARENA__V1__RESPONSE__BODY_CANCEL;
      resp->cancel = cr; /* nothing in flight */
      return;
    }
    case ES_ASK_CLOSE: {
      /* an episode of an earlier server run that never recorded its close: record it */
      if (!(rec->closed_at > 0) &&
          es_store_close_episode(s->store, rec->id, ka_wall_s(), "closed", err, sizeof err)) {
        es_log(s, "close %s: %s", rec->id, err);
        es_reply_error(a, resp, KERNELARENA__V1__ERROR_CODE__INTERNAL, 1,
                       "the close of episode %s could not be recorded: %s; retry Close", rec->id,
                       err);
        return;
      }
      es_ep_workspace_remove(s, rec->id);
      Kernelarena__V1__CloseResponse *cr = es_arena_alloc(a, sizeof *cr);
      kernelarena__v1__close_response__init(cr);
      cr->was_open = 0; /* not open on this server: Close is idempotent */
      resp->body_case = KERNELARENA__V1__RESPONSE__BODY_CLOSE;
      resp->close = cr;
      return;
    }
    case ES_ASK_STATE: {
      Kernelarena__V1__StateResponse *sr = es_arena_alloc(a, sizeof *sr);
      kernelarena__v1__state_response__init(sr);
      sr->episode_id = rec->id;
      sr->task_id = rec->task_id;
      sr->task_version = rec->task_version;
      sr->seed = rec->seed;
      sr->step = rec->steps;
      sr->max_steps = rec->max_steps;
      sr->closed = 1;
      sr->close_reason = es_arena_strdup(a, reason);
      sr->run_id = rec->run_id;
      sr->idle_s = rec->closed_at > 0 ? ka_wall_s() - rec->closed_at : 0;
      sr->expires_in_s = -1;
      resp->body_case = KERNELARENA__V1__RESPONSE__BODY_STATE;
      resp->state = sr;
      return;
    }
  }
}

void es_ep_close_recorded(es_server *s, const char *id) {
  es_episode *ep = es_ep_find(s, id);
  if (!ep || !ep->closed) return;
  ep->close_recorded = 1;
  ep_evict(s, ep); /* unless a step is in flight: then when it ends */
}

char **es_ep_reap_idle(es_server *s, double now, int *n, es_ep_cancelled_fn cancelled, void *arg) {
  *n = 0;
  if (s->cfg.idle_ttl_s <= 0) return NULL;
  char **ids = NULL;
  int cap = 0;
  for (size_t b = 0; b < s->ep_nbuckets; b++)
    for (es_episode *ep = s->ep_buckets[b]; ep; ep = ep->hnext) {
      if (ep->closed || now - ep->last_active <= s->cfg.idle_ttl_s) continue;
      if (ep->inflight) { /* in flight past the TTL since it was queued: cancelled */
        if (ep->inflight->state == ES_JOB_COMPLETING) continue; /* being recorded */
        int step;
        void *waiter = ep_cancel_inflight(s, ep, &step);
        if (waiter && cancelled) cancelled(waiter, ep->id, step, arg);
      }
      ep->closed = 1;
      ep->close_reason = "idle_ttl";
      s->nopen--;
      es_fileset_free(&ep->files);
      if (*n == cap) {
        cap = cap ? 2 * cap : 16;
        ids = es_xrealloc(ids, sizeof *ids * (size_t)cap);
      }
      ids[(*n)++] = es_xstrdup(ep->id);
    }
  return ids;
}
