#!/usr/bin/env python3
"""Method comparison on the real stories260K checkpoint: prunes it with every method at 50%, 70% and 2:4
(TinyStories train text as calibration), evaluates TinyStories-validation perplexity of each pruned model with
`alps eval`, and writes a markdown table (perplexity, pruning time, mean layer error) to docs/method-comparison.md.

Usage: python3 scripts/compare_methods.py [--alps build/apps/alps/alps] [--data-dir ../shared/data]
           [--nsamples 128] [--seqlen 512] [--out docs/method-comparison.md]
"""
import argparse
import datetime
import json
import pathlib
import subprocess
import sys
import tempfile

root = pathlib.Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--alps", default=str(root / "build/apps/alps/alps"))
ap.add_argument("--data-dir", default=str(root.parent / "shared/data"))
ap.add_argument("--nsamples", type=int, default=128)
ap.add_argument("--seqlen", type=int, default=512)
ap.add_argument("--methods", default="magnitude,wanda,sparsegpt,dsnot,alps")
ap.add_argument("--patterns", default="0.5,0.7,2:4")
ap.add_argument("--out", default=str(root / "docs/method-comparison.md"))
args = ap.parse_args()

data = pathlib.Path(args.data_dir)
model = data / "models/stories260K-hf"
calib = data / "text/tinystories/tinystories.train.txt"


def run(cmd):
    print("+ " + " ".join(cmd), file=sys.stderr)
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if res.returncode != 0:
        sys.exit(f"command failed ({res.returncode}):\n{res.stderr}")
    return json.loads(res.stdout)


def ppl(model_dir):
    doc = run([args.alps, "eval", "--model", str(model_dir), "--ppl", "tinystories", "--seqlen", str(args.seqlen),
               "--data-dir", str(data), "--device", "cpu", "--json", "-q"])
    return doc["results"][0]["perplexity"]


rows = []
dense = ppl(model)
with tempfile.TemporaryDirectory() as tmp:
    for pattern in args.patterns.split(","):
        for method in args.methods.split(","):
            out = pathlib.Path(tmp) / f"{method}-{pattern.replace(':', 'of')}"
            flag = "--pattern" if ":" in pattern else "--sparsity"
            rep = run([args.alps, "prune", "--model", str(model), "--out", str(out), "--method", method, flag, pattern,
                       "--calib", str(calib), "--nsamples", str(args.nsamples), "--seqlen", str(args.seqlen),
                       "--device", "cpu", "--json", "-q"])
            layers = [l for l in rep["layers"] if not l["skipped"]]
            err = sum(l["rel_error"] for l in layers) / len(layers)
            solve = sum(l["seconds"] for l in layers)
            rows.append({"pattern": pattern, "method": method, "ppl": ppl(out), "err": err, "solve": solve,
                         "sparsity": rep["linear_sparsity"]})
            print(json.dumps(rows[-1]), file=sys.stderr)

lines = [
    "# Method comparison on stories260K",
    "",
    f"Generated {datetime.date.today()} by `python3 scripts/compare_methods.py --nsamples {args.nsamples} "
    f"--seqlen {args.seqlen}` on this machine's CPU, fp32.",
    "",
    f"Model: `models/stories260K-hf` (real, pretrained; 5 blocks, hidden 64). Calibration: {args.nsamples} windows of "
    f"{args.seqlen} tokens from `text/tinystories/tinystories.train.txt`, seed 0. Perplexity: "
    f"`alps eval --ppl tinystories --seqlen {args.seqlen}` (TinyStories V1 validation, first 400 stories, docs/pipeline.md "
    f"windows). Dense perplexity: **{dense:.4f}**.",
    "",
    "Mean layer error is the mean over the 35 pruned linears of the relative reconstruction error (docs/algorithms.md) of the "
    "method's own output; solver seconds is the sum of the per-layer solve times (the whole command also loads, "
    "calibrates and runs the forward passes).",
    "",
]
for pattern in args.patterns.split(","):
    sub = [r for r in rows if r["pattern"] == pattern]
    best = min(r["ppl"] for r in sub)
    lines += [f"## {'unstructured ' + str(int(float(pattern) * 100)) + '%' if ':' not in pattern else pattern}", "",
              "| method | perplexity | mean layer error | linear sparsity | solver seconds |", "|---|---|---|---|---|"]
    for r in sub:
        mark = "**" if r["ppl"] == best else ""
        lines.append(f"| {r['method']} | {mark}{r['ppl']:.4f}{mark} | {r['err']:.4e} | {r['sparsity']:.4f} | {r['solve']:.2f} |")
    lines.append("")
# The hand-written interpretation below the tables ("## Reading the table" onwards) survives a regeneration; its
# figures are for the author to update.
out_path = pathlib.Path(args.out)
previous = out_path.read_text() if out_path.exists() else ""
marker = "## Reading the table"
notes = "\n" + previous[previous.index(marker):] if marker in previous else ""
out_path.write_text("\n".join(lines) + notes)
print(f"wrote {args.out}", file=sys.stderr)
