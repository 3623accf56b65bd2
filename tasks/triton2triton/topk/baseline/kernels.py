"""Per-row top-k in Triton: one program per row and k passes over it; pass j finds the
largest element that ranks after the (j-1)-th answer in the order (value descending,
column ascending). Each lane keeps its best over chunks of BLOCK columns, then the row's
best and its smallest column. Only @triton.jit kernels, imports of triton and constants
may appear at the top level (prompt.md)."""
import triton
import triton.language as tl


@triton.jit
def topk_rows(x_ptr, values_ptr, indices_ptr, rows, n, k, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n
    offs = tl.arange(0, BLOCK)
    prev_v = tl.full([], float("inf"), tl.float32)
    prev_i = tl.full([], -1, tl.int32)
    for j in range(0, k):
        best = tl.full([BLOCK], float("-inf"), tl.float32)
        best_i = tl.full([BLOCK], 2147483647, tl.int32)
        for start in range(0, n, BLOCK):
            c = start + offs
            x = tl.load(x_row + c, mask=c < n, other=float("-inf"))
            after = (c < n) & ((x < prev_v) | ((x == prev_v) & (c > prev_i)))
            take = after & ((x > best) | (best_i == 2147483647))
            best = tl.where(take, x, best)
            best_i = tl.where(take, c, best_i)
        m = tl.max(best, 0)
        i = tl.min(tl.where((best == m) & (best_i != 2147483647), best_i, 2147483647), 0)
        tl.store(values_ptr + row * k + j, m)
        tl.store(indices_ptr + row * k + j, i)
        prev_v = m
        prev_i = i
