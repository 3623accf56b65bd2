"""The hidden baseline of instruction2triton/depthwise_conv (never shown to the agent):
one program per (image, channel) plane and BLOCK_H x BLOCK_W tile of it; the nine taps
as masked loads (zero padding), the channel's nine weights as scalars."""
import triton
import triton.language as tl


@triton.jit
def depthwise3x3(x_ptr, w_ptr, y_ptr, N, C, H, W, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    plane = tl.program_id(0).to(tl.int64)
    c = plane % C
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    w = tl.program_id(2) * BLOCK_W + tl.arange(0, BLOCK_W)
    base = x_ptr + plane * H * W
    acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32)
    for i in tl.static_range(3):
        for j in tl.static_range(3):
            hh = h[:, None] + (i - 1)
            ww = w[None, :] + (j - 1)
            m = (hh >= 0) & (hh < H) & (ww >= 0) & (ww < W)
            v = tl.load(base + hh * W + ww, mask=m, other=0.0)
            acc += tl.load(w_ptr + c * 9 + i * 3 + j) * v
    out = (h[:, None] < H) & (w[None, :] < W)
    tl.store(y_ptr + plane * H * W + h[:, None] * W + w[None, :], acc, mask=out)
