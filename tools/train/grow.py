"""Function-preserving growth of a trained Llama model: a wider and deeper model that computes the
same logits as the small one, so training can continue from what the small model already knows
instead of from scratch (Net2Net-style widening, identity-initialised new layers).

The rule that keeps the function and still lets every new weight learn: in the residual stream,
new hidden dimensions start at zero. Every weight that *writes* into the stream's new dimensions
or from a new unit (embedding columns, o_proj, down_proj) starts at zero; every weight that only
*reads* (q/k/v, gate/up, the LM head) gets small random values. Readers of a zero input add
nothing, and writers of zero add nothing, so the output is unchanged; but the gradient of a
zero writer is (gradient at its output) x (its non-zero random input), so no weight is stuck at a
saddle. New layers are residual blocks whose writers are zero, so each starts as the identity.

RMSNorm divides by the root mean square over the hidden size: zero-padding from H to H' shrinks
that mean by H / H', so every norm weight is scaled by sqrt(H / H') and the grown config's
rms_norm_eps by H / H': then sqrt(mean' + eps') = sqrt(H / H') * sqrt(mean + eps) exactly. (Keeping
eps would not do: early in the stream the mean square is ~4e-4, so eps = 1e-5 is not negligible.)
"""

import math

import torch

import llama_reference as ref


def _check_compatible(small, big):
    s, b = small.config, big.config
    if b.head_dim != s.head_dim:
        raise ValueError("growth keeps head_dim (RoPE frequencies depend on it): %d vs %d" % (s.head_dim, b.head_dim))
    if b.num_attention_heads // b.num_key_value_heads != s.num_attention_heads // s.num_key_value_heads:
        raise ValueError("growth keeps the query heads per KV head, so old heads keep their KV head")
    for name in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads"):
        if getattr(b, name) < getattr(s, name):
            raise ValueError("cannot shrink %s" % name)
    if b.vocab_size != s.vocab_size or b.tie_word_embeddings != s.tie_word_embeddings:
        raise ValueError("growth keeps the vocabulary and head tying")
    if s.tie_word_embeddings and b.hidden_size != s.hidden_size:
        raise ValueError("a tied head both reads and writes the stream: widen untied models only")


def _embed(dst, src, reader_std, generator):
    """dst = random readers (or zeros when reader_std is 0) with src copied into its top-left."""
    with torch.no_grad():
        if reader_std > 0:
            dst.copy_(torch.randn(dst.shape, generator=generator) * reader_std)
        else:
            dst.zero_()
        dst[tuple(slice(0, n) for n in src.shape)].copy_(src)


def _old_layer_positions(n_old, n_new):
    """Where each old layer goes in the deeper stack: spread evenly, new identity layers between."""
    return [(j * n_new) // n_old for j in range(n_old)]


def grow(small, big_config, seed, reader_std=0.02):
    """Returns a LlamaForCausalLM of big_config computing the same function as `small`."""
    ratio = small.config.hidden_size / big_config.hidden_size
    big_config.rms_norm_eps = small.config.rms_norm_eps * ratio
    big = ref.LlamaForCausalLM(big_config)
    _check_compatible(small, big)
    g = torch.Generator().manual_seed(seed)
    norm_scale = math.sqrt(ratio)
    sd_small = small.state_dict()

    def norm(dst, src):
        with torch.no_grad():
            dst.fill_(norm_scale)
            dst[:src.shape[0]].copy_(src * norm_scale)

    _embed(big.model.embed_tokens.weight, sd_small["model.embed_tokens.weight"], 0.0, g)
    if big.lm_head is not None:
        _embed(big.lm_head.weight, sd_small["lm_head.weight"], reader_std, g)
    norm(big.model.norm.weight, sd_small["model.norm.weight"])

    old_at = dict((pos, j) for j, pos in enumerate(
        _old_layer_positions(small.config.num_hidden_layers, big_config.num_hidden_layers)))
    for i, layer in enumerate(big.model.layers):
        attn, mlp = layer.self_attn, layer.mlp
        readers = (attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight, mlp.gate_proj.weight,
                   mlp.up_proj.weight)
        writers = (attn.o_proj.weight, mlp.down_proj.weight)
        if i not in old_at:  # a new layer: identity (zero writers), random readers
            with torch.no_grad():
                for w in readers:
                    w.copy_(torch.randn(w.shape, generator=g) * reader_std)
                for w in writers:
                    w.zero_()
                layer.input_layernorm.weight.fill_(norm_scale)
                layer.post_attention_layernorm.weight.fill_(norm_scale)
                for b in (attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias):
                    if b is not None:
                        b.zero_()
            continue
        prefix = "model.layers.%d." % old_at[i]
        for w, name in zip(readers, ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                     "mlp.gate_proj", "mlp.up_proj")):
            _embed(w, sd_small[prefix + name + ".weight"], reader_std, g)
        for w, name in zip(writers, ("self_attn.o_proj", "mlp.down_proj")):
            _embed(w, sd_small[prefix + name + ".weight"], 0.0, g)
        for b, name in ((attn.q_proj.bias, "q_proj"), (attn.k_proj.bias, "k_proj"), (attn.v_proj.bias, "v_proj")):
            if b is not None:
                _embed(b, sd_small[prefix + "self_attn." + name + ".bias"], 0.0, g)
        norm(layer.input_layernorm.weight, sd_small[prefix + "input_layernorm.weight"])
        norm(layer.post_attention_layernorm.weight, sd_small[prefix + "post_attention_layernorm.weight"])
    return big
