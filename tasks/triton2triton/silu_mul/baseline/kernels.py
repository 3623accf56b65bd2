"""SwiGLU in Triton: one program per row and chunk of BLOCK columns; silu(gate) * up in
float32, stored as bfloat16. Only @triton.jit kernels, imports of triton and constants
may appear at the top level (prompt.md)."""
import triton
import triton.language as tl


@triton.jit
def silu_mul_rows(x_ptr, y_ptr, rows, d, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < d
    x_row = x_ptr + r * 2 * d
    g = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(x_row + d + offs, mask=mask, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(y_ptr + r * d + offs, y.to(tl.bfloat16), mask=mask)
