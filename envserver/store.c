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

#define STORE_SCHEMA_VERSION 1
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
    "  workspace TEXT NOT NULL);\n"
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
        "max_steps, created_at, workspace) VALUES(?1,?2,?3,?4,?5,?6,?7,?8)",
    [STORE_CLOSE] = "UPDATE episodes SET closed_at = ?2 WHERE id = ?1 AND closed_at IS NULL",
    [STORE_BLOB] = "INSERT OR IGNORE INTO blobs(sha256, size, content) VALUES(?1, ?2, ?3)",
    [STORE_STEP] =
        "INSERT INTO steps(episode_id, step, created_at, status, reward, "
        "geomean_speedup, compile_log, runtime_log, message, wall_s, worker_id, "
        "device_name, result_pb) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
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
  return ka_seterr(err, errlen, KA_EIO, "trace store: %s: %s", what, sqlite3_errmsg(st->db));
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
  } else if (have < 0) {
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
    ok = store_run(s) == SQLITE_DONE;
  }
  int rc = store_end(st, ok, err, errlen, "add episode");
  pthread_mutex_unlock(&st->mtx);
  return rc;
}

int es_store_close_episode(es_store *st, const char *id, double closed_at, char *err,
                           size_t errlen) {
  pthread_mutex_lock(&st->mtx);
  sqlite3_stmt *s = st->stmt[STORE_CLOSE];
  store_text(s, 1, id);
  sqlite3_bind_double(s, 2, closed_at);
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
