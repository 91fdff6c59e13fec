#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/seed-*): small valid
inputs of each format, so that fuzzing starts from the structure real inputs have. Run from
anywhere; rewrites the seed-* files only (crash-* regression inputs are kept).
Usage: python3 tests/fuzz/make_seed_corpus.py"""
import json
import pathlib
import shutil
import struct

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"


def varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def f_varint(field, v):
    return key(field, 0) + varint(v)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return key(field, 2) + varint(len(b)) + b


def f_float(field, v):
    return key(field, 5) + struct.pack("<f", v)


def f_double(field, v):
    return key(field, 1) + struct.pack("<d", v)


def packed_int32(field, values):
    return f_bytes(field, b"".join(varint(v) for v in values))


def packed_float(field, values):
    return f_bytes(field, b"".join(struct.pack("<f", v) for v in values))


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / ("seed-" + name)).write_bytes(data if isinstance(data, bytes) else data.encode())


def clear_seeds():
    if CORPUS.exists():
        for f in CORPUS.glob("*/seed-*"):
            f.unlink()


# ---- safetensors -------------------------------------------------------------------------
def safetensors(tensors, metadata=None):
    header = {}
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    write("safetensors_header", "two-tensors", safetensors([
        ("a", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
        ("b", "BF16", [3], b"\x80\x3f" * 3)], {"format": "pt"}))
    write("safetensors_header", "f16-scalar-and-empty", safetensors([
        ("s", "F16", [], b"\x00\x3c"), ("e", "F32", [0, 4], b"")]))
    write("safetensors_header", "empty-table", safetensors([]))


# ---- config.json -------------------------------------------------------------------------
def config_seeds():
    for model in ("target", "draft"):
        write("model_config", model, (ROOT / "models" / model / "config.json").read_text())
    write("model_config", "qwen2-llama3-rope", json.dumps({
        "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "attention_bias": True,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        "tie_word_embeddings": True, "rms_norm_eps": 1e-6, "rope_theta": 500000.0}))


# ---- tokenizer.model ---------------------------------------------------------------------
def spm_model(pieces, model_type=2, byte_fallback=False, add_dummy_prefix=True):
    out = b""
    for piece, score, kind in pieces:
        out += f_bytes(1, f_bytes(1, piece) + f_float(2, score) + f_varint(3, kind))
    out += f_bytes(2, f_varint(3, model_type) + f_varint(35, int(byte_fallback)))
    out += f_bytes(3, f_bytes(1, "identity") + f_varint(3, int(add_dummy_prefix)) + f_varint(4, 0) + f_varint(5, 1))
    return out


def tokenizer_model_seeds():
    specials = [("<unk>", 0, 2), ("<s>", 0, 3), ("</s>", 0, 3)]
    sp = "\u2581"
    words = [(sp + "hello", -1, 1), (sp + "world", -2, 1), ("h", -5, 1), ("e", -5, 1), ("l", -5, 1),
             ("o", -5, 1), (sp, -3, 1), ("he", -4, 1), ("ll", -4, 1)]
    write("tokenizer_model", "bpe-tiny", spm_model(specials + words))
    byte_pieces = [("<0x%02X>" % b, 0, 6) for b in range(256)]
    write("tokenizer_model", "bpe-byte-fallback", spm_model(specials + byte_pieces + words, byte_fallback=True))
    write("tokenizer_model", "unigram-tiny", spm_model(specials + words, model_type=1))
    shutil.copy(ROOT / "models" / "target" / "tokenizer.model", CORPUS / "tokenizer_model" / "seed-bundled")


# ---- tokenizer.json ----------------------------------------------------------------------
def tokenizer_json_seeds():
    byte_level = {
        "added_tokens": [{"id": 6, "content": "<|end|>", "special": True},
                         {"id": 7, "content": "<tool>", "special": False}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "post_processor": {"type": "ByteLevel"},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": {"\u00c3": 0, "\u00a9": 1, "a": 2, "\u0120": 3, "\u0120a": 4, "aa": 5},
                  "merges": ["\u0120 a", "a a"]}}
    write("tokenizer_json", "byte-level-bpe", json.dumps(byte_level))
    split = dict(byte_level)
    split["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}| ?\\p{L}+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    write("tokenizer_json", "split-regex", json.dumps(split))
    sp_style = {
        "added_tokens": [{"id": 0, "content": "<unk>", "special": True},
                         {"id": 1, "content": "<s>", "special": True},
                         {"id": 2, "content": "</s>", "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "byte_fallback": True, "fuse_unk": True, "unk_token": "<unk>",
                  "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0xC3>": 4, "<0xA9>": 5,
                            "\u2581": 6, "h": 7, "i": 8, "hi": 9, "\u2581hi": 10},
                  "merges": ["h i", "\u2581 hi"]}}
    write("tokenizer_json", "sentencepiece-style", json.dumps(sp_style))


# ---- chat templates ----------------------------------------------------------------------
def chat_template_seeds():
    write("chat_template", "llama3-like",
          "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
          "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
          "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")
    write("chat_template", "namespace-and-filters",
          "{%- set ns = namespace(system='') -%}{%- for m in messages -%}{%- if m.role == 'system' -%}"
          "{%- set ns.system = m.content -%}{%- elif loop.index0 is even -%}[{{ loop.index }}] {{ m.content | upper }}"
          "{%- else -%}{{ m.content[:3] ~ '...' if m.content | length > 3 else m.content }}{%- endif -%}"
          "{%- endfor -%}{{ ns.system | tojson }}{% if messages | length > 5 %}{{ raise_exception('too long') }}{% endif %}")
    write("chat_template", "tools-and-dicts",
          "{% for m in messages %}{% if m.tool_calls is defined %}{% for c in m.tool_calls %}"
          "{{ c.name }}({{ c.arguments | tojson }}){% endfor %}{% endif %}{% for k, v in {'a': 1, 'b': [1, 2]}.items() %}"
          "{{ k }}={{ v }}{% endfor %}{{ m.get('content', 'none').split(' ') | join(',') }}{% endfor %}"
          "{{ range(3) | list }}{{ '%s' if true else 'x' }}")


# ---- prompt text -------------------------------------------------------------------------
def tokenizer_text_seeds():
    write("tokenizer_text", "code", 'class Stack:\n    """A stack."""\n\n    def push(self, x):\n        self.items.append(x)\n')
    write("tokenizer_text", "prose", "The quick brown fox, 12345 times: \u00e9t\u00e9 \u20ac \U0001F600!")
    write("tokenizer_text", "whitespace", "  \t\n\n    leading and  double  spaces  ")
    write("tokenizer_text", "invalid-utf8", b"ok \xff\xfe \xc3 \xe2\x82 end")


# ---- RPC messages ------------------------------------------------------------------------
def sampling(temperature, top_k, top_p, seed=None):
    out = f_float(1, temperature) + f_varint(2, top_k) + f_float(3, top_p)
    if seed is not None:
        out += f_varint(4, seed)
    return out


def draft_tree(tokens, parents, probs=None):
    out = packed_int32(1, tokens) + packed_int32(2, parents)
    if probs:
        out += packed_float(3, probs)
    return out


def rpc_seeds():
    chain = draft_tree([5, 9, 11], [-1, 0, 1])
    tree = draft_tree([5, 6, 9, 10], [-1, -1, 0, 0])
    dense = [0.0] * 64
    dense[5], dense[6] = 0.7, 0.3
    sampled = draft_tree([5], [-1], dense)
    write("draft_tree", "chain", chain)
    write("draft_tree", "tree", tree)
    write("draft_tree", "sampled", sampled)
    write("draft_tree", "empty", b"")

    verify = f_bytes(1, f_varint(1, 7) + f_bytes(2, chain)) + f_bytes(1, f_varint(1, 8) + f_bytes(2, tree))
    write("verify_request", "two-items", verify)
    write("verify_request", "plain-decode", f_bytes(1, f_varint(1, 3)))
    write("verify_request", "sampled", f_bytes(1, f_varint(1, 4) + f_bytes(2, sampled)))

    # The step socket's compact encoding (common/rpc/step_codec.h), host order = little-endian here.
    def array(fmt, values):
        return struct.pack("<I", len(values)) + b"".join(struct.pack("<" + fmt, v) for v in values)

    def compact_item(rid, tokens, parents, probs=(), scores=()):
        return struct.pack("<Q", rid) + array("i", tokens) + array("i", parents) + array("f", probs) + array("f", scores)

    def compact_result(rid, accept, code, message, tokens):
        m = message.encode()
        return struct.pack("<QiiI", rid, accept, code, len(m)) + m + array("i", tokens)
    write("step_codec", "request-chain-and-plain",
          struct.pack("<I", 2) + compact_item(7, [5, 9, 11], [-1, 0, 1], scores=[0.9, 0.5, 0.2]) + compact_item(3, [], []))
    write("step_codec", "request-sampled", struct.pack("<I", 1) + compact_item(4, [5], [-1], dense))
    write("step_codec", "answer",
          struct.pack("<I", 2) + compact_result(7, 2, 0, "", [5, 9, 12]) +
          compact_result(3, 0, 11, "past the context", []) + struct.pack("<dii", 0.0095, 120, 128))

    def compact_propose(rid, known, new, depth, branching, max_nodes, temperature, top_k, top_p, seed):
        return (struct.pack("<Qi", rid, known) + array("i", new) + struct.pack("<iii", depth, branching, max_nodes) +
                struct.pack("<fifQ", temperature, top_k, top_p, seed))
    write("step_codec", "propose-request",
          struct.pack("<I", 2) + compact_propose(1, 0, [1, 2, 3, 1, 2], 4, 1, 0, 0.0, 0, 1.0, 0) +
          compact_propose(2, 3, [4], 3, 2, 5, 0.8, 40, 0.95, 1234))
    write("step_codec", "propose-answer",
          struct.pack("<I", 2) + struct.pack("<QiI", 1, 0, 0) + array("i", [5, 9]) + array("i", [-1, 0]) +
          array("f", []) + array("f", [0.8, 0.6]) +
          struct.pack("<QiI", 2, 9, 6) + b"resend" + array("i", []) * 2 + array("f", []) * 2 + struct.pack("<d", 0.002))

    write("prefill_request", "greedy", f_bytes(1, f_varint(1, 1) + packed_int32(2, [1, 17, 42, 99])))
    write("prefill_request", "sampled", f_bytes(1, f_varint(1, 2) + packed_int32(2, [1, 5]) +
                                         f_bytes(3, sampling(0.8, 40, 0.95, 1234))))

    def propose(rid, known, new, depth, branching=0, max_nodes=0, samp=b""):
        shape = f_varint(1, depth) + f_varint(2, branching) + f_varint(3, max_nodes)
        item = f_varint(1, rid) + f_varint(2, known) + packed_int32(3, new) + f_bytes(4, shape)
        if samp:
            item += f_bytes(5, samp)
        return f_bytes(1, item)
    write("propose_request", "new-session", propose(1, 0, [1, 2, 3, 1, 2, 3, 1, 2], 4))
    write("propose_request", "tree-and-sampled", propose(2, 0, [4, 4, 4, 4], 3, 2, 5, sampling(1.0, 0, 1.0, 9)) +
          propose(3, 0, [7, 8, 7, 8, 7], 2))
    write("propose_request", "known-length", propose(1, 3, [4, 5], 2))


def main():
    clear_seeds()
    safetensors_seeds()
    config_seeds()
    tokenizer_model_seeds()
    tokenizer_text_seeds()
    tokenizer_json_seeds()
    chat_template_seeds()
    rpc_seeds()
    for d in sorted(CORPUS.iterdir()):
        print(f"{d.relative_to(ROOT)}: {len(list(d.iterdir()))} files")


if __name__ == "__main__":
    main()
