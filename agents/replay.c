/* The replay adapter: the steps of a recorded episode submitted again, no CLI
 * (docs/agents.md). A recording is a JSONL file (an `envctl export` episode line with
 * "steps"; or one object per line with "files": {path: content} or [{path, content}];
 * lines without files are skipped) or a folder of step folders (an episode folder of a
 * run: steps/<n>/; or <dir>/<n>/). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mbedtls/base64.h>

#include "agents.h"
#include "ka_common.h"

static int replay_check(const json_t *cfg, char *err, size_t errlen) {
  struct stat st;
  const char *src = ka_cfg_str(cfg, "replay", NULL);
  if (!src || !*src) return ka_seterr(err, errlen, KA_EINVAL, "adapter replay needs replay: PATH");
  if (stat(src, &st) != 0) return ka_seterr(err, errlen, KA_ENOENT, "replay %s: no such path", src);
  if (S_ISDIR(st.st_mode)) {
    char a[PATH_MAX + 16], b[PATH_MAX + 16];
    snprintf(a, sizeof a, "%s/steps/1", src);
    snprintf(b, sizeof b, "%s/1", src);
    if (stat(a, &st) != 0 && stat(b, &st) != 0)
      return ka_seterr(err, errlen, KA_ENOENT,
                       "replay %s: no recorded steps (neither steps/1/ nor 1/ there)", src);
  } else if (access(src, R_OK) != 0) {
    return ka_seterr(err, errlen, KA_ENOENT, "replay %s: %s", src, strerror(errno));
  }
  return KA_OK;
}

/* 1 if v is a file's content as `envctl export` writes it: a string (UTF-8 text), or
 * {"base64": "..."} (any other bytes). */
static int replay_is_content(const json_t *v) {
  return json_is_string(v) || json_is_string(json_object_get(v, "base64"));
}

/* {path: content} from "files" given as an object or as [{path, content}]; contents
 * that are neither a string nor a base64 object are left out. */
static json_t *replay_files(const json_t *fl) {
  json_t *files = json_object();
  if (json_is_object(fl)) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)fl, k, v) if (replay_is_content(v)) json_object_set(files, k, v);
  } else if (json_is_array(fl)) {
    size_t i;
    json_t *v;
    json_array_foreach(fl, i, v) {
      const char *p = json_string_value(json_object_get(v, "path"));
      json_t *c = json_object_get(v, "content");
      if (p && replay_is_content(c)) json_object_set(files, p, c);
    }
  }
  return files;
}

/* Content of a file as replay_is_content accepts it: text as it is, bytes that are not
 * UTF-8 (or hold NUL) as {"base64": ...} (RFC 4648, mbedtls). NULL when out of memory. */
static json_t *replay_content_new(const char *buf, size_t len) {
  if (!memchr(buf, 0, len)) {
    json_t *s = json_stringn(buf, len); /* NULL if not UTF-8 */
    if (s) return s;
  }
  size_t n = (len + 2) / 3 * 4 + 1, olen = 0;
  unsigned char *o = malloc(n);
  json_t *r = o && mbedtls_base64_encode(o, n, &olen, (const unsigned char *)buf, len) == 0
                  ? json_pack("{s:s}", "base64", (const char *)o)
                  : NULL;
  free(o);
  return r;
}

/* Writes content v (replay_is_content) to path f (a write that fails leaves the file
 * out, as for text). KA_OK, KA_EINVAL (base64 that does not decode: the reason in err) or
 * KA_ENOMEM. */
static int replay_write(const char *f, const json_t *v, char *err, size_t errlen) {
  if (json_is_string(v)) {
    ka_write_file(f, json_string_value(v), json_string_length(v));
    return KA_OK;
  }
  const json_t *b = json_object_get(v, "base64");
  const unsigned char *src = (const unsigned char *)json_string_value(b);
  size_t slen = json_string_length(b), olen = 0;
  unsigned char *o = malloc(slen / 4 * 3 + 3);
  if (!o) return KA_ENOMEM;
  int rc = mbedtls_base64_decode(o, slen / 4 * 3 + 3, &olen, src, slen) == 0 ? KA_OK : KA_EINVAL;
  if (rc == KA_OK)
    ka_write_file(f, (const char *)o, olen);
  else
    ka_seterr(err, errlen, KA_EINVAL, "replay: the base64 content of %s does not decode", f);
  free(o);
  return rc;
}

/* The steps of a folder of step folders: {path: content} of the editable files found
 * in each of base/1, base/2, ... (base: src/steps, else src). */
static void replay_read_dir(const char *src, char *const *names, int nnames, json_t *steps) {
  struct stat st;
  char base[PATH_MAX];
  snprintf(base, sizeof base, "%s/steps", src);
  if (stat(base, &st) != 0 || !S_ISDIR(st.st_mode)) snprintf(base, sizeof base, "%s", src);
  for (int n = 1; n <= 1000; n++) {
    char d[PATH_MAX + 16];
    snprintf(d, sizeof d, "%s/%d", base, n);
    if (stat(d, &st) != 0) break;
    json_t *files = json_object();
    for (int i = 0; i < nnames; i++) {
      char f[PATH_MAX * 2];
      snprintf(f, sizeof f, "%s/%s", d, names[i]);
      char *buf;
      size_t len;
      if (ka_read_file(f, 0, &buf, &len) == KA_OK) {
        json_t *c = replay_content_new(buf, len);
        if (c) json_object_set_new(files, names[i], c);
        free(buf);
      }
    }
    json_array_append_new(steps, files);
  }
}

/* Appends to steps the {path: content} of fl when it holds any file. */
static void replay_add(json_t *steps, const json_t *fl) {
  json_t *files = replay_files(fl);
  if (json_object_size(files))
    json_array_append_new(steps, files);
  else
    json_decref(files);
}

/* The steps of a JSONL recording. */
static void replay_read_jsonl(const json_t *cfg, const char *src, json_t *steps) {
  FILE *f = fopen(src, "r");
  int taken = 0;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  const char *want = ka_cfg_str(cfg, "replay_episode", NULL);
  while (f && (n = getline(&line, &cap, f)) > 0) {
    json_error_t je;
    json_t *o = json_loadb(line, (size_t)n, 0, &je);
    /* an episode line of `envctl export` ({"id", "steps": [{"files"}...]}): its steps,
     * if it is the episode asked for (replay_episode) or the first one */
    json_t *eps = json_object_get(o, "steps");
    const char *id = json_string_value(json_object_get(o, "id"));
    size_t k;
    json_t *sv;
    if (json_is_array(eps) && !taken && (!want || (id && !strcmp(want, id)))) {
      json_array_foreach(eps, k, sv) replay_add(steps, json_object_get(sv, "files"));
      taken = 1;
    }
    replay_add(steps, json_object_get(o, "files"));
    json_decref(o);
  }
  free(line);
  if (f) fclose(f);
}

/* Each recorded step is written into the workspace and submitted like `envctl step`. */
static int replay_play(const json_t *cfg, const char *workspace, char *const *names, int nnames,
                       ka_agent_submit_fn submit, void *sctx, volatile sig_atomic_t *interrupted,
                       char *err, size_t errlen) {
  const char *src = ka_cfg_str(cfg, "replay", NULL);
  if (!src) return ka_seterr(err, errlen, KA_EINVAL, "adapter replay needs replay: PATH");
  struct stat st;
  if (stat(src, &st) != 0) return ka_seterr(err, errlen, KA_ENOENT, "replay %s: no such path", src);
  json_t *steps = json_array(); /* of {path: content} objects */
  if (S_ISDIR(st.st_mode))
    replay_read_dir(src, names, nnames, steps);
  else
    replay_read_jsonl(cfg, src, steps);
  if (json_array_size(steps) == 0) {
    json_decref(steps);
    return ka_seterr(err, errlen, KA_EINVAL, "replay %s: no recorded steps with files", src);
  }
  size_t i;
  json_t *files;
  int rc = KA_OK;
  json_array_foreach(steps, i, files) {
    const char *k;
    json_t *v;
    json_object_foreach(files, k, v) {
      char f[PATH_MAX * 2];
      if (!ka_path_is_safe(k)) continue;
      snprintf(f, sizeof f, "%s/%s", workspace, k);
      if ((rc = replay_write(f, v, err, errlen)) != KA_OK) break;
    }
    if (rc) break;
    int done = 0;
    if ((rc = submit(sctx, &done, err, errlen))) break;
    if (done || (interrupted && *interrupted)) break;
  }
  json_decref(steps);
  return rc;
}

const ka_adapter_ops ka_adapter_replay = {
    .name = "replay", .check = replay_check, .play = replay_play, .final_eval = 0};
