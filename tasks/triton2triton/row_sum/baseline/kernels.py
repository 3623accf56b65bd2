"""Row sums in Triton: one program per row, float32 partial sums over chunks of BLOCK
columns, reduced at the end. Only @triton.jit kernels, imports of triton and constants
may appear at the top level (prompt.md)."""
import triton
import triton.language as tl


@triton.jit
def row_sum_rows(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        acc += tl.load(x_row + start + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, 0))
