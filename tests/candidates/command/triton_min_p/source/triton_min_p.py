"""Min-p filtering, written for kernelarena's command_h200 test (issue 19): a row that
fits in one block (vocab <= 32768) is read once, its maximum taken, and written once,
with more warps for longer rows; the baseline reads every row twice in blocks of 1024
with 4 warps. Longer rows take the baseline's two passes."""
import torch
import triton
import triton.language as tl


@triton.jit
def _min_p_kernel(
    logits_ptr,
    logits_stride,
    idx_mapping_ptr,
    min_p_ptr,
    vocab_size,
    BLOCK_SIZE: tl.constexpr,
    ONE_BLOCK: tl.constexpr,
):
    req_idx = tl.program_id(0)
    req_state_idx = tl.load(idx_mapping_ptr + req_idx)
    min_p = tl.load(min_p_ptr + req_state_idx).to(tl.float32)
    if min_p == 0.0:
        return
    row = logits_ptr + req_idx.to(tl.int64) * logits_stride
    if ONE_BLOCK:
        block = tl.arange(0, BLOCK_SIZE)
        mask = block < vocab_size
        logits = tl.load(row + block, mask=mask, other=float("-inf"))
        max_val = tl.max(logits, 0).to(tl.float32)
        threshold = max_val + tl.log(min_p)
        logits = tl.where(logits < threshold, float("-inf"), logits)
        tl.store(row + block, logits, mask=mask)
    else:
        max_val = float("-inf")
        for i in range(0, vocab_size, BLOCK_SIZE):
            block = i + tl.arange(0, BLOCK_SIZE)
            mask = block < vocab_size
            logits = tl.load(row + block, mask=mask, other=float("-inf"))
            max_val = tl.max(tl.maximum(logits, max_val))
        max_val = max_val.to(tl.float32)
        threshold = max_val + tl.log(min_p)
        for i in range(0, vocab_size, BLOCK_SIZE):
            block = i + tl.arange(0, BLOCK_SIZE)
            mask = block < vocab_size
            logits = tl.load(row + block, mask=mask, other=float("-inf"))
            logits = tl.where(logits < threshold, float("-inf"), logits)
            tl.store(row + block, logits, mask=mask)


def apply_min_p(logits, idx_mapping, min_p):
    """Apply min-p filtering to logits in-place."""
    num_reqs, vocab_size = logits.shape
    block = triton.next_power_of_2(vocab_size)
    if block <= 32768:
        warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
        _min_p_kernel[(num_reqs,)](
            logits, logits.stride(0), idx_mapping, min_p, vocab_size,
            BLOCK_SIZE=block, ONE_BLOCK=True, num_warps=warps,
        )
    else:
        _min_p_kernel[(num_reqs,)](
            logits, logits.stride(0), idx_mapping, min_p, vocab_size,
            BLOCK_SIZE=1024, ONE_BLOCK=False,
        )
