/* envserver's leaf utilities, used by every other envserver file: allocators that
 * abort on failure, arenas for building responses, Device copies, file sets, protobuf
 * encoding and random bytes. Includes nothing else of envserver (envserver.h includes
 * it), so that nothing here can call back into the server. */
#ifndef KA_ENVSERVER_BASE_H
#define KA_ENVSERVER_BASE_H

#include <nng/nng.h>
#include <stddef.h>
#include <stdint.h>

#include "kernelarena.pb-c.h"

typedef Kernelarena__V1__Device es_pb_device;
typedef Kernelarena__V1__Result es_pb_result;
typedef Kernelarena__V1__Response es_pb_response;

/* ---- memory */

/* malloc/calloc/realloc/strdup that abort the process on allocation failure. */
void *es_xmalloc(size_t n);
void *es_xcalloc(size_t n, size_t size);
void *es_xrealloc(void *p, size_t n);
char *es_xstrdup(const char *s);

/* A bump allocator for building one response: everything a response points to is
 * taken from its arena and released at once with es_arena_free after encoding.
 * Zero-initialise. Not thread-safe (one arena per request). */
typedef struct es_arena {
  struct es_arena_blk *head;
} es_arena;
/* Returns n zeroed bytes, aligned for any type. Never NULL. */
void *es_arena_alloc(es_arena *a, size_t n);
/* Copies s (NULL gives ""). */
char *es_arena_strdup(es_arena *a, const char *s);
char *es_arena_printf(es_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copies n bytes. */
void *es_arena_memdup(es_arena *a, const void *p, size_t n);
/* A client-supplied string made safe to quote in a message: at most 80 bytes (then
 * "..."), control bytes replaced by '?'. */
const char *es_arena_quote(es_arena *a, const char *s);
struct ka_registry;
/* The tail of an "unknown task 'ID'" message: ": it was skipped at load: WHY" when the
 * task folder of id was skipped when reg was loaded (common/task.h, ka_registry_skipped),
 * else "". Lives in a (or is a literal); never NULL. */
const char *es_skip_why(es_arena *a, const struct ka_registry *reg, const char *id);
void es_arena_free(es_arena *a);

/* Fills resp (request_id already set by the caller) with Error{code, message,
 * retryable}; the error and its text live in a. */
void es_reply_error(es_arena *a, es_pb_response *resp, Kernelarena__V1__ErrorCode code,
                    int retryable, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Deep copy of a Device (NULL gives NULL); free with es_device_free. */
es_pb_device *es_device_dup(const es_pb_device *d);
void es_device_free(es_pb_device *d);
/* Copies a Device into arena memory (for a response). */
es_pb_device *es_device_to_arena(es_arena *a, const es_pb_device *d);

/* ---- file sets: the editable files of a workspace, or of a step */

typedef struct es_file {
  char *path;
  uint8_t *data;
  size_t len;
} es_file;

typedef struct es_fileset {
  es_file *v;
  int n;
} es_fileset;

/* Adds path or replaces its contents with a copy of data[0..len). */
void es_fileset_put(es_fileset *fs, const char *path, const void *data, size_t len);
/* Index of path, or -1. */
int es_fileset_find(const es_fileset *fs, const char *path);
/* Deep copy of src into *dst (dst must be empty). */
void es_fileset_copy(es_fileset *dst, const es_fileset *src);
/* Frees every file; fs becomes empty. */
void es_fileset_free(es_fileset *fs);
/* Sum of the file sizes, bytes. */
size_t es_fileset_bytes(const es_fileset *fs);
/* Builds File messages for fs in arena memory (paths and bytes copied). Returns the
 * array; *n receives its length. */
Kernelarena__V1__File **es_fileset_to_pb(es_arena *a, const es_fileset *fs, size_t *n);

/* ---- map entries: the one copy of a key and its value into a map<string, ...> entry
 * message of the protocol (protobuf-c gives each map its own entry type, all with fields
 * key and value) */

/* A new entry message of descriptor d (fields key and value: string and string) in
 * arena memory, holding copies of k and v (NULL gives ""). Never NULL. */
void *es_pb_entry_str(es_arena *a, const ProtobufCMessageDescriptor *d, const char *k,
                      const char *v);
/* The same for a map<string, double> entry (value a double). */
void *es_pb_entry_num(es_arena *a, const ProtobufCMessageDescriptor *d, const char *k, double v);

/* ---- encoding, randomness */

/* Encodes a protobuf message into a new nng message; the caller owns the result.
 * Never NULL (allocation failure is fatal, as for es_xmalloc). */
nng_msg *es_encode(const ProtobufCMessage *m);

/* Fills buf with n random bytes from getrandom(2). Returns KA_OK or KA_ESYS. */
int es_random(void *buf, size_t n);

#endif
