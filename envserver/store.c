/* The trace store: every episode and step in one sqlite database (WAL mode), so that
 * episodes can be exported, compared across runs and replayed. docs/trace-store.md
 * describes the schema; keep the two in step.
 *
 * One connection guarded by a mutex; every statement is prepared once at open. A step
 * is written in one BEGIN IMMEDIATE ... COMMIT transaction and rolled back on error. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "envserver.h"

#define STORE_SCHEMA_VERSION 3
#define STORE_BUSY_MS 5000

static const char store_schema[] =
    "CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);\n"
    "CREATE TABLE IF NOT EXISTS runs(\n"
    "  id TEXT PRIMARY KEY,\n"
    "  label TEXT NOT NULL DEFAULT '',\n"
    "  created_at REAL NOT NULL);\n"
    "CREATE TABLE IF NOT EXISTS episodes(\n"
    "  id TEXT PRIMARY KEY,\n"
    "  run_id TEXT NOT NULL REFERENCES runs(id),\n"
    "  task_id TEXT NOT NULL,\n"
    "  task_version TEXT NOT NULL,\n"
    "  seed INTEGER NOT NULL,\n"
    "  max_steps INTEGER NOT NULL,\n"
    "  created_at REAL NOT NULL,\n"
    "  closed_at REAL,\n"
    "  workspace TEXT NOT NULL,\n"
    "  close_reason TEXT,\n"
    "  env_version TEXT NOT NULL DEFAULT '',\n"
    "  code_hash TEXT NOT NULL DEFAULT '');\n"
    "CREATE INDEX IF NOT EXISTS episodes_run ON episodes(run_id);\n"
    "CREATE TABLE IF NOT EXISTS blobs(\n"
    "  sha256 TEXT PRIMARY KEY,\n"
    "  size INTEGER NOT NULL,\n"
    "  content BLOB NOT NULL);\n"
    "CREATE TABLE IF NOT EXISTS steps(\n"
    "  episode_id TEXT NOT NULL REFERENCES episodes(id),\n"
    "  step INTEGER NOT NULL,\n"
    "  created_at REAL NOT NULL,\n"
    "  status INTEGER NOT NULL,\n"
    "  reward REAL,\n"
    "  geomean_speedup REAL,\n"
    "  compile_log TEXT NOT NULL,\n"
    "  runtime_log TEXT NOT NULL,\n"
    "  message TEXT NOT NULL,\n"
    "  wall_s REAL,\n"
    "  worker_id TEXT NOT NULL,\n"
    "  device_name TEXT NOT NULL,\n"
    "  result_pb BLOB NOT NULL,\n"
    "  attempt INTEGER NOT NULL DEFAULT 1,\n"
    "  PRIMARY KEY(episode_id, step));\n"
    "CREATE TABLE IF NOT EXISTS step_files(\n"
    "  episode_id TEXT NOT NULL,\n"
    "  step INTEGER NOT NULL,\n"
    "  path TEXT NOT NULL,\n"
    "  sha256 TEXT NOT NULL REFERENCES blobs(sha256),\n"
    "  PRIMARY KEY(episode_id, step, path));\n"
    "CREATE TABLE IF NOT EXISTS step_components(\n"
    "  episode_id TEXT NOT NULL,\n"
    "  step INTEGER NOT NULL,\n"
    "  key TEXT NOT NULL,\n"
    "  value REAL,\n"
    "  PRIMARY KEY(episode_id, step, key));\n"
    "CREATE TABLE IF NOT EXISTS step_cases(\n"
    "  episode_id TEXT NOT NULL,\n"
    "  step INTEGER NOT NULL,\n"
    "  name TEXT NOT NULL,\n"
    "  correct INTEGER NOT NULL,\n"
    "  max_abs_err REAL,\n"
    "  max_rel_err REAL,\n"
    "  baseline_ms REAL,\n"
    "  candidate_ms REAL,\n"
    "  speedup REAL,\n"
    "  PRIMARY KEY(episode_id, step, name));\n";

enum {
  STORE_BEGIN,
  STORE_COMMIT,
  STORE_ROLLBACK,
  STORE_RUN,
  STORE_EPISODE,
  STORE_CLOSE,
  STORE_BLOB,
  STORE_STEP,
  STORE_STEP_FILE,
  STORE_STEP_COMPONENT,
  STORE_STEP_CASE,
  STORE_NSTMT
};

static const char *const store_sql[STORE_NSTMT] = {
    [STORE_BEGIN] = "BEGIN IMMEDIATE",
    [STORE_COMMIT] = "COMMIT",
    [STORE_ROLLBACK] = "ROLLBACK",
    [STORE_RUN] =
        "INSERT INTO runs(id, label, created_at) VALUES(?1, ?2, ?3) "
        "ON CONFLICT(id) DO UPDATE SET label = excluded.label "
        "WHERE excluded.label <> ''",
    [STORE_EPISODE] =
        "INSERT INTO episodes(id, run_id, task_id, task_version, seed, "
        "max_steps, created_at, workspace, env_version, code_hash) "
        "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)",
    [STORE_CLOSE] =
        "UPDATE episodes SET closed_at = ?2, close_reason = ?3 WHERE id = ?1 AND "
        "closed_at IS NULL",
    [STORE_BLOB] = "INSERT OR IGNORE INTO blobs(sha256, size, content) VALUES(?1, ?2, ?3)",
    [STORE_STEP] =
        "INSERT INTO steps(episode_id, step, created_at, status, reward, "
        "geomean_speedup, compile_log, runtime_log, message, wall_s, worker_id, "
        "device_name, result_pb, attempt) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14)",
    [STORE_STEP_FILE] =
        "INSERT OR REPLACE INTO step_files(episode_id, step, path, sha256) "
        "VALUES(?1,?2,?3,?4)",
    [STORE_STEP_COMPONENT] =
        "INSERT OR REPLACE INTO step_components(episode_id, step, key, "
        "value) VALUES(?1,?2,?3,?4)",
    [STORE_STEP_CASE] =
        "INSERT OR REPLACE INTO step_cases(episode_id, step, name, correct, "
        "max_abs_err, max_rel_err, baseline_ms, candidate_ms, speedup) "
        "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9)",
};

struct es_store {
  pthread_mutex_t mtx;
  sqlite3 *db;
  sqlite3_stmt *stmt[STORE_NSTMT];
};

static int store_fail(es_store *st, char *err, size_t errlen, const char *what) {
  int full = (sqlite3_extended_errcode(st->db) & 0xff) == SQLITE_FULL;
  return ka_seterr(err, errlen, KA_EIO, "trace store: %s: %s%s", what, sqlite3_errmsg(st->db),
                   full ? " (no space left on device)" : "");
}

/* Refuses, at open, a store that every write would fail on: a database sqlite opened
 * read-only (file or folder not writable) or one whose pages are damaged (PRAGMA
 * quick_check). Returns KA_OK or KA_EIO with the reason in err. */
static int store_check(es_store *st, const char *path, char *err, size_t errlen) {
  if (sqlite3_db_readonly(st->db, "main") == 1)
    return ka_seterr(err, errlen, KA_EIO,
                     "trace store %s is read-only (check the permissions of the file and its "
                     "folder); every Reset would fail",
                     path);
  sqlite3_stmt *q = NULL;
  int rc = KA_OK;
  if (sqlite3_prepare_v2(st->db, "PRAGMA quick_check", -1, &q, NULL) != SQLITE_OK)
    return ka_seterr(err, errlen, KA_EIO, "trace store %s: %s", path, sqlite3_errmsg(st->db));
  int step = sqlite3_step(q);
  if (step != SQLITE_ROW)
    rc = ka_seterr(err, errlen, KA_EIO, "trace store %s: integrity check: %s", path,
                   sqlite3_errmsg(st->db));
  else if (strcmp((const char *)sqlite3_column_text(q, 0), "ok"))
    rc = ka_seterr(err, errlen, KA_EIO,
                   "trace store %s is damaged (quick_check: %.200s); restore it from a backup "
                   "or move it away",
                   path, (const char *)sqlite3_column_text(q, 0));
  sqlite3_finalize(q);
  return rc;
}

/* Runs a prepared statement to completion and resets it. Returns SQLITE_DONE or the
 * error code. */
static int store_run(sqlite3_stmt *stmt) {
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
  }
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  return rc;
}

/* Binds a double; NaN (which sqlite would store as NULL anyway) is bound as NULL. */
static void store_real(sqlite3_stmt *s, int i, double v) {
  if (isnan(v))
    sqlite3_bind_null(s, i);
  else
    sqlite3_bind_double(s, i, v);
}

static void store_text(sqlite3_stmt *s, int i, const char *v) {
  sqlite3_bind_text(s, i, v ? v : "", -1, SQLITE_TRANSIENT);
}

int es_store_open(const char *path, es_store **out, char *err, size_t errlen) {
  *out = NULL;
  es_store *st = es_xcalloc(1, sizeof *st);
  pthread_mutex_init(&st->mtx, NULL);
  int rc = sqlite3_open_v2(
      path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
  if (rc != SQLITE_OK) {
    rc = ka_seterr(err, errlen, KA_EIO, "trace store %s: %s", path,
                   st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
    es_store_close(st);
    return rc;
  }
  sqlite3_busy_timeout(st->db, STORE_BUSY_MS);
  if ((rc = store_check(st, path, err, errlen)) != KA_OK) {
    es_store_close(st);
    return rc;
  }
  char *msg = NULL;
  static const char pragmas[] =
      "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;";
  if (sqlite3_exec(st->db, pragmas, NULL, NULL, &msg) != SQLITE_OK ||
      sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK) {
    rc = ka_seterr(err, errlen, KA_EIO, "trace store %s: %s", path, msg ? msg : "?");
    sqlite3_free(msg);
    es_store_close(st);
    return rc;
  }
  if (sqlite3_exec(st->db, store_schema, NULL, NULL, &msg) != SQLITE_OK) {
    rc = ka_seterr(err, errlen, KA_EIO, "trace store %s: schema: %s", path, msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    es_store_close(st);
    return rc;
  }
  /* schema_version holds one row; a database written by a newer schema is refused. */
  sqlite3_stmt *q = NULL;
  int have = -1;
  if (sqlite3_prepare_v2(st->db, "SELECT max(version) FROM schema_version", -1, &q, NULL) ==
          SQLITE_OK &&
      sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL)
    have = sqlite3_column_int(q, 0);
  sqlite3_finalize(q);
  rc = KA_OK;
  if (have > STORE_SCHEMA_VERSION) {
    rc = ka_seterr(err, errlen, KA_EIO,
                   "trace store %s: schema version %d is newer than this server's %d", path, have,
                   STORE_SCHEMA_VERSION);
  } else if (have == 1) {
    /* version 1 -> 2: the episode's close reason and the server that ran it */
    static const char mig[] =
        "ALTER TABLE episodes ADD COLUMN close_reason TEXT;"
        "ALTER TABLE episodes ADD COLUMN env_version TEXT NOT NULL DEFAULT '';"
        "ALTER TABLE episodes ADD COLUMN code_hash TEXT NOT NULL DEFAULT '';"
        "UPDATE episodes SET close_reason = 'closed' WHERE closed_at IS NOT NULL;"
        "UPDATE schema_version SET version = 2;";
    if (sqlite3_exec(st->db, mig, NULL, NULL, NULL) != SQLITE_OK)
      rc = store_fail(st, err, errlen, "migrate schema 1 -> 2");
  }
  if (rc == KA_OK && (have == 1 || have == 2)) {
    /* version 2 -> 3: the dispatch whose result a step recorded (re-dispatched: > 1) */
    static const char mig[] =
        "ALTER TABLE steps ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;"
        "UPDATE schema_version SET version = 3;";
    if (sqlite3_exec(st->db, mig, NULL, NULL, NULL) != SQLITE_OK)
      rc = store_fail(st, err, errlen, "migrate schema 2 -> 3");
  } else if (rc == KA_OK && have < 0) {
    char ins[96];
    snprintf(ins, sizeof ins, "INSERT INTO schema_version(version) VALUES(%d)",
             STORE_SCHEMA_VERSION);
    if (sqlite3_exec(st->db, ins, NULL, NULL, NULL) != SQLITE_OK)
      rc = store_fail(st, err, errlen, "schema_version");
  }
  if (rc == KA_OK && sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
    rc = store_fail(st, err, errlen, "commit schema");
  if (rc != KA_OK) {
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    es_store_close(st);
    return rc;
  }
  for (int i = 0; i < STORE_NSTMT; i++) {
    if (sqlite3_prepare_v3(st->db, store_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[i],
                           NULL) != SQLITE_OK) {
      rc = store_fail(st, err, errlen, store_sql[i]);
      es_store_close(st);
      return rc;
    }
  }
  *out = st;
  return KA_OK;
}

void es_store_close(es_store *st) {
  if (!st) return;
  pthread_mutex_lock(&st->mtx);
  for (int i = 0; i < STORE_NSTMT; i++) sqlite3_finalize(st->stmt[i]);
  if (st->db) sqlite3_close(st->db);
  st->db = NULL;
  pthread_mutex_unlock(&st->mtx);
  pthread_mutex_destroy(&st->mtx);
  free(st);
}

/* Ends the transaction opened with STORE_BEGIN: COMMIT when ok, else ROLLBACK. */
static int store_end(es_store *st, int ok, char *err, size_t errlen, const char *what) {
  if (ok) {
    if (store_run(st->stmt[STORE_COMMIT]) == SQLITE_DONE) return KA_OK;
    int rc = store_fail(st, err, errlen, what);
    store_run(st->stmt[STORE_ROLLBACK]);
    return rc;
  }
  int rc = store_fail(st, err, errlen, what);
  store_run(st->stmt[STORE_ROLLBACK]);
  return rc;
}

int es_store_add_episode(es_store *st, const es_episode_rec *rec, char *err, size_t errlen) {
  pthread_mutex_lock(&st->mtx);
  int ok = store_run(st->stmt[STORE_BEGIN]) == SQLITE_DONE;
  if (!ok) {
    int rc = store_fail(st, err, errlen, "begin");
    pthread_mutex_unlock(&st->mtx);
    return rc;
  }
  sqlite3_stmt *s = st->stmt[STORE_RUN];
  store_text(s, 1, rec->run_id);
  store_text(s, 2, rec->run_label);
  sqlite3_bind_double(s, 3, rec->created_at);
  ok = store_run(s) == SQLITE_DONE;
  if (ok) {
    s = st->stmt[STORE_EPISODE];
    store_text(s, 1, rec->id);
    store_text(s, 2, rec->run_id);
    store_text(s, 3, rec->task_id);
    store_text(s, 4, rec->task_version);
    sqlite3_bind_int64(s, 5, (sqlite3_int64)rec->seed);
    sqlite3_bind_int(s, 6, rec->max_steps);
    sqlite3_bind_double(s, 7, rec->created_at);
    store_text(s, 8, rec->workspace);
    store_text(s, 9, KA_VERSION);
    store_text(s, 10, KA_GIT_HASH);
    ok = store_run(s) == SQLITE_DONE;
  }
  int rc = store_end(st, ok, err, errlen, "add episode");
  pthread_mutex_unlock(&st->mtx);
  return rc;
}

int es_store_close_episode(es_store *st, const char *id, double closed_at, const char *reason,
                           char *err, size_t errlen) {
  pthread_mutex_lock(&st->mtx);
  sqlite3_stmt *s = st->stmt[STORE_CLOSE];
  store_text(s, 1, id);
  sqlite3_bind_double(s, 2, closed_at);
  store_text(s, 3, reason);
  int rc = store_run(s) == SQLITE_DONE ? KA_OK : store_fail(st, err, errlen, "close episode");
  pthread_mutex_unlock(&st->mtx);
  return rc;
}

/* Inserts the blob (if new) and the step_files row of one file. */
static int store_step_file(es_store *st, const es_step_rec *rec, const es_file *f) {
  char hex[65];
  ka_sha256_hex(f->data, f->len, hex);
  sqlite3_stmt *s = st->stmt[STORE_BLOB];
  store_text(s, 1, hex);
  sqlite3_bind_int64(s, 2, (sqlite3_int64)f->len);
  sqlite3_bind_blob64(s, 3, f->len ? (const void *)f->data : "", f->len, SQLITE_STATIC);
  if (store_run(s) != SQLITE_DONE) return 0;
  s = st->stmt[STORE_STEP_FILE];
  store_text(s, 1, rec->episode_id);
  sqlite3_bind_int(s, 2, rec->step);
  store_text(s, 3, f->path);
  store_text(s, 4, hex);
  return store_run(s) == SQLITE_DONE;
}

static int store_step_rows(es_store *st, const es_step_rec *rec) {
  const es_pb_result *r = rec->result;
  size_t pblen = protobuf_c_message_get_packed_size(&r->base);
  uint8_t *pb = es_xmalloc(pblen ? pblen : 1);
  protobuf_c_message_pack(&r->base, pb);
  sqlite3_stmt *s = st->stmt[STORE_STEP];
  store_text(s, 1, rec->episode_id);
  sqlite3_bind_int(s, 2, rec->step);
  sqlite3_bind_double(s, 3, rec->created_at);
  sqlite3_bind_int(s, 4, (int)r->status);
  store_real(s, 5, rec->reward->reward);
  store_real(s, 6, r->geomean_speedup);
  store_text(s, 7, r->compile_log);
  store_text(s, 8, r->runtime_log);
  store_text(s, 9, r->message);
  store_real(s, 10, r->wall_s);
  store_text(s, 11, rec->worker_id);
  store_text(s, 12, r->device ? r->device->name : "");
  sqlite3_bind_blob64(s, 13, pb, pblen, SQLITE_STATIC);
  sqlite3_bind_int(s, 14, rec->attempt > 0 ? rec->attempt : 1);
  int ok = store_run(s) == SQLITE_DONE;
  free(pb);
  for (int i = 0; ok && i < rec->files->n; i++) ok = store_step_file(st, rec, &rec->files->v[i]);
  for (int i = 0; ok && i < rec->reward->n; i++) {
    s = st->stmt[STORE_STEP_COMPONENT];
    store_text(s, 1, rec->episode_id);
    sqlite3_bind_int(s, 2, rec->step);
    store_text(s, 3, rec->reward->keys[i]);
    store_real(s, 4, rec->reward->values[i]);
    ok = store_run(s) == SQLITE_DONE;
  }
  for (size_t i = 0; ok && i < r->n_cases; i++) {
    const Kernelarena__V1__CaseResult *c = r->cases[i];
    s = st->stmt[STORE_STEP_CASE];
    store_text(s, 1, rec->episode_id);
    sqlite3_bind_int(s, 2, rec->step);
    store_text(s, 3, c->name);
    sqlite3_bind_int(s, 4, c->correct ? 1 : 0);
    store_real(s, 5, c->max_abs_err);
    store_real(s, 6, c->max_rel_err);
    store_real(s, 7, c->baseline_ms);
    store_real(s, 8, c->candidate_ms);
    store_real(s, 9, c->speedup);
    ok = store_run(s) == SQLITE_DONE;
  }
  return ok;
}

int es_store_add_step(es_store *st, const es_step_rec *rec, char *err, size_t errlen) {
  pthread_mutex_lock(&st->mtx);
  if (store_run(st->stmt[STORE_BEGIN]) != SQLITE_DONE) {
    int rc = store_fail(st, err, errlen, "begin");
    pthread_mutex_unlock(&st->mtx);
    return rc;
  }
  int ok = store_step_rows(st, rec);
  int rc = store_end(st, ok, err, errlen, "add step");
  pthread_mutex_unlock(&st->mtx);
  return rc;
}

/* ---- reading (GetEpisode, ListEpisodes, Evaluate of a recorded step) */

static void *store_arena_alloc(void *data, size_t n) {
  return es_arena_alloc(data, n);
}
static void store_arena_nofree(void *data, void *p) {}

/* A column's text copied into arena memory ("" for NULL). */
static char *store_col_text(es_arena *a, sqlite3_stmt *q, int i) {
  return es_arena_strdup(a, (const char *)sqlite3_column_text(q, i));
}

#define STORE_EPISODE_COLS                                                                \
  "SELECT e.id, e.run_id, e.task_id, e.task_version, e.seed, e.max_steps, e.created_at, " \
  "e.closed_at, e.close_reason, e.env_version, e.code_hash, r.label, "                    \
  "(SELECT count(*) FROM steps s WHERE s.episode_id = e.id), "                            \
  "(SELECT device_name FROM steps s WHERE s.episode_id = e.id ORDER BY step LIMIT 1), "   \
  "e.rowid FROM episodes e JOIN runs r ON r.id = e.run_id "

static Kernelarena__V1__EpisodeRecord *store_episode_row(es_arena *a, sqlite3_stmt *q) {
  Kernelarena__V1__EpisodeRecord *e = es_arena_alloc(a, sizeof *e);
  kernelarena__v1__episode_record__init(e);
  e->id = store_col_text(a, q, 0);
  e->run_id = store_col_text(a, q, 1);
  e->task_id = store_col_text(a, q, 2);
  e->task_version = store_col_text(a, q, 3);
  e->seed = (uint64_t)sqlite3_column_int64(q, 4);
  e->max_steps = sqlite3_column_int(q, 5);
  e->created_at = sqlite3_column_double(q, 6);
  e->closed_at = sqlite3_column_double(q, 7);
  e->close_reason = store_col_text(a, q, 8);
  e->env_version = store_col_text(a, q, 9);
  e->code_hash = store_col_text(a, q, 10);
  e->run_label = store_col_text(a, q, 11);
  e->steps = sqlite3_column_int(q, 12);
  e->device_name = store_col_text(a, q, 13);
  return e;
}

/* The files of one step into arena File messages. Returns 1 on success. */
static int store_read_files(es_store *st, const char *id, int step, es_arena *a,
                            Kernelarena__V1__File ***out, size_t *n) {
  sqlite3_stmt *q = NULL;
  if (sqlite3_prepare_v2(st->db,
                         "SELECT f.path, b.content FROM step_files f JOIN blobs b ON "
                         "b.sha256 = f.sha256 WHERE f.episode_id = ?1 AND f.step = ?2 "
                         "ORDER BY f.path",
                         -1, &q, NULL) != SQLITE_OK)
    return 0;
  store_text(q, 1, id);
  sqlite3_bind_int(q, 2, step);
  size_t cap = 4;
  *n = 0;
  *out = es_arena_alloc(a, sizeof **out * cap);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    if (*n == cap) {
      Kernelarena__V1__File **v = es_arena_alloc(a, sizeof *v * cap * 2);
      memcpy(v, *out, sizeof *v * cap);
      *out = v;
      cap *= 2;
    }
    Kernelarena__V1__File *f = es_arena_alloc(a, sizeof *f);
    kernelarena__v1__file__init(f);
    f->path = store_col_text(a, q, 0);
    f->content.len = (size_t)sqlite3_column_bytes(q, 1);
    f->content.data = es_arena_memdup(a, sqlite3_column_blob(q, 1), f->content.len);
    (*out)[(*n)++] = f;
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE;
}

static int store_read_steps(es_store *st, Kernelarena__V1__EpisodeRecord *e, int omit_files,
                            es_arena *a) {
  sqlite3_stmt *q = NULL, *qc = NULL;
  int ok = sqlite3_prepare_v2(st->db,
                              "SELECT step, created_at, status, reward, geomean_speedup, "
                              "compile_log, runtime_log, message, wall_s, worker_id, "
                              "device_name, result_pb FROM steps WHERE episode_id = ?1 "
                              "ORDER BY step",
                              -1, &q, NULL) == SQLITE_OK &&
           sqlite3_prepare_v2(st->db,
                              "SELECT key, value FROM step_components WHERE episode_id = ?1 "
                              "AND step = ?2 ORDER BY key",
                              -1, &qc, NULL) == SQLITE_OK;
  ProtobufCAllocator al = {store_arena_alloc, store_arena_nofree, a};
  e->step_records = es_arena_alloc(a, sizeof *e->step_records * (size_t)(e->steps + 1));
  if (ok) store_text(q, 1, e->id);
  while (ok && sqlite3_step(q) == SQLITE_ROW && e->n_step_records < (size_t)e->steps) {
    Kernelarena__V1__StepRecord *r = es_arena_alloc(a, sizeof *r);
    kernelarena__v1__step_record__init(r);
    r->step = sqlite3_column_int(q, 0);
    r->created_at = sqlite3_column_double(q, 1);
    r->status = sqlite3_column_int(q, 2);
    r->reward = sqlite3_column_type(q, 3) == SQLITE_NULL ? NAN : sqlite3_column_double(q, 3);
    r->geomean_speedup = sqlite3_column_double(q, 4);
    r->compile_log = store_col_text(a, q, 5);
    r->runtime_log = store_col_text(a, q, 6);
    r->message = store_col_text(a, q, 7);
    r->wall_s = sqlite3_column_double(q, 8);
    r->worker_id = store_col_text(a, q, 9);
    r->device_name = store_col_text(a, q, 10);
    r->terminated = 0;
    r->truncated = r->step >= e->max_steps;
    es_pb_result *res = kernelarena__v1__result__unpack(&al, (size_t)sqlite3_column_bytes(q, 11),
                                                        sqlite3_column_blob(q, 11));
    if (res) {
      r->compile_s = res->compile_s;
      r->cases = es_arena_alloc(a, sizeof *r->cases * (res->n_cases + 1));
      for (size_t i = 0; i < res->n_cases; i++)
        if (!res->cases[i]->held_out) r->cases[r->n_cases++] = res->cases[i];
    }
    sqlite3_reset(qc);
    store_text(qc, 1, e->id);
    sqlite3_bind_int(qc, 2, r->step);
    size_t cap = 8;
    r->reward_components = es_arena_alloc(a, sizeof *r->reward_components * cap);
    while (sqlite3_step(qc) == SQLITE_ROW) {
      if (r->n_reward_components == cap) {
        void *v = es_arena_alloc(a, sizeof *r->reward_components * cap * 2);
        memcpy(v, r->reward_components, sizeof *r->reward_components * cap);
        r->reward_components = v;
        cap *= 2;
      }
      Kernelarena__V1__StepRecord__RewardComponentsEntry *c = es_arena_alloc(a, sizeof *c);
      kernelarena__v1__step_record__reward_components_entry__init(c);
      c->key = store_col_text(a, qc, 0);
      c->value = sqlite3_column_double(qc, 1);
      r->reward_components[r->n_reward_components++] = c;
    }
    if (!omit_files) ok = store_read_files(st, e->id, r->step, a, &r->files, &r->n_files);
    e->step_records[e->n_step_records++] = r;
  }
  sqlite3_finalize(q);
  sqlite3_finalize(qc);
  return ok;
}

int es_store_get_episode(es_store *st, const char *id, int with_steps, int omit_files, es_arena *a,
                         Kernelarena__V1__EpisodeRecord **out, char *err, size_t errlen) {
  *out = NULL;
  pthread_mutex_lock(&st->mtx);
  sqlite3_stmt *q = NULL;
  int rc = KA_OK;
  if (sqlite3_prepare_v2(st->db, STORE_EPISODE_COLS "WHERE e.id = ?1", -1, &q, NULL) != SQLITE_OK) {
    rc = store_fail(st, err, errlen, "get episode");
  } else {
    store_text(q, 1, id);
    int r = sqlite3_step(q);
    if (r == SQLITE_ROW)
      *out = store_episode_row(a, q);
    else if (r == SQLITE_DONE)
      rc = KA_ENOENT;
    else
      rc = store_fail(st, err, errlen, "get episode");
  }
  sqlite3_finalize(q);
  if (rc == KA_OK && with_steps && !store_read_steps(st, *out, omit_files, a))
    rc = store_fail(st, err, errlen, "read steps");
  pthread_mutex_unlock(&st->mtx);
  return rc;
}

int es_store_list_episodes(es_store *st, const char *run_id, const char *task_id, int limit,
                           const char *page_token, es_arena *a,
                           Kernelarena__V1__EpisodeRecord ***out, size_t *n, char **next, char *err,
                           size_t errlen) {
  *out = NULL;
  *n = 0;
  *next = "";
  long long after = 0;
  if (page_token && *page_token) {
    char *end;
    after = strtoll(page_token, &end, 10);
    if (*end || after < 0) return ka_seterr(err, errlen, KA_EINVAL, "bad page_token");
  }
  pthread_mutex_lock(&st->mtx);
  sqlite3_stmt *q = NULL;
  int rc = KA_OK;
  if (sqlite3_prepare_v2(st->db,
                         STORE_EPISODE_COLS
                         "WHERE (?1 = '' OR e.run_id = ?1) AND (?2 = '' OR e.task_id = ?2) "
                         "AND e.rowid > ?3 ORDER BY e.rowid LIMIT ?4",
                         -1, &q, NULL) != SQLITE_OK) {
    rc = store_fail(st, err, errlen, "list episodes");
  } else {
    store_text(q, 1, run_id);
    store_text(q, 2, task_id);
    sqlite3_bind_int64(q, 3, after);
    sqlite3_bind_int(q, 4, limit + 1);
    *out = es_arena_alloc(a, sizeof **out * (size_t)(limit + 1));
    int r;
    long long last = 0;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
      if (*n == (size_t)limit) {
        *next = es_arena_printf(a, "%lld", last);
        break;
      }
      (*out)[(*n)++] = store_episode_row(a, q);
      last = sqlite3_column_int64(q, 14);
    }
    if (r != SQLITE_ROW && r != SQLITE_DONE) rc = store_fail(st, err, errlen, "list episodes");
  }
  sqlite3_finalize(q);
  pthread_mutex_unlock(&st->mtx);
  return rc;
}

int es_store_step_files(es_store *st, const char *episode_id, int step, es_fileset *files,
                        int *step_out, char *err, size_t errlen) {
  pthread_mutex_lock(&st->mtx);
  sqlite3_stmt *q = NULL;
  int rc = KA_OK;
  if (step == 0) {
    if (sqlite3_prepare_v2(st->db, "SELECT max(step) FROM steps WHERE episode_id = ?1", -1, &q,
                           NULL) != SQLITE_OK) {
      rc = store_fail(st, err, errlen, "last step");
    } else {
      store_text(q, 1, episode_id);
      if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL)
        step = sqlite3_column_int(q, 0);
      else
        rc = KA_ENOENT;
    }
    sqlite3_finalize(q);
    q = NULL;
  }
  if (rc == KA_OK &&
      sqlite3_prepare_v2(st->db,
                         "SELECT f.path, b.content FROM step_files f JOIN blobs b ON b.sha256 = "
                         "f.sha256 WHERE f.episode_id = ?1 AND f.step = ?2 ORDER BY f.path",
                         -1, &q, NULL) != SQLITE_OK)
    rc = store_fail(st, err, errlen, "step files");
  if (rc == KA_OK) {
    store_text(q, 1, episode_id);
    sqlite3_bind_int(q, 2, step);
    int r;
    while ((r = sqlite3_step(q)) == SQLITE_ROW)
      es_fileset_put(files, (const char *)sqlite3_column_text(q, 0), sqlite3_column_blob(q, 1),
                     (size_t)sqlite3_column_bytes(q, 1));
    if (r != SQLITE_DONE)
      rc = store_fail(st, err, errlen, "step files");
    else if (!files->n)
      rc = KA_ENOENT;
  }
  sqlite3_finalize(q);
  pthread_mutex_unlock(&st->mtx);
  if (rc != KA_OK) es_fileset_free(files);
  *step_out = step;
  return rc;
}
