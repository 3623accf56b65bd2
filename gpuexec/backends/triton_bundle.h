/* The image of a Triton submission: the cubins of its compile units with the metadata
 * their launches need, in one byte string, so that it travels where a CUBIN does (the
 * compile request's image, the worker's baseline build cache). Written by triton.c (in
 * ka-runner), read there and by the cuda backend module (backend_cuda.c), which links
 * nothing of ka_exec: hence these inline functions.
 *
 * Layout (little-endian, no padding):
 *   "KATRITON" u32 version (1) u32 count
 *   count x { u32 name_len, name, u32 sym_len, sym, u32 shared, u32 warps,
 *             u64 scratch_bytes, u32 scratch_align, u64 cubin_len, cubin }
 * name: the unit's launch name ("<kernel>__ka<k>"), sym: the kernel's symbol in its
 * cubin, shared: dynamic shared memory bytes, warps: num_warps (block = 32 x warps),
 * scratch_bytes: Triton's global scratch per program (0: none). Pure functions; the
 * parsed entries point into the caller's buffer. */
#ifndef KA_TRITON_BUNDLE_H
#define KA_TRITON_BUNDLE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KA_TRITON_MAGIC "KATRITON"
#define KA_TRITON_MAX_UNITS 16
#define KA_TRITON_NAME_MAX 128

typedef struct ka_triton_unit {
  char name[KA_TRITON_NAME_MAX], sym[KA_TRITON_NAME_MAX];
  uint32_t shared, warps, scratch_align;
  uint64_t scratch_bytes;
  const unsigned char *cubin; /* into the bundle */
  size_t cubin_len;
} ka_triton_unit;

static inline int ka_tb_get(const unsigned char *b, size_t n, size_t *off, void *out, size_t k) {
  if (*off > n || n - *off < k) return -1;
  memcpy(out, b + *off, k);
  *off += k;
  return 0;
}

static inline int ka_tb_str(const unsigned char *b, size_t n, size_t *off, char *out) {
  uint32_t len;
  if (ka_tb_get(b, n, off, &len, 4) || len == 0 || len >= KA_TRITON_NAME_MAX) return -1;
  if (ka_tb_get(b, n, off, out, len)) return -1;
  out[len] = '\0';
  return strlen(out) == len ? 0 : -1;
}

/* Parses bundle (n bytes) into units[0..*count). Returns 0, or -1 when it is not a
 * complete bundle of at most KA_TRITON_MAX_UNITS units (nothing else is trusted). */
static inline int ka_triton_bundle_parse(const void *bundle, size_t n, ka_triton_unit *units,
                                         int *count) {
  const unsigned char *b = (const unsigned char *)bundle;
  size_t off = 8;
  uint32_t ver, cnt;
  *count = 0;
  if (!b || n < 16 || memcmp(b, KA_TRITON_MAGIC, 8)) return -1;
  if (ka_tb_get(b, n, &off, &ver, 4) || ka_tb_get(b, n, &off, &cnt, 4) || ver != 1 || cnt == 0 ||
      cnt > KA_TRITON_MAX_UNITS)
    return -1;
  for (uint32_t i = 0; i < cnt; i++) {
    ka_triton_unit *u = &units[i];
    uint64_t clen;
    if (ka_tb_str(b, n, &off, u->name) || ka_tb_str(b, n, &off, u->sym) ||
        ka_tb_get(b, n, &off, &u->shared, 4) || ka_tb_get(b, n, &off, &u->warps, 4) ||
        ka_tb_get(b, n, &off, &u->scratch_bytes, 8) ||
        ka_tb_get(b, n, &off, &u->scratch_align, 4) || ka_tb_get(b, n, &off, &clen, 8) ||
        clen == 0 || off > n || n - off < clen)
      return -1;
    u->cubin = b + off;
    u->cubin_len = (size_t)clen;
    off += (size_t)clen;
  }
  if (off != n) return -1;
  *count = (int)cnt;
  return 0;
}

/* 1 if bundle (n bytes) starts like a Triton bundle (the magic), else 0. */
static inline int ka_triton_bundle_is(const void *bundle, size_t n) {
  return bundle && n >= 16 && !memcmp(bundle, KA_TRITON_MAGIC, 8);
}

#endif
