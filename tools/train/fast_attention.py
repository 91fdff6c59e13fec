"""Grouped-query attention for training, without materialising repeated K/V heads.

tests/reference/llama_reference.py's Attention repeats each KV head for its query heads
(`repeat_interleave`) and divides the full score tensor by sqrt(head_dim): clear, and right for a
reference, but at training shapes the copies, their backward (index_add) and the extra passes
over the (batch, heads, seq, seq) scores cost more than the matrix products. This forward folds
each KV head's query heads into the sequence axis of one product, scales q instead of the scores,
and computes the same function (same weights, same state dict). `use_fast_attention(model)`
switches a model's layers to it.
"""

import math
import types

import llama_reference as ref


def _grouped_forward(self, x, cos, sin, mask):
    bsz, seq, _ = x.shape
    d, n_kv = self.head_dim, self.n_kv
    group = self.n_heads // n_kv
    # Query head h = kv * group + g reads KV head kv, as in the reference.
    q = self.q_proj(x).view(bsz, seq, n_kv, group, d).permute(0, 2, 3, 1, 4)
    k = self.k_proj(x).view(bsz, seq, n_kv, d).transpose(1, 2)
    v = self.v_proj(x).view(bsz, seq, n_kv, d).transpose(1, 2)
    q, k = ref.rotate(q, cos, sin), ref.rotate(k, cos, sin)
    q = (q * (1.0 / math.sqrt(d))).reshape(bsz, n_kv, group * seq, d)
    scores = (q @ k.transpose(-1, -2)).view(bsz, n_kv, group, seq, seq) + mask
    probs = scores.softmax(dim=-1).view(bsz, n_kv, group * seq, seq)
    out = (probs @ v).view(bsz, n_kv, group, seq, d).permute(0, 3, 1, 2, 4)
    return self.o_proj(out.reshape(bsz, seq, self.n_heads * d))


def use_fast_attention(model):
    for layer in model.model.layers:
        layer.self_attn.forward = types.MethodType(_grouped_forward, layer.self_attn)
    return model
