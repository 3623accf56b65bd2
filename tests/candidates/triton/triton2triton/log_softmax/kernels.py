"""A faster row log-softmax (tests/candidates/triton/README.md): a row of at most BLOCK
columns is read once and kept in registers; longer rows take the baseline's two passes."""
import triton
import triton.language as tl


@triton.jit
def log_softmax_rows(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    if cols <= BLOCK:
        offs1 = tl.arange(0, BLOCK)
        mask1 = offs1 < cols
        x1 = tl.load(x_row + offs1, mask=mask1, other=float("-inf"))
        row_max = tl.max(x1, 0)
        shift = row_max + tl.log(tl.sum(tl.exp(x1 - row_max), 0))
        tl.store(y_row + offs1, x1 - shift, mask=mask1)
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
        shift = row_max + tl.log(tl.sum(s * tl.exp(m - row_max), 0))
        for start in range(0, cols, CHUNK):
            mask = start + offs < cols
            x = tl.load(x_row + start + offs, mask=mask, other=0.0)
            tl.store(y_row + start + offs, x - shift, mask=mask)
