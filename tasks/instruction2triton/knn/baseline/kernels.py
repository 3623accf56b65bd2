"""The hidden baseline of instruction2triton/knn (never shown to the agent): one program
per BLOCK_Q queries and k passes over the points; pass j keeps, per lane of a
BLOCK_Q x BLOCK_P tile, the smallest distance that ranks after answer j-1 in the order
(distance, point index), then each query's smallest."""
import triton
import triton.language as tl


@triton.jit
def knn_queries(q_ptr, p_ptr, dist_ptr, nq, npts, dim, k, BLOCK_Q: tl.constexpr,
                BLOCK_P: tl.constexpr):
    rq = tl.program_id(0) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    q_ok = rq < nq
    rp0 = tl.arange(0, BLOCK_P)
    prev_d = tl.full([BLOCK_Q], float("-inf"), tl.float32)
    prev_i = tl.full([BLOCK_Q], -1, tl.int32)
    for j in range(0, k):
        best = tl.full([BLOCK_Q, BLOCK_P], float("inf"), tl.float32)
        best_i = tl.full([BLOCK_Q, BLOCK_P], 2147483647, tl.int32)
        for p0 in range(0, npts, BLOCK_P):
            rp = p0 + rp0
            p_ok = rp < npts
            d2 = tl.zeros([BLOCK_Q, BLOCK_P], tl.float32)
            for d in range(0, dim):
                qv = tl.load(q_ptr + rq * dim + d, mask=q_ok, other=0.0)
                pv = tl.load(p_ptr + rp * dim + d, mask=p_ok, other=0.0)
                diff = qv[:, None] - pv[None, :]
                d2 += diff * diff
            idx = rp[None, :] + tl.zeros([BLOCK_Q, BLOCK_P], tl.int32)
            after = p_ok[None, :] & ((d2 > prev_d[:, None]) |
                                     ((d2 == prev_d[:, None]) & (idx > prev_i[:, None])))
            take = after & ((d2 < best) | (best_i == 2147483647))
            best = tl.where(take, d2, best)
            best_i = tl.where(take, idx, best_i)
        m = tl.min(best, 1)
        i = tl.min(tl.where((best == m[:, None]) & (best_i != 2147483647), best_i, 2147483647), 1)
        tl.store(dist_ptr + rq.to(tl.int64) * k + j, m, mask=q_ok)
        prev_d = m
        prev_i = i
