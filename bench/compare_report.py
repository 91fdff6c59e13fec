#!/usr/bin/python3
"""Markdown tables for a policy comparison written by scripts/router-compare.sh.

  /usr/bin/python3 bench/compare_report.py OUT_DIR

Reads OUT_DIR/settings.json and OUT_DIR/pass<N>/<policy>-<rate>.json (`splitspec bench
--out-prefix`) and prints, pooling the completed requests of every pass of a cell:
  1. mean end-to-end latency per (rate, policy), * = lowest at that rate, with each pass's
     own mean in brackets (their spread is the noise of the machine);
  2. one row per cell: mean / p50 / p99 E2E latency over the pooled requests, output
     tokens/s (mean over passes, and the median over passes with its ratio to `none`'s median
     at the same level when `none` ran), mean k (draft tokens verified per decode step), mean accept
     length (tokens per verify step), completed / sent (+ dropped), the 1-minute load average
     after each pass, and for smartspec the request-steps that sat out (shorter candidate
     batches).
Percentiles interpolate linearly between order statistics, as `splitspec bench` does.
"""

import json
import math
import os
import sys


def percentile(sorted_values, q):
    if not sorted_values:
        return math.nan
    pos = q * (len(sorted_values) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def load_level(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    levels = [level for level in data["levels"] if level["mode"] in ("open", "closed")]
    return levels[0] if levels else None


def sat_out(level):
    state = level.get("server_state") or ""
    try:
        state = json.loads(state) if isinstance(state, str) else state
    except ValueError:
        return None
    return state.get("sat_out_request_steps") if isinstance(state, dict) else None


class Cell:
    def __init__(self, levels):
        self.levels = levels
        ok = [r for level in levels for r in level["requests"] if r["ok"]]
        self.e2e = sorted(r["e2e_ms"] / 1000.0 for r in ok)
        self.pass_means = [level["summary"]["e2e"]["mean_ms"] / 1000.0 for level in levels
                           if level["summary"]["completed"] > 0]
        self.mean = sum(self.e2e) / len(self.e2e) if self.e2e else math.nan
        self.throughput = sum(level["summary"]["output_throughput"] for level in levels) / len(levels)
        per_pass = sorted(level["summary"]["output_throughput"] for level in levels)
        self.median_throughput = percentile(per_pass, 0.5)
        steps = sum(r["steps"] for r in ok)
        drafted = sum(r["drafted_tokens"] for r in ok)
        accepted = sum(r["accepted_tokens"] for r in ok)
        decode_steps = steps - len(ok)  # a request's usage.steps counts its prefill step
        self.mean_k = drafted / decode_steps if decode_steps > 0 else 0.0
        self.accept_length = 1.0 + accepted / decode_steps if decode_steps > 0 else 1.0
        self.completed = sum(level["summary"]["completed"] for level in levels)
        self.sent = sum(level["summary"]["sent"] for level in levels)
        self.failed = sum(level["summary"]["failed"] for level in levels)
        self.dropped = sum(level["summary"].get("dropped", 0) for level in levels)
        self.loads = [level.get("load_average", -1) for level in levels]
        outs = [sat_out(level) for level in levels]
        self.sat_out = sum(x for x in outs if x is not None) if any(x is not None for x in outs) else None


def main(out):
    with open(os.path.join(out, "settings.json"), encoding="utf-8") as f:
        settings = json.load(f)
    policies = settings["policies"].split(",")
    rates = [level.split(":")[0] for level in settings["levels"].split(",")]
    passes = int(settings.get("passes", 1))
    cells = {}
    for p in policies:
        for r in rates:
            levels = [load_level(os.path.join(out, "pass%d" % n, "%s-%s.json" % (p.replace(":", "-"), r)))
                      for n in range(1, passes + 1)]
            levels = [level for level in levels if level is not None]
            cells[(p, r)] = Cell(levels) if levels else None

    print("Mean end-to-end latency (s) over the requests of all passes (each pass's mean in brackets); "
          "* = lowest at that rate.\n")
    print("| level | " + " | ".join(policies) + " |")
    print("|---" * (len(policies) + 1) + "|")
    for r in rates:
        present = {p: cells[(p, r)] for p in policies if cells[(p, r)] is not None}
        finite = [c.mean for c in present.values() if not math.isnan(c.mean)]
        best = min(finite) if finite else None
        row = []
        for p in policies:
            c = present.get(p)
            if c is None:
                row.append("-")
                continue
            text = "%.3f" % c.mean
            if best is not None and c.mean == best:
                text += "*"
            if len(c.pass_means) > 1:
                text += " (%s)" % " / ".join("%.3f" % m for m in c.pass_means)
            if c.failed:
                text += " !%d failed" % c.failed
            row.append(text)
        print("| %s | %s |" % (r, " | ".join(row)))

    print("\n| level | policy | mean s | p50 s | p99 s | tok/s | median tok/s (x none) | mean k | accept len "
          "| done/sent (dropped) | load after | sat out |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rates:
        plain = cells.get(("none", r))
        for p in policies:
            c = cells[(p, r)]
            if c is None:
                print("| %s | %s |%s" % (r, p, " - |" * 10))
                continue
            ratio = ""
            if plain is not None and plain.median_throughput > 0:
                ratio = " (%.2fx)" % (c.median_throughput / plain.median_throughput)
            print("| %s | %s | %.3f | %.3f | %.3f | %.1f | %.1f%s | %.2f | %.2f | %d/%d (%d) | %s | %s |" % (
                r, p, c.mean, percentile(c.e2e, 0.5), percentile(c.e2e, 0.99), c.throughput,
                c.median_throughput, ratio,
                c.mean_k, c.accept_length, c.completed, c.sent, c.dropped,
                " / ".join("%.1f" % x for x in c.loads), "" if c.sat_out is None else c.sat_out))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
