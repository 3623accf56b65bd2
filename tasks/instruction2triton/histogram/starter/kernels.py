"""Histogram, in Triton: the specification (prompt.md has it all).

    x       int32 [n]      input, keys in [0, 65536)
    counts  int32 [bins]   output
    n                      int64
    bins                   int32

    counts[b] = the number of i with (x[i] * bins) >> 16 == b      (x[i] * bins < 2^31)

Every call gets freshly drawn keys.

Only imports of triton, triton.language and math, constants and @triton.jit
functions may appear at the top level."""
import triton
import triton.language as tl


@triton.jit
def histogram(x_ptr, counts_ptr, n, bins):
    # the kernel's body: yours to write (add tl.constexpr parameters as you need)
    pass
