"""x * rsqrt(mean(x^2) + eps) * weight * gate in Triton: one program per row, the sum
of squares over chunks of BLOCK elements, then a second pass that scales, multiplies
and writes. Only @triton.jit kernels, imports of triton and constants may appear at
the top level (prompt.md)."""
import triton
import triton.language as tl


@triton.jit
def rmsnorm_mul_rows(x_ptr, w_ptr, g_ptr, y_ptr, rows, hidden, BLOCK: tl.constexpr,
                     EPS: tl.constexpr = 1e-6):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * hidden
    g_row = g_ptr + row * hidden
    y_row = y_ptr + row * hidden
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, hidden, BLOCK):
        mask = start + offs < hidden
        x = tl.load(x_row + start + offs, mask=mask, other=0.0)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / hidden + EPS)
    for start in range(0, hidden, BLOCK):
        mask = start + offs < hidden
        x = tl.load(x_row + start + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
        g = tl.load(g_row + start + offs, mask=mask, other=0.0)
        tl.store(y_row + start + offs, x * rstd * w * g, mask=mask)
