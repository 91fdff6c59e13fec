#!/usr/bin/python3
"""Markdown table and PNG plot for a policy sweep written by scripts/bench-sweep.sh.

  /usr/bin/python3 bench/sweep_report.py OUT_DIR

Reads OUT_DIR/settings.json and OUT_DIR/<workload>/<policy>.json (`splitspec bench --out-prefix`
JSON), writes OUT_DIR/sweep.md and OUT_DIR/speedup_<workload>.png. Speedup is the mean
end-to-end latency under `none` divided by the policy's at the same request rate (> 1: the policy
is faster), as in the SmartSpec paper's figure 11.
"""

import json
import math
import os
import sys


def load(out):
    with open(os.path.join(out, "settings.json"), encoding="utf-8") as f:
        settings = json.load(f)
    policies = settings["policies"].split(",")
    results = {}  # workload -> policy -> rate -> summary
    for workload in settings["workloads"].split(","):
        per_policy = {}
        for policy in policies:
            path = os.path.join(out, workload, policy.replace(":", "-") + ".json")
            if not os.path.exists(path):
                continue
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            levels = [level for level in data["levels"] if level["mode"] == "open" and level["rate"] != "inf"]
            per_policy[policy] = {float(level["rate"]): level["summary"] for level in levels}
            loads = {("load", float(level["rate"])): level["load_average"] for level in levels if "load_average" in level}
            per_policy[policy].update(loads)
        results[workload] = per_policy
    return settings, policies, results


def e2e_mean_s(summary):
    return summary["e2e"]["mean_ms"] / 1000.0 if summary["completed"] > 0 else math.nan


def speedup(base, summary):
    mine = e2e_mean_s(summary)
    return base / mine if mine > 0 and not math.isnan(base) else math.nan


def fmt(x, spec):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def workload_tables(workload, policies, per_policy):
    rates = sorted({r for runs in per_policy.values() for r in runs if not isinstance(r, tuple)})
    present = [p for p in policies if p in per_policy]
    lines = ["### %s" % workload, "",
             "Mean end-to-end latency in seconds (speedup over `none`); * = lowest at that rate; "
             "! = some requests failed.", "",
             "| req/s | " + " | ".join(present) + " |", "|---" * (len(present) + 1) + "|"]
    for rate in rates:
        base = e2e_mean_s(per_policy["none"][rate]) if "none" in per_policy and rate in per_policy["none"] else math.nan
        values = {p: e2e_mean_s(per_policy[p][rate]) for p in present if rate in per_policy[p]}
        finite = [v for v in values.values() if not math.isnan(v)]
        best = min(finite) if finite else None
        cells = []
        for p in present:
            if p not in values:
                cells.append("-")
                continue
            s = per_policy[p][rate]
            cell = "%s (%s×)" % (fmt(values[p], ".2f"), fmt(speedup(base, s), ".2f"))
            if best is not None and values[p] == best:
                cell += "*"
            if s["failed"] > 0:
                cell += " !%d" % s["failed"]
            cells.append(cell)
        lines.append("| %g | %s |" % (rate, " | ".join(cells)))
    lines += ["", "Output tokens/s, mean TPOT (ms), mean accept length (tokens per verify step), machine load "
              "(1-minute load average after the level, when recorded):", "",
              "| req/s | " + " | ".join(present) + " |", "|---" * (len(present) + 1) + "|"]
    for rate in rates:
        cells = []
        for p in present:
            s = per_policy[p].get(rate)
            load = per_policy[p].get(("load", rate))
            cells.append("-" if s is None else "%s tok/s, %s ms, %s%s" % (
                fmt(s["output_throughput"], ".1f"), fmt(s["tpot"]["mean_ms"], ".1f"),
                fmt(s["mean_accept_length"], ".2f"), "" if load is None or load < 0 else ", load %.1f" % load))
        lines.append("| %g | %s |" % (rate, " | ".join(cells)))
    lines.append("")
    return lines


def plot(out, workload, policies, per_policy, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401 (used as matplotlib.ticker)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    base = per_policy.get("none", {})
    for p in policies:
        if p not in per_policy:
            continue
        rates = sorted(r for r in per_policy[p] if not isinstance(r, tuple) and r in base)
        ys = [speedup(e2e_mean_s(base[r]), per_policy[p][r]) for r in rates]
        ax1.plot(rates, ys, marker="o", label=p)
        own = sorted(r for r in per_policy[p] if not isinstance(r, tuple))
        ax2.plot(own, [per_policy[p][r]["mean_accept_length"] for r in own], marker="o", label=p)
    all_rates = sorted({r for runs in per_policy.values() for r in runs if not isinstance(r, tuple)})
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_rates)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xlabel("request rate (req/s)")
        ax.grid(True, alpha=0.3)
    ax1.axhline(1.0, color="black", linewidth=0.8)
    ax1.set_ylabel("speedup of mean E2E latency over none")
    ax2.set_ylabel("mean accept length (tokens / verify step)")
    ax1.legend(fontsize=8)
    fig.suptitle("%s%s" % (workload, (" — " + title) if title else ""))
    fig.tight_layout()
    path = os.path.join(out, "speedup_%s.png" % workload)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[0]
    settings, policies, results = load(out)
    lines = ["## Policy sweep", "",
             "- models: target `%s`, draft `%s`; drafters: %s" % (settings["target"], settings["draft"],
                                                                  settings["drafters"]),
             "- machine: %s" % settings["machine"],
             "- placement: %s" % settings["placement"],
             "- %s s of Poisson arrivals per rate (drain %s s), max %s new tokens, greedy, ignore EOS" % (
                 settings["duration_s"], settings["drain_s"], settings["max_tokens"]),
             "- latency model: %s" % (settings["latency_model"] or "router default"), ""]
    for workload, per_policy in results.items():
        if not per_policy:
            continue
        lines += workload_tables(workload, policies, per_policy)
        try:
            path = plot(out, workload, policies, per_policy, settings.get("title", ""))
            lines += ["![%s](%s)" % (workload, os.path.basename(path)), ""]
        except ImportError as e:  # matplotlib missing: the table still stands
            print("no plot: %s" % e, file=sys.stderr)
    md = os.path.join(out, "sweep.md")
    with open(md, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print("wrote %s" % md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
