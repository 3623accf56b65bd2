"""Inclusive prefix sum, in Triton: the specification (prompt.md has it all).

    x   int32 [n]   input, values in [-1000, 1000]
    y   int32 [n]   output
    n               int64

    y[i] = x[0] + x[1] + ... + x[i]     (32-bit two's-complement wraparound)

A scan across programs needs more than one kernel (or a decoupled look-back):
`scratch` buffers hold what one kernel leaves for the next.

Only imports of triton, triton.language and math, constants and @triton.jit
functions may appear at the top level."""
import triton
import triton.language as tl


@triton.jit
def prefix_scan(x_ptr, y_ptr, n):
    # the kernel's body: yours to write (add tl.constexpr parameters as you need)
    pass
