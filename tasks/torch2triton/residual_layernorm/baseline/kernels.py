"""LayerNorm(x + residual) in Triton: one program per row, three passes over chunks of
BLOCK elements (mean, variance, output), the sum x + residual recomputed in each. Only
@triton.jit kernels, imports of triton and constants may appear at the top level
(prompt.md)."""
import triton
import triton.language as tl


@triton.jit
def residual_layernorm_rows(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, rows, hidden,
                            BLOCK: tl.constexpr, EPS: tl.constexpr = 1e-5):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * hidden
    r_row = r_ptr + row * hidden
    y_row = y_ptr + row * hidden
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, hidden, BLOCK):
        mask = start + offs < hidden
        h = tl.load(x_row + start + offs, mask=mask, other=0.0) + \
            tl.load(r_row + start + offs, mask=mask, other=0.0)
        acc += h
    mean = tl.sum(acc, 0) / hidden
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, hidden, BLOCK):
        mask = start + offs < hidden
        h = tl.load(x_row + start + offs, mask=mask, other=0.0) + \
            tl.load(r_row + start + offs, mask=mask, other=0.0)
        d = tl.where(mask, h - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / hidden + EPS)
    for start in range(0, hidden, BLOCK):
        mask = start + offs < hidden
        h = tl.load(x_row + start + offs, mask=mask, other=0.0) + \
            tl.load(r_row + start + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + start + offs, mask=mask, other=0.0)
        tl.store(y_row + start + offs, (h - mean) * rstd * w + b, mask=mask)
