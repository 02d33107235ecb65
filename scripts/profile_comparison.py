#!/usr/bin/env python3
"""Uniform against OWL sparsity: two sweep directories of scripts/sweep.sh with the same methods, patterns and
calibration, the second run with `-- --sparsity-profile owl`, side by side (standard library + gnuplot).

Usage: python3 scripts/profile_comparison.py UNIFORM_SWEEP OWL_SWEEP OUT_DIR
Writes OUT_DIR/comparison.md (per metric: rows method x profile, columns the sparsities; the best of each column in
bold) and OUT_DIR/<metric>.png (perplexity against sparsity, uniform solid and OWL dashed, log scale).
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_summary import computed_with, fmt, metrics_of_eval, pattern_label, pattern_order  # noqa: E402


def runs_of(sweep):
    """{(method, pattern): report} of the finished runs of a sweep directory."""
    out = {}
    reports = os.path.join(sweep, "reports")
    for name in sorted(os.listdir(reports)):
        if name == "dense.json" or not name.endswith(".json"):
            continue
        method, pattern = name[:-5].split("-", 1)
        with open(os.path.join(reports, name)) as f:
            out[(method, pattern)] = json.load(f)
    return out


def main():
    uniform_dir, owl_dir, out_dir = sys.argv[1:4]
    profiles = {"uniform": runs_of(uniform_dir), "owl": runs_of(owl_dir)}
    with open(os.path.join(uniform_dir, "reports", "dense.json")) as f:
        dense = metrics_of_eval(json.load(f).get("results", []))
    methods = sorted({m for runs in profiles.values() for (m, _) in runs})
    patterns = sorted({p for runs in profiles.values() for (_, p) in runs}, key=pattern_order)
    metrics = sorted({k for runs in profiles.values() for r in runs.values() for k in metrics_of_eval(r["eval"])})
    os.makedirs(out_dir, exist_ok=True)
    lines = [f"Uniform sparsity against OWL's per-block allocation ({uniform_dir}, {owl_dir}).", ""]
    for metric in metrics:
        value = {(m, prof, p): metrics_of_eval(profiles[prof].get((m, p), {}).get("eval", [])).get(metric)
                 for m in methods for prof in profiles for p in patterns}
        best = {p: min((v for (_, _, q), v in value.items() if q == p and v is not None), default=None)
                for p in patterns}
        lines += [f"| {metric} | " + " | ".join(pattern_label(p) for p in patterns) + " |",
                  "|---|" + "---|" * len(patterns),
                  "| dense | " + " | ".join(fmt(dense.get(metric), metric) for _ in patterns) + " |"]
        for m in methods:
            for prof in profiles:
                cells = []
                for p in patterns:
                    v = value[(m, prof, p)]
                    cells.append(f"**{fmt(v, metric)}**" if v is not None and v == best[p] else fmt(v, metric))
                lines.append(f"| {m} {prof} | " + " | ".join(cells) + " |")
        lines.append("")
        data = os.path.join(out_dir, f"{metric.replace(' ', '_')}.dat")
        with open(data, "w") as f:
            for p in patterns:
                if ":" in p:
                    continue
                f.write(f"{float(p)} " + " ".join(
                    str(value[(m, prof, p)] if value[(m, prof, p)] is not None else "NaN")
                    for m in methods for prof in profiles) + "\n")
        if shutil.which("gnuplot"):
            png = os.path.join(out_dir, f"{metric.replace(' ', '_')}.png")
            plots = []
            for i, m in enumerate(methods):
                for j, prof in enumerate(profiles):
                    column = 2 + i * len(profiles) + j
                    plots.append(f"'{data}' using 1:{column} with linespoints lc {i + 1} dt {j + 1} "
                                 f"title '{m} {prof}'")
            script = (f"set terminal png size 800,500; set output '{png}'; set logscale y; "
                      f"set xlabel 'sparsity'; set ylabel '{metric}'; set key top left; plot " + ", ".join(plots))
            subprocess.run(["gnuplot", "-e", script], check=True)
        os.remove(data)
    computed = sorted({computed_with(r) for runs in profiles.values() for r in runs.values()})
    lines += ["Computed with: " + "; ".join(computed), ""]
    with open(os.path.join(out_dir, "comparison.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
