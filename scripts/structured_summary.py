#!/usr/bin/env python3
"""The table of a structured sweep (scripts/structured_sweep.sh): one row per pruned model, the dense model first
(from the --eval-dense of the sweep's first run): perplexities, the zero-shot mean (acc_norm where a task reports
it, else acc), parameters, and the seconds of the structured choices.

Usage: python3 scripts/structured_summary.py REPORTS_DIR
"""
import json
import pathlib
import sys


def figures(evals):
    ppl, acc = {}, {}
    for e in evals:
        if "perplexity" in e:
            ppl[e["dataset"]] = e["perplexity"]
        elif "metrics" in e:
            m = e["metrics"]
            acc[e["task"]] = m.get("acc_norm", m.get("acc"))
    return ppl, acc


def main():
    reports = sorted(pathlib.Path(sys.argv[1]).glob("*.json"))
    rows, datasets, tasks = [], [], []
    for path in reports:
        r = json.loads(path.read_text())
        s = r["extra"]["structured"]
        if r.get("eval_dense"):
            rows.insert(0, ("dense", *figures(r["eval_dense"]), s["parameters"]["before"], None, None, None, None))
        kept = ", ".join(f"{st['kept']}/{st['units']} {st['structure']}" for st in s["steps"])
        seconds = sum(b["seconds"] for b in s["blocks"])
        label = path.stem.rsplit("-", 1)[0] if path.stem.endswith("-refit") else path.stem
        method = s["method"] + ("+refit" if s.get("options", {}).get("refit") else "")
        rels = [b["rel_error"] for b in s["blocks"] if "rel_error" in b]  # removed experts have none
        rel = sum(rels) / len(rels) if rels else None
        stats = [b.get("stats", {}) for b in s["blocks"]]
        search = None
        if any("moves" in st for st in stats):
            search = (f"{sum(st.get('moves', 0) for st in stats)} moves, "
                      f"{sum(st.get('start') == 'score' for st in stats)}/{len(stats)} from the score")
        rows.append((f"{kept} ({method})", *figures(r["eval"]), s["parameters"]["after"], seconds, rel, search, label))
    for _, ppl, acc, *_ in rows:
        datasets += [d for d in ppl if d not in datasets]
        tasks += [t for t in acc if t not in tasks]
    head = ["model"] + [f"{d} ppl" for d in datasets] + [f"{t}" for t in tasks]
    head += ["zero-shot mean"] if tasks else []
    head += ["parameters (M)", "choice s", "mean rel_error", "search"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, ppl, acc, params, seconds, rel, search, _ in rows:
        cells = [name] + [f"{ppl[d]:.2f}" if d in ppl else "-" for d in datasets]
        cells += [f"{100 * acc[t]:.2f}" if t in acc else "-" for t in tasks]
        if tasks:
            have = [acc[t] for t in tasks if t in acc]
            cells.append(f"{100 * sum(have) / len(have):.2f}" if len(have) == len(tasks) else "-")
        cells += [f"{params / 1e6:.2f}", "-" if seconds is None else f"{seconds:.1f}"]
        cells += ["-" if rel is None else f"{rel:.4f}", search or "-"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
