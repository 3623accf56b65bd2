"""Single-head attention forward in Triton, FlashAttention style (Dao et al., 2022):
one program per BLOCK_M query rows; over blocks of BLOCK_N keys, S = Q K^T / sqrt(D) by
tl.dot (bfloat16 tensor cores, float32 accumulation), an online softmax (running max and
sum in float32), and P V by tl.dot with P rounded to bfloat16. BLOCK_D covers D (masked
beyond it). Only @triton.jit kernels, imports of triton and constants may appear at the
top level (prompt.md)."""
import triton
import triton.language as tl


@triton.jit
def attention_fwd(q_ptr, k_ptr, v_ptr, o_ptr, S, D, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_D: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rd = tl.arange(0, BLOCK_D)
    d_ok = rd[None, :] < D
    q = tl.load(q_ptr + rm[:, None].to(tl.int64) * D + rd[None, :], mask=(rm[:, None] < S) & d_ok,
                other=0.0)
    scale = 1.0 / tl.sqrt(D.to(tl.float32))
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for n0 in range(0, S, BLOCK_N):
        kn = n0 + rn
        kv_mask = (kn[:, None] < S) & d_ok
        offs = kn[:, None].to(tl.int64) * D + rd[None, :]
        k = tl.load(k_ptr + offs, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(kn[None, :] < S, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + offs, mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
        m_i = m_new
    o = acc / l_i[:, None]
    tl.store(o_ptr + rm[:, None].to(tl.int64) * D + rd[None, :], o, mask=(rm[:, None] < S) & d_ok)
