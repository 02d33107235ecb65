#!/usr/bin/env python3
"""Writes a Phi3ForCausalLM twin of a LLaMA checkpoint: q, k, v stored as one qkv_proj and gate, up as one
gate_up_proj, the config's architecture and model_type changed, everything else as it was. Phi-3's block is LLaMA's
with fused projections, so the twin computes what the input computes (with default RoPE); it gives a fused checkpoint
with several key/value heads for checking structured pruning on fused projections in transformers
(docs/structured.md; the test PruneStructuredRun.AFusedCheckpointLosesTheUnitsItsSeparateTwinLoses builds the same
twin in C++).

Usage: python3 scripts/make_phi3_twin.py LLAMA_DIR OUT_DIR   (needs torch and safetensors)
"""
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

src, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=False)
for f in src.iterdir():
    if f.name not in ("config.json", "model.safetensors") and f.is_file():
        shutil.copy(f, out / f.name)
config = json.loads((src / "config.json").read_text())
config["architectures"] = ["Phi3ForCausalLM"]
config["model_type"] = "phi3"
(out / "config.json").write_text(json.dumps(config, indent=2))
tensors = load_file(src / "model.safetensors")
fused = {}
for name, t in tensors.items():
    if "q_proj" in name:
        parts = [t, tensors[name.replace("q_proj", "k_proj")], tensors[name.replace("q_proj", "v_proj")]]
        fused[name.replace("q_proj", "qkv_proj")] = torch.cat(parts)
    elif "gate_proj" in name:
        fused[name.replace("gate_proj", "gate_up_proj")] = torch.cat([t, tensors[name.replace("gate_proj", "up_proj")]])
    elif not any(k in name for k in ("k_proj", "v_proj", "up_proj")):
        fused[name] = t
save_file(fused, out / "model.safetensors", metadata={"format": "pt"})
