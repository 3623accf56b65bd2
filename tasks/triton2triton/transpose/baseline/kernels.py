"""Matrix transpose in Triton: one program per BLOCK_R x BLOCK_C tile, loaded along the
rows of x and stored transposed (tl.trans) along the rows of y. Only @triton.jit
kernels, imports of triton and constants may appear at the top level (prompt.md)."""
import triton
import triton.language as tl


@triton.jit
def transpose_tiles(x_ptr, y_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rr = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
    cc = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rr[:, None] < rows) & (cc[None, :] < cols)
    tile = tl.load(x_ptr + rr[:, None].to(tl.int64) * cols + cc[None, :], mask=mask)
    out_mask = (cc[:, None] < cols) & (rr[None, :] < rows)
    tl.store(y_ptr + cc[:, None].to(tl.int64) * rows + rr[None, :], tl.trans(tile), mask=out_mask)
