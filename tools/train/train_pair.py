#!/usr/bin/python3
"""Trains splitspec's default model pair from scratch, in one command:

  /usr/bin/python3 tools/train/train_pair.py --out models/

1. corpus: Python standard library sources (code) and the Python Language Reference topics plus
   Debian's licence texts (prose), split into train / held-out by file (tools/train/corpus.py);
2. tokenizer: SentencePiece BPE with byte fallback, trained by Debian's `spm_train`;
3. target: a Llama-architecture model (RMSNorm, RoPE, SwiGLU, GQA) trained on next-token loss;
   draft: a much smaller Llama distilled from the target's logits (KL on the soft targets);
4. export: Hugging Face directories (config.json, model.safetensors in BF16, tokenizer.model)
   under --out/target and --out/draft, plus --out/README.md with sizes, losses, timings and
   greedy samples measured on the exported (BF16-rounded) weights.

The model is tests/reference/llama_reference.py's LlamaForCausalLM: one torch definition of the
architecture for the engine's reference test and for training. Seeds are fixed; with the same
thread count the run repeats exactly. Intermediate files go to --work (default
/tmp/splitspec-train); stages whose outputs exist there are reused with --resume.
"""

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

# Debian's torch hands fp32 matrix products to the system BLAS (OpenBLAS, pthreads build), whose
# own pool of one thread per core then competes with torch's OpenMP threads for the same cores:
# a target step took 1.25 s with both pools, 0.77 s with OpenBLAS kept to the calling thread.
# The library reads this when it loads, so it must be set before torch is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))

import corpus  # noqa: E402
import hf_export  # noqa: E402
import llama_reference as ref  # noqa: E402
from progress import Progress  # noqa: E402

BOS, EOS = 1, 2

# Model shapes and schedules. `full` is the committed pair; `smoke` checks the pipeline in a
# minute or two.
PRESETS = {
    "full": {
        "vocab_size": 4096,
        "target": dict(hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                       num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=False),
        "draft": dict(hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True),
        "seq_len": 256, "batch": 8,
        "target_steps": 5000, "target_lr": 2e-3,
        "draft_steps": 2500, "draft_lr": 3e-3,
        "eval_windows": 48, "prose_fraction": 0.3, "repeat_fraction": 0.2,
    },
    "smoke": {
        "vocab_size": 1024,
        "target": dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False),
        "draft": dict(hidden_size=32, intermediate_size=96, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True),
        "seq_len": 64, "batch": 4,
        "target_steps": 40, "target_lr": 3e-3,
        "draft_steps": 40, "draft_lr": 3e-3,
        "eval_windows": 8, "prose_fraction": 0.3, "repeat_fraction": 0.15,
    },
}

SAMPLE_PROMPTS = [
    ("code", "import os\nimport sys\n\n\ndef main(argv):\n"),
    ("code", "class Stack:\n    \"\"\"A last-in first-out stack.\"\"\"\n\n    def __init__(self):\n"),
    ("code", "    for i in range(len(items)):\n"),
    ("prose", "The for statement is used to"),
    ("prose", "This program is free software; you can redistribute it"),
    ("prose", "An exception is raised when"),
]


def log(msg):
    sys.stderr.write("[train_pair %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


# ---------------------------------------------------------------------------------------------
# Stages 1-2: corpus and tokenizer
# ---------------------------------------------------------------------------------------------


def build_corpus(work):
    parts = corpus.build()
    os.makedirs(os.path.join(work, "corpus"), exist_ok=True)
    stats = {}
    for kind, (train, held) in parts.items():
        stats[kind] = {"train_files": len(train), "heldout_files": len(held),
                       "train_chars": sum(len(t) for _, t in train),
                       "heldout_chars": sum(len(t) for _, t in held),
                       "heldout_keys": [k for k, _ in held]}
    # spm_train reads one sentence per line; empty lines carry nothing.
    with open(os.path.join(work, "corpus", "spm_input.txt"), "w", encoding="utf-8") as f:
        for kind in sorted(parts):
            for _, text in parts[kind][0]:
                for line in text.splitlines():
                    if line.strip():
                        f.write(line + "\n")
    return parts, stats


def train_tokenizer(work, vocab_size, seed, threads):
    prefix = os.path.join(work, "tokenizer")
    # Llama's settings: identity normalisation and no whitespace squeezing (indentation is
    # content in code), byte fallback for anything outside the vocabulary, digits split.
    cmd = ["spm_train", "--input=" + os.path.join(work, "corpus", "spm_input.txt"),
           "--model_prefix=" + prefix, "--model_type=bpe", "--vocab_size=%d" % vocab_size,
           "--byte_fallback=true", "--character_coverage=0.9995",
           "--normalization_rule_name=identity", "--remove_extra_whitespaces=false",
           "--add_dummy_prefix=true", "--split_digits=true", "--allow_whitespace_only_pieces=true",
           "--unk_id=0", "--bos_id=1", "--eos_id=2", "--pad_id=-1",
           "--max_sentence_length=8192", "--input_sentence_size=2000000",
           "--shuffle_input_sentence=true", "--random_seed=%d" % seed,
           "--num_threads=%d" % threads, "--minloglevel=1"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return prefix + ".model"


def encode_documents(sp, docs):
    """One stream: BOS doc EOS BOS doc EOS ... as an int64 tensor."""
    ids = []
    for _, text in docs:
        ids.append(BOS)
        ids.extend(sp.encode(text))
        ids.append(EOS)
    return torch.tensor(ids, dtype=torch.int64)


# ---------------------------------------------------------------------------------------------
# Stage 3: training
# ---------------------------------------------------------------------------------------------


def init_weights(model, seed):
    """GPT-2 style: N(0, 0.02), residual output projections scaled by 1/sqrt(2 * layers)."""
    g = torch.Generator().manual_seed(seed)
    n_layers = model.config.num_hidden_layers
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.endswith(".bias"):
                p.zero_()
            else:
                std = 0.02
                if name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                    std /= math.sqrt(2 * n_layers)
                p.copy_(torch.randn(p.shape, generator=g) * std)


def make_optimizer(model, lr):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


def pick_precision(requested, device):
    """bf16-mixed (bf16 matrix products, fp32 weights, optimiser state and losses) where the
    hardware multiplies bf16 natively, fp32 elsewhere. On this machine's AVX512-BF16 cores oneDNN's
    bf16 products made a target step 2.6x faster (0.77 -> 0.30 s); without native bf16 they would
    be emulated and slower than fp32."""
    if requested != "auto":
        return requested
    if device.startswith("cuda"):
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "fp32"
    try:
        with open("/proc/cpuinfo") as f:
            native = any(line.startswith("flags") and "avx512_bf16" in line.split() for line in f)
    except OSError:
        native = False
    return "bf16-mixed" if native else "fp32"


def mixed_precision(device, precision):
    kind = "cuda" if device.startswith("cuda") else "cpu"
    return torch.autocast(kind, dtype=torch.bfloat16, enabled=precision == "bf16-mixed")


def lr_at(step, total, peak):
    warmup = max(1, total // 20)
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


class Batches:
    """Random windows of seq_len + 1 tokens; a window is prose with probability prose_fraction.

    With probability repeat_fraction a window is instead a short random span (4-64 tokens) of
    the corpus repeated to fill it. Text repeats in real traffic (code that restates names,
    quoted passages, templated lines) and a model continues such text only if it has learned
    to copy from its context (induction heads); at this model size and token budget natural
    windows alone do not teach that, so without these windows the target would not continue a
    repetition and neither speculation nor n-gram lookup would pay on repetitive workloads."""

    def __init__(self, streams, seq_len, batch, prose_fraction, seed, repeat_fraction=0.0):
        self.code, self.prose = streams["code"], streams["prose"]
        self.seq_len, self.batch, self.prose_fraction = seq_len, batch, prose_fraction
        self.repeat_fraction = repeat_fraction
        self.g = torch.Generator().manual_seed(seed)

    def repeat_span(self):
        """A span length log-uniform in [4, 64], so short periods come often: they are the easiest
        copies to learn. The target's shape on random tokens repeated with period 8 learned to copy
        within 300 steps; with periods drawn uniformly from 8-64 it had not after 1200."""
        u = torch.rand((), generator=self.g).item()
        return int(4 * 16 ** u)

    def next(self):
        rows = []
        for _ in range(self.batch):
            use_prose = torch.rand((), generator=self.g).item() < self.prose_fraction
            stream = self.prose if use_prose else self.code
            repeat = torch.rand((), generator=self.g).item() < self.repeat_fraction
            span = self.repeat_span() if repeat else self.seq_len + 1
            start = torch.randint(0, len(stream) - span, (), generator=self.g).item()
            window = stream[start:start + span]
            if repeat:
                window = window.repeat((self.seq_len + 1 + span - 1) // span)[:self.seq_len + 1]
            rows.append(window)
        x = torch.stack(rows)
        return x[:, :-1], x[:, 1:]


def train_target(model, batches, steps, lr, device, precision):
    opt = make_optimizer(model, lr)
    model.train()
    bar = Progress(steps, "target")
    smoothed = None
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr)
        x, y = batches.next()
        x, y = x.to(device), y.to(device)
        with mixed_precision(device, precision):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        smoothed = loss.item() if smoothed is None else 0.95 * smoothed + 0.05 * loss.item()
        bar.update(1, loss=smoothed)
    return bar.close()


def distill_draft(draft, target, batches, steps, lr, device, precision):
    """Minimises KL(target || draft) over every position: the draft learns the target's whole
    next-token distribution, which is what speculative acceptance rewards."""
    opt = make_optimizer(draft, lr)
    draft.train()
    target.eval()
    bar = Progress(steps, "draft")
    smoothed = None
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr)
        x, _ = batches.next()
        x = x.to(device)
        with mixed_precision(device, precision):
            with torch.no_grad():
                teacher_logits = target(x)
            student_logits = draft(x)
        teacher = F.log_softmax(teacher_logits.float(), dim=-1)
        student = F.log_softmax(student_logits.float(), dim=-1)
        vocab = student.shape[-1]
        loss = F.kl_div(student.reshape(-1, vocab), teacher.reshape(-1, vocab),
                        log_target=True, reduction="batchmean")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        smoothed = loss.item() if smoothed is None else 0.95 * smoothed + 0.05 * loss.item()
        bar.update(1, kl=smoothed)
    return bar.close()


@torch.no_grad()
def heldout_loss(model, stream, seq_len, max_windows, device):
    """Mean next-token cross-entropy over the first non-overlapping windows of the stream."""
    model.eval()
    total, count = 0.0, 0
    n_windows = min(max_windows, (len(stream) - 1) // seq_len)
    for w in range(n_windows):
        chunk = stream[w * seq_len:(w + 1) * seq_len + 1].to(device)
        logits = model(chunk[None, :-1])[0]
        total += F.cross_entropy(logits, chunk[1:], reduction="sum").item()
        count += seq_len
    return total / max(1, count)


@torch.no_grad()
def greedy(model, prompt_ids, n_new, device):
    model.eval()
    ids = list(prompt_ids)
    for _ in range(n_new):
        logits = model(torch.tensor([ids], device=device))[0, -1]
        nxt = int(torch.argmax(logits).item())
        ids.append(nxt)
        if nxt == EOS:
            break
    return ids[len(prompt_ids):]


# ---------------------------------------------------------------------------------------------
# Stage 4: export and report
# ---------------------------------------------------------------------------------------------


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def write_readme(out, facts):
    t, d = facts["target"], facts["draft"]
    lines = [
        "# The default model pair",
        "",
        "`target/` and `draft/` are small Llama-architecture models trained from scratch on this",
        "machine by `tools/train/train_pair.py` (one command, fixed seeds). They are Hugging Face",
        "model directories (config.json, model.safetensors in %s, tokenizer.model) that the engine" % facts["dtype"].upper(),
        "loads unchanged; the draft shares the target's tokenizer and was distilled from the",
        "target's logits (KL divergence on the full next-token distribution).",
        "",
        "Reproduce: `/usr/bin/python3 tools/train/train_pair.py --out models/ --threads %d` (prefix" % facts["threads"],
        "`nice -n 19` on a shared machine). The same thread count and Debian packages give byte-identical",
        "weights (checked by running the smoke preset twice); tokenizer.model differs only in the work-directory",
        "paths that spm_train records in its trainer spec.",
        "Then `/usr/bin/python3 tools/train/measure_acceptance.py --models models/ --readme models/README.md`",
        "and `/usr/bin/python3 tools/train/service_acceptance.py --models models/ --build build --readme models/README.md`",
        "add the two acceptance sections below.",
        "",
        "## Models",
        "",
        "| | layers | hidden | heads / kv heads | MLP | vocab | tied head | parameters | files |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in (("target", t), ("draft", d)):
        c = m["config"]
        lines.append("| %s | %d | %d | %d / %d | %d | %d | %s | %.2f M | %.1f MB |" % (
            name, c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"],
            c["num_key_value_heads"], c["intermediate_size"], c["vocab_size"],
            "yes" if c["tie_word_embeddings"] else "no", m["params"] / 1e6, m["bytes"] / 1e6))
    cs = facts["corpus"]
    lines += [
        "",
        "Trained context: %d tokens (positions beyond it are extrapolated by RoPE and degrade)." % facts["seq_len"],
        "",
        "## Corpus (held-out split by file, by a hash of the path)",
        "",
        "- code: the Python %s standard library sources (`/usr/lib/python3.11/**/*.py`, Debian package" % "3.11",
        "  libpython3.11-stdlib) without its test suites: %d training files (%.1f MB), %d held-out files (%.1f MB)." % (
            cs["code"]["train_files"], cs["code"]["train_chars"] / 1e6,
            cs["code"]["heldout_files"], cs["code"]["heldout_chars"] / 1e6),
        "- prose: the Python Language Reference topics (`pydoc_data/topics.py`, plain English) and the",
        "  licence texts of `/usr/share/common-licenses` (package base-files; always in training, as they",
        "  come in near-identical families): %d training documents (%.2f MB), %d held-out topics (%.3f MB):" % (
            cs["prose"]["train_files"], cs["prose"]["train_chars"] / 1e6,
            cs["prose"]["heldout_files"], cs["prose"]["heldout_chars"] / 1e6),
        "  %s." % ", ".join("`%s`" % k for k in cs["prose"]["heldout_keys"]),
        "- Held-out text for acceptance measurements: `heldout/code.txt` (the first held-out code files,",
        "  about 100 kB) and `heldout/prose.txt` (all held-out topics).",
        "- Tokenizer: SentencePiece BPE, vocab %d, byte fallback, identity normalisation, whitespace kept" % facts["vocab_size"],
        "  (`--remove_extra_whitespaces=false`), digits split; unk=0, bos=1, eos=2, no pad.",
        "  Training tokens: code %d, prose %d." % (facts["tokens"]["code"], facts["tokens"]["prose"]),
        "",
        "## Training",
        "",
        "- target: %d steps x %d sequences x %d tokens (%.2f M tokens, %d%% prose windows), AdamW" % (
            facts["target_steps"], facts["batch"], facts["seq_len"],
            facts["target_steps"] * facts["batch"] * facts["seq_len"] / 1e6, int(100 * facts["prose_fraction"])),
        "  (betas 0.9/0.95, weight decay 0.1), peak lr %g, warm-up then cosine to 10%%, gradient clip 1." % facts["target_lr"],
        "  %d%% of windows are a random 4-64 token span (log-uniform length) repeated to fill the window, so the model learns" % int(
            100 * facts.get("repeat_fraction", 0)),
        "  to continue repeated text (see `Batches` in train_pair.py for why).",
        "- draft: %d steps of the same shape, peak lr %g, loss KL(target || draft) at temperature 1." % (
            facts["draft_steps"], facts["draft_lr"]),
        "- Wall time on this machine (%s, torch %s, %d threads, device %s, %s): total %s" % (
            facts["cpu"], torch.__version__, facts["threads"], facts["device"], facts.get("precision", "fp32"),
            _minutes(facts["times"]["total"])),
        "  (corpus + tokenizer %s, target %s, draft %s, evaluation + export %s)." % (
            _minutes(facts["times"]["prepare"]), _minutes(facts["times"]["target"]),
            _minutes(facts["times"]["draft"]), _minutes(facts["times"]["report"])),
    ]
    if "cpu_seconds" in facts:
        lines.append("- CPU time (all threads, spm_train included): %s." % _minutes(facts["cpu_seconds"]))
    if facts.get("note"):
        lines.append("- " + facts["note"])
    lines += [
        "",
        "## Held-out loss (exported %s weights, nats/token)" % facts["dtype"].upper(),
        "",
        "Mean next-token loss over the first non-overlapping %d-token windows of each held-out stream, at" % facts["seq_len"],
        "most %d per kind%s." % (facts["eval_windows"], "".join(
            " (%s: %d windows)" % (k, min(facts["eval_windows"], (n - 1) // facts["seq_len"]))
            for k, n in sorted(facts.get("heldout_tokens", {}).items()))),
        "",
        "| | code loss | code ppl | prose loss | prose ppl |",
        "|---|---|---|---|---|",
    ]
    for name in ("target", "draft"):
        h = facts[name]["heldout"]
        lines.append("| %s | %.3f | %.1f | %.3f | %.1f |" % (
            name, h["code"], math.exp(h["code"]), h["prose"], math.exp(h["prose"])))
    lines += ["", "## Greedy continuations (torch forward of the exported target, 48 tokens)", ""]
    for s in facts["samples"]:
        lines += ["%s prompt:" % s["kind"], "", "```", s["prompt"] + "\u2502" + s["target"], "```", ""]
    lines += ["The `\u2502` marks where the prompt ends.", ""]
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def _minutes(seconds):
    return "%.1f min" % (seconds / 60.0)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="models", help="writes OUT/target, OUT/draft, OUT/README.md")
    parser.add_argument("--work", default="/tmp/splitspec-train", help="intermediate files")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="full")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto")
    parser.add_argument("--precision", choices=["auto", "bf16-mixed", "fp32"], default="auto",
                        help="auto: bf16-mixed where the hardware has native bf16 products, else fp32")
    parser.add_argument("--resume", action="store_true", help="reuse the tokenizer and target in --work")
    parser.add_argument("--readme-from", help="only rewrite OUT/README.md from a facts.json of an earlier run")
    parser.add_argument("--note", default="", help="a line added to the README's training section")
    args = parser.parse_args(argv)
    if args.readme_from:
        with open(args.readme_from) as f:
            facts = json.load(f)
        if args.note:
            facts["note"] = args.note
        write_readme(args.out, facts)
        return 0

    import sentencepiece as spm  # Debian's python3-sentencepiece

    p = PRESETS[args.preset]
    torch.set_num_threads(args.threads)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    precision = pick_precision(args.precision, device)
    log("device %s, precision %s, %d threads" % (device, precision, args.threads))
    os.makedirs(args.work, exist_ok=True)
    t_start = time.time()

    log("corpus")
    parts, corpus_stats = build_corpus(args.work)
    sp_model = os.path.join(args.work, "tokenizer.model")
    if not (args.resume and os.path.exists(sp_model)):
        log("tokenizer: spm_train, vocab %d" % p["vocab_size"])
        sp_model = train_tokenizer(args.work, p["vocab_size"], args.seed, args.threads)
    sp = spm.SentencePieceProcessor(model_file=sp_model)
    log("encoding")
    streams = {k: encode_documents(sp, parts[k][0]) for k in parts}
    held = {k: encode_documents(sp, parts[k][1]) for k in parts}
    log("tokens: train %s, held-out %s" % ({k: len(v) for k, v in streams.items()},
                                            {k: len(v) for k, v in held.items()}))
    t_prepared = time.time()

    configs = {}
    for name in ("target", "draft"):
        configs[name] = ref.LlamaConfig(vocab_size=p["vocab_size"], max_position_embeddings=2048,
                                        rope_theta=10000.0, rms_norm_eps=1e-5, **p[name])

    torch.manual_seed(args.seed)
    target = ref.LlamaForCausalLM(configs["target"])
    ckpt = os.path.join(args.work, "target.pt")
    if args.resume and os.path.exists(ckpt):
        log("target: reusing %s" % ckpt)
        target.load_state_dict(torch.load(ckpt))
        target_time = 0.0
    else:
        init_weights(target, args.seed)
        target.to(device)
        log("target: %.2f M parameters" % (sum(x.numel() for x in target.parameters()) / 1e6))
        target_time = train_target(target, Batches(streams, p["seq_len"], p["batch"], p["prose_fraction"], args.seed + 1,
                                                   p["repeat_fraction"]),
                                   p["target_steps"], p["target_lr"], device, precision)
        torch.save(target.state_dict(), ckpt)
    target.to(device)
    t_target = time.time()

    draft = ref.LlamaForCausalLM(configs["draft"])
    init_weights(draft, args.seed + 2)
    draft.to(device)
    log("draft: %.2f M parameters" % (sum(x.numel() for x in draft.parameters()) / 1e6))
    draft_time = distill_draft(draft, target, Batches(streams, p["seq_len"], p["batch"], p["prose_fraction"], args.seed + 3,
                                           p["repeat_fraction"]),
                               p["draft_steps"], p["draft_lr"], device, precision)
    t_draft = time.time()

    log("export and evaluation")
    facts = {"dtype": args.dtype, "threads": args.threads, "device": device, "precision": precision,
             "cpu": cpu_name(),
             "corpus": corpus_stats, "vocab_size": p["vocab_size"],
             "tokens": {k: len(v) for k, v in streams.items()},
             "heldout_tokens": {k: len(v) for k, v in held.items()}, "seq_len": p["seq_len"], "batch": p["batch"],
             "target_steps": p["target_steps"], "target_lr": p["target_lr"],
             "draft_steps": p["draft_steps"], "draft_lr": p["draft_lr"],
             "eval_windows": p["eval_windows"], "prose_fraction": p["prose_fraction"],
             "repeat_fraction": p["repeat_fraction"]}
    for name, model in (("target", target), ("draft", draft)):
        out_dir = os.path.join(args.out, name)
        hf_export.export_model_dir(model.cpu(), out_dir, sp_model, args.dtype)
        exported = ref.load_model(out_dir)  # measure what ships: the rounded weights
        facts[name] = {
            "config": configs[name].to_dict(),
            "params": sum(x.numel() for x in exported.parameters()),
            "bytes": dir_bytes(out_dir),
            "heldout": {k: heldout_loss(exported, held[k], p["seq_len"], p["eval_windows"], "cpu") for k in held},
        }
        log("%s held-out loss %s" % (name, facts[name]["heldout"]))
        if name == "target":
            facts["samples"] = []
            for kind, prompt in SAMPLE_PROMPTS:
                ids = [BOS] + sp.encode(prompt)
                cont = sp.decode(greedy(exported, ids, 48, "cpu"))
                facts["samples"].append({"kind": kind, "prompt": prompt, "target": cont})
    heldout_dir = os.path.join(args.out, "heldout")
    os.makedirs(heldout_dir, exist_ok=True)
    with open(os.path.join(heldout_dir, "code.txt"), "w", encoding="utf-8") as f:
        written = 0
        for _, text in parts["code"][1]:
            if written > 100_000:
                break
            f.write(text if text.endswith("\n") else text + "\n")
            written += len(text)
    with open(os.path.join(heldout_dir, "prose.txt"), "w", encoding="utf-8") as f:
        for _, text in parts["prose"][1]:
            f.write(text if text.endswith("\n") else text + "\n")
    t_end = time.time()
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    facts["cpu_seconds"] = sum(u.ru_utime + u.ru_stime for u in usage)
    if args.note:
        facts["note"] = args.note
    facts["times"] = {"prepare": t_prepared - t_start, "target": target_time if target_time else t_target - t_prepared,
                      "draft": draft_time, "report": t_end - t_draft, "total": t_end - t_start}
    with open(os.path.join(args.work, "facts.json"), "w") as f:
        json.dump(facts, f, indent=2)
    write_readme(args.out, facts)
    log("done in %s; wrote %s" % (_minutes(t_end - t_start), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
