#!/usr/bin/env python3
"""Zero-shot accuracy of alps reports named on the command line, one row per report, in scripts/sweep_summary.py's
layout (acc_norm where a task reports it, else acc; the mean), then LAMBADA's perplexity where it was evaluated.

Usage: python3 scripts/zeroshot_table.py "LABEL=REPORT.json" ...   (an `alps prune --json` or `alps eval --json`
report; the label names its row)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_summary import computed_with, metrics_of_eval, zero_shot_lines  # noqa: E402


def main(args):
    if not args or any("=" not in a for a in args):
        sys.exit(__doc__)
    rows, names, sources = [], [], []
    for arg in args:
        label, path = arg.split("=", 1)
        with open(path) as f:
            report = json.load(f)
        report = report.get("report", report)
        metrics = metrics_of_eval(report.get("eval", report.get("results", [])))
        rows.append((label, metrics))
        names += [k for k in metrics if k not in names]
        sources.append(f"{label}: {computed_with(report)}")
    lines = zero_shot_lines(rows, names)
    if any("lambada_openai perplexity" in m for _, m in rows):
        lines += ["", "| run | LAMBADA perplexity |", "|---|---:|"]
        lines += [f"| {label} | {m['lambada_openai perplexity']:.1f} |" for label, m in rows
                  if "lambada_openai perplexity" in m]
    lines += [""] + sources
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
