/* kernelarena common definitions: the one error enum, small utilities.
 *
 * Every kernelarena function that can fail returns an int: KA_OK (0) on success or a
 * negative ka_err code. Long diagnostics (parser messages, compiler logs, sqlite
 * messages) go out of band into a caller-supplied buffer, never into the return code.
 * Thread safety: all functions here are reentrant unless stated otherwise. */
#ifndef KA_COMMON_H
#define KA_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define KA_VERSION "0.1.0"
#define KA_PROTOCOL_VERSION "kernelarena.v1"

/* X-macro: name, value, text. Codes are negative so that they never collide with
 * sizes or counts returned on success. */
#define KA_ERR_MAP(X)                        \
  X(KA_OK, 0, "success")                     \
  X(KA_EINVAL, -1, "invalid argument")       \
  X(KA_ENOENT, -2, "not found")              \
  X(KA_ENOMEM, -3, "out of memory")          \
  X(KA_EIO, -4, "input/output error")        \
  X(KA_EPARSE, -5, "parse error")            \
  X(KA_ERANGE, -6, "value out of range")     \
  X(KA_ESTATE, -7, "invalid state")          \
  X(KA_ETIMEDOUT, -8, "timed out")           \
  X(KA_EUNAVAIL, -9, "unavailable")          \
  X(KA_ECOMPILE, -10, "compilation failed")  \
  X(KA_ELAUNCH, -11, "kernel launch failed") \
  X(KA_EDEVICE, -12, "device error")         \
  X(KA_ESYS, -13, "system call failed")      \
  X(KA_EINTERNAL, -14, "internal error")     \
  X(KA_ETOOBIG, -15, "too large")            \
  X(KA_EOOM, -16, "device out of memory")

typedef enum ka_err {
#define KA_ERR_ENUM(name, val, text) name = val,
  KA_ERR_MAP(KA_ERR_ENUM)
#undef KA_ERR_ENUM
} ka_err;

/* Returns a static text for a ka_err code (never NULL; unknown codes give
 * "unknown error"). */
const char *ka_strerror(int err);

/* Writes a formatted message into err[0..errlen) if err is non-NULL. Returns code so
 * that callers can write `return ka_seterr(err, errlen, KA_EINVAL, "...")`. */
int ka_seterr(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads a whole file into a NUL-terminated malloc'd buffer. Fails with KA_ETOOBIG if
 * the file exceeds max_bytes (0: no limit), KA_ENOENT/KA_EIO otherwise. The caller
 * owns *out on success; *len (may be NULL) excludes the terminator. */
int ka_read_file(const char *path, size_t max_bytes, char **out, size_t *len);

/* ka_read_file for a path a submission may have made: a symbolic link as the last
 * component is refused (KA_EIO), and so is anything but a regular file, without blocking
 * on a FIFO or opening a device (O_NOFOLLOW | O_NONBLOCK; red team 2026-12-01). Thread
 * safe. */
int ka_read_file_nofollow(const char *path, size_t max_bytes, char **out, size_t *len);

/* Writes len bytes to path (created 0644 or truncated). Returns KA_OK or KA_EIO. */
int ka_write_file(const char *path, const void *data, size_t len);

/* Creates a directory and its parents (mode 0755). Existing directories are fine. */
int ka_mkdirs(const char *path);

/* Removes a directory tree; a missing path is not an error. */
int ka_rmtree(const char *path);

/* Seconds from CLOCK_MONOTONIC; for intervals only. */
double ka_now_s(void);

/* Seconds since the Unix epoch (CLOCK_REALTIME), for records. */
double ka_wall_s(void);

/* SHA-256 of data (FIPS 180-4, computed with mbedtls) as 64 lowercase hex digits plus
 * NUL in out[65]. */
void ka_sha256_hex(const void *data, size_t len, char out[65]);

/* Growable NUL-terminated string. Zero-initialise; free with ka_sb_free. Append
 * failures (out of memory) leave the buffer unchanged and set oom. */
typedef struct ka_sb {
  char *s;
  size_t len, cap;
  int oom;
} ka_sb;
void ka_sb_append(ka_sb *sb, const char *s, size_t n);
/* Reads fd into sb (at most keep bytes kept, the rest read and dropped) until end of
 * file or until ka_now_s() reaches deadline (seconds). Returns 1 when the deadline came
 * first, else 0. For the output pipe of a child process; not thread safe on one sb. */
int ka_sb_read_until(ka_sb *sb, int fd, double deadline, size_t keep);
void ka_sb_puts(ka_sb *sb, const char *s);
void ka_sb_printf(ka_sb *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ka_sb_free(ka_sb *sb);
/* Returns the string (never NULL: "" when empty) and transfers ownership; sb is reset. */
char *ka_sb_take(ka_sb *sb);

/* Directory of the running executable (from /proc/self/exe) into out. */
int ka_exe_dir(char *out, size_t outlen);

/* Returns 1 if path is a safe relative workspace path: non-empty, no leading '/', no
 * ".." or "." component, no empty component, no backslash or control character,
 * at most 255 bytes. */
int ka_path_is_safe(const char *path);

#endif
