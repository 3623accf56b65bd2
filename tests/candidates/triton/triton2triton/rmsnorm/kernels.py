"""A faster RMSNorm (tests/candidates/triton/README.md). Rows are read once and kept in
registers. The grid is (ceil_div(rows, ROWS), ROWS): rows of at most SMALL elements go
ROWS to a program, as one ROWS x SMALL tile (the programs with program_id(1) > 0 have
nothing to do); rows of at most BLOCK elements go one to a program; longer rows take the
baseline's two passes."""
import triton
import triton.language as tl


@triton.jit
def rmsnorm_rows(x_ptr, w_ptr, y_ptr, rows, hidden, BLOCK: tl.constexpr, SMALL: tl.constexpr,
                 ROWS: tl.constexpr, CHUNK: tl.constexpr, EPS: tl.constexpr = 1e-6):
    if hidden <= SMALL:
        if tl.program_id(1) == 0:
            r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
            c = tl.arange(0, SMALL)
            m2 = (r[:, None] < rows) & (c[None, :] < hidden)
            off = r[:, None].to(tl.int64) * hidden + c[None, :]
            xs = tl.load(x_ptr + off, mask=m2, other=0.0).to(tl.float32)
            rstd2 = 1.0 / tl.sqrt(tl.sum(xs * xs, 1) / hidden + EPS)
            ws = tl.load(w_ptr + c, mask=c < hidden, other=0.0).to(tl.float32)
            tl.store(y_ptr + off, (xs * rstd2[:, None] * ws[None, :]).to(tl.bfloat16), mask=m2)
    else:
        row = tl.program_id(0).to(tl.int64) * ROWS + tl.program_id(1)
        if row < rows:
            x_row = x_ptr + row * hidden
            y_row = y_ptr + row * hidden
            if hidden <= BLOCK:
                offs1 = tl.arange(0, BLOCK)
                mask1 = offs1 < hidden
                x1 = tl.load(x_row + offs1, mask=mask1, other=0.0).to(tl.float32)
                rstd1 = 1.0 / tl.sqrt(tl.sum(x1 * x1, 0) / hidden + EPS)
                w1 = tl.load(w_ptr + offs1, mask=mask1, other=0.0).to(tl.float32)
                tl.store(y_row + offs1, (x1 * rstd1 * w1).to(tl.bfloat16), mask=mask1)
            else:
                offs = tl.arange(0, CHUNK)
                acc = tl.zeros([CHUNK], tl.float32)
                for start in range(0, hidden, CHUNK):
                    x = tl.load(x_row + start + offs, mask=start + offs < hidden, other=0.0).to(tl.float32)
                    acc += x * x
                rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / hidden + EPS)
                for start in range(0, hidden, CHUNK):
                    mask = start + offs < hidden
                    x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
                    w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
                    tl.store(y_row + start + offs, (x * rstd * w).to(tl.bfloat16), mask=mask)
