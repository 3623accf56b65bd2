"""Rotary embedding in Triton: one program per token and block of BLOCK_H heads; the
angles of the token's BLOCK_HALF frequency pairs once (libdevice pow, as powf), then the
rotate-half pairs of every head of the block. Only @triton.jit kernels, imports of
triton and constants may appear at the top level (prompt.md)."""
import triton
import triton.language as tl


@triton.jit
def rope_rows(x_ptr, pos_ptr, y_ptr, tokens, heads, hdim, BLOCK_H: tl.constexpr,
              BLOCK_HALF: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    i = tl.arange(0, BLOCK_HALF)
    half = hdim // 2
    inv_freq = tl.extra.libdevice.pow(10000.0, -(2 * i).to(tl.float32) / hdim)
    theta = tl.load(pos_ptr + t).to(tl.float32) * inv_freq
    c = tl.cos(theta)[None, :]
    s = tl.sin(theta)[None, :]
    mask = (h[:, None] < heads) & (i[None, :] < half)
    base = (t * heads + h[:, None]) * hdim + i[None, :]
    a = tl.load(x_ptr + base, mask=mask, other=0.0)
    b = tl.load(x_ptr + base + half, mask=mask, other=0.0)
    tl.store(y_ptr + base, a * c - b * s, mask=mask)
    tl.store(y_ptr + base + half, b * c + a * s, mask=mask)
