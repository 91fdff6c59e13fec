#!/usr/bin/python3
"""Calibration of the expected-length formulas against what a router-compare run observed.

  /usr/bin/python3 bench/tree_calibration.py OUT_DIR

For every static:K and static-tree:D:N cell of OUT_DIR (scripts/router-compare.sh), per level:
  - observed: tokens per verify step (accept length, bonus included) over the cell's requests;
  - chain formula: l(a, k) = (1 - a^(k+1)) / (1 - a), a being the per-token acceptance that
    reproduces the static:K cell with the largest K at that level (solved from its accept
    length), so the chain rows show how well one a explains every chain depth;
  - tree prior: 1 + sum_i prod_{j<=i} (1 - (1 - a)^w), w = ceil(N / D), what independent
    candidates at each depth would give (TreeAcceptance's prior);
  - tree learnt: 1 + sum_i prod_{j<=i} c_{j-1} p_j with the per-depth estimates p_j and
    continuations c_j (c_0 = 1) the router had learnt from that cell's tree outcomes (its
    /server_info after the cell), as TreeAcceptance::ExpectedLength computes it.
"""

import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from compare_report import Cell, load_level  # noqa: E402


def chain_length(a, k):
    return k + 1.0 if a >= 1 else (1 - a ** (k + 1)) / (1 - a)


def solve_a(length, k):
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if chain_length(mid, k) < length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def learnt_length(level, depth, nodes):
    state = level.get("server_state") or ""
    try:
        state = json.loads(state) if isinstance(state, str) else state
    except ValueError:
        return None
    table = (state or {}).get("tree_acceptance_by_width") or {}
    width = str(min(8, max(2, math.ceil(nodes / depth))))
    for pool in table.values():
        rows = pool.get(width)
        if not rows:
            continue
        p = {row["depth"]: row["acceptance"] for row in rows}
        c = {row["depth"]: row.get("continuation", 1.0) for row in rows}
        # TreeAcceptance::ExpectedLength: depth d is reached when the node accepted at d - 1
        # had children (c_{d-1}; the root always has) and one of them was accepted (p_d).
        length, reach = 1.0, 1.0
        for d in range(1, depth + 1):
            reach *= (1.0 if d == 1 else c.get(d - 1, 1.0)) * p.get(d, 0.0)
            length += reach
        return length
    return None


def main(out):
    with open(os.path.join(out, "settings.json"), encoding="utf-8") as f:
        settings = json.load(f)
    policies = settings["policies"].split(",")
    levels = [level.split(":")[0] for level in settings["levels"].split(",")]
    passes = int(settings.get("passes", 1))
    print("| level | shape | observed accept len | chain formula | tree prior | tree learnt |")
    print("|---|---|---|---|---|---|")
    for r in levels:
        cells = {}
        for p in policies:
            found = [load_level(os.path.join(out, "pass%d" % n, "%s-%s.json" % (p.replace(":", "-"), r)))
                     for n in range(1, passes + 1)]
            found = [x for x in found if x is not None]
            if found:
                cells[p] = (Cell(found), found[-1])
        chains = sorted((int(p.split(":")[1]), p) for p in cells if p.startswith("static:") and "+" not in p)
        if not chains:
            continue
        k_ref, p_ref = chains[-1]
        a = solve_a(cells[p_ref][0].accept_length, k_ref)
        for k, p in chains:
            print("| %s | chain %d | %.2f | %.2f | | |" % (r, k, cells[p][0].accept_length, chain_length(a, k)))
        for p in policies:
            if not p.startswith("static-tree:") or p not in cells:
                continue
            _, d, n = p.split(":")
            d, n = int(d), int(n)
            w = min(8, max(2, math.ceil(n / d)))
            prior, reach = 1.0, 1.0
            for _ in range(d):
                reach *= 1 - (1 - a) ** w
                prior += reach
            learnt = learnt_length(cells[p][1], d, n)
            print("| %s | tree %d levels / %d nodes | %.2f | | %.2f | %s |" % (
                r, d, n, cells[p][0].accept_length, prior, "-" if learnt is None else "%.2f" % learnt))
        print("| %s | (a = %.3f from static:%d) | | | | |" % (r, a, k_ref))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
