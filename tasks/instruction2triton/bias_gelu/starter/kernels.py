"""Fused bias + GELU, in Triton: the specification (prompt.md has it all).

    x     float32 [rows, cols]   input, row-major
    bias  float32 [cols]         input
    y     float32 [rows, cols]   output
    rows, cols                   int32

    y[r, c] = gelu(x[r, c] + bias[c]),   gelu(v) = 0.5 * v * (1 + erf(v / sqrt(2)))

(the exact, erf form of GELU, not the tanh approximation)

Only imports of triton, triton.language and math, constants and @triton.jit
functions may appear at the top level."""
import triton
import triton.language as tl


@triton.jit
def bias_gelu(x_ptr, bias_ptr, y_ptr, rows, cols):
    # the kernel's body: yours to write (add tl.constexpr parameters as you need)
    pass
