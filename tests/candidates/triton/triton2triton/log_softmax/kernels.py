"""A faster row log-softmax (tests/candidates/triton/README.md). Rows are read once and
kept in registers. The grid is (ceil_div(rows, ROWS), ROWS): rows of at most SMALL
columns go ROWS to a program, as one ROWS x SMALL tile (the programs with
program_id(1) > 0 have nothing to do); rows of at most BLOCK columns go one to a
program; longer rows take the baseline's two passes."""
import triton
import triton.language as tl


@triton.jit
def log_softmax_rows(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr, SMALL: tl.constexpr,
                     ROWS: tl.constexpr, CHUNK: tl.constexpr):
    if cols <= SMALL:
        if tl.program_id(1) == 0:
            r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
            c = tl.arange(0, SMALL)
            m2 = (r[:, None] < rows) & (c[None, :] < cols)
            off = r[:, None].to(tl.int64) * cols + c[None, :]
            xs = tl.load(x_ptr + off, mask=m2, other=float("-inf"))
            mx = tl.max(xs, 1)
            sh = mx + tl.log(tl.sum(tl.exp(xs - mx[:, None]), 1))
            tl.store(y_ptr + off, xs - sh[:, None], mask=m2)
    else:
        row = tl.program_id(0).to(tl.int64) * ROWS + tl.program_id(1)
        if row < rows:
            x_row = x_ptr + row * cols
            y_row = y_ptr + row * cols
            if cols <= BLOCK:
                offs1 = tl.arange(0, BLOCK)
                mask1 = offs1 < cols
                x1 = tl.load(x_row + offs1, mask=mask1, other=float("-inf"))
                mx1 = tl.max(x1, 0)
                sh1 = mx1 + tl.log(tl.sum(tl.exp(x1 - mx1), 0))
                tl.store(y_row + offs1, x1 - sh1, mask=mask1)
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
