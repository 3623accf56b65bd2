/* UTF-8 checks of decoded protobuf messages. protobuf-c does not validate proto3 string
 * fields, so bytes that are not UTF-8 would be stored and echoed, and conforming
 * decoders (Python protobuf) reject the reply. Requests are checked field by field
 * (es_pb_utf8_check) and refused naming the field; executor results, whose text comes
 * from compilers and submissions, are repaired in place (es_pb_utf8_fix). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "envserver.h"

/* Length of the valid UTF-8 sequence at s (1 to 4), or 0 if it is not one (overlong
 * forms, surrogates and code points above U+10FFFF are invalid). */
static int u8_seq(const unsigned char *s) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  int n;
  unsigned min, cp;
  if ((c & 0xe0) == 0xc0)
    n = 2, min = 0x80, cp = c & 0x1f;
  else if ((c & 0xf0) == 0xe0)
    n = 3, min = 0x800, cp = c & 0x0f;
  else if ((c & 0xf8) == 0xf0)
    n = 4, min = 0x10000, cp = c & 0x07;
  else
    return 0;
  for (int i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0; /* also stops at the terminating NUL */
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

/* Checks (fix = 0) or repairs (fix = 1: each invalid byte becomes '?') one string.
 * Returns 1 if it was valid. */
static int u8_string(char *str, int fix) {
  int ok = 1;
  for (unsigned char *p = (unsigned char *)str; *p;) {
    int n = u8_seq(p);
    if (n) {
      p += n;
      continue;
    }
    ok = 0;
    if (!fix) return 0;
    *p++ = '?';
  }
  return ok;
}

/* Appends ".name" or ".name[k]" to path at plen (the leading dot left out at 0). */
static size_t u8_path(char *path, size_t cap, size_t plen, const char *name, long k) {
  if (!cap) return 0;
  int w = k < 0 ? snprintf(path + plen, cap - plen, "%s%s", plen ? "." : "", name)
                : snprintf(path + plen, cap - plen, "%s%s[%ld]", plen ? "." : "", name, k);
  if (w < 0 || (size_t)w >= cap - plen) return cap - 1;
  return plen + (size_t)w;
}

/* Walks every string of m. Returns 1 if all were valid; else 0, with the path of the
 * first invalid one in path (check mode stops there; fix mode repairs them all). */
static int u8_walk(ProtobufCMessage *m, int fix, char *path, size_t cap, size_t plen) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  int all_ok = 1;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
    char *base = (char *)m;
    int repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
    if (!repeated && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
        *(const uint32_t *)(base + f->quantifier_offset) != f->id)
      continue; /* not the member of its oneof that is set */
    size_t count = repeated ? *(const size_t *)(base + f->quantifier_offset) : 1;
    void **v = repeated ? *(void ***)(base + f->offset) : (void **)(base + f->offset);
    for (size_t k = 0; v && k < count; k++) {
      if (!v[k]) continue;
      size_t pl = u8_path(path, cap, plen, f->name, repeated ? (long)k : -1);
      int ok = f->type == PROTOBUF_C_TYPE_STRING ? u8_string(v[k], fix)
                                                 : u8_walk(v[k], fix, path, cap, pl);
      if (!ok && all_ok) {
        all_ok = 0;
        if (!fix) return 0;
      }
      if (cap) path[plen] = 0;
    }
  }
  return all_ok;
}

int es_pb_utf8_check(const ProtobufCMessage *m, char *path, size_t pathlen) {
  if (pathlen) path[0] = 0;
  char scratch[1];
  if (!pathlen) path = scratch, pathlen = 1;
  /* check mode never writes to the message */
  int ok = u8_walk((ProtobufCMessage *)m, 0, path, pathlen, 0);
  return ok;
}

int es_pb_utf8_fix(ProtobufCMessage *m) {
  char path[256];
  return !u8_walk(m, 1, path, sizeof path, 0);
}
