"""A faster row softmax (tests/candidates/triton/README.md): a row of at most BLOCK
columns is read once and kept in registers (max, sum and the write from one load);
longer rows take the baseline's two passes."""
import triton
import triton.language as tl


@triton.jit
def softmax_rows(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    if cols <= BLOCK:
        offs1 = tl.arange(0, BLOCK)
        mask1 = offs1 < cols
        x1 = tl.load(x_row + offs1, mask=mask1, other=float("-inf"))
        e1 = tl.exp(x1 - tl.max(x1, 0))
        tl.store(y_row + offs1, e1 / tl.sum(e1, 0), mask=mask1)
    else:
        offs = tl.arange(0, CHUNK)
        m = tl.full([CHUNK], float("-inf"), tl.float32)
        s = tl.zeros([CHUNK], tl.float32)
        for start in range(0, cols, CHUNK):
            mask = start + offs < cols
            x = tl.load(x_row + start + offs, mask=mask, other=float("-inf"))
            m_new = tl.maximum(m, x)
            empty = m_new == float("-inf")
            s = s * tl.where(empty, 0.0, tl.exp(m - m_new)) + tl.where(empty, 0.0, tl.exp(x - m_new))
            m = m_new
        row_max = tl.max(m, 0)
        total = tl.sum(s * tl.exp(m - row_max), 0)
        for start in range(0, cols, CHUNK):
            mask = start + offs < cols
            x = tl.load(x_row + start + offs, mask=mask, other=float("-inf"))
            tl.store(y_row + start + offs, tl.exp(x - row_max) / total, mask=mask)
