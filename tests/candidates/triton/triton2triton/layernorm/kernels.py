"""A faster LayerNorm (tests/candidates/triton/README.md). Rows are read once and kept
in registers (mean, the variance around it and the write from one load). The grid is
(ceil_div(rows, ROWS), ROWS): rows of at most SMALL elements go ROWS to a program, as
one ROWS x SMALL tile (the programs with program_id(1) > 0 have nothing to do); rows of
at most BLOCK elements go one to a program; longer rows take the baseline's passes."""
import triton
import triton.language as tl


@triton.jit
def layernorm_rows(x_ptr, w_ptr, b_ptr, y_ptr, rows, hidden, BLOCK: tl.constexpr,
                   SMALL: tl.constexpr, ROWS: tl.constexpr, CHUNK: tl.constexpr,
                   EPS: tl.constexpr = 1e-5):
    if hidden <= SMALL:
        if tl.program_id(1) == 0:
            r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
            c = tl.arange(0, SMALL)
            m2 = (r[:, None] < rows) & (c[None, :] < hidden)
            off = r[:, None].to(tl.int64) * hidden + c[None, :]
            xs = tl.load(x_ptr + off, mask=m2, other=0.0)
            mean2 = tl.sum(xs, 1) / hidden
            ds = tl.where(m2, xs - mean2[:, None], 0.0)
            rstd2 = 1.0 / tl.sqrt(tl.sum(ds * ds, 1) / hidden + EPS)
            ws = tl.load(w_ptr + c, mask=c < hidden, other=0.0)
            bs = tl.load(b_ptr + c, mask=c < hidden, other=0.0)
            tl.store(y_ptr + off, ds * rstd2[:, None] * ws[None, :] + bs[None, :], mask=m2)
    else:
        row = tl.program_id(0).to(tl.int64) * ROWS + tl.program_id(1)
        if row < rows:
            x_row = x_ptr + row * hidden
            y_row = y_ptr + row * hidden
            if hidden <= BLOCK:
                offs1 = tl.arange(0, BLOCK)
                mask1 = offs1 < hidden
                x1 = tl.load(x_row + offs1, mask=mask1, other=0.0)
                mean1 = tl.sum(x1, 0) / hidden
                d1 = tl.where(mask1, x1 - mean1, 0.0)
                rstd1 = 1.0 / tl.sqrt(tl.sum(d1 * d1, 0) / hidden + EPS)
                w1 = tl.load(w_ptr + offs1, mask=mask1, other=0.0)
                b1 = tl.load(b_ptr + offs1, mask=mask1, other=0.0)
                tl.store(y_row + offs1, d1 * rstd1 * w1 + b1, mask=mask1)
            else:
                offs = tl.arange(0, CHUNK)
                acc = tl.zeros([CHUNK], tl.float32)
                for start in range(0, hidden, CHUNK):
                    acc += tl.load(x_row + start + offs, mask=start + offs < hidden, other=0.0)
                mean = tl.sum(acc, 0) / hidden
                acc = tl.zeros([CHUNK], tl.float32)
                for start in range(0, hidden, CHUNK):
                    mask = start + offs < hidden
                    x = tl.load(x_row + start + offs, mask=mask, other=0.0)
                    d = tl.where(mask, x - mean, 0.0)
                    acc += d * d
                rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / hidden + EPS)
                for start in range(0, hidden, CHUNK):
                    mask = start + offs < hidden
                    x = tl.load(x_row + start + offs, mask=mask, other=0.0)
                    w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
                    b = tl.load(b_ptr + start + offs, mask=mask, other=0.0)
                    tl.store(y_row + start + offs, (x - mean) * rstd * w + b, mask=mask)
