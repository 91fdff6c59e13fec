#!/usr/bin/python3
"""Our model dir (config.json, model.safetensors, tokenizer.model) -> GGUF (llama arch) with
the weights' dtype kept (F32 / F16 / BF16; norms F32), for speed comparisons with llama.cpp.
  LLAMA_CPP_DIR=/path/to/llama.cpp /usr/bin/python3 to_gguf.py MODEL_DIR OUT.gguf
Uses the gguf-py package of that llama.cpp checkout."""
import json, os, struct, sys
import numpy as np
sys.path.insert(0, os.path.join(os.environ.get("LLAMA_CPP_DIR", "llama.cpp"), "gguf-py"))
import gguf
import sentencepiece as spm

src, out = sys.argv[1], sys.argv[2]
cfg = json.load(open(f"{src}/config.json"))
f = open(f"{src}/model.safetensors", "rb")
n = struct.unpack("<Q", f.read(8))[0]
header = json.loads(f.read(n))
base = 8 + n
data = open(f"{src}/model.safetensors", "rb").read()

def raw(name):
    h = header[name]
    a, b = h["data_offsets"]
    buf = data[base + a: base + b]
    dt = h["dtype"]
    if dt == "F32": arr = np.frombuffer(buf, dtype=np.float32)
    elif dt == "F16": arr = np.frombuffer(buf, dtype=np.float16)
    elif dt == "BF16": arr = np.frombuffer(buf, dtype=np.uint16)
    else: raise SystemExit("dtype " + dt)
    return arr.reshape(h["shape"]), dt

def as_f32(arr, dt):
    if dt == "BF16": return (arr.astype(np.uint32) << 16).view(np.float32)
    return arr.astype(np.float32)

def permute(w, n_head):  # HF rotate-half layout -> llama.cpp's interleaved pairs
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

w = gguf.GGUFWriter(out, "llama")
L, H, Hkv = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
hd = cfg.get("head_dim", cfg["hidden_size"] // H)
w.add_name("splitspec-" + src.rstrip("/").split("/")[-1])
w.add_context_length(cfg["max_position_embeddings"])
w.add_embedding_length(cfg["hidden_size"])
w.add_block_count(L)
w.add_feed_forward_length(cfg["intermediate_size"])
w.add_rope_dimension_count(hd)
w.add_head_count(H)
w.add_head_count_kv(Hkv)
w.add_key_length(hd)
w.add_value_length(hd)
w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
w.add_vocab_size(cfg["vocab_size"])
matrix_dtype = header["model.layers.0.mlp.up_proj.weight"]["dtype"]
w.add_file_type({"F32": gguf.LlamaFileType.ALL_F32, "F16": gguf.LlamaFileType.MOSTLY_F16,
                 "BF16": gguf.LlamaFileType.MOSTLY_BF16}[matrix_dtype])
sp = spm.SentencePieceProcessor(model_file=f"{src}/tokenizer.model")
tokens, scores, types = [], [], []
for i in range(cfg["vocab_size"]):
    if i < sp.get_piece_size():
        tokens.append(sp.id_to_piece(i).encode()); scores.append(sp.get_score(i))
        types.append(gguf.TokenType.CONTROL if sp.is_control(i) else gguf.TokenType.UNKNOWN if sp.is_unknown(i) else gguf.TokenType.BYTE if sp.is_byte(i) else gguf.TokenType.NORMAL)
    else:
        tokens.append(f"[PAD{i}]".encode()); scores.append(0.0); types.append(gguf.TokenType.UNUSED)
w.add_tokenizer_model("llama")
w.add_token_list(tokens); w.add_token_scores(scores); w.add_token_types(types)
w.add_bos_token_id(cfg.get("bos_token_id", 1)); w.add_eos_token_id(cfg.get("eos_token_id", 2))

def put(gname, hname, perm_heads=None, norm=False):
    arr, dt = raw(hname)
    if norm:
        w.add_tensor(gname, as_f32(arr, dt)); return
    if perm_heads: arr = permute(arr, perm_heads)
    if dt == "BF16":
        w.add_tensor(gname, np.ascontiguousarray(arr), raw_shape=arr.shape, raw_dtype=gguf.GGMLQuantizationType.BF16)
    else:
        w.add_tensor(gname, np.ascontiguousarray(arr))

put("token_embd.weight", "model.embed_tokens.weight")
put("output_norm.weight", "model.norm.weight", norm=True)
if "lm_head.weight" in header: put("output.weight", "lm_head.weight")
for i in range(L):
    p = f"model.layers.{i}."
    put(f"blk.{i}.attn_norm.weight", p + "input_layernorm.weight", norm=True)
    put(f"blk.{i}.attn_q.weight", p + "self_attn.q_proj.weight", perm_heads=H)
    put(f"blk.{i}.attn_k.weight", p + "self_attn.k_proj.weight", perm_heads=Hkv)
    put(f"blk.{i}.attn_v.weight", p + "self_attn.v_proj.weight")
    put(f"blk.{i}.attn_output.weight", p + "self_attn.o_proj.weight")
    put(f"blk.{i}.ffn_norm.weight", p + "post_attention_layernorm.weight", norm=True)
    put(f"blk.{i}.ffn_gate.weight", p + "mlp.gate_proj.weight")
    put(f"blk.{i}.ffn_up.weight", p + "mlp.up_proj.weight")
    put(f"blk.{i}.ffn_down.weight", p + "mlp.down_proj.weight")
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print("wrote", out)
