#!/usr/bin/env python3
"""Runs the authors' own pruning pipeline (ALPS: mazumder-lab/ALPS; SparseGPT: IST-DASLab/sparsegpt) on this CPU,
with timers, so that `alps prune` can be compared with it on the same model and the same calibration windows.

No code of those repositories is in this repository. This driver takes a checkout of theirs (a work tree, a plain
directory, or a bare git directory such as `git clone --bare` makes, which it exports to a temporary directory),
records its commit in the JSON, and imports their modules from it, changing at run time only what keeps them from
running here. The runs recorded in docs/benchmarks.md used github.com/mazumder-lab/ALPS at commit
8af9e6b5c8b1b06a028bde6065e5c38829df3a19 and github.com/IST-DASLab/sparsegpt at commit
147d2159dc4f3e9f73e47b32c04d7b3708f44436; what is said below of "their" code is said of those commits.

  * device: every string literal 'cuda:0' / "cuda" in their modules becomes 'cpu' while the source is compiled (an
    import hook; the files on disk are not touched); torch.cuda.synchronize and empty_cache become no-ops. Their
    sequential and eval functions are called with dev=cpu.
  * data: their loaders call `datasets.load_dataset` / `load_from_disk` (C4 from the Hugging Face hub or a saved
    copy) and `AutoTokenizer.from_pretrained(model, use_fast=False)`. A stand-in `datasets` module hands them the rows
    of a local C4 JSONL file (default: the first 1000 documents of c4-train.00000-of-01024, the file `alps prune
    --calib c4` reads) and an empty C4 validation set; the tokenizer is built from the checkpoint's files the way
    alps reads them (tokenizer.json -> PreTrainedTokenizerFast; vocab.json + merges.txt -> the slow GPT2Tokenizer,
    BOS only if tokenizer_config.json says add_bos_token; tokenizer.model -> LlamaTokenizer). Their sampling loop
    itself (Python `random` seeded, random document longer than seqlen, random start) runs unchanged, so the windows
    are the ones alps draws; --check-alps-inputs verifies it against alps's captured block-0 inputs and exits with
    status 3, before pruning, if they differ.
    ALPS's loader (get_c4_val) reads C4 *validation* in the authors' setup; here it gets the same train file as alps.
    It also always draws 256 extra validation windows after the calibration ones; they cost time in the data phase
    only and do not change the calibration windows.
  * transformers API: the code was written for transformers 4.35; with 4.57 a LLaMA decoder layer no longer computes
    its rotary embedding from position_ids, so LlamaDecoderLayer.forward is wrapped to compute it (with the model's
    own rotary_emb) when the caller passes none. OPT needs nothing.
  * globals: their sequential/eval functions read a module-level `args` (set by their __main__); it is set here to
    an argparse.Namespace with the values their command line would give (printed into the JSON).
  * precision: the checkpoint is loaded with their loader (torch_dtype='auto') and cast to fp32 (--dtype fp32,
    default), as alps computes on the CPU. Their published runs use fp16 forwards on a GPU.

Timers (time.perf_counter, wrapped around their methods, nothing inside them changed):
  solve        = their per-layer solve (ALPS_prune.ALPS_admm: ADMM + their PCG; SparseGPT.fasterprune);
  statistics   = their add_batch hooks (Gram / Hessian accumulation), a part of statistics_and_forward;
  statistics_and_forward = their whole sequential function minus solve: block-0 capture, the forward passes with
                 and without hooks, add_batch, moving layers (the harness's own extra work is subtracted);
  calibration_data = their data loader (sampling + tokenising), reported apart.
Per-layer relative reconstruction errors are recomputed by the harness with the undamped Gram matrix,
err = tr(dW G dW^T) / tr(W0 G W0^T), as alps reports them (outside the timers); the numbers the authors' code returns
(ALPS: the error of the damped, normalised problem; SparseGPT: the summed OBS loss it prints) are kept too, and for
ALPS the final ADMM iteration, rho, ADMM/PCG seconds and PCG iterations are read from the solve's locals at return.

Perplexity: WikiText-2 raw test (the rows joined with "\\n\\n", text/wikitext2/wikitext-2-raw-v1.test.hf_joined.txt),
tokenised once as their get_wikitext2 does, cut to the first W windows of L2 tokens, scored by the authors' own
eval function (llama_eval / opt_eval: non-overlapping windows, mean CE over the seqlen-1 predicted tokens,
exp(sum l_i * L2 / (W * L2))).

Usage:
  /tmp/lmeval-venv/bin/python scripts/reference/run_reference.py --impl alps-authors|sparsegpt-authors \\
      --checkout DIR --model DIR (--sparsity 0.7|70%|2:4) [--method alps|sparsegpt|dense] [--nsamples 128]
      [--seqlen 2048] [--seed 0] [--eval-windows 0] [--eval-seqlen 2048] [--threads N] [--dtype fp32|auto]
      [--calib FILE.jsonl] [--data-dir DIR] [--max-blocks K]
      [--check-alps-inputs OUT/.alps-state/inputs-00000.safetensors]
      [--set KEY=VALUE ...] [--no-layer-errors] [--json OUT.json]

Needs: torch and transformers (tested: torch 2.11.0 (its CUDA 13.0 wheel, run on the CPU), transformers 4.57.6,
Python 3.11: /tmp/lmeval-venv, nothing installed for this), numpy, safetensors;
pandas for the ALPS checkout (its llama.py imports it). Nothing is downloaded.
"""
import argparse
import contextlib
import gzip
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import types

T_START = time.perf_counter()

IMPLS = {
    # impl: (modules of the checkout imported through the patching hook, family -> entry module, solver class, method)
    "alps-authors": (["alps", "modelutils", "datautils", "llama", "opt"], "ALPS_prune", "ALPS_admm", "alps"),
    "sparsegpt-authors": (["sparsegpt", "modelutils", "datautils", "quant", "llama", "opt"], "SparseGPT",
                          "fasterprune", "sparsegpt"),
}
CUDA_LITERAL = re.compile(r"""(['"])cuda(?::\d+)?\1""")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", required=True, choices=sorted(IMPLS))
    ap.add_argument("--checkout", required=True, help="their repository: work tree, plain directory or bare git dir")
    ap.add_argument("--checkout-commit", help="commit to record when --checkout is a plain directory")
    ap.add_argument("--model", required=True, help="Hugging Face checkpoint directory (OPT or LLaMA)")
    ap.add_argument("--method", help="alps (alps-authors), sparsegpt (sparsegpt-authors) or dense (no pruning)")
    ap.add_argument("--sparsity", help="unstructured fraction (0.7 or 70%%) or N:M (keep N of every M, 2:4)")
    ap.add_argument("--nsamples", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-windows", type=int, default=0, help="first W WikiText-2 windows (0: all)")
    ap.add_argument("--eval-seqlen", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "auto"])
    ap.add_argument("--data-dir", default=os.environ.get("ALPS_DATA_DIR") or os.path.normpath(
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data")))
    ap.add_argument("--calib", help="C4-style JSONL(.gz) with a text field (default: DATA/text/c4/c4-train...)")
    ap.add_argument("--max-blocks", type=int, default=0,
                    help="prune only the first K blocks (the others stay dense; for quick checks; 0: all)")
    ap.add_argument("--check-alps-inputs", metavar="SAFETENSORS",
                    help="alps's block-0 inputs (OUT/.alps-state/inputs-00000.safetensors of `alps prune "
                         "--stop-after 0` with the same model and calibration): compared with theirs")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a field of the `args` namespace their code reads (e.g. percdamp=0.01)")
    ap.add_argument("--no-layer-errors", action="store_true", help="skip the harness's undamped per-layer errors")
    ap.add_argument("--json", help="write the result here (else stdout)")
    a = ap.parse_args()
    default_method = IMPLS[a.impl][3]
    a.method = a.method or default_method
    if a.method not in (default_method, "dense"):
        ap.error(f"--impl {a.impl} runs --method {default_method} or dense, not {a.method}")
    a.nm = None
    a.sp = 0.0
    if a.method != "dense":
        if not a.sparsity:
            ap.error("--sparsity is required (0.7, 70% or 2:4)")
        if ":" in a.sparsity:
            n, m = (int(x) for x in a.sparsity.split(":"))
            if not 1 <= n <= m:
                ap.error("--sparsity N:M needs 1 <= N <= M")
            a.nm = (n, m)
            a.sp = 1 - n / m
        else:
            s = a.sparsity.rstrip("%")
            a.sp = float(s) / (100 if a.sparsity.endswith("%") else 1)
            if not 0 <= a.sp < 1:
                ap.error("--sparsity must be in [0, 1)")
    if a.threads < 1 or a.nsamples < 1 or a.seqlen < 2 or a.eval_seqlen < 2 or a.eval_windows < 0:
        ap.error("--threads, --nsamples >= 1, --seqlen, --eval-seqlen >= 2, --eval-windows >= 0")
    return a


# ------------------------------------------------------------------------------------------------ their checkout

def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout.strip()


def resolve_checkout(path, commit_override):
    """Returns (source directory, provenance dict, temporary directory to remove or None)."""
    path = os.path.abspath(path)
    info = {"path": path}
    if os.path.exists(os.path.join(path, ".git")):
        info["kind"] = "work tree"
        info["commit"] = run(["git", "-C", path, "rev-parse", "HEAD"])
        info["dirty"] = bool(run(["git", "-C", path, "status", "--porcelain", "--untracked-files=no"]))
        return path, info, None
    if os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(os.path.join(path, "objects")):
        info["kind"] = "bare git directory, HEAD exported to a temporary directory"
        info["commit"] = run(["git", "--git-dir", path, "rev-parse", "HEAD"])
        info["commit_date"] = run(["git", "--git-dir", path, "log", "-1", "--format=%cI", "HEAD"])
        tmp = tempfile.mkdtemp(prefix="alps-ref-checkout.")
        archive = subprocess.run(["git", "--git-dir", path, "archive", info["commit"]], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        return tmp, info, tmp
    info["kind"] = "plain directory"
    info["commit"] = commit_override or "unknown (pass --checkout-commit or a git checkout)"
    return path, info, None


class PatchingLoader(importlib.machinery.SourceFileLoader):
    """Compiles one of their modules from source with the device literals replaced (never from a cached .pyc)."""
    patches = {}

    def get_code(self, fullname):
        src = self.get_data(self.path).decode("utf-8")
        new, n = CUDA_LITERAL.subn("'cpu'", src)
        PatchingLoader.patches[os.path.basename(self.path)] = {
            "cuda_literals_to_cpu": n, "sha256": hashlib.sha256(src.encode()).hexdigest()}
        return compile(new, self.path, "exec", dont_inherit=True)


class CheckoutFinder(importlib.abc.MetaPathFinder):
    def __init__(self, root, names):
        self.root, self.names = root, set(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names:
            return None
        file = os.path.join(self.root, fullname + ".py")
        if not os.path.isfile(file):
            return None
        return importlib.util.spec_from_file_location(fullname, file, loader=PatchingLoader(fullname, file))


# ------------------------------------------------------------------------------------------------ data

class Rows:
    """The part of a `datasets.Dataset` their loaders use: len, rows by index, columns by slice."""

    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return {"text": [r["text"] for r in self.rows[k]]}
        if isinstance(k, str):
            return [r[k] for r in self.rows]
        return self.rows[k]


def read_jsonl(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [{"text": json.loads(line)["text"]} for line in f if line.strip()]


def install_fake_datasets(calib_rows, log):
    def load_dataset(path, *a, data_files=None, split=None, **kw):
        files = json.dumps(data_files)
        if "c4" in path and split == "train":
            log.append(f"load_dataset({path!r}, {files}, split='train') -> local calibration file")
            return Rows(calib_rows)
        if "c4" in path and split == "validation":
            log.append(f"load_dataset({path!r}, {files}, split='validation') -> empty (not used here)")
            return Rows([])
        raise RuntimeError(f"the reference asked for dataset {path!r} split {split!r}: not available offline")

    def load_from_disk(path, *a, **kw):
        if os.path.normpath(path).endswith(os.path.join("c4", "c4-val")):
            log.append(f"load_from_disk({path!r}) -> local calibration file")
            return Rows(calib_rows)
        raise RuntimeError(f"the reference asked for a saved dataset at {path!r}: not available offline")

    mod = types.ModuleType("datasets")
    mod.load_dataset, mod.load_from_disk = load_dataset, load_from_disk
    mod.__file__ = "<run_reference.py stand-in>"
    sys.modules["datasets"] = mod


def make_tokenizer(model_dir):
    import transformers
    cfg_path = os.path.join(model_dir, "tokenizer_config.json")
    cfg = json.load(open(cfg_path)) if os.path.isfile(cfg_path) else {}
    tj = os.path.join(model_dir, "tokenizer.json")
    vocab, merges = os.path.join(model_dir, "vocab.json"), os.path.join(model_dir, "merges.txt")
    sp = os.path.join(model_dir, "tokenizer.model")
    if os.path.isfile(tj):
        # AutoTokenizer would rebuild SmolLM2's tokenizer from its config and drop the Digits pre-tokenizer.
        return transformers.PreTrainedTokenizerFast(tokenizer_file=tj), "PreTrainedTokenizerFast(tokenizer.json)"
    if os.path.isfile(vocab) and os.path.isfile(merges):
        kw = {"add_bos_token": bool(cfg.get("add_bos_token", False))}
        for k in ("bos_token", "eos_token", "unk_token"):
            if isinstance(cfg.get(k), str):
                kw[k] = cfg[k]
        return transformers.GPT2Tokenizer(vocab, merges, **kw), f"GPT2Tokenizer(vocab.json, merges.txt, {kw})"
    if os.path.isfile(sp):
        return transformers.LlamaTokenizer(sp), "LlamaTokenizer(tokenizer.model)"
    raise SystemExit(f"{model_dir}: no tokenizer.json, vocab.json+merges.txt or tokenizer.model")


class TokenizerShim:
    tokenizer = None

    @classmethod
    def from_pretrained(cls, *a, **kw):
        return cls.tokenizer


# ------------------------------------------------------------------------------------------------ helpers

class LocalsAtReturn(contextlib.AbstractContextManager):
    """Reads chosen local variables of chosen functions when they return (sys.settrace, 'return' events only)."""

    def __init__(self, wanted):
        self.wanted = {code: names for code, names in wanted.items()}
        self.got = {}

    def __enter__(self):
        self.prev = sys.gettrace()
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc):
        sys.settrace(self.prev)
        return False

    def _global(self, frame, event, arg):
        if event == "call" and frame.f_code in self.wanted:
            frame.f_trace_lines = False
            return self._local
        return None

    def _local(self, frame, event, arg):
        if event == "return":
            loc = frame.f_locals
            self.got[frame.f_code.co_name] = {k: loc.get(k) for k in self.wanted[frame.f_code]}
        return self._local


class Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, s):
        for st in self.streams:
            st.write(s)
        return len(s)

    def flush(self):
        for st in self.streams:
            st.flush()


def block_list(model):
    return model.model.layers if hasattr(model.model, "layers") else model.model.decoder.layers


def set_block_list(model, layers):
    if hasattr(model.model, "layers"):
        model.model.layers = layers
    else:
        model.model.decoder.layers = layers


def to_float(x):
    import torch
    if isinstance(x, torch.Tensor):
        return float(x.double().sum()) if x.numel() > 1 else float(x)
    return x if isinstance(x, (int, float, type(None))) else str(x)


def patch_llama_rope(model):
    """transformers >= 4.48: LlamaAttention needs position_embeddings; the 4.35-era callers pass position_ids only."""
    import torch
    from transformers.models.llama import modeling_llama as ml
    if "position_embeddings" not in inspect.signature(ml.LlamaDecoderLayer.forward).parameters:
        return None
    orig = ml.LlamaDecoderLayer.forward
    rotary = model.model.rotary_emb

    def forward(self, hidden_states, *a, **kw):
        if kw.get("position_embeddings") is None:
            pid = kw.get("position_ids")
            if pid is None:
                pid = torch.arange(hidden_states.shape[-2], device=hidden_states.device).unsqueeze(0)
            kw["position_embeddings"] = rotary(hidden_states, pid)
        return orig(self, hidden_states, *a, **kw)

    ml.LlamaDecoderLayer.forward = forward
    return "LlamaDecoderLayer.forward computes rotary position_embeddings from position_ids when none are passed"


def capture_block0_inputs(model, dataloader):
    """The hidden states the model feeds its first block for each calibration window (what both pipelines store)."""
    import torch

    class Stop(Exception):
        pass

    got = []

    def hook(mod, args, kwargs):
        got.append((args[0] if args else kwargs["hidden_states"]).detach().clone())
        raise Stop

    h = block_list(model)[0].register_forward_pre_hook(hook, with_kwargs=True)
    try:
        with torch.no_grad():
            for batch in dataloader:
                try:
                    model(batch[0])
                except Stop:
                    pass
    finally:
        h.remove()
    return torch.cat(got, 0)


def check_alps_inputs(path, model, family, dataloader):
    import torch
    from safetensors.torch import load_file
    alps_x = load_file(path)["inputs"].float()
    ref_x = capture_block0_inputs(model, dataloader).float()
    res = {"alps_inputs_file": os.path.abspath(path), "alps_shape": list(alps_x.shape),
           "reference_shape": list(ref_x.shape)}
    if alps_x.shape != ref_x.shape:
        res["identical"] = False
        return res
    diff = (alps_x - ref_x).abs()
    res["max_abs_diff"] = float(diff.max())
    res["windows_bitwise_equal"] = int(sum(torch.equal(a, b) for a, b in zip(alps_x, ref_x)))
    res["windows"] = int(alps_x.shape[0])
    ref_ids = torch.cat([b[0] for b in dataloader], 0)
    if family == "llama":
        # Block 0's input is a pure embedding lookup: recover alps's token ids by matching embedding rows.
        E = model.model.embed_tokens.weight.detach().float()
        r = torch.randn(E.shape[1], generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        kE = E.double() @ r
        order = torch.argsort(kE)
        kx = alps_x.reshape(-1, E.shape[1]).double() @ r
        pos = torch.searchsorted(kE[order], kx).clamp(1, len(order) - 1)
        cand = torch.stack([order[pos - 1], order[pos]], 1)
        d = (E[cand] - alps_x.reshape(-1, 1, E.shape[1])).abs().amax(-1)
        ids = cand.gather(1, d.argmin(1, keepdim=True)).squeeze(1)
        ok = d.min(1).values <= 1e-6
        alps_ids = torch.where(ok, ids, torch.full_like(ids, -1)).reshape(alps_x.shape[:2])
        res["token_ids_recovered"] = bool(ok.all())
        res["token_ids_equal_windows"] = int((alps_ids == ref_ids).all(1).sum())
        res["first_window_first_16_ids"] = {"alps": alps_ids[0, :16].tolist(), "reference": ref_ids[0, :16].tolist()}
        res["identical"] = bool((alps_ids == ref_ids).all())
    else:
        res["identical"] = res["windows_bitwise_equal"] == res["windows"] or res["max_abs_diff"] == 0.0
    return res


# ------------------------------------------------------------------------------------------------ main

def main():
    a = parse_args()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    sys.dont_write_bytecode = True  # never write __pycache__ into their checkout
    import torch
    import transformers
    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass

    their_out = sys.stderr  # their prints go to stderr; stdout carries only the JSON (without --json)
    src_dir, provenance, tmpdir = resolve_checkout(a.checkout, a.checkout_commit)
    mods, solver_cls, solver_fn, _ = IMPLS[a.impl]
    try:
        cfg = json.load(open(os.path.join(a.model, "config.json")))
        family = {"llama": "llama", "opt": "opt"}.get(cfg.get("model_type"))
        if family is None:
            raise SystemExit(f"{a.model}: model_type {cfg.get('model_type')!r}; "
                             "the authors' code handles llama and opt")

        calib = a.calib or os.path.join(a.data_dir, "text", "c4", "c4-train.00000-of-01024.first1000.jsonl")
        calib_rows = read_jsonl(calib)
        data_log = []
        install_fake_datasets(calib_rows, data_log)
        torch.cuda.synchronize = lambda *x, **k: None
        torch.cuda.empty_cache = lambda *x, **k: None
        sys.meta_path.insert(0, CheckoutFinder(src_dir, mods))
        with contextlib.redirect_stdout(their_out):
            entry = importlib.import_module(family)
            datautils = importlib.import_module("datautils")
        solver_mod = importlib.import_module(mods[0])
        SolverClass = getattr(solver_mod, solver_cls)

        tok, tok_kind = make_tokenizer(a.model)
        TokenizerShim.tokenizer = tok
        for name in ("AutoTokenizer", "LlamaTokenizer"):  # SparseGPT's imports them at module level
            if hasattr(datautils, name):
                setattr(datautils, name, TokenizerShim)

        # ---- model, with their loader
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(their_out):
            loader = getattr(entry, f"get_{family}")
            model = loader(a.model, a.model) if a.impl == "alps-authors" else loader(a.model)
        orig_dtype = str(next(model.parameters()).dtype)
        if a.dtype == "fp32":
            model = model.float()
        model.eval()
        model.config.use_cache = False
        t_load = time.perf_counter() - t0
        rope_patch = patch_llama_rope(model) if family == "llama" else None

        # ---- calibration data, with their loader
        # ALPS's loader imports AutoTokenizer inside the function; loading the model above can leave a new
        # transformers module object in sys.modules, so the shim goes onto the one a later import finds, now.
        sys.modules["transformers"].AutoTokenizer = TokenizerShim
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(their_out):
            if a.impl == "alps-authors":
                dataloader, _ = datautils.get_loaders("c4", data_path=os.path.dirname(calib), nsamples=a.nsamples,
                                                      seed=a.seed, seqlen=a.seqlen, model=a.model)
            else:
                dataloader, _ = datautils.get_loaders("c4", nsamples=a.nsamples, seed=a.seed, seqlen=a.seqlen,
                                                      model=a.model)
        t_data = time.perf_counter() - t0
        ids = torch.cat([b[0] for b in dataloader], 0)
        calibration = {"file": os.path.abspath(calib), "documents": len(calib_rows), "nsamples": a.nsamples,
                       "seqlen": a.seqlen, "seed": a.seed, "tokenizer": tok_kind, "loader_calls": data_log,
                       "windows_shape": list(ids.shape),
                       "token_ids_sha256": hashlib.sha256(ids.to(torch.int64).numpy().tobytes()).hexdigest(),
                       "first_window_first_16_ids": ids[0, :16].tolist()}
        check = check_alps_inputs(a.check_alps_inputs, model, family, dataloader) if a.check_alps_inputs else None
        if check is not None:
            print(f"calibration check against alps: {json.dumps(check)}", file=sys.stderr)
            if not check.get("identical"):
                print("ERROR: the reference's calibration windows differ from alps's; nothing pruned",
                      file=sys.stderr)
                return 3

        # ---- their `args`
        n, m = a.nm or (0, 0)
        if a.impl == "alps-authors":
            ns = argparse.Namespace(model=a.model, dataset="c4", method="ALPS", sp=a.sp if not a.nm else 0.5,
                                    seed=a.seed, nm_n=n, nm_m=m, nsamples=a.nsamples, rho=300.0)
        else:  # their flags take the number of *pruned* weights per group of M
            ns = argparse.Namespace(model=a.model, dataset="c4", seed=a.seed, nsamples=a.nsamples, percdamp=0.01,
                                    sparsity=a.sp if not a.nm else 0.0, prunen=(m - n) if a.nm else 0, prunem=m,
                                    blocksize=128, gmp=False, wbits=16, minlayer=-1, maxlayer=1000, prune_only="",
                                    invert=False, save="", log_wandb=False, true_sequential=False)
        for kv in a.set:
            k, v = kv.split("=", 1)
            old = getattr(ns, k, None)
            setattr(ns, k, type(old)(v) if old is not None and not isinstance(old, bool) else
                    (v.lower() in ("1", "true", "yes") if isinstance(old, bool) else v))
        entry.args = ns

        # ---- timers around their methods
        names = {}
        for bi, blk in enumerate(block_list(model)):
            for ln, mod in blk.named_modules():
                if isinstance(mod, torch.nn.Linear):
                    names[id(mod)] = f"{'model.layers' if family == 'llama' else 'model.decoder.layers'}.{bi}.{ln}"
        timers = {"solve": 0.0, "statistics": 0.0, "harness": 0.0}
        layers = []
        orig_add, orig_solve = SolverClass.add_batch, getattr(SolverClass, solver_fn)

        def add_batch(self, *x, **k):
            t = time.perf_counter()
            try:
                return orig_add(self, *x, **k)
            finally:
                timers["statistics"] += time.perf_counter() - t

        wanted = {orig_solve.__code__: (["i_admm", "rho", "admm_time", "back_time"] if a.impl == "alps-authors"
                                        else ["Losses"])}
        if a.impl == "alps-authors":
            wanted[SolverClass.cg_batch.__code__] = ["k"]

        def solve(self, *x, **k):
            th = time.perf_counter()
            gram = getattr(self, "XtX" if a.impl == "alps-authors" else "H")
            G = None if a.no_layer_errors else gram.detach().clone().float()
            W0 = self.layer.weight.detach().clone().float()
            timers["harness"] += time.perf_counter() - th
            t = time.perf_counter()
            with LocalsAtReturn(wanted) as lr:
                ret = orig_solve(self, *x, **k)
            dt = time.perf_counter() - t
            timers["solve"] += dt
            th = time.perf_counter()
            W = self.layer.weight.detach().float()
            rec = {"name": names.get(id(self.layer), "?"), "shape": list(W.shape), "seconds": dt,
                   "sparsity": float((W == 0).float().mean())}
            if G is not None:
                dW = W - W0
                rec["rel_error"] = float(((dW @ G) * dW).double().sum() / ((W0 @ G) * W0).double().sum())
            if a.impl == "alps-authors":
                loc = lr.got.get(orig_solve.__name__, {})
                rec.update({"reported_error": to_float(ret), "iterations": (loc.get("i_admm") or 0) + 1,
                            "rho": to_float(loc.get("rho")), "admm_seconds": to_float(loc.get("admm_time")),
                            "pcg_seconds": to_float(loc.get("back_time")),
                            "pcg_iterations": lr.got.get("cg_batch", {}).get("k")})
            else:
                rec["reported_error"] = to_float(lr.got.get(orig_solve.__name__, {}).get("Losses"))
            layers.append(rec)
            timers["harness"] += time.perf_counter() - th
            return ret

        SolverClass.add_batch = add_batch
        setattr(SolverClass, solver_fn, solve)

        # ---- their sequential pruning
        full_blocks = block_list(model)
        if a.max_blocks:
            set_block_list(model, torch.nn.ModuleList(list(full_blocks)[:a.max_blocks]))
        model.seqlen = a.seqlen
        load_before = os.getloadavg()
        t0 = time.perf_counter()
        if a.method != "dense":
            seq = getattr(entry, f"{family}_sequential")
            with contextlib.redirect_stdout(their_out):
                if a.impl == "alps-authors":
                    seq(model, dataloader, torch.device("cpu"), nsamples=a.nsamples)
                else:
                    seq(model, dataloader, torch.device("cpu"))
        t_seq = time.perf_counter() - t0
        set_block_list(model, full_blocks)

        # ---- perplexity, with their eval function, on the first W windows
        text = open(os.path.join(a.data_dir, "text", "wikitext2", "wikitext-2-raw-v1.test.hf_joined.txt"),
                    encoding="utf-8", newline="").read()
        t0 = time.perf_counter()
        testenc = tok(text, return_tensors="pt")
        t_tok = time.perf_counter() - t0
        total_windows = testenc.input_ids.numel() // a.eval_seqlen
        W = min(a.eval_windows, total_windows) if a.eval_windows else total_windows

        class Enc:
            input_ids = testenc.input_ids[:, :W * a.eval_seqlen]

        model.seqlen = a.eval_seqlen
        ev = getattr(entry, f"{family}_eval")
        ev_code = inspect.unwrap(ev).__code__  # under @torch.no_grad()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(their_out), LocalsAtReturn({ev_code: ["ppl"]}) as lr:
            cpu = torch.device("cpu")
            ret = ev(model, Enc, cpu) if a.impl == "alps-authors" else ev(model, Enc, cpu, "wikitext2", False)
        t_eval = time.perf_counter() - t0
        ppl = ret if ret is not None else to_float(lr.got.get(ev_code.co_name, {}).get("ppl"))
        load_after = os.getloadavg()

        nz = sum(l["sparsity"] * l["shape"][0] * l["shape"][1] for l in layers)
        tot = sum(l["shape"][0] * l["shape"][1] for l in layers)
        seq_net = t_seq - timers["harness"]
        result = {
            "impl": a.impl, "method": a.method, "sparsity": a.sparsity, "max_blocks": a.max_blocks or None,
            "their_args": vars(ns),
            "checkout": dict(provenance, modules=PatchingLoader.patches),
            "patches": {"device": "string literals 'cuda[:N]' -> 'cpu' at compile time; torch.cuda.synchronize and "
                                  "empty_cache are no-ops",
                        "data": "stand-in `datasets` module (local C4 JSONL; empty C4 validation); tokenizer "
                                "from the checkpoint's files in place of AutoTokenizer.from_pretrained",
                        "transformers": rope_patch, "dtype": f"{orig_dtype} -> "
                                                             f"{str(next(model.parameters()).dtype)}"},
            "model": {"path": os.path.abspath(a.model), "family": family, "blocks": len(full_blocks)},
            "calibration": calibration,
            "calibration_check": check,
            "phase_seconds": {
                "model_load": t_load,
                "calibration_data": t_data,
                "statistics_and_forward": seq_net - timers["solve"],
                "statistics": timers["statistics"],
                "solve": timers["solve"],
                "sequential_total": seq_net,
                "harness_overhead": timers["harness"],
                "eval_tokenize": t_tok,
                "eval": t_eval,
            },
            "total_wall_seconds": time.perf_counter() - T_START,
            "perplexity": {"dataset": "wikitext2", "windows": W, "windows_available": total_windows,
                           "seqlen": a.eval_seqlen, "tokens": int(testenc.input_ids.numel()), "ppl": ppl,
                           "code": f"the authors' {family}_eval"},
            "achieved_sparsity": nz / tot if tot else 0.0,
            "layers": layers,
            "software": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__, "threads": torch.get_num_threads(),
                         "interop_threads": torch.get_num_interop_threads(),
                         "blas": torch.__config__.show().split("BLAS_INFO=")[-1].split(",")[0]
                         if "BLAS_INFO=" in torch.__config__.show() else "?"},
            "hardware": {"cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                                      if l.startswith("model name")), platform.processor()),
                         "cores": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": load_after,
                         "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20},
            "command": [sys.executable] + sys.argv,
        }
        out = json.dumps(result, indent=1)
        if a.json:
            with open(a.json, "w") as f:
                f.write(out + "\n")
        else:
            print(out)
        ps = result["phase_seconds"]
        print(f"[{a.impl} {a.method} {a.sparsity or ''}] stats+forward {ps['statistics_and_forward']:.2f}s "
              f"solve {ps['solve']:.2f}s eval {ps['eval']:.2f}s ppl {ppl:.4f} on {W} x {a.eval_seqlen} "
              f"(achieved sparsity {result['achieved_sparsity']:.4f})", file=sys.stderr)
        return 0
    finally:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
