#!/usr/bin/python3
"""Acceptance of the draft model and of an n-gram (prompt lookup) proposer against the target,
for greedy chains of k tokens, on three workloads: held-out code, held-out prose, and
repetitive text. Runs on the torch forward (tests/reference/llama_reference.py), so the figures
do not depend on the serving stack.

  /usr/bin/python3 tools/train/measure_acceptance.py --models models/ [--k 4]

Greedy speculation is simulated exactly without running the draft step by step: the target's
greedy continuation G is generated once; a chain proposed at position p is accepted up to its
first token that differs from G, and until then the draft sees exactly G's prefix, so one
teacher-forced draft forward over G gives every proposal that matters. Each verification step
commits the accepted tokens plus the target's own next token.
"""

import argparse
import os
import sys

# One BLAS thread, as in train_pair.py: OpenBLAS's own pool would fight torch's threads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
import llama_reference as ref  # noqa: E402

BOS, EOS = 1, 2


@torch.no_grad()
def greedy_continuation(model, prompt, n_new):
    ids = list(prompt)
    for _ in range(n_new):
        nxt = int(model(torch.tensor([ids]))[0, -1].argmax())
        ids.append(nxt)
    return ids


def simulate(proposal_len, matches_at, start, end):
    """proposal_len(p): tokens proposed at position p (a step with none is a plain decode step);
    matches_at(p, j) -> True when token j of that proposal equals G[p + j].
    Returns (steps, proposed, accepted)."""
    p, steps, proposed, accepted = start, 0, 0, 0
    while p < end:
        n_prop = min(proposal_len(p), end - p)
        a = 0
        while a < n_prop and matches_at(p, a):
            a += 1
        steps += 1
        proposed += n_prop
        accepted += a
        p += a + 1
    return steps, proposed, accepted


def ngram_proposal(ids, p, k, max_n=3):
    """Prompt lookup: the tokens after the most recent earlier occurrence of the longest suffix
    (up to max_n tokens) of ids[:p]."""
    for n in range(min(max_n, p - 1), 0, -1):
        suffix = ids[p - n:p]
        for s in range(p - n - 1, -1, -1):
            if ids[s:s + n] == suffix:
                return ids[s + n:min(s + n + k, p)]
    return []


@torch.no_grad()
def measure(target, draft, prompts, n_new, k):
    totals = {"draft": [0, 0, 0], "ngram": [0, 0, 0]}
    for prompt in prompts:
        g = greedy_continuation(target, prompt, n_new)
        start, end = len(prompt), len(g)
        # draft_next[p] = the draft's greedy token after g[:p].
        logits = draft(torch.tensor([g[:-1]]))[0]
        draft_next = [None] + logits.argmax(dim=-1).tolist()
        stats = simulate(lambda p: k, lambda p, j: draft_next[p + j] == g[p + j], start, end)
        for i, v in enumerate(stats):
            totals["draft"][i] += v
        proposals = {}

        def ngram(p):
            if p not in proposals:
                proposals[p] = ngram_proposal(g, p, k)
            return proposals[p]
        stats = simulate(lambda p: len(ngram(p)), lambda p, j: ngram(p)[j] == g[p + j], start, end)
        for i, v in enumerate(stats):
            totals["ngram"][i] += v
    return totals


def windows(stream, length, count):
    step = max(1, (len(stream) - length) // count)
    return [stream[i * step:i * step + length] for i in range(count) if i * step + length <= len(stream)]


def workload_token_windows(sp, models, count):
    """The three workloads as token-id prompts (no BOS): 128-token windows of held-out code and
    of held-out prose, and repetitive text: a 40-token window of held-out code shown three
    times, then the start of a fourth, as in boilerplate-heavy requests (repeated records, list
    items, templated lines). service_acceptance.py uses the same prompts."""
    def stream(name):
        with open(os.path.join(models, "heldout", name), encoding="utf-8") as f:
            return sp.encode(f.read())

    code, prose = stream("code.txt"), stream("prose.txt")
    return {
        "code": windows(code, 128, count),
        "prose": windows(prose, 128, count),
        "repetitive": [(w * 3) + w[:8] for w in windows(code, 40, count)],
    }


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="models")
    parser.add_argument("--k", type=int, default=4)
    # Rates measured on 6 prompts per workload moved by up to 0.17 when measured again on 24.
    parser.add_argument("--prompts", type=int, default=24, help="prompts per workload")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--readme", help="also write the table as a section of this markdown file "
                                         "(replacing an earlier one)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    import sentencepiece as spm

    target = ref.load_model(os.path.join(args.models, "target"))
    draft = ref.load_model(os.path.join(args.models, "draft"))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.models, "target", "tokenizer.model"))

    workloads = {name: [[BOS] + w for w in prompts]
                 for name, prompts in workload_token_windows(sp, args.models, args.prompts).items()}
    rows = ["| workload | proposer | acceptance rate | mean accepted per step | tokens per target step |",
            "|---|---|---|---|---|"]
    print("\n".join(rows))
    for name, prompts in workloads.items():
        totals = measure(target, draft, prompts, args.new_tokens, args.k)
        for proposer in ("draft", "ngram"):
            steps, proposed, accepted = totals[proposer]
            rows.append("| %s | %s | %.2f | %.2f | %.2f |" % (
                name, "draft model" if proposer == "draft" else "n-gram (prompt lookup, n <= 3)",
                accepted / max(1, proposed), accepted / max(1, steps), (accepted + steps) / max(1, steps)))
            print(rows[-1])
        sys.stdout.flush()
    if args.readme:
        write_section(args.readme, args, rows)
    return 0


SECTION = "## Acceptance against the target"


def write_section(path, args, rows):
    replace_section(path, SECTION, [
        "Greedy chains of k = %d, simulated on the torch forward by `tools/train/measure_acceptance.py`:" % args.k,
        "%d prompts per workload, each followed by the target's %d-token greedy continuation." % (
            args.prompts, args.new_tokens),
        "code: 128-token windows of held-out code; prose: 128-token windows of held-out prose;",
        "repetitive: a 40-token window of held-out code shown three times plus the start of a fourth.",
        "Acceptance rate = accepted / proposed tokens (the n-gram proposer proposes fewer than k, or",
        "nothing, when the context has no match); a target step commits the accepted tokens plus its",
        "own next token.",
    ], rows)


def replace_section(path, title, intro, rows):
    """Writes `title`, the intro lines and the table rows as a section of the markdown file at
    `path`, replacing an earlier section of that title (up to the next one) or appending."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if title in text:
        head, rest = text.split(title, 1)
        nxt = rest.find("\n## ")
        text = head.rstrip("\n") + "\n" + (rest[nxt:] if nxt >= 0 else "")
    section = ["", title, ""] + intro + [""] + rows + [""]
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.rstrip("\n") + "\n" + "\n".join(section))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
