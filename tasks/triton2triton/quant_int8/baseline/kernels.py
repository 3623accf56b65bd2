"""Per-row int8 quantization in Triton: one program per row; max|x| over chunks of
BLOCK columns, then a second pass that writes round-half-even(x * 127 / max|x|) and the
row's scale. Only @triton.jit kernels, imports of triton and constants may appear at the
top level (prompt.md)."""
import triton
import triton.language as tl


@triton.jit
def quant_rows(x_ptr, q_ptr, scale_ptr, tokens, hidden, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * hidden
    q_row = q_ptr + row * hidden
    offs = tl.arange(0, BLOCK)
    amax = tl.zeros([BLOCK], tl.float32)
    for start in range(0, hidden, BLOCK):
        mask = start + offs < hidden
        amax = tl.maximum(amax, tl.abs(tl.load(x_row + start + offs, mask=mask, other=0.0)))
    m = tl.max(amax, 0)
    inv = tl.where(m > 0, 127.0 / m, 0.0)
    for start in range(0, hidden, BLOCK):
        mask = start + offs < hidden
        x = tl.load(x_row + start + offs, mask=mask, other=0.0)
        q = tl.extra.libdevice.rint(x * inv)  # ties to even
        q = tl.minimum(tl.maximum(q, -127.0), 127.0)
        tl.store(q_row + start + offs, q.to(tl.int8), mask=mask)
    tl.store(scale_ptr + row, m / 127.0)
