#!/usr/bin/env python3
"""Tables and plots of a sweep directory written by scripts/sweep.sh (standard library + gnuplot).

Reads SWEEP/sweep.json (settings), SWEEP/reports/dense.json (`alps eval --json` of the dense model) and
SWEEP/reports/<method>-<pattern>.json (`alps-report.json` of each run), and writes
  SWEEP/summary.json   every run's metrics, achieved sparsity, times and what computed it (alps, its source
                       revision, libtorch, the CPU)
  SWEEP/summary.md     one table per metric, rows = methods, columns = sparsities (the paper's layout), the zero-shot
                       tasks side by side (one row per run) and a time table
  SWEEP/<metric>.png   perplexity against sparsity per method, log scale (gnuplot; skipped with a note if missing)
Runs not finished yet show as "-".
"""
import json
import os
import shutil
import subprocess
import sys


def shown_path(path):
    """A path as the summary prints it: relative to the directory that holds this repository when it lies under it
    (../shared/data), so that a committed summary names no one machine's directories."""
    parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rel = os.path.relpath(os.path.abspath(path), parent)
    return path if rel.startswith("..") else os.path.join("..", rel)


def metrics_of_eval(entries):
    """{metric name: value} from an evaluation list: perplexities as '<dataset> ppl', tasks as '<task> <metric>'."""
    out = {}
    for e in entries:
        if "task" in e:
            for name, value in e["metrics"].items():
                if not name.endswith("_stderr") and isinstance(value, (int, float)):
                    out[f"{e['task']} {name}"] = value
        elif "dataset" in e:
            out[f"{e['dataset']} ppl"] = e["perplexity"]
    return out


def computed_with(report):
    """'alps VERSION (source REVISION), libtorch V, on CPU' (or 'on cuda:0 (host CPU)'): from a report's software and
    hardware entries (reports written before alps recorded its source revision say so)."""
    sw, hw = report.get("software", {}), report.get("hardware", {})
    if not sw:
        return "an alps that did not record its version"
    # `alps eval --json` names the device it ran on; a prune report, the recipe's choice ("auto": a GPU if one is seen).
    device = report.get("device") or report.get("recipe", {}).get("device", "cpu")
    if device == "auto":
        device = "cuda" if hw.get("cuda_devices") else "cpu"
    cpu = hw.get("cpu", "an unrecorded CPU")
    where = cpu if device == "cpu" else f"{device} (host {cpu})"
    return (f"alps {sw.get('alps', '?')} (source {sw.get('source_revision', 'not recorded')}), "
            f"libtorch {sw.get('libtorch', '?')}, on {where}")


def pattern_order(p):
    """Unstructured sparsities ascending, then N:M patterns by density: a sweep may run its patterns in any order."""
    if ":" in p:
        n, m = p.split(":")
        return (1, int(n) / int(m), p)
    return (0, float(p), p)


def pattern_label(p):
    return p if ":" in p else f"{100 * float(p):g}%"


def is_perplexity(metric):
    return metric.endswith(" ppl") or metric.endswith(" perplexity")  # a dataset's, or a task's (LAMBADA)


def fmt(value, metric):
    if value is None:
        return "-"
    if is_perplexity(metric):
        return f"{value:.2f}" if value < 1e4 else f"{value:.3g}"
    return f"{100 * value:.2f}"  # accuracies in percent, as papers print them


def seconds(s):
    """Seconds with the digits a run of that length needs: a tiny model's runs take fractions of one."""
    return f"{s:.0f}" if s >= 100 else f"{s:.1f}" if s >= 1 else f"{s:.2f}"


def main(sweep):
    settings = json.load(open(os.path.join(sweep, "sweep.json")))
    methods, patterns = settings["methods"], sorted(settings["patterns"], key=pattern_order)
    reports = os.path.join(sweep, "reports")

    dense = None
    if os.path.exists(os.path.join(reports, "dense.json")):
        d = json.load(open(os.path.join(reports, "dense.json")))
        dense = {"metrics": metrics_of_eval(d.get("results", []) + d.get("tasks", [])),
                 "seconds": d.get("wall_seconds"), "computed_with": computed_with(d)}

    runs = []
    for m in methods:
        for p in patterns:
            path = os.path.join(reports, f"{m}-{p.replace(':', 'of')}.json")
            if not os.path.exists(path):
                continue
            r = json.load(open(path))
            phases = r.get("phase_seconds", {})
            runs.append({"method": m, "pattern": p, "linear_sparsity": r.get("linear_sparsity"),
                         "metrics": metrics_of_eval(r.get("eval", [])),
                         "seconds": {"total": sum(phases.values()),
                                     "prune": sum(v for k, v in phases.items() if k != "eval"),
                                     "solve": sum(l.get("seconds", 0) + l.get("refine_seconds", 0)
                                                  for l in r.get("layers", []))},
                         "calibration": r.get("extra", {}).get("calibration"),
                         "computed_with": computed_with(r)})

    metric_names = []
    for src in ([dense] if dense else []) + runs:
        for k in src["metrics"]:
            if k not in metric_names:
                metric_names.append(k)

    summary = {"settings": settings, "dense": dense, "runs": runs}
    with open(os.path.join(sweep, "summary.json.tmp"), "w") as f:
        json.dump(summary, f, indent=1)
    os.replace(os.path.join(sweep, "summary.json.tmp"), os.path.join(sweep, "summary.json"))

    def cell(m, p, key):
        for r in runs:
            if r["method"] == m and r["pattern"] == p:
                return key(r)
        return None

    lines = [f"# {settings['title']}: sweep summary", ""]
    lines.append(f"Calibration: {settings['nsamples']} x {settings['seqlen']} tokens of {settings['calib']}"
                 + (f" (data directory {shown_path(settings['data_dir'])})" if settings.get("data_dir") else "")
                 + "; "
                 f"evaluation window {settings['eval_seqlen'] or 'min(2048, model positions)'}"
                 + (f", at most {settings['eval_max_windows']} windows per dataset"
                    if settings["eval_max_windows"] else ", full test sets")
                 + (f", first {settings['eval_limit']} documents per task" if settings.get("eval_limit") else "")
                 + (f"; alps prune {' '.join(settings['prune_args'])}" if settings["prune_args"] else "") + ".")
    lines.append(f"{len(runs)} of {len(methods) * len(patterns)} runs finished.")
    # A sweep resumed across machines and builds: which alps and which machine computed how many of its results.
    sources = {}
    for src in ([dense] if dense else []) + runs:
        sources[src["computed_with"]] = sources.get(src["computed_with"], 0) + 1
    lines.append("Computed with: " + "; ".join(f"{k} ({n} of the {sum(sources.values())} reports)"
                                             for k, n in sorted(sources.items())) + ".")
    head = "| method | " + " | ".join(pattern_label(p) for p in patterns) + " |"
    rule = "|---|" + "---|" * len(patterns)
    for metric in metric_names:
        unit = "" if is_perplexity(metric) else " (%)"
        lines += ["", f"## {metric}{unit}", "", head, rule]
        if dense and metric in dense["metrics"]:
            lines.append("| dense | " + " | ".join([fmt(dense["metrics"][metric], metric)] * len(patterns)) + " |")
        for m in methods:
            lines.append(f"| {m} | " + " | ".join(fmt(cell(m, p, lambda r: r["metrics"].get(metric)), metric)
                                                 for p in patterns) + " |")
    lines += zero_shot_table(dense, methods, patterns, runs, metric_names)
    lines += ["", "## wall time of alps prune, seconds (layer solves in parentheses; evaluation excluded)", "",
              head, rule]
    for m in methods:
        def t(r):
            return f"{seconds(r['seconds']['prune'])} ({seconds(r['seconds']['solve'])})"
        lines.append(f"| {m} | " + " | ".join(cell(m, p, t) or "-" for p in patterns) + " |")

    plots = plot(sweep, settings, methods, patterns, runs, dense, [k for k in metric_names if k.endswith(" ppl")])
    if plots:
        lines += ["", "## plots", ""] + [f"![{name}]({name})" for name in plots]
    with open(os.path.join(sweep, "summary.md.tmp"), "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(os.path.join(sweep, "summary.md.tmp"), os.path.join(sweep, "summary.md"))
    print("\n".join(lines))


def zero_shot_table(dense, methods, patterns, runs, metric_names):
    """Zero-shot tasks side by side, one row per run (the layout of the papers' accuracy tables): acc_norm where a
    task reports it, else acc; LAMBADA's acc; and the mean of those columns."""
    rows = ([("dense", dense["metrics"])] if dense else []) + [
        (f"{r['method']} {pattern_label(r['pattern'])}", r["metrics"])
        for m in methods for p in patterns for r in runs if r["method"] == m and r["pattern"] == p]
    return zero_shot_lines(rows, metric_names)


def zero_shot_lines(rows, metric_names):
    """zero_shot_table's lines for (label, {metric: value}) rows."""
    tasks = []
    for k in metric_names:
        task, metric = k.rsplit(" ", 1)
        if metric in ("acc", "acc_norm") and task not in tasks:
            tasks.append(task)
    if not tasks:
        return []

    def primary(metrics, task):
        return metrics.get(f"{task} acc_norm", metrics.get(f"{task} acc"))

    cols = [f"{t} {'acc_norm' if any(f'{t} acc_norm' in metrics for _, metrics in rows) else 'acc'}" for t in tasks]
    lines = ["", "## zero-shot accuracy (%), one row per run", "",
             "| run | " + " | ".join(cols) + " | mean |", "|---|" + "---:|" * (len(cols) + 1)]
    for label, metrics in rows:
        values = [primary(metrics, t) for t in tasks]
        mean = sum(values) / len(values) if all(v is not None for v in values) else None
        lines.append(f"| {label} | " + " | ".join(fmt(v, "acc") for v in values) + f" | {fmt(mean, 'acc')} |")
    return lines


def gnuplot_text(s):
    """A gnuplot single-quoted string: a quote inside is written twice."""
    return "'" + str(s).replace("'", "''") + "'"


def plot(sweep, settings, methods, patterns, runs, dense, ppl_metrics):
    """One PNG per perplexity metric; N:M patterns are not on the sparsity axis and are left out of the lines.
    A plot that cannot be made is a warning: the tables are the result, the plot a view of them."""
    if not ppl_metrics:
        return []
    if shutil.which("gnuplot") is None:
        print("sweep: gnuplot not found (Debian: apt install gnuplot-nox): plots skipped", file=sys.stderr)
        return []
    unstructured = [p for p in patterns if ":" not in p]
    written = []
    for metric in ppl_metrics:
        name = metric.replace(" ", "_") + ".png"
        data = os.path.join(sweep, name + ".dat")
        points = 0
        with open(data, "w") as f:
            for m in methods:
                f.write(f"# {m}\n")
                for p in unstructured:
                    v = next((r["metrics"].get(metric) for r in runs if r["method"] == m and r["pattern"] == p), None)
                    if v is not None:
                        f.write(f"{100 * float(p):g} {v}\n")
                        points += 1
                f.write("\n\n")
        if points == 0:
            print(f"sweep: no unstructured run has {metric} yet: no plot", file=sys.stderr)
            continue
        script = [
            "set terminal pngcairo size 900,600 noenhanced",
            f"set output {gnuplot_text(os.path.join(sweep, name))}",
            f"set title {gnuplot_text(settings['title'] + ': ' + metric + ' against sparsity')}",
            "set xlabel 'sparsity (%)'", f"set ylabel {gnuplot_text(metric + ' (log scale)')}", "set logscale y",
            "set key top left", "set grid",
        ]
        if dense and metric in dense["metrics"]:
            script.append(f"dense = {dense['metrics'][metric]}")
        plots = [f"{gnuplot_text(data)} index {i} with linespoints lw 2 title {gnuplot_text(m)}"
                 for i, m in enumerate(methods)]
        if dense and metric in dense["metrics"]:
            plots.append("dense with lines dt 2 lc rgb 'gray' title 'dense'")
        script.append("plot " + ", ".join(plots))
        done = subprocess.run(["gnuplot"], input="\n".join(script), text=True, capture_output=True)
        if done.returncode != 0:
            print(f"sweep: gnuplot failed on {name}, plot skipped:\n{done.stderr.strip()}", file=sys.stderr)
            continue
        written.append(name)
    return written


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: sweep_summary.py SWEEP_DIR")
    main(sys.argv[1])
