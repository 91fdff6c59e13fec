#!/usr/bin/python3
"""An independent PyTorch reference of the Llama-family decoder forward.

Written from the architecture, not from any library: it reads a Hugging Face model directory
(config.json plus model.safetensors or a sharded model.safetensors.index.json) with its own
safetensors parser, so the engine is checked against code that shares nothing with it. The same
`LlamaForCausalLM` module is the one tools/train/ trains, so there is a single torch definition
of the model in the repository.

Covers: RMSNorm, rotary embeddings with Llama's half-split rotation (pairs (i, i + d/2)) and
optional llama3 rope_scaling, grouped-query attention with a causal mask, optional q/k/v bias
(Qwen2), SwiGLU MLP, tied or untied lm_head.

CLI:
  llama_reference.py --model DIR --tokens-file IN.json --out OUT.bin [--dtype float32|float64]
  llama_reference.py --jobs JOBS.json [--dtype ...]   (JOBS.json: [{"model", "tokens_file", "out"}])
IN.json is a list of prompts (lists of token ids). OUT.bin receives, for each prompt in order,
the float32 logits of every position (n_tokens x vocab), little-endian, concatenated.
"""

import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# safetensors: an 8-byte little-endian header length, a JSON header mapping tensor names to
# {dtype, shape, data_offsets: [begin, end)} relative to the data area, then the raw data.
# ---------------------------------------------------------------------------------------------

_ELEMENT_SIZE = {"F32": 4, "F16": 2, "BF16": 2}


def _decode_tensor(raw, dtype, shape):
    """Turns the raw little-endian bytes of one tensor into a float32 torch tensor."""
    if len(raw) == 0:
        return torch.zeros(shape, dtype=torch.float32)
    buf = bytearray(raw)  # frombuffer wants a writable buffer
    if dtype == "F32":
        t = torch.frombuffer(buf, dtype=torch.float32)
    elif dtype == "F16":
        t = torch.frombuffer(buf, dtype=torch.float16).to(torch.float32)
    elif dtype == "BF16":
        # bfloat16 is the top half of a float32: widen the 16 bits and shift them up.
        bits = torch.frombuffer(buf, dtype=torch.int16).to(torch.int32) & 0xFFFF
        t = (bits << 16).view(torch.float32)
    else:
        raise ValueError("unsupported safetensors dtype %r" % dtype)
    return t.reshape(shape).clone()


def read_safetensors(path):
    """Returns {name: float32 tensor} for every tensor of one .safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: shorter than the 8-byte header length" % path)
    (header_len,) = struct.unpack("<Q", data[:8])
    if 8 + header_len > len(data):
        raise ValueError("%s: header length %d beyond the file" % (path, header_len))
    header = json.loads(data[8:8 + header_len].decode("utf-8"))
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _ELEMENT_SIZE:
            raise ValueError("%s: tensor %s has unsupported dtype %s" % (path, name, dtype))
        shape = [int(s) for s in info["shape"]]
        begin, end = info["data_offsets"]
        n = 1
        for s in shape:
            n *= s
        if end - begin != n * _ELEMENT_SIZE[dtype] or base + end > len(data):
            raise ValueError("%s: tensor %s has inconsistent offsets" % (path, name))
        tensors[name] = _decode_tensor(data[base + begin:base + end], dtype, shape)
    return tensors


def read_model_weights(model_dir):
    """Reads model.safetensors, or every shard named by model.safetensors.index.json."""
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(single):
        return read_safetensors(single)
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        tensors = {}
        for shard in sorted(set(weight_map.values())):
            tensors.update(read_safetensors(os.path.join(model_dir, shard)))
        return tensors
    raise FileNotFoundError("%s: neither model.safetensors nor model.safetensors.index.json" % model_dir)


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------


class LlamaConfig:
    """The hyper-parameters of config.json that the forward depends on."""

    def __init__(self, **kw):
        self.model_type = kw.get("model_type", "llama")
        self.hidden_size = int(kw["hidden_size"])
        self.intermediate_size = int(kw["intermediate_size"])
        self.num_hidden_layers = int(kw["num_hidden_layers"])
        self.num_attention_heads = int(kw["num_attention_heads"])
        kv = kw.get("num_key_value_heads")
        self.num_key_value_heads = int(kv) if kv is not None else self.num_attention_heads
        hd = kw.get("head_dim")
        self.head_dim = int(hd) if hd is not None else self.hidden_size // self.num_attention_heads
        self.vocab_size = int(kw["vocab_size"])
        self.rms_norm_eps = float(kw.get("rms_norm_eps", 1e-6))
        self.rope_theta = float(kw.get("rope_theta", 10000.0))
        self.rope_scaling = kw.get("rope_scaling")
        self.tie_word_embeddings = bool(kw.get("tie_word_embeddings", False))
        # Qwen2's config.json has no attention_bias key: its q/k/v projections always carry one.
        self.attention_bias = bool(kw.get("attention_bias", self.model_type == "qwen2"))
        self.max_position_embeddings = int(kw.get("max_position_embeddings", 2048))
        self.bos_token_id = int(kw.get("bos_token_id", 1))
        self.eos_token_id = int(kw.get("eos_token_id", 2))
        if self.num_attention_heads % self.num_key_value_heads != 0:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim % 2 != 0:
            raise ValueError("head_dim must be even for rotary embeddings")

    @classmethod
    def from_file(cls, path):
        with open(path) as f:
            return cls(**json.load(f))

    def to_dict(self):
        """Hugging Face config.json keys (used when exporting trained models)."""
        d = {
            "architectures": ["LlamaForCausalLM"],
            "model_type": self.model_type,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "vocab_size": self.vocab_size,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "tie_word_embeddings": self.tie_word_embeddings,
            "attention_bias": self.attention_bias,
            "max_position_embeddings": self.max_position_embeddings,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "hidden_act": "silu",
        }
        if self.rope_scaling is not None:
            d["rope_scaling"] = self.rope_scaling
        return d


# ---------------------------------------------------------------------------------------------
# Rotary embeddings
# ---------------------------------------------------------------------------------------------


def rope_inverse_frequencies(config):
    """inv_freq[i] = theta^(-2i/d), optionally rescaled as Llama 3.1's rope_scaling prescribes."""
    d = config.head_dim
    exponents = torch.arange(0, d, 2, dtype=torch.float64) / d
    inv_freq = 1.0 / (config.rope_theta ** exponents)
    scaling = config.rope_scaling
    if scaling:
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind != "llama3":
            raise ValueError("unsupported rope_scaling type %r" % kind)
        factor = float(scaling["factor"])
        low = float(scaling.get("low_freq_factor", 1.0))
        high = float(scaling.get("high_freq_factor", 4.0))
        original = float(scaling.get("original_max_position_embeddings", 8192))
        # Wavelengths shorter than original/high stay; longer than original/low are divided
        # by `factor`; in between, blend linearly in original/wavelength.
        scaled = []
        for f in inv_freq.tolist():
            wavelength = 2.0 * math.pi / f
            if wavelength < original / high:
                scaled.append(f)
            elif wavelength > original / low:
                scaled.append(f / factor)
            else:
                smooth = (original / wavelength - low) / (high - low)
                scaled.append((1.0 - smooth) * f / factor + smooth * f)
        inv_freq = torch.tensor(scaled, dtype=torch.float64)
    return inv_freq


def rotate(x, cos, sin):
    """Llama's half-split rotation: (a, b) = (x[:d/2], x[d/2:]) -> (a cos - b sin, b cos + a sin).

    x: (..., seq, head_dim); cos, sin: (seq, head_dim / 2).
    """
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


# ---------------------------------------------------------------------------------------------
# The model. Module names mirror the Hugging Face tensor names, so state_dict() keys are the
# safetensors names (model.layers.0.self_attn.q_proj.weight, ...).
# ---------------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.n_kv = config.num_key_value_heads
        self.head_dim = config.head_dim
        h, d = config.hidden_size, config.head_dim
        bias = config.attention_bias
        self.q_proj = nn.Linear(h, self.n_heads * d, bias=bias)
        self.k_proj = nn.Linear(h, self.n_kv * d, bias=bias)
        self.v_proj = nn.Linear(h, self.n_kv * d, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * d, h, bias=False)

    def forward(self, x, cos, sin, mask):
        bsz, seq, _ = x.shape
        d = self.head_dim
        q = self.q_proj(x).view(bsz, seq, self.n_heads, d).transpose(1, 2)
        k = self.k_proj(x).view(bsz, seq, self.n_kv, d).transpose(1, 2)
        v = self.v_proj(x).view(bsz, seq, self.n_kv, d).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        # Grouped-query attention: query head h reads KV head h // (n_heads / n_kv).
        group = self.n_heads // self.n_kv
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d) + mask
        out = torch.softmax(scores, dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(bsz, seq, self.n_heads * d))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        h, i = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaBody(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(config) for _ in range(config.num_hidden_layers)])
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = LlamaBody(config)
        self.lm_head = None
        if not config.tie_word_embeddings:
            self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.register_buffer("inv_freq", rope_inverse_frequencies(config), persistent=False)

    def hidden_states(self, tokens):
        """tokens: (batch, seq) int64 starting at position 0 -> final-norm hidden states."""
        seq = tokens.shape[1]
        x = self.model.embed_tokens(tokens)
        # Angles in float64, then cast: keeps the reference's own rounding far below the tolerance.
        positions = torch.arange(seq, dtype=torch.float64)
        angles = torch.outer(positions, self.inv_freq.to(torch.float64))
        cos = torch.cos(angles).to(x.dtype)
        sin = torch.sin(angles).to(x.dtype)
        mask = torch.full((seq, seq), float("-inf"), dtype=x.dtype).triu(1)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        return self.model.norm(x)

    def head_weight(self):
        return self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def forward(self, tokens):
        """tokens: (batch, seq) -> logits (batch, seq, vocab)."""
        hidden = self.hidden_states(tokens)
        if getattr(self, "int8_head_input", False):
            hidden = int8_activations(hidden)
        return hidden @ self.head_weight().t()

    def load_hf_state(self, tensors):
        """Loads {hf_name: tensor}; raises naming any missing, unexpected or misshapen tensor."""
        own = self.state_dict()
        missing = sorted(set(own) - set(tensors))
        unexpected = sorted(set(tensors) - set(own))
        if self.lm_head is None:
            unexpected = [n for n in unexpected if n != "lm_head.weight"]  # tied: ignore a copy
        if missing or unexpected:
            raise ValueError("tensor mismatch: missing %s, unexpected %s" % (missing, unexpected))
        for name, value in own.items():
            if tuple(tensors[name].shape) != tuple(value.shape):
                raise ValueError("%s: shape %s, expected %s" % (name, list(tensors[name].shape), list(value.shape)))
        self.load_state_dict({n: tensors[n] for n in own}, strict=True)


def int8_activations(x):
    """x as the engine's int8 matmul sees it (common/engine/cpu/matmul_q8.cc): each block of 32
    values along the last axis rounded to a multiple of d = max|x| / 127, in float32 as there."""
    shape = x.shape
    blocks = x.to(torch.float32).reshape(*shape[:-1], shape[-1] // 32, 32)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    inverse = torch.where(amax == 0, torch.zeros_like(amax), 127.0 / amax)
    q = torch.round(blocks * inverse).clamp(-127, 127)  # round half to even, as the engine
    return (q.to(torch.float64) * (amax / 127.0).to(torch.float64)).reshape(shape).to(x.dtype)


def quantize_activations(model):
    """Makes every matrix product of `model` whose rows are whole blocks of 32 take its input
    through int8_activations, as --quantize int8 serves a model (use it on the weights
    `splitspec make-model --int8-of` writes)."""
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.in_features % 32 == 0:
            module.register_forward_pre_hook(lambda _, args: (int8_activations(args[0]),))
    # A tied head multiplies by the embedding table, not through an nn.Linear.
    model.int8_head_input = model.lm_head is None and model.config.hidden_size % 32 == 0
    return model


def load_model(model_dir, dtype=torch.float32):
    config = LlamaConfig.from_file(os.path.join(model_dir, "config.json"))
    model = LlamaForCausalLM(config)
    model.load_hf_state(read_model_weights(model_dir))
    return model.to(dtype).eval()


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------


def run_job(model_dir, tokens_file, out_path, dtype, int8=False):
    model = load_model(model_dir, dtype)
    if int8:
        quantize_activations(model)
    with open(tokens_file) as f:
        prompts = json.load(f)
    vocab = model.config.vocab_size
    with open(out_path, "wb") as out, torch.no_grad():
        for prompt in prompts:
            if not prompt or any((not isinstance(t, int)) or t < 0 or t >= vocab for t in prompt):
                raise ValueError("%s: each prompt must be a non-empty list of token ids below %d" % (tokens_file, vocab))
            logits = model(torch.tensor([prompt], dtype=torch.int64))[0]
            out.write(logits.to(torch.float32).contiguous().numpy().astype("<f4").tobytes())


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="Hugging Face model directory")
    parser.add_argument("--tokens-file", help="JSON list of prompts (lists of token ids)")
    parser.add_argument("--out", help="output: float32 logits, all positions, all prompts")
    parser.add_argument("--jobs", help="JSON list of {model, tokens_file, out[, int8_activations]}: several runs in one process "
                                       "(importing torch costs seconds)")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                        help="compute precision (weights are widened from their file dtype)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32

    if args.jobs:
        with open(args.jobs) as f:
            jobs = json.load(f)
    elif args.model and args.tokens_file and args.out:
        jobs = [{"model": args.model, "tokens_file": args.tokens_file, "out": args.out}]
    else:
        parser.error("give --model, --tokens-file and --out, or --jobs")
    for job in jobs:
        run_job(job["model"], job["tokens_file"], job["out"], dtype, job.get("int8_activations", False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
