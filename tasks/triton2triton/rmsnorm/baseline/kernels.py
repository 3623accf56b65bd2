"""RMSNorm in Triton: one program per row, the sum of squares over chunks of BLOCK
elements in float32, then a second pass that scales and writes bfloat16. Only
@triton.jit kernels, imports of triton and constants may appear at the top level."""
import triton
import triton.language as tl


@triton.jit
def rmsnorm_rows(x_ptr, w_ptr, y_ptr, rows, hidden, BLOCK: tl.constexpr, EPS: tl.constexpr = 1e-6):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * hidden
    y_row = y_ptr + row * hidden
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, hidden, BLOCK):
        mask = start + offs < hidden
        x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / hidden + EPS)
    for start in range(0, hidden, BLOCK):
        mask = start + offs < hidden
        x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + start + offs, (x * rstd * w).to(tl.bfloat16), mask=mask)
