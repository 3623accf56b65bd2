"""A faster x * rsqrt(mean(x^2) + eps) * weight * gate (tests/candidates/triton/README.md):
a row of at most BLOCK elements is read once and kept in registers for the sum of
squares and the write; longer rows take the baseline's two passes."""
import triton
import triton.language as tl


@triton.jit
def rmsnorm_mul_rows(x_ptr, w_ptr, g_ptr, y_ptr, rows, hidden, BLOCK: tl.constexpr,
                     CHUNK: tl.constexpr, EPS: tl.constexpr = 1e-6):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * hidden
    g_row = g_ptr + row * hidden
    y_row = y_ptr + row * hidden
    if hidden <= BLOCK:
        offs1 = tl.arange(0, BLOCK)
        mask1 = offs1 < hidden
        x1 = tl.load(x_row + offs1, mask=mask1, other=0.0)
        rstd1 = 1.0 / tl.sqrt(tl.sum(x1 * x1, 0) / hidden + EPS)
        w1 = tl.load(w_ptr + offs1, mask=mask1, other=0.0)
        g1 = tl.load(g_row + offs1, mask=mask1, other=0.0)
        tl.store(y_row + offs1, x1 * rstd1 * w1 * g1, mask=mask1)
    else:
        offs = tl.arange(0, CHUNK)
        acc = tl.zeros([CHUNK], tl.float32)
        for start in range(0, hidden, CHUNK):
            x = tl.load(x_row + start + offs, mask=start + offs < hidden, other=0.0)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / hidden + EPS)
        for start in range(0, hidden, CHUNK):
            mask = start + offs < hidden
            x = tl.load(x_row + start + offs, mask=mask, other=0.0)
            w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
            g = tl.load(g_row + start + offs, mask=mask, other=0.0)
            tl.store(y_row + start + offs, x * rstd * w * g, mask=mask)
