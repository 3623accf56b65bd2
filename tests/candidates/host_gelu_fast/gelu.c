/* A faster correct candidate: four floats at a time (GCC vector extensions, SSE2), erfc
 * from Abramowitz & Stegun, Handbook of Mathematical Functions (1964), formula 7.1.26
 * (|error| <= 1.5e-7 in erf), and exp(-z^2) by Cody-Waite range reduction and a degree-7
 * Taylor polynomial. No libm call, no branch in the loop: several times the baseline's
 * speed (scalar double erf), so the e2e test's "faster than the baseline" holds on a
 * noisy machine.
 * With z = |x|/sqrt(2) and e = 0.5 x erfc(z): y = e for x < 0 and x - e otherwise, so the
 * negative side never subtracts two numbers near 1 (its absolute error stays under
 * 0.5 |x| 1.5e-7 plus float rounding, inside the task's atol, 1e-6 x max|y|, where |y| is
 * small). An infinite x gives NaN (the task's normal inputs are finite). */
#include <string.h>

typedef float v4f __attribute__((vector_size(16)));
typedef int v4i __attribute__((vector_size(16)));

/* A&S 7.1.26's constants */
#define AS_P 0.3275911f
#define AS_A1 0.254829592f
#define AS_A2 -0.284496736f
#define AS_A3 1.421413741f
#define AS_A4 -1.453152027f
#define AS_A5 1.061405429f

static v4f splat(float v) {
  return (v4f){v, v, v, v};
}

/* exp(-u) for 0 <= u: u clamped to 87 (exp(-87) is still a normal float) */
static v4f exp_neg(v4f u) {
  v4f big = splat(87.0f);
  v4i over = u > big;
  u = (v4f)((over & (v4i)big) | (~over & (v4i)u));
  v4f a = -u * splat(1.44269504f) - splat(0.5f); /* log2(e); k = round(-u log2 e) <= 0 */
  v4i k = __builtin_convertvector(a, v4i);       /* truncates toward 0: a < 0 rounds up */
  v4f kf = __builtin_convertvector(k, v4f);
  /* ln 2 split so that kf * hi is exact (hi has 16 significant bits) */
  v4f r = -u - kf * splat(0.693145751953125f) - kf * splat(1.42860682e-06f);
  v4f p = splat(1.0f / 5040.0f);
  p = p * r + splat(1.0f / 720.0f);
  p = p * r + splat(1.0f / 120.0f);
  p = p * r + splat(1.0f / 24.0f);
  p = p * r + splat(1.0f / 6.0f);
  p = p * r + splat(0.5f);
  p = p * r + splat(1.0f);
  p = p * r + splat(1.0f);
  v4i scale = (k + 127) << 23; /* 2^k, k in [-126, 0] */
  return p * (v4f)scale;
}

static v4f gelu4(v4f x) {
  v4i sign = (v4i){(int)0x80000000, (int)0x80000000, (int)0x80000000, (int)0x80000000};
  v4f z = (v4f)((v4i)x & ~sign) * splat(0.70710678f);
  v4f t = splat(1.0f) / (splat(1.0f) + splat(AS_P) * z);
  v4f poly = t * (splat(AS_A1) +
                  t * (splat(AS_A2) + t * (splat(AS_A3) + t * (splat(AS_A4) + t * splat(AS_A5)))));
  v4f e = splat(0.5f) * x * poly * exp_neg(z * z);
  v4i neg = x < splat(0.0f);
  return (v4f)((neg & (v4i)e) | (~neg & (v4i)(x - e)));
}

void gelu_forward(const float *x, float *y, long long n) {
  long long i = 0;
  for (; i + 4 <= n; i += 4) {
    v4f v;
    memcpy(&v, x + i, sizeof v); /* x and y need not be 16-byte aligned */
    v = gelu4(v);
    memcpy(y + i, &v, sizeof v);
  }
  if (i < n) { /* the last 1-3 elements, through one padded vector */
    float in[4] = {0}, out[4];
    memcpy(in, x + i, (size_t)(n - i) * sizeof(float));
    v4f v;
    memcpy(&v, in, sizeof v);
    v = gelu4(v);
    memcpy(out, &v, sizeof v);
    memcpy(y + i, out, (size_t)(n - i) * sizeof(float));
  }
}
