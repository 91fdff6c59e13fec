#!/usr/bin/env python3
"""The output of compare.sh as one markdown table, a row per weight format.

  bench/llamacpp/compare.sh MODELS STEP_BENCH 3 | tee compare.txt
  /usr/bin/python3 bench/llamacpp/summarize.py compare.txt [more.txt ...]

Per format and round: decode tok/s of splitspec / llama.cpp with their ratio, splitspec's paired
share (its median step's reads against the read kernel with the best median, and that kernel's
reading), llama.cpp's share of the same reading (the bytes a step reads, as bench-engine counts
them for the same model, over llama.cpp's median step: measured seconds after the pairing, so
it moves with the machine's bandwidth between the two), and the 16-token forwards. The last
columns count the rounds splitspec was ahead and give the median ratio. Where compare.sh ran
paired_bench too (PAIRED_BENCH), a last column gives each round's step-paired comparison: the
median over the pairs of llama.cpp's step time over splitspec's (both engines' steps one after
the other in one process, so in the same minute of the machine), and the pairs splitspec won.
Rounds from several files are taken in order, as one run.
"""
import re
import statistics
import sys

CEILING = re.compile(r"^read bandwidth ceiling \((\d+) MB read")
FORMAT = re.compile(r"^== (\S+) \(load average ([\d.]+) ([\d.]+) ([\d.]+)\)")
# The batch table's batch-1 row: "1   step_ms   tok/s"; the forward table's rows: "N   ms   ratio".
TABLE_ROW = re.compile(r"^(\d+)\s+([\d.]+)\s+([\d.]+)\s*$")
PAIRED = re.compile(r"read ([\d.]+) GB/s \(median.*a step's reads are (\d+)% of that kernel's pass")
LLAMA = re.compile(r"decode ([\d.]+) ms \(([\d.]+) tok/s\), 16-token forward ([\d.]+) ms")
STEP_PAIRS = re.compile(r"^paired decode, .*median of pairs ([\d.]+) .*splitspec faster in (\d+) of (\d+) pairs")


def finished(block):
    """The block with tok_s and forward16 taken from its table rows, or None where it lacks one
    of both engines' decode and 16-token figures (a run cut short)."""
    if block is None or "llama_ms" not in block:
        return None
    # The first batch-1 row is the decode table's (tok/s); a 16-token row is a forward's.
    decode = next((row for row in block["rows"] if row[0] == 1), None)
    forward16 = next((row for row in block["rows"] if row[0] == 16), None)
    if decode is None or forward16 is None:
        return None
    return {**block, "tok_s": decode[2], "forward16": forward16[1]}


def parse(lines):
    """Yields one dict per (round, format) block, in the order they ran."""
    block = None
    for line in lines:
        line = line.rstrip("\n")
        if line.startswith("## ") or FORMAT.match(line):
            if (done := finished(block)) is not None:
                yield done
            block = None
        if match := FORMAT.match(line):
            block = {"format": match[1], "load": float(match[2]), "rows": []}
        elif block is None:
            continue
        elif match := CEILING.match(line):
            block["step_mb"] = int(match[1])
        elif match := TABLE_ROW.match(line):
            block["rows"].append((int(match[1]), float(match[2]), float(match[3])))
        elif match := PAIRED.search(line):
            block["paired"] = (int(match[2]), float(match[1]))
        elif match := STEP_PAIRS.match(line):
            block["step_pairs"] = (float(match[1]), int(match[2]), int(match[3]))
        elif match := LLAMA.search(line):
            block["llama_ms"], block["llama_tok_s"], block["llama_16"] = float(match[1]), float(match[2]), float(match[3])
    if (done := finished(block)) is not None:
        yield done


def llama_share(block):
    """llama.cpp's reads per second against the paired kernel's reading, in percent; None when
    the block lacks the step's bytes or the pairing."""
    if "step_mb" not in block or "paired" not in block:
        return None
    return 100 * block["step_mb"] / block["llama_ms"] / block["paired"][1]  # MB per ms = GB/s


def summarize(blocks):
    blocks = list(blocks)
    by_format = {}
    for block in blocks:
        by_format.setdefault(block["format"], []).append(block)
    out = ["| weights | decode tok/s, splitspec / llama.cpp (ratio), per round | paired share of the read "
           "kernel's reading | llama.cpp's reads against that reading | 16-token forward ms, splitspec / "
           "llama.cpp | ahead | median ratio |"]
    with_pairs = any("step_pairs" in block for block in blocks)
    if with_pairs:
        out[0] += " step-paired: llama.cpp / splitspec step time, median of pairs (pairs splitspec won), per round |"
    out.append("| --- " * (8 if with_pairs else 7) + "|")
    loads = [block["load"] for blocks in by_format.values() for block in blocks]
    for name, rounds in by_format.items():
        ratios = [r["tok_s"] / r["llama_tok_s"] for r in rounds]
        decode = ", ".join(f"{r['tok_s']:.1f} / {r['llama_tok_s']:.1f} ({q:.2f})" for r, q in zip(rounds, ratios))
        paired = ", ".join(f"{r['paired'][0]}% of {r['paired'][1]:.1f}" if "paired" in r else "-" for r in rounds)
        shares = [llama_share(r) for r in rounds]
        theirs_share = ", ".join("-" if q is None else f"{q:.0f}%" for q in shares)
        ours = [r["forward16"] for r in rounds]
        theirs = [r["llama_16"] for r in rounds]
        forward = f"{min(ours):.1f}-{max(ours):.1f} / {min(theirs):.1f}-{max(theirs):.1f}"
        ahead = sum(q > 1 for q in ratios)
        label = "int8 / Q8_0" if name == "int8" else name.upper()
        row = (f"| {label} | {decode} | {paired} | {theirs_share} | {forward} | {ahead} of {len(rounds)} | "
               f"{statistics.median(ratios):.2f} |")
        if with_pairs:
            row += " " + ", ".join(f"{r['step_pairs'][0]:.2f} ({r['step_pairs'][1]}/{r['step_pairs'][2]})"
                                   if "step_pairs" in r else "-" for r in rounds) + " |"
        out.append(row)
    if loads:
        out.append("")
        out.append(f"Load average (1 min) at the blocks' starts: {min(loads):.2f}-{max(loads):.2f}.")
    return "\n".join(out)


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    blocks = []
    for path in paths:
        with open(path) as f:
            blocks.extend(parse(f))
    if not blocks:
        print(f"no complete format blocks in {', '.join(paths)}", file=sys.stderr)
        return 1
    print(summarize(blocks))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
