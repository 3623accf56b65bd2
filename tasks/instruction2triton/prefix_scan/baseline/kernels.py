"""The hidden baseline of instruction2triton/prefix_scan (never shown to the agent):
three kernels over tiles of BLOCK elements: each tile's sum, then one program turning
the sums into each tile's exclusive offset (tl.cumsum over chunks with a carry), then
each tile's inclusive scan (tl.cumsum) plus its offset. int32 sums wrap as the task
asks."""
import triton
import triton.language as tl


@triton.jit
def tile_sums(x_ptr, sums_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n, other=0)
    tl.store(sums_ptr + tl.program_id(0), tl.sum(x, 0))


@triton.jit
def tile_offsets(sums_ptr, n, BLOCK: tl.constexpr, CHUNK: tl.constexpr):
    tiles = tl.cdiv(n, BLOCK)
    offs = tl.arange(0, CHUNK)
    carry = tl.zeros([], tl.int32)
    for t0 in range(0, tiles, CHUNK):
        t = t0 + offs
        s = tl.load(sums_ptr + t, mask=t < tiles, other=0)
        inc = tl.cumsum(s, 0)
        tl.store(sums_ptr + t, inc - s + carry, mask=t < tiles)
        carry += tl.sum(s, 0)


@triton.jit
def scan_tiles(x_ptr, sums_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask, other=0)
    tl.store(y_ptr + i, tl.cumsum(x, 0) + tl.load(sums_ptr + tl.program_id(0)), mask=mask)
