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
     length (tokens per verify step), accepted draft tokens per draft token verified (a tree
     verifies more tokens than it can accept), completed / sent (+ dropped), the 1-minute load
     average after each pass, and for smartspec the request-steps that sat out (shorter
     candidate batches);
  3. when the routers reported them: the step overhead p50 / p99 (wall minus the compute the
     step waited for: its serial drafts, then the slower of the verify call and the drafts made
     ahead beside it), the router's CPU time per step (its .router_cpu file) and, for `+pipeline`
     cells, the draft-ahead hit rate and the share of draft time hidden behind verification;
  4. with `none` and several passes: each pass's tokens/s over `none`'s in the same pass, and
     their median (pairs within a pass share the machine's state of the moment);
  5. when the routers' metrics were kept (<policy>-<rate>.metrics.txt): where a decode step's
     time outside the workers' compute went, as means over the cell's steps from the router's
     stage histogram (splitspec_step_stage_duration_seconds): scheduling, the router's own work
     between its calls and since the previous step, and the calls' time beyond the compute the
     workers reported; and how the router came by its step socket answers and the workers by
     their requests (--unix: polling or asleep, and what each cost; the step socket pickup
     histograms of docs/observability.md).
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


def load_stage_means(path):
    """{stage: (sum of seconds, steps)} from a router's /metrics text, or None without it."""
    if not os.path.exists(path):
        return None
    sums, counts = {}, {}
    prefix = "splitspec_step_stage_duration_seconds_"
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith(prefix) or 'stage="' not in line:
                continue
            name, _, value = line.rpartition(" ")
            stage = name.split('stage="', 1)[1].split('"', 1)[0]
            if name.startswith(prefix + "sum{"):
                sums[stage] = float(value)
            elif name.startswith(prefix + "count{"):
                counts[stage] = float(value)
    return {stage: (sums[stage], counts[stage]) for stage in sums if counts.get(stage)}


def load_pickups(path, family="splitspec_step_answer_pickup_seconds"):
    """{(method, wait): (sum of seconds, count)} of a step socket pickup histogram (the router's
    answers, or a worker's requests with family splitspec_step_request_pickup_seconds) from a
    /metrics text, or None without it."""
    if not os.path.exists(path):
        return None
    prefix = family + "_"
    sums, counts = {}, {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith(prefix) or 'method="' not in line:
                continue
            name, _, value = line.rpartition(" ")
            key = (name.split('method="', 1)[1].split('"', 1)[0], name.split('wait="', 1)[1].split('"', 1)[0])
            if name.startswith(prefix + "sum{"):
                sums[key] = float(value)
            elif name.startswith(prefix + "count{"):
                counts[key] = float(value)
    return {key: (sums.get(key, 0.0), counts[key]) for key in counts} or None


def load_worker_pickups(prefix, worker):
    """A worker's request pickups over one cell: its counters after the cell less those before."""
    family = "splitspec_step_request_pickup_seconds"
    after = load_pickups(prefix + "." + worker + ".after.metrics.txt", family)
    if after is None:
        return None
    before = load_pickups(prefix + "." + worker + ".before.metrics.txt", family) or {}
    return {key: (s - before.get(key, (0.0, 0.0))[0], n - before.get(key, (0.0, 0.0))[1])
            for key, (s, n) in after.items()}


def load_level(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    levels = [level for level in data["levels"] if level["mode"] in ("open", "closed")]
    if not levels:
        return None
    levels[0]["stage_seconds"] = load_stage_means(path[:-len(".json")] + ".metrics.txt")
    levels[0]["answer_pickups"] = load_pickups(path[:-len(".json")] + ".metrics.txt")
    for worker in ("verifier", "drafter"):
        levels[0][worker + "_pickups"] = load_worker_pickups(path[:-len(".json")], worker)
    # The router's CPU seconds over the cell, when the script could read them.
    cpu_path = path[:-len(".json")] + ".router_cpu"
    if os.path.exists(cpu_path):
        with open(cpu_path, encoding="utf-8") as f:
            text = f.read().strip()
        levels[0]["router_cpu_seconds"] = float(text) if text else None
    return levels[0]


def server_info(level):
    info = level.get("server_info") or ""
    try:
        return json.loads(info) if isinstance(info, str) and info else None
    except ValueError:
        return None


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
        self.accepted_per_draft_token = accepted / drafted if drafted > 0 else math.nan
        parsed = [server_info(level) for level in levels]
        infos = [i for i in parsed if i]
        # Step overhead (wall minus the compute the step waited for) and the pipeline's draft-ahead
        # figures, as the router reported them after each pass (its own process per pass).
        self.overhead_p50 = [i.get("overhead_p50_us", math.nan) for i in infos]
        self.overhead_p99 = [i.get("overhead_p99_us", math.nan) for i in infos]
        # Router CPU per step (planning, bookkeeping, RPC framing), per pass.
        self.router_cpu_us = []
        for level, info in zip(levels, parsed):
            cpu, steps = level.get("router_cpu_seconds"), (info or {}).get("total_steps", 0)
            if cpu is not None and steps > 0:
                self.router_cpu_us.append(cpu / steps * 1e6)
        pipe = [i.get("pipeline") or {} for i in infos]
        used = sum(p.get("draft_ahead_used", 0) for p in pipe)
        dropped = sum(p.get("draft_ahead_dropped", 0) for p in pipe)
        self.ahead_hit = used / (used + dropped) if used + dropped > 0 else None
        draft_s = sum(p.get("draft_seconds", 0) for p in pipe)
        self.hidden_share = sum(p.get("hidden_draft_seconds", 0) for p in pipe) / draft_s if draft_s > 0 else None
        # Stage means in us over all passes' steps (schedule, router, rpc_overhead, ...).
        totals = {}
        for level in levels:
            for stage, (seconds, steps) in (level.get("stage_seconds") or {}).items():
                acc = totals.setdefault(stage, [0.0, 0.0])
                acc[0] += seconds
                acc[1] += steps
        self.stage_mean_us = {stage: 1e6 * s / n for stage, (s, n) in totals.items() if n > 0}
        # Step socket pickups over all passes, {(method, wait): [seconds, count]}: the router's
        # answers, and each worker's requests.
        self.pickups, self.worker_pickups = {}, {"verifier": {}, "drafter": {}}
        for level in levels:
            for into, got in [(self.pickups, level.get("answer_pickups"))] + [
                    (self.worker_pickups[w], level.get(w + "_pickups")) for w in self.worker_pickups]:
                for key, (seconds, count) in (got or {}).items():
                    acc = into.setdefault(key, [0.0, 0.0])
                    acc[0] += seconds
                    acc[1] += count
        self.completed = sum(level["summary"]["completed"] for level in levels)
        self.sent = sum(level["summary"]["sent"] for level in levels)
        self.failed = sum(level["summary"]["failed"] for level in levels)
        self.dropped = sum(level["summary"].get("dropped", 0) for level in levels)
        self.loads = [level.get("load_average", -1) for level in levels]
        outs = [sat_out(level) for level in levels]
        self.sat_out = sum(x for x in outs if x is not None) if any(x is not None for x in outs) else None


def file_name(policy):
    """The name router-compare.sh gives a policy's files (':' and '/' become '-')."""
    return policy.replace(":", "-").replace("/", "-")


def pass_ratios(pass_throughput, policy, rate, passes):
    """Each pass's tokens/s over `none`'s in the same pass, where both ran."""
    ratios = []
    for n in range(1, passes + 1):
        mine = pass_throughput.get((policy, rate, n))
        plain = pass_throughput.get(("none", rate, n))
        if mine is not None and plain:
            ratios.append(mine / plain)
    return ratios


def main(out):
    with open(os.path.join(out, "settings.json"), encoding="utf-8") as f:
        settings = json.load(f)
    policies = settings["policies"].split(",")
    rates = [level.split(":")[0] for level in settings["levels"].split(",")]
    passes = int(settings.get("passes", 1))
    cells = {}
    # Output tokens/s per (policy, rate, pass), for ratios within a pass.
    pass_throughput = {}
    for p in policies:
        for r in rates:
            levels = []
            for n in range(1, passes + 1):
                level = load_level(os.path.join(out, "pass%d" % n, "%s-%s.json" % (file_name(p), r)))
                if level is None:
                    continue
                levels.append(level)
                pass_throughput[(p, r, n)] = level["summary"]["output_throughput"]
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
          "| accepted / draft token | done/sent (dropped) | load after | sat out |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rates:
        plain = cells.get(("none", r))
        for p in policies:
            c = cells[(p, r)]
            if c is None:
                print("| %s | %s |%s" % (r, p, " - |" * 11))
                continue
            ratio = ""
            if plain is not None and plain.median_throughput > 0:
                ratio = " (%.2fx)" % (c.median_throughput / plain.median_throughput)
            print("| %s | %s | %.3f | %.3f | %.3f | %.1f | %.1f%s | %.2f | %.2f | %.2f | %d/%d (%d) | %s | %s |" % (
                r, p, c.mean, percentile(c.e2e, 0.5), percentile(c.e2e, 0.99), c.throughput,
                c.median_throughput, ratio,
                c.mean_k, c.accept_length, c.accepted_per_draft_token, c.completed, c.sent, c.dropped,
                " / ".join("%.1f" % x for x in c.loads), "" if c.sat_out is None else c.sat_out))

    if "none" in policies and passes > 1:
        print("\nTokens/s over `none`'s in the same pass (each pass runs the policies in the reverse "
              "order of the one before), and the median of those ratios.\n")
        print("| level | policy | per pass | median |")
        print("|---|---|---|---|")
        for r in rates:
            for p in policies:
                ratios = pass_ratios(pass_throughput, p, r, passes)
                if p == "none" or not ratios:
                    continue
                ordered = sorted(ratios)
                print("| %s | %s | %s | %.3f |" % (r, p, " / ".join("%.3f" % x for x in ratios),
                                                   percentile(ordered, 0.5)))

    if any(c is not None and c.overhead_p50 for c in cells.values()):
        print("\nStep overhead (wall time, with the router's time since the previous step when the two ran "
              "back to back, minus the compute the step waited for: its serial drafts, then the "
              "slower of the verify call and the drafts made ahead beside it; per pass: p50 / p99 us) and "
              "draft-ahead (share of drafts made ahead that were used; share of draft compute hidden "
              "behind verification).\n")
        print("| level | policy | overhead p50 us | overhead p99 us | router CPU us/step | draft-ahead hit rate "
              "| draft time hidden |")
        print("|---|---|---|---|---|---|---|")
        for r in rates:
            for p in policies:
                c = cells[(p, r)]
                if c is None or not c.overhead_p50:
                    continue
                print("| %s | %s | %s | %s | %s | %s | %s |" % (
                    r, p, " / ".join("%.0f" % x for x in c.overhead_p50),
                    " / ".join("%.0f" % x for x in c.overhead_p99),
                    " / ".join("%.0f" % x for x in c.router_cpu_us) or "-",
                    "-" if c.ahead_hit is None else "%.2f" % c.ahead_hit,
                    "-" if c.hidden_share is None else "%.2f" % c.hidden_share))

    stages = ("schedule", "router", "rpc_overhead")
    if any(c is not None and all(k in c.stage_mean_us for k in stages) for c in cells.values()):
        print("\nA decode step's time outside the workers' compute, means over the cell's steps (us), from the "
              "router's stage histogram: scheduling (admission, pool choice, policy), the router's own work "
              "between its calls and since the previous step, and its calls' time beyond the compute the "
              "workers reported.\n")
        print("| level | policy | scheduling | router | calls beyond compute | draft compute | verify compute |")
        print("|---|---|---|---|---|---|---|")
        for r in rates:
            for p in policies:
                c = cells[(p, r)]
                if c is None or not all(k in c.stage_mean_us for k in stages):
                    continue
                m = c.stage_mean_us
                print("| %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f |" % (
                    r, p, m["schedule"], m["router"], m["rpc_overhead"], m.get("draft", 0.0), m.get("verify", 0.0)))

    print_pickups(cells, rates, policies)


def pickup_cells(pickups, method):
    """'asleep share | polling mean us | asleep mean us' of one method's frames, or dashes. A
    frame that was there already ("ready") counts in the share's total only: the time it waited
    was its reader's own work, not a wake-up."""
    def total(waits):
        got = [pickups.get((method, w), [0.0, 0.0]) for w in waits]
        return sum(x[0] for x in got), sum(x[1] for x in got)
    _, n_ready = total(("ready",))
    polling_s, n_polling = total(("spinning",))
    asleep_s, n_asleep = total(("asleep_before_window", "asleep_after_window"))
    n = n_ready + n_polling + n_asleep
    if n == 0:
        return "- | - | -"
    mean = lambda seconds, count: "%.0f" % (1e6 * seconds / count) if count > 0 else "-"
    return "%.2f | %s | %s" % (n_asleep / n, mean(polling_s, n_polling), mean(asleep_s, n_asleep))


def print_pickup_table(cells, rates, policies, intro, sides):
    """One row a cell of pickup_cells for each of `sides`: (heading, pickups of a cell, method)."""
    rows = []
    for r in rates:
        for p in policies:
            c = cells[(p, r)]
            if c is not None and any(pickups(c) for _, pickups, _ in sides):
                rows.append("| %s | %s | %s |" % (r, p, " | ".join(pickup_cells(pickups(c), method)
                                                                  for _, pickups, method in sides)))
    if not rows:
        return
    print("\n" + intro + "\n")
    print("| level | policy | " + " | ".join(h + ": asleep | polling us | asleep us" for h, _, _ in sides) + " |")
    print("|---|---|" + "---|---|---|" * len(sides))
    for row in rows:
        print(row)


def print_pickups(cells, rates, policies):
    print_pickup_table(
        cells, rates, policies,
        "How the router came by its step socket answers (splitspec_step_answer_pickup_seconds, every pass): "
        "the share that came while it slept outside the window where it polls (--step-spin-us), and the mean "
        "time from the worker's publishing an answer to the router's reading it, for those that came while it "
        "polled and those that came while it slept (us). Answers already there when it looked count in the "
        "share only.",
        [("verify", lambda c: c.pickups, "verify"), ("propose", lambda c: c.pickups, "propose")])
    print_pickup_table(
        cells, rates, policies,
        "The same for the workers' step socket requests (splitspec_step_request_pickup_seconds, each "
        "worker's counters after the cell less those before): the verifier's Verify requests and the "
        "drafter's Propose requests.",
        [("verifier", lambda c: c.worker_pickups["verifier"], "verify"),
         ("drafter", lambda c: c.worker_pickups["drafter"], "propose")])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
