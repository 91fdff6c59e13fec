"""Writes a trained LlamaForCausalLM as a Hugging Face model directory the engine loads unchanged:
config.json, model.safetensors (F32, F16 or BF16) and a copy of tokenizer.model."""

import json
import os
import shutil
import struct

import torch

_DTYPES = {"f32": ("F32", torch.float32), "f16": ("F16", torch.float16), "bf16": ("BF16", torch.bfloat16)}


def _tensor_bytes(t, file_dtype):
    t = t.detach().to(torch.float32).contiguous().cpu()
    if file_dtype == "F32":
        return t.numpy().astype("<f4").tobytes()
    if file_dtype == "F16":
        return t.to(torch.float16).numpy().astype("<f2").tobytes()
    # BF16: round to nearest even (torch's conversion), then keep the raw 16 bits.
    return t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()


def write_safetensors(path, tensors, dtype="bf16"):
    """tensors: {name: tensor}. Header sorted by name; data offsets 8-byte aligned."""
    file_dtype = _DTYPES[dtype][0]
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        raw = _tensor_bytes(tensors[name], file_dtype)
        header[name] = {"dtype": file_dtype, "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(raw)]}
        pad = (-len(raw)) % 8
        blobs.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((-len(text)) % 8)  # keeps the data area 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def export_model_dir(model, out_dir, tokenizer_model=None, dtype="bf16"):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        d = model.config.to_dict()
        d["torch_dtype"] = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype]
        json.dump(d, f, indent=2, sort_keys=True)
        f.write("\n")
    write_safetensors(os.path.join(out_dir, "model.safetensors"), model.state_dict(), dtype)
    if tokenizer_model:
        shutil.copyfile(tokenizer_model, os.path.join(out_dir, "tokenizer.model"))
