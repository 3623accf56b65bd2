/* envserver's leaf utilities (base.h): allocators, arenas, Device copies, file sets,
 * protobuf encoding, random bytes. */
#include <errno.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base.h"
#include "ka_common.h"
#include "task.h"

/* ---- memory */

static void srv_oom(size_t n) {
  fprintf(stderr, "envserver: out of memory allocating %zu bytes\n", n);
  abort();
}

void *es_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) srv_oom(n);
  return p;
}

void *es_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) srv_oom(n * size);
  return p;
}

void *es_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) srv_oom(n);
  return q;
}

char *es_xstrdup(const char *s) {
  size_t n = strlen(s ? s : "") + 1;
  char *d = es_xmalloc(n);
  memcpy(d, s ? s : "", n);
  return d;
}

struct es_arena_blk {
  struct es_arena_blk *next;
  size_t used, cap;
  alignas(max_align_t) unsigned char data[];
};

void *es_arena_alloc(es_arena *a, size_t n) {
  const size_t al = alignof(max_align_t);
  n = (n + al - 1) / al * al;
  if (!n) n = al;
  struct es_arena_blk *b = a->head;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > 60000 ? n : 60000;
    b = es_xmalloc(sizeof *b + cap);
    b->cap = cap;
    b->used = 0;
    b->next = a->head;
    a->head = b;
  }
  void *p = b->data + b->used;
  b->used += n;
  memset(p, 0, n);
  return p;
}

void *es_arena_memdup(es_arena *a, const void *p, size_t n) {
  void *d = es_arena_alloc(a, n);
  if (n) memcpy(d, p, n);
  return d;
}

char *es_arena_strdup(es_arena *a, const char *s) {
  if (!s) s = "";
  return es_arena_memdup(a, s, strlen(s) + 1);
}

const char *es_arena_quote(es_arena *a, const char *s) {
  size_t n = strlen(s);
  int cut = n > 80;
  if (cut) n = 80;
  char *q = es_arena_alloc(a, n + 4); /* zeroed: NUL-terminated */
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    q[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  if (cut) memcpy(q + n, "...", 3);
  return q;
}

const char *es_skip_why(es_arena *a, const struct ka_registry *reg, const char *id) {
  const char *why = ka_registry_skipped(reg, id);
  return why ? es_arena_printf(a, ": it was skipped at load: %s", why) : "";
}

char *es_arena_printf(es_arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return es_arena_strdup(a, "");
  char *s = es_arena_alloc(a, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

void es_arena_free(es_arena *a) {
  while (a->head) {
    struct es_arena_blk *b = a->head;
    a->head = b->next;
    free(b);
  }
}

void es_reply_error(es_arena *a, es_pb_response *resp, Kernelarena__V1__ErrorCode code,
                    int retryable, const char *fmt, ...) {
  Kernelarena__V1__Error *e = es_arena_alloc(a, sizeof *e);
  kernelarena__v1__error__init(e);
  e->code = code;
  e->retryable = retryable != 0;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  e->message = es_arena_alloc(a, n > 0 ? (size_t)n + 1 : 1);
  if (n > 0) {
    va_start(ap, fmt);
    vsnprintf(e->message, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  resp->body_case = KERNELARENA__V1__RESPONSE__BODY_ERROR;
  resp->error = e;
}

es_pb_device *es_device_dup(const es_pb_device *d) {
  if (!d) return NULL;
  size_t n = kernelarena__v1__device__get_packed_size(d);
  uint8_t *buf = es_xmalloc(n);
  kernelarena__v1__device__pack(d, buf);
  es_pb_device *c = kernelarena__v1__device__unpack(NULL, n, buf);
  free(buf);
  if (!c) srv_oom(n); /* it was just packed: only allocation can fail */
  return c;
}

void es_device_free(es_pb_device *d) {
  if (d) kernelarena__v1__device__free_unpacked(d, NULL);
}

es_pb_device *es_device_to_arena(es_arena *a, const es_pb_device *d) {
  es_pb_device *c = es_arena_memdup(a, d, sizeof *d);
  c->backend = es_arena_strdup(a, d->backend);
  c->name = es_arena_strdup(a, d->name);
  c->arch = es_arena_strdup(a, d->arch);
  c->driver = es_arena_strdup(a, d->driver);
  /* repeated fields: their arrays too (Device.languages), not d's pointers */
  c->languages = NULL;
  c->n_languages = 0;
  if (d->n_languages) {
    c->languages = es_arena_alloc(a, sizeof *c->languages * d->n_languages);
    for (size_t i = 0; i < d->n_languages; i++)
      c->languages[c->n_languages++] = es_arena_strdup(a, d->languages[i]);
  }
  /* unknown fields are not copied: the pointer would dangle once d is freed */
  c->base.n_unknown_fields = 0;
  c->base.unknown_fields = NULL;
  return c;
}

/* ---- map entries */

/* A new entry message of d with its key copied in; *value receives the address of its
 * value field. */
static ProtobufCMessage *base_entry(es_arena *a, const ProtobufCMessageDescriptor *d, const char *k,
                                    void **value) {
  ProtobufCMessage *m = es_arena_alloc(a, d->sizeof_message);
  protobuf_c_message_init(d, m);
  const ProtobufCFieldDescriptor *fk = protobuf_c_message_descriptor_get_field_by_name(d, "key");
  const ProtobufCFieldDescriptor *fv = protobuf_c_message_descriptor_get_field_by_name(d, "value");
  *(char **)((char *)m + fk->offset) = es_arena_strdup(a, k);
  *value = (char *)m + fv->offset;
  return m;
}

void *es_pb_entry_str(es_arena *a, const ProtobufCMessageDescriptor *d, const char *k,
                      const char *v) {
  void *value;
  ProtobufCMessage *m = base_entry(a, d, k, &value);
  *(char **)value = es_arena_strdup(a, v);
  return m;
}

void *es_pb_entry_num(es_arena *a, const ProtobufCMessageDescriptor *d, const char *k, double v) {
  void *value;
  ProtobufCMessage *m = base_entry(a, d, k, &value);
  *(double *)value = v;
  return m;
}

/* ---- file sets */

int es_fileset_find(const es_fileset *fs, const char *path) {
  for (int i = 0; i < fs->n; i++)
    if (!strcmp(fs->v[i].path, path)) return i;
  return -1;
}

void es_fileset_put(es_fileset *fs, const char *path, const void *data, size_t len) {
  int i = es_fileset_find(fs, path);
  if (i < 0) {
    fs->v = es_xrealloc(fs->v, sizeof *fs->v * (size_t)(fs->n + 1));
    i = fs->n++;
    fs->v[i].path = es_xstrdup(path);
  } else {
    free(fs->v[i].data);
  }
  fs->v[i].data = es_xmalloc(len ? len : 1);
  if (len) memcpy(fs->v[i].data, data, len);
  fs->v[i].len = len;
}

void es_fileset_copy(es_fileset *dst, const es_fileset *src) {
  for (int i = 0; i < src->n; i++)
    es_fileset_put(dst, src->v[i].path, src->v[i].data, src->v[i].len);
}

void es_fileset_free(es_fileset *fs) {
  for (int i = 0; i < fs->n; i++) free(fs->v[i].path), free(fs->v[i].data);
  free(fs->v);
  fs->v = NULL;
  fs->n = 0;
}

size_t es_fileset_bytes(const es_fileset *fs) {
  size_t n = 0;
  for (int i = 0; i < fs->n; i++) n += fs->v[i].len;
  return n;
}

Kernelarena__V1__File **es_fileset_to_pb(es_arena *a, const es_fileset *fs, size_t *n) {
  Kernelarena__V1__File **v = es_arena_alloc(a, sizeof *v * (size_t)(fs->n + 1));
  for (int i = 0; i < fs->n; i++) {
    Kernelarena__V1__File *f = es_arena_alloc(a, sizeof *f);
    kernelarena__v1__file__init(f);
    f->path = es_arena_strdup(a, fs->v[i].path);
    f->content.data = es_arena_memdup(a, fs->v[i].data, fs->v[i].len);
    f->content.len = fs->v[i].len;
    v[i] = f;
  }
  *n = (size_t)fs->n;
  return v;
}

/* ---- small utilities */

nng_msg *es_encode(const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  nng_msg *msg;
  if (nng_msg_alloc(&msg, n) != 0) srv_oom(n);
  protobuf_c_message_pack(m, nng_msg_body(msg));
  return msg;
}

int es_random(void *buf, size_t n) {
  unsigned char *p = buf;
  while (n) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return KA_ESYS;
    p += r;
    n -= (size_t)r;
  }
  return KA_OK;
}
