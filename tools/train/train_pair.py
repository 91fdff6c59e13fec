#!/usr/bin/python3
"""Trains splitspec's default model pair from scratch, in one command:

  /usr/bin/python3 tools/train/train_pair.py --out models/

1. corpus: Python standard library sources (code), more Python from numpy, scipy, matplotlib and
   torch (training only), and the Python Language Reference topics plus Debian's licence texts
   (prose), split into train / held-out by file (tools/train/corpus.py);
2. tokenizer: SentencePiece BPE with byte fallback, trained by Debian's `spm_train`;
3. target: a Llama-architecture model (RMSNorm, RoPE, SwiGLU, GQA) trained on next-token loss,
   first as a small `seed` model at a short context, then grown into the target shape without
   changing its function (grow.py), trained on at the full context, and annealed on a mixture
   weighted towards what it is measured on (standard-library code, prose);
   draft: a much smaller Llama distilled from the target's logits (KL on the soft targets);
   `--start-from DIR` skips the seed and target stages and continues an earlier pair instead;
4. export: Hugging Face directories (config.json, model.safetensors in F32 by default,
   tokenizer.model) under --out/target and --out/draft, plus --out/README.md with sizes, losses,
   timings and greedy samples measured on the exported weights.

The model is tests/reference/llama_reference.py's LlamaForCausalLM: one torch definition of the
architecture for the engine's reference test and for training. Seeds are fixed; with the same
thread count the run repeats exactly. Intermediate files go to --work (default
/var/tmp/splitspec-train), which also holds each stage's checkpoints: rerunning the same command
continues an interrupted run (see resumable.py).
"""

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import time

# Debian's torch hands fp32 matrix products to the system BLAS (OpenBLAS, pthreads build), whose
# own pool of one thread per core then competes with torch's OpenMP threads for the same cores:
# a target step took 1.25 s with both pools, 0.77 s with OpenBLAS kept to the calling thread.
# The library reads this when it loads, so it must be set before torch is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# glibc serves large blocks with mmap and returns them on free, so every training step faulted in
# (and the kernel zeroed) its activations afresh: ~50k page faults a second, ~10% of a step. Keeping
# freed memory in the heap makes later steps reuse it. glibc reads these only at start-up, hence
# the re-exec (once: the variables are then set).
_MALLOC_SETTINGS = {"MALLOC_MMAP_THRESHOLD_": str(1 << 32), "MALLOC_TRIM_THRESHOLD_": str(1 << 36),
                    "MALLOC_TOP_PAD_": str(1 << 28)}
if __name__ == "__main__" and any(k not in os.environ for k in _MALLOC_SETTINGS):
    os.environ.update({k: v for k, v in _MALLOC_SETTINGS.items() if k not in os.environ})
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))

import corpus  # noqa: E402
import fast_attention  # noqa: E402
import grow  # noqa: E402
import hf_export  # noqa: E402
import llama_reference as ref  # noqa: E402
import resumable  # noqa: E402
from progress import Progress  # noqa: E402

BOS, EOS = 1, 2

# Model shapes and schedules. `full` is the committed pair: a small `seed` target trained first,
# grown (tools/train/grow.py: wider and deeper, same function) into the `target` shape and trained
# on at a longer context, then a draft distilled from it. The target is sized so that a batch-1
# decode step reads ~107 MB of F32 weights, several times a typical last-level cache, which is
# the regime where verifying k drafted tokens costs little more than decoding one. `smoke` checks
# the pipeline in a minute or two.
PRESETS = {
    "full": {
        "vocab_size": 4096,
        "seed": dict(hidden_size=256, intermediate_size=704, num_hidden_layers=4, head_dim=32,
                     num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=False),
        # Attention stays 8 heads x 32 (narrower than the stream): the weights that make a decode
        # step memory-bound are the MLP's, and at a 512-token context the (heads x seq x seq)
        # scores, not the products, dominate training time.
        "target": dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=8, head_dim=32,
                       num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=False),
        "draft": dict(hidden_size=192, intermediate_size=512, num_hidden_layers=2, head_dim=32,
                      num_attention_heads=6, num_key_value_heads=2, tie_word_embeddings=True),
        "seed_steps": 2500, "seed_seq_len": 256, "seed_batch": 8, "seed_lr": 2e-3,
        "seq_len": 512, "batch": 8,
        "target_steps": 2400, "target_lr": 1e-3,
        # A last pass over the kinds the pair is measured on: the standard library and prose
        # weigh more than in the broad mixture, at a lower learning rate.
        "anneal_steps": 900, "anneal_lr": 4e-4,
        "anneal_mixture": {"code": 0.45, "code_extra": 0.1, "prose": 0.45},
        "draft_steps": 1500, "draft_lr": 3e-3,
        # With --start-from the draft continues from the earlier draft: fewer steps, lower lr.
        "continued_draft_steps": 500, "continued_draft_lr": 1e-3,
        "eval_windows": 48, "mixture": {"code": 0.45, "code_extra": 0.35, "prose": 0.2},
        "repeat_fraction": 0.2,
    },
    "smoke": {
        "vocab_size": 1024,
        "seed": dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, head_dim=16,
                     num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False),
        "target": dict(hidden_size=128, intermediate_size=320, num_hidden_layers=3, head_dim=16,
                       num_attention_heads=8, num_key_value_heads=4, tie_word_embeddings=False),
        "draft": dict(hidden_size=32, intermediate_size=96, num_hidden_layers=1, head_dim=16,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True),
        "seed_steps": 30, "seed_seq_len": 32, "seed_batch": 4, "seed_lr": 3e-3,
        "seq_len": 64, "batch": 4,
        "target_steps": 30, "target_lr": 2e-3,
        "anneal_steps": 10, "anneal_lr": 1e-3,
        "anneal_mixture": {"code": 0.45, "code_extra": 0.1, "prose": 0.45},
        "draft_steps": 30, "draft_lr": 3e-3,
        "continued_draft_steps": 10, "continued_draft_lr": 1e-3,
        "eval_windows": 8, "mixture": {"code": 0.45, "code_extra": 0.35, "prose": 0.2},
        "repeat_fraction": 0.15,
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
    # The tokenizer learns from the standard library and prose only (see corpus.py).
    with open(os.path.join(work, "corpus", "spm_input.txt"), "w", encoding="utf-8") as f:
        for kind in ("code", "prose"):
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
    """Random windows of seq_len + 1 tokens from a mixture of token streams: each window comes
    from stream `name` with probability mixture[name].

    With probability repeat_fraction a window is instead a short random span (4-64 tokens) of
    the stream repeated to fill it. Text repeats in real traffic (code that restates names,
    quoted passages, templated lines) and a model continues such text only if it has learned
    to copy from its context (induction heads); at this model size and token budget natural
    windows alone do not teach that, so without these windows the target would not continue a
    repetition and neither speculation nor n-gram lookup would pay on repetitive workloads."""

    def __init__(self, streams, seq_len, batch, mixture, seed, repeat_fraction=0.0):
        self.names = sorted(name for name in mixture if mixture[name] > 0)
        self.streams = [streams[name] for name in self.names]
        total = sum(mixture[name] for name in self.names)
        self.cumulative, acc = [], 0.0
        for name in self.names:
            acc += mixture[name] / total
            self.cumulative.append(acc)
        self.seq_len, self.batch = seq_len, batch
        self.repeat_fraction = repeat_fraction
        self.generator = torch.Generator().manual_seed(seed)

    def _uniform(self):
        return torch.rand((), generator=self.generator).item()

    def repeat_span(self):
        """A span length log-uniform in [4, 64], so short periods come often: they are the easiest
        copies to learn. The target's shape on random tokens repeated with period 8 learned to copy
        within 300 steps; with periods drawn uniformly from 8-64 it had not after 1200."""
        return int(4 * 16 ** self._uniform())

    def _pick_stream(self):
        u = self._uniform()
        for stream, edge in zip(self.streams, self.cumulative):
            if u < edge:
                return stream
        return self.streams[-1]

    def next(self):
        rows = []
        for _ in range(self.batch):
            stream = self._pick_stream()
            repeat = self._uniform() < self.repeat_fraction
            span = self.repeat_span() if repeat else self.seq_len + 1
            start = torch.randint(0, len(stream) - span, (), generator=self.generator).item()
            window = stream[start:start + span]
            if repeat:
                window = window.repeat((self.seq_len + 1 + span - 1) // span)[:self.seq_len + 1]
            rows.append(window)
        x = torch.stack(rows)
        return x[:, :-1], x[:, 1:]


def next_token_loss(device, precision):
    def step_loss(model, batch):
        x, y = (t.to(device) for t in batch)
        with mixed_precision(device, precision):
            logits = model(x)
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
    return step_loss


def distillation_loss(target, device, precision):
    """KL(target || draft) over every position: the draft learns the target's whole next-token
    distribution, which is what speculative acceptance rewards."""
    target.eval()

    def step_loss(draft, batch):
        x = batch[0].to(device)
        with mixed_precision(device, precision):
            with torch.no_grad():
                teacher_logits = target(x)
            student_logits = draft(x)
        teacher = F.log_softmax(teacher_logits.float(), dim=-1)
        student = F.log_softmax(student_logits.float(), dim=-1)
        vocab = student.shape[-1]
        return F.kl_div(student.reshape(-1, vocab), teacher.reshape(-1, vocab),
                        log_target=True, reduction="batchmean")
    return step_loss


def train(name, work, model, sampler, steps, peak_lr, step_loss, log, evaluate=None):
    """One resumable stage (tools/train/resumable.py) with AdamW and warm-up + cosine."""
    return resumable.run_stage(name, work, model, make_optimizer(model, peak_lr), sampler, steps,
                               lambda step: lr_at(step, steps, peak_lr), step_loss, log,
                               evaluate=evaluate, evaluate_every=max(1, steps // 10))


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
        "`target/` and `draft/` are small Llama-architecture models trained %s on this" % (
            "(continuing an earlier pair, see Training)" if facts.get("start_from") else "from scratch"),
        "machine by `tools/train/train_pair.py` (one command, fixed seeds). They are Hugging Face",
        "model directories (config.json, model.safetensors in %s, tokenizer.model) that the engine" % facts["dtype"].upper(),
        "loads unchanged; the draft shares the target's tokenizer and was distilled from the",
        "target's logits (KL divergence on the full next-token distribution).",
        "",
        "Reproduce: `/usr/bin/python3 tools/train/train_pair.py --out models/ --threads %d%s` (prefix" % (
            facts["threads"], " --start-from %s" % facts["start_from"] if facts.get("start_from") else ""),
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
        "- code_extra (training only; not in the tokenizer's input, not evaluated): the Python sources of",
        "  %s under `/usr/lib/python3/dist-packages` without test suites: %d files (%.1f MB); a further %d" % (
            ", ".join(corpus.EXTRA_CODE_PACKAGES), cs["code_extra"]["train_files"], cs["code_extra"]["train_chars"] / 1e6,
            cs["code_extra"]["heldout_files"]),
        "  files fall in the held-out split and are not used.",
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
        "  Training tokens: code %d, code_extra %d, prose %d." % (
            facts["tokens"]["code"], facts["tokens"]["code_extra"], facts["tokens"]["prose"]),
        "",
        "## Training",
        "",
        "Windows are drawn from the training streams in proportion %s; %d%% of them are a random" % (
            mixture_text(facts["mixture"]),
            int(100 * facts["repeat_fraction"])),
        "4-64 token span (log-uniform length) repeated to fill the window, so the models learn to continue",
        "repeated text (see `Batches` in train_pair.py for why). AdamW (betas 0.9/0.95, weight decay 0.1),",
        "warm-up then cosine to 10% of the peak learning rate, gradient clip 1, bf16 matrix products where",
        "the CPU multiplies bf16 natively.",
        "",
    ] + training_stage_lines(facts) + [
        "- Wall time on this machine (%s, torch %s, %d threads, device %s, %s): total %s" % (
            facts["cpu"], torch.__version__, facts["threads"], facts["device"], facts.get("precision", "fp32"),
            _minutes(facts["times"]["total"])),
        "  (%s), summed over" % ", ".join(
            "%s %s" % (label, _minutes(facts["times"][key])) for key, label in (
                ("prepare", "corpus + tokenizer"), ("seed", "seed"), ("target", "target"), ("anneal", "anneal"),
                ("draft", "draft"), ("report", "evaluation + export")) if key in facts["times"]),
        "  every resumed part of the run; `train.log` in the work directory has every stage's steps and times.",
    ]
    if facts.get("note"):
        lines.append("- " + facts["note"])
    lines += [
        "",
        "## Held-out loss (exported %s weights, nats/token)" % facts["dtype"].upper(),
        "",
        "Mean next-token loss over the first non-overlapping 256-token windows of each held-out stream, at",
        "most %d per kind%s (the window every earlier pair was measured with), and over %d-token windows" % (
            facts["eval_windows"], "".join(
                " (%s: %d windows)" % (k, min(facts["eval_windows"], (n - 1) // 256))
                for k, n in sorted(facts.get("heldout_tokens", {}).items())), facts["seq_len"]),
        "(at most %d per kind), the trained context." % (facts["eval_windows"] // 2),
        "",
        "| | code loss | code ppl | prose loss | prose ppl | code ppl at %d | prose ppl at %d |" % (
            facts["seq_len"], facts["seq_len"]),
        "|---|---|---|---|---|---|---|",
    ]
    for name in ("target", "draft"):
        h, g = facts[name]["heldout"], facts[name]["heldout_long"]
        lines.append("| %s | %.3f | %.1f | %.3f | %.1f | %.1f | %.1f |" % (
            name, h["code"], math.exp(h["code"]), h["prose"], math.exp(h["prose"]),
            math.exp(g["code"]), math.exp(g["prose"])))
    lines += ["", "## Greedy continuations (torch forward of the exported target, 48 tokens)", ""]
    for s in facts["samples"]:
        lines += ["%s prompt:" % s["kind"], "", "```", s["prompt"] + "\u2502" + s["target"], "```", ""]
    lines += ["The `\u2502` marks where the prompt ends.", ""]
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def training_stage_lines(facts):
    tokens = lambda steps, batch, seq: steps * batch * seq / 1e6
    lines = []
    if facts.get("start_from"):
        lines += [
            "- seed and target: not rerun; the target stage's result is the earlier pair of this preset",
            "  (`--start-from %s`, its exported weights), made by this preset's seed and target stages" % facts["start_from"],
            "  (%d seed steps x %d x %d, grown, %d target steps x %d x %d)." % (
                facts["seed_steps"], facts["seed_batch"], facts["seed_seq_len"],
                facts["target_steps"], facts["batch"], facts["seq_len"]),
        ]
    else:
        lines += [
            "- seed: a %d-layer, %d-wide model, %d steps x %d sequences x %d tokens (%.2f M tokens), peak lr %g." % (
                facts["seed_config"]["num_hidden_layers"], facts["seed_config"]["hidden_size"], facts["seed_steps"],
                facts["seed_batch"], facts["seed_seq_len"],
                tokens(facts["seed_steps"], facts["seed_batch"], facts["seed_seq_len"]), facts["seed_lr"]),
            "- target: the seed grown into the target shape by `tools/train/grow.py` (new hidden units, heads",
            "  and interleaved layers start so that the grown model computes the seed's logits), then %d steps x" % (
                facts["target_steps"]),
            "  %d sequences x %d tokens (%.2f M tokens), peak lr %g." % (
                facts["batch"], facts["seq_len"], tokens(facts["target_steps"], facts["batch"], facts["seq_len"]),
                facts["target_lr"]),
        ]
    if "anneal_steps" in facts:
        lines.append("- anneal: the target, %d more steps x %d x %d (%.2f M tokens) drawn %s, peak lr %g." % (
            facts["anneal_steps"], facts["batch"], facts["seq_len"],
            tokens(facts["anneal_steps"], facts["batch"], facts["seq_len"]),
            mixture_text(facts["anneal_mixture"]),
            facts["anneal_lr"]))
    lines.append("- draft: %s%d steps of the target's batch shape, peak lr %g, loss KL(target || draft) at temperature 1." % (
        "continued from the earlier draft, " if facts.get("start_from") else "", facts["draft_steps"], facts["draft_lr"]))
    return lines


def mixture_text(mixture):
    return ", ".join("%s %d%%" % (k, round(100 * v)) for k, v in sorted(mixture.items()))


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


def check_work_dir(work, preset_name, preset, seed, start_from=None):
    """A work directory belongs to one run: refuse to resume another preset's checkpoints."""
    stamp = {"preset": preset_name, "seed": seed, "config": preset}
    if start_from:
        stamp["start_from"] = os.path.abspath(start_from)
    path = os.path.join(work, "run.json")
    if os.path.exists(path):
        with open(path) as f:
            if json.load(f) != json.loads(json.dumps(stamp)):
                raise SystemExit("%s holds a different run (preset or seed); use another --work or delete it" % work)
    else:
        with open(path, "w") as f:
            json.dump(stamp, f, indent=2)


def reuse_tokenizer(start_from, work):
    """A continued pair keeps its tokenizer: a retrained one could number the pieces differently."""
    source = os.path.join(start_from, "target", "tokenizer.model")
    if not os.path.exists(source):
        raise SystemExit("--start-from %s: no target/tokenizer.model there" % start_from)
    dest = os.path.join(work, "tokenizer.model")
    if not os.path.exists(dest):
        shutil.copyfile(source, dest)


def prepare_data(args, p, work):
    """Corpus, tokenizer (reused from the work directory when present) and token streams."""
    import sentencepiece as spm  # Debian's python3-sentencepiece

    log("corpus")
    parts, corpus_stats = build_corpus(work)
    sp_model = os.path.join(work, "tokenizer.model")
    if not os.path.exists(sp_model):
        log("tokenizer: spm_train, vocab %d" % p["vocab_size"])
        sp_model = train_tokenizer(work, p["vocab_size"], args.seed, args.threads)
    sp = spm.SentencePieceProcessor(model_file=sp_model)
    log("encoding")
    streams = {k: encode_documents(sp, parts[k][0]) for k in parts}
    held = {k: encode_documents(sp, parts[k][1]) for k in ("code", "prose")}
    log("tokens: train %s, held-out %s" % ({k: len(v) for k, v in streams.items()},
                                            {k: len(v) for k, v in held.items()}))
    return parts, corpus_stats, sp, sp_model, streams, held


def model_config(p, name, seq_len):
    return ref.LlamaConfig(vocab_size=p["vocab_size"], max_position_embeddings=max(2048, seq_len),
                           rope_theta=10000.0, rms_norm_eps=1e-5, **p[name])


def evaluator(held, seq_len, device, windows=8):
    """A quick held-out check logged during training (the report's figures use more windows)."""
    def evaluate(model):
        return " ".join("%s=%.4f" % (k, heldout_loss(model, held[k], seq_len, windows, device)) for k in sorted(held))
    return evaluate


def train_models(args, p, work, streams, held, device, precision, train_log):
    """seed target -> grown target -> annealed target -> distilled draft, each stage resumable.
    With --start-from the seed and target stages are not run: the target stage's result is the
    earlier pair's target and the draft continues from its draft. Returns the two models and each
    stage's wall time."""
    times = {}
    if args.start_from:
        target = ref.load_model(os.path.join(args.start_from, "target"))
        fast_attention.use_fast_attention(target).to(device)
        log("target from %s: %.2f M parameters" % (args.start_from, sum(x.numel() for x in target.parameters()) / 1e6))
    else:
        target = train_seed_and_target(args, p, work, streams, held, device, precision, train_log, times)

    times["anneal"] = train("anneal", work, target,
                            Batches(streams, p["seq_len"], p["batch"], p["anneal_mixture"], args.seed + 6,
                                    p["repeat_fraction"]),
                            p["anneal_steps"], p["anneal_lr"], next_token_loss(device, precision), train_log,
                            evaluator(held, p["seq_len"], device))

    if args.start_from:
        draft = ref.load_model(os.path.join(args.start_from, "draft"))
    else:
        draft = ref.LlamaForCausalLM(model_config(p, "draft", p["seq_len"]))
        init_weights(draft, args.seed + 2)
    draft_steps, draft_lr = draft_schedule(p, args.start_from)
    fast_attention.use_fast_attention(draft).to(device)
    log("draft: %.2f M parameters" % (sum(x.numel() for x in draft.parameters()) / 1e6))
    times["draft"] = train("draft", work, draft,
                           Batches(streams, p["seq_len"], p["batch"], p["mixture"], args.seed + 3,
                                   p["repeat_fraction"]),
                           draft_steps, draft_lr, distillation_loss(target, device, precision), train_log,
                           evaluator(held, p["seq_len"], device))
    return target, draft, times


def draft_schedule(p, start_from):
    """(steps, peak lr) of the draft stage: fewer, gentler steps when it continues an earlier draft."""
    if start_from:
        return p["continued_draft_steps"], p["continued_draft_lr"]
    return p["draft_steps"], p["draft_lr"]


def train_seed_and_target(args, p, work, streams, held, device, precision, train_log, times):
    torch.manual_seed(args.seed)
    seed_model = ref.LlamaForCausalLM(model_config(p, "seed", p["seed_seq_len"]))
    init_weights(seed_model, args.seed)
    fast_attention.use_fast_attention(seed_model).to(device)
    log("seed target: %.2f M parameters" % (sum(x.numel() for x in seed_model.parameters()) / 1e6))
    times["seed"] = train("seed", work, seed_model,
                          Batches(streams, p["seed_seq_len"], p["seed_batch"], p["mixture"], args.seed + 1,
                                  p["repeat_fraction"]),
                          p["seed_steps"], p["seed_lr"], next_token_loss(device, precision), train_log,
                          evaluator(held, p["seed_seq_len"], device))

    target = grow.grow(seed_model.cpu(), model_config(p, "target", p["seq_len"]), args.seed + 4)
    fast_attention.use_fast_attention(target).to(device)
    log("target (grown from the seed): %.2f M parameters" % (sum(x.numel() for x in target.parameters()) / 1e6))
    times["target"] = train("target", work, target,
                            Batches(streams, p["seq_len"], p["batch"], p["mixture"], args.seed + 5,
                                    p["repeat_fraction"]),
                            p["target_steps"], p["target_lr"], next_token_loss(device, precision), train_log,
                            evaluator(held, p["seq_len"], device))
    return target


def export_and_measure(args, p, parts, sp, sp_model, held, models):
    """Writes OUT/target, OUT/draft and OUT/heldout; measures what ships (the rounded weights)."""
    facts = {}
    for name, model in models.items():
        out_dir = os.path.join(args.out, name)
        hf_export.export_model_dir(model.cpu(), out_dir, sp_model, args.dtype)
        exported = ref.load_model(out_dir)
        facts[name] = {
            "config": exported.config.to_dict(),
            "params": sum(x.numel() for x in exported.parameters()),
            "bytes": dir_bytes(out_dir),
            # At 256-token windows (comparable with earlier pairs) and at the trained context.
            "heldout": {k: heldout_loss(exported, held[k], 256, p["eval_windows"], "cpu") for k in held},
            "heldout_long": {k: heldout_loss(exported, held[k], p["seq_len"], p["eval_windows"] // 2, "cpu")
                             for k in held},
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
    return facts


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="models", help="writes OUT/target, OUT/draft, OUT/README.md")
    parser.add_argument("--work", default="/var/tmp/splitspec-train",
                        help="intermediate files and checkpoints; rerunning the same command resumes from them")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="full")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="f32",
                        help="exported weights; F32 by default so that a decode step of the target reads "
                             "several times a typical last-level cache")
    parser.add_argument("--start-from", metavar="DIR",
                        help="skip the seed and target stages: continue from DIR/target and DIR/draft, an "
                             "earlier pair of this preset (its tokenizer is reused, so token ids do not change)")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto")
    parser.add_argument("--precision", choices=["auto", "bf16-mixed", "fp32"], default="auto",
                        help="auto: bf16-mixed where the hardware has native bf16 products, else fp32")
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

    p = PRESETS[args.preset]
    torch.set_num_threads(args.threads)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    precision = pick_precision(args.precision, device)
    log("device %s, precision %s, %d threads, work %s" % (device, precision, args.threads, args.work))
    os.makedirs(args.work, exist_ok=True)
    check_work_dir(args.work, args.preset, p, args.seed, args.start_from)
    if args.start_from:
        reuse_tokenizer(args.start_from, args.work)
    train_log = resumable.TrainLog(args.work)
    train_log.write("run preset=%s threads=%d device=%s precision=%s" % (args.preset, args.threads, device, precision))
    t_start = time.time()
    parts, corpus_stats, sp, sp_model, streams, held = prepare_data(args, p, args.work)
    t_prepared = time.time()
    try:
        target, draft, times = train_models(args, p, args.work, streams, held, device, precision, train_log)
    except resumable.Interrupted as stop:
        log(str(stop))
        return 3
    t_trained = time.time()

    log("export and evaluation")
    facts = export_and_measure(args, p, parts, sp, sp_model, held, {"target": target, "draft": draft})
    facts.update({"dtype": args.dtype, "threads": args.threads, "device": device, "precision": precision,
                  "cpu": cpu_name(), "preset": args.preset,
                  "corpus": corpus_stats, "vocab_size": p["vocab_size"],
                  "tokens": {k: len(v) for k, v in streams.items()},
                  "heldout_tokens": {k: len(v) for k, v in held.items()}})
    for key in ("seq_len", "batch", "seed_seq_len", "seed_batch", "seed_steps", "seed_lr", "target_steps",
                "target_lr", "anneal_steps", "anneal_lr", "anneal_mixture", "draft_steps", "draft_lr",
                "eval_windows", "mixture", "repeat_fraction"):
        facts[key] = p[key]
    if args.start_from:
        facts["start_from"] = args.start_from
        facts["draft_steps"], facts["draft_lr"] = draft_schedule(p, args.start_from)
    facts["seed_config"] = model_config(p, "seed", p["seed_seq_len"]).to_dict()
    t_end = time.time()
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    if args.note:
        facts["note"] = args.note
    # Training stages report their own wall time summed over every resumed part; this process's
    # CPU time covers only the last part.
    facts["times"] = dict(times, prepare=t_prepared - t_start, report=t_end - t_trained,
                          total=sum(times.values()) + (t_prepared - t_start) + (t_end - t_trained))
    facts["cpu_seconds_last_part"] = sum(u.ru_utime + u.ru_stime for u in usage)
    with open(os.path.join(args.work, "facts.json"), "w") as f:
        json.dump(facts, f, indent=2)
    write_readme(args.out, facts)
    log("done; wrote %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
