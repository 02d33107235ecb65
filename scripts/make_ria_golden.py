#!/usr/bin/env python3
"""Golden masks for `alps prune --method ria`, from RIA's own code run on SmolLM2-135M-Instruct.

RIA (Zhang et al., ICLR 2024) is github.com/biomedical-cybernetics/Relative-importance-and-activation-pruning; this
script imports its lib/prune.py from a checkout given by --ria (a work tree, a plain directory or a bare git
directory; none of its code is copied here) and calls its `prune_ria` on the first --blocks blocks of the model, in
fp32 on the CPU, once per configuration:
    unstructured  --sparsity_ratio 0.5 (one threshold per layer, the reference's default)
    nm            --sparsity_type 2:4 (groups of 4 consecutive inputs)
    nm_lsa        --sparsity_type 2:4 --reallocation --lsa (channel reallocation, then linear sum assignment)
It records, for every linear of those blocks, which weights RIA zeroed: every --row-step-th row of the mask, bits
packed with numpy.packbits (big-endian bit order) into uint8 tensors named "<config>/<weight name>", and the whole
mask's zero count ("<config>/<weight name>.zeros"), and for the channel permutation the kept score's gain over groups of
consecutive inputs that RIA prints ("<config>/<weight name>.kept_score_gain": the score kept after its last round
over the score kept before its reallocation, - 1). tests/pipeline/prune_ria_test.cc compares alps's masks with them.

What the script supplies around RIA's code, and why:
- the calibration text: RIA's get_c4 reads the C4 train shard through `datasets`; a stand-in module hands its own
  sampling loop (CPython's random, SparseGPT's get_c4) the first 1000 documents of that shard shipped in the data
  directory (`alps prune --calib c4`'s source), so that it draws the windows alps draws;
- the tokenizer: tokenizer.json through transformers' PreTrainedTokenizerFast, as alps reads it;
- the device: prune_ria sorts on `.cuda()` and runs its assignment on "cuda:7"; here Tensor.cuda returns the tensor
  and the module's "cuda[:N]" literals become "cpu" as it is compiled (the files on disk are not touched);
- transformers 5: prune_ria calls each decoder layer with position_ids alone, and the layer wants rotary
  position_embeddings: the layer's forward computes them with the model's rotary_emb when none are passed.
  Its `layer(...)[0]` then takes the batch's only sequence, the shape RIA stores;
- the model holds its first --blocks blocks only (RIA prunes every block it holds), and model.hf_device_map is {}.

Pinned environment (PyPI): torch 2.15.0 (CPU use), transformers 5.23.0, scipy, numpy, safetensors.
    python3 -m venv /tmp/venv-ria && /tmp/venv-ria/bin/pip install torch==2.15.0 transformers==5.23.0 scipy \
        safetensors numpy
Usage (repository root, after scripts/get_smollm2.sh and a checkout of RIA):
    /tmp/venv-ria/bin/python scripts/make_ria_golden.py --ria PATH/TO/RIA \
        [--model ~/.cache/alps/models/SmolLM2-135M-Instruct] [--data-dir ../shared/data] \
        [--out tests/data/ria/smollm2_ria_golden.safetensors]
"""
import argparse
import contextlib
import importlib.abc
import importlib.util
import io
import json
import os
import pathlib
import re
import shutil
import sys
import types

import numpy as np
import torch
import transformers
from safetensors.torch import save_file

root = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(root / "scripts" / "reference"))
import run_reference as rr  # noqa: E402  (the checkout and device helpers of the authors'-code harness)

ap = argparse.ArgumentParser()
ap.add_argument("--ria", required=True, help="a checkout of RIA's repository")
ap.add_argument("--model", default=os.path.expanduser("~/.cache/alps/models/SmolLM2-135M-Instruct"))
ap.add_argument("--data-dir", default=str(root.parent / "shared" / "data"))
ap.add_argument("--out", default=str(root / "tests/data/ria/smollm2_ria_golden.safetensors"))
ap.add_argument("--nsamples", type=int, default=8)
ap.add_argument("--seqlen", type=int, default=512)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--blocks", type=int, default=2)
ap.add_argument("--row-step", type=int, default=16)
args = ap.parse_args()

torch.set_num_threads(os.cpu_count() or 1)
source, provenance, tmp = rr.resolve_checkout(args.ria, None)

# RIA's modules are the namespace package `lib`; lib.prune is compiled with its device literals on the CPU.
class RiaFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != "lib.prune":
            return None
        file = os.path.join(source, "lib", "prune.py")
        return importlib.util.spec_from_file_location(fullname, file, loader=rr.PatchingLoader(fullname, file))


sys.meta_path.insert(0, RiaFinder())
sys.path.insert(0, source)
c4 = pathlib.Path(args.data_dir) / "text/c4/c4-train.00000-of-01024.first1000.jsonl"
rr.install_fake_datasets(rr.read_jsonl(str(c4)), [])
torch.Tensor.cuda = lambda self, *a, **k: self
torch.cuda.empty_cache = lambda *a, **k: None
import lib.prune as ria  # noqa: E402

tokenizer, _ = rr.make_tokenizer(args.model)


def pruned_model(**options):
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.eval()
    model.model.layers = torch.nn.ModuleList(list(model.model.layers)[: args.blocks])
    model.seqlen = args.seqlen
    model.hf_device_map = {}
    rr.patch_llama_rope(model)
    ria_args = types.SimpleNamespace(
        model="llama (SmolLM2-135M-Instruct)", calib_dataset="c4", nsamples=args.nsamples, seed=args.seed,
        seqlen=args.seqlen, prune_method="ria", a=0.5, reconstruction=False, gptq=False, semi_sparse_acc=False,
        per_outneuron=False, importance_score="sum", fast=False, sparsity_ratio=0.5, reallocation=False, lsa=False)
    n_m = options.pop("n_m", (0, 0))
    vars(ria_args).update(options)
    printed = io.StringIO()
    with torch.no_grad(), contextlib.redirect_stdout(printed):
        ria.prune_ria(ria_args, model, tokenizer, device=torch.device("cpu"), prune_n=n_m[0], prune_m=n_m[1])
    return model, kept_score_gains(printed.getvalue())


def kept_score_gains(printed):
    """{weight name: the kept score after RIA's last round over the kept score of groups of consecutive inputs, - 1}
    from the lines prune_ria prints per linear ("pruning layer i name n", "The total value before resort: v", ...)."""
    gains, name, before, after = {}, None, None, None
    for line in printed.splitlines() + ["pruning layer -1 name end"]:
        if line.startswith("pruning layer "):
            if name is not None and before is not None:
                gains[name] = after / before - 1
            _, _, i, _, linear = line.split()
            name, before, after = f"model.layers.{i}.{linear}.weight", None, None
        elif line.startswith("The total value before resort:"):
            before = float(line.split(":")[1])
        elif line.startswith("The total value after"):
            after = float(re.match(r"The total value after [^:]*: ([^,]+)", line).group(1))
    return gains


configs = {"unstructured": {}, "nm": {"n_m": (2, 4)}, "nm_lsa": {"n_m": (2, 4), "reallocation": True, "lsa": True}}
tensors = {}
for config, options in configs.items():
    model, gains = pruned_model(**dict(options))
    for name, gain in gains.items():
        tensors[f"{config}/{name}.kept_score_gain"] = torch.tensor([gain], dtype=torch.float64)
    for name, W in model.state_dict().items():
        if not name.endswith("_proj.weight"):
            continue
        zeros = (W == 0).numpy()
        tensors[f"{config}/{name}"] = torch.from_numpy(np.packbits(zeros[:: args.row_step], axis=1))
        tensors[f"{config}/{name}.zeros"] = torch.tensor([int(zeros.sum())], dtype=torch.int64)
    print(config, "done", file=sys.stderr)
if tmp:
    shutil.rmtree(tmp)
meta = {"reference": json.dumps(provenance), "nsamples": str(args.nsamples), "seqlen": str(args.seqlen),
        "seed": str(args.seed), "blocks": str(args.blocks), "row_step": str(args.row_step),
        "configs": json.dumps({k: {kk: list(v) if isinstance(v, tuple) else v for kk, v in o.items()}
                               for k, o in configs.items()}),
        "torch": torch.__version__, "transformers": transformers.__version__}
os.makedirs(os.path.dirname(args.out), exist_ok=True)
save_file(tensors, args.out, metadata=meta)
print(f"wrote {args.out}: {len(tensors)} tensors", file=sys.stderr)
