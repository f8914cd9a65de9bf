"""Benchmark: the cost of the check across widths on a Llama-7B-shaped Hugging Face config.

The original (32 layers, hidden 4096, intermediate 11008, 32 heads of 128, vocabulary 32000)
is built on the meta device: check(widths=...) reads only its config and class, and builds
its twins (2 layers, widths 256, 512, 768: 2, 4, 6 heads of 128; at 128, 256, 512 one
layer's down_proj shows a one-step slope of -0.22 that is gone at the larger widths, a
small-width effect) on the CPU. Targets: a median of at most 60 s and a peak of at most 2 GB
on a 2-core CPU. The time judged is the process's CPU time (both threads summed), as the
README's other benchmarks do: wall time on this shared machine measures the other jobs.

Run from the repository root::

    .venv/bin/python benchmarks/bench_check_widths.py              # 3 repeats
    .venv/bin/python benchmarks/bench_check_widths.py --repeat 5

Prints the median wall and CPU time of one check (and of building the meta model), and the
peak resident memory of the whole process (``resource.getrusage``: torch, transformers and the
generated config included); exits 1 if either misses its target (``--no-check`` only
reports).

``--cli`` measures the command itself instead (issue 36: at most 2 GB at widths 512, 1024,
2048): it writes the 7B config.json and runs ``spectral check muon-kimi --others adamw
--hf-config FILE --widths ...`` in a child process, once, and reports the child's peak
resident memory and its exit code::

    .venv/bin/python benchmarks/bench_check_widths.py --cli --widths 512,1024,2048

On a CPU the twins run Muon's Newton-Schulz iteration in float32 (torch's bfloat16 one has no
matrix units on this AVX2 machine: before, the command did not finish, its 3600 s limit
ended it at width 2048, with a peak of 1.78 GB), and each twin takes its one step one
parameter at a time (twin_rows.step_once: one parameter's optimizer state at a time).
Measured on this 2-core machine (commit after 65d67e2; GB here is 1024**3 bytes, as printed):
peak resident memory of the child 1.43 GB (ru_maxrss 1,500,188 KiB), exit code 0, every
module within 0.2 of its rules, 131.6 s wall.

The twins hold at most ``TWIN_VOCAB`` (1024) tokens of vocabulary: a 32000-token table and
readout at width 2048 are 131M parameters, 2.1 GB with their gradients and AdamW's states,
which is what took the check to 3.9 GB before.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time

TARGET_S = 60.0
TARGET_BYTES = 2 * 1024**3
WIDTHS = [256, 512, 768]


def llama_7b_on_meta():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        tie_word_embeddings=False,
    )
    with torch.device("meta"):
        return LlamaForCausalLM(config)


LLAMA_7B_JSON = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "tie_word_embeddings": False,
}


def run_cli(widths: str, check: bool) -> int:
    """``spectral check --hf-config`` on the 7B config in a child: its peak memory."""
    import json
    import os
    import subprocess

    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(LLAMA_7B_JSON, f)
    command = [
        sys.executable,
        "-m",
        "spectral",
        "check",
        "muon-kimi",
        "--others",
        "adamw",
        "--hf-config",
        path,
        "--widths",
        widths,
        "--timeout",
        "3600",
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    print(f"spectral check --hf-config (Llama-7B config, 32 layers) --widths {widths}:")
    print(f"  exit code        {done.returncode}")
    print(f"  wall time        {wall:6.1f} s (other jobs on the machine included)")
    print(f"  peak memory      {peak / 1024**3:6.2f} GB (target ≤ {TARGET_BYTES / 1024**3:g} GB)")
    for line in (done.stdout + done.stderr).splitlines()[-6:]:
        print(f"  | {line}")
    return 0 if not check or (peak <= TARGET_BYTES and done.returncode == 0) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument(
        "--widths", default=",".join(map(str, WIDTHS)), help="twin widths (multiples of 128)"
    )
    ap.add_argument("--cli", action="store_true", help="measure `spectral check --hf-config`")
    args = ap.parse_args(argv)
    if args.cli:
        return run_cli(args.widths, not args.no_check)

    import torch

    from spectral.codegen import load_generated
    from spectral.torch import check_widths

    torch.set_num_threads(2)
    cfg = load_generated(
        "muon-kimi", "adamw", base_width=256, base_depth=2, folder=tempfile.mkdtemp()
    )
    widths = [int(w) for w in args.widths.split(",")]
    builds, checks, cpus = [], [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        model = llama_7b_on_meta()
        builds.append(time.perf_counter() - start)
        start, cpu = time.perf_counter(), time.process_time()
        report = check_widths(
            cfg.CONFIG, model, widths, base={"lr": 3e-3, "weight_decay": 0.1}, timeout=None
        )
        checks.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
        if len(report.rows) < 10:
            print("not measured:", report.problems[:3], file=sys.stderr)
            return 1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    check_s, build_s = statistics.median(checks), statistics.median(builds)
    print(f"Llama-7B config (32 layers) on meta, twins at widths {widths}, 2 layers:")
    print(f"  build on meta    median {build_s:6.2f} s over {args.repeat}")
    cpu_s = statistics.median(cpus)
    print(
        f"  check(widths=)   median {cpu_s:6.2f} s CPU over {args.repeat} (target ≤ {TARGET_S:g} s)"
    )
    print(f"                   median {check_s:6.2f} s wall (other jobs on the machine included)")
    print(f"  peak memory      {peak / 1024**3:6.2f} GB (target ≤ {TARGET_BYTES / 1024**3:g} GB)")
    print(f"  modules measured {len(report.rows)}, named {len(report.problems)}")
    for line in report.problems:
        print(f"  {line}")
    if args.no_check:
        return 0
    fast = cpu_s <= TARGET_S and peak <= TARGET_BYTES
    return 0 if fast and not report.problems else 1


if __name__ == "__main__":
    sys.exit(main())
