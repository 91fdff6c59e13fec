#!/usr/bin/python3
"""Renders the dashboard's panels into one PNG from Prometheus query_range results.

Input: the JSON written by tests/integration/prometheus_scrape.py --range-out FILE (a list of
{title, refId, expr, result}). One subplot per panel, one line per series (legend from its
labels). Uses Debian's matplotlib: run with /usr/bin/python3.

  deploy/grafana/render_dashboard.py ranges.json dashboard.png
"""
import json
import re
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Labels that only repeat what the panel says.
NOISE = {"__name__", "job", "instance", "service"}


def series_label(entry, metric):
    """The panel's legendFormat with {{label}} filled in, else the distinguishing labels."""
    legend = entry.get("legendFormat", "")
    if legend:
        return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), legend)
    parts = [f"{k}={v}" for k, v in sorted(metric.items()) if k not in NOISE]
    return f"{entry['refId']} " + ",".join(parts)


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    with open(argv[1]) as f:
        ranges = json.load(f)
    panels = OrderedDict()
    for entry in ranges:
        panels.setdefault(entry["title"], []).append(entry)
    n = len(panels)
    cols = 3
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.2 * rows), squeeze=False)
    for ax, (title, entries) in zip(axes.flat, panels.items()):
        t0 = None
        n_lines = 0
        for entry in entries:
            for series in entry["result"]:
                points = [(float(t), float(v)) for t, v in series["values"]]
                points = [(t, v) for t, v in points if v == v]  # drop NaN
                if not points:
                    continue
                if t0 is None:
                    t0 = points[0][0]
                ax.plot([t - t0 for t, _ in points], [v for _, v in points], linewidth=1,
                        label=series_label(entry, series["metric"]))
                n_lines += 1
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("seconds", fontsize=8)
        ax.tick_params(labelsize=7)
        if 0 < n_lines <= 8:
            ax.legend(fontsize=6, loc="best")
        elif n_lines == 0:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=80)
    print(f"wrote {argv[2]} ({n} panels)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
