"""The hidden baseline of instruction2triton/bias_gelu (never shown to the agent): one
program per row and chunk of BLOCK columns, gelu(x + bias) with libdevice's erf."""
import triton
import triton.language as tl


@triton.jit
def bias_gelu(x_ptr, bias_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = c < cols
    v = tl.load(x_ptr + r * cols + c, mask=mask, other=0.0) + tl.load(bias_ptr + c, mask=mask, other=0.0)
    y = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))
    tl.store(y_ptr + r * cols + c, y, mask=mask)
