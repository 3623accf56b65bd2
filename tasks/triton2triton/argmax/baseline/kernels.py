"""Row argmax in Triton: one program per row; each lane keeps the largest value it saw
and its first column over chunks of BLOCK columns, then the row's largest value and the
smallest column holding it. Only @triton.jit kernels, imports of triton and constants
may appear at the top level (prompt.md)."""
import triton
import triton.language as tl


@triton.jit
def argmax_rows(x_ptr, idx_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    best_i = tl.full([BLOCK], 2147483647, tl.int32)
    for start in range(0, cols, BLOCK):
        c = start + offs
        mask = c < cols
        x = tl.load(x_row + c, mask=mask, other=float("-inf"))
        # columns only grow, so an equal value later in a lane never wins
        take = mask & ((x > best) | (best_i == 2147483647))
        best = tl.where(take, x, best)
        best_i = tl.where(take, c, best_i)
    m = tl.max(best, 0)
    i = tl.min(tl.where(best == m, best_i, 2147483647), 0)
    tl.store(idx_ptr + row, i.to(tl.int64))
