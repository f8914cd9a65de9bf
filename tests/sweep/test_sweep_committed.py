"""The committed sweep results are what their raw runs give: re-rendering each committed
``runs.jsonl`` with the command in docs/transfer.md reproduces ``summary.md``, ``drift.json``
and ``tuning.json`` byte for byte (so no table was edited by hand, and the report code still
reads old runs the same way); likewise ``comparison.md`` where a folder holds two comparable arms."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]

GPULIKE = ["--depths", "2", "--width", "128", "--base-width", "128", "--base-depth", "2", "--head-dim", "64",
           "--batch-size", "32", "--block-size", "256", "--steps", "200"]
"""The GPU's base and tokens on a CPU (cpu-gpulike/ and the gap/ folders tuned at the base)."""
GAP = ["--widths", "256", "--width", "256", "--depths", "2", "--base-width", "128", "--base-depth", "2", "--head-dim",
       "64", "--batch-size", "32", "--block-size", "256", "--steps", "200", "--multiplier", "output=1", "--seeds", "0,1"]

SP128 = ["--param", "sp", "--widths", "128", "--width", "128", "--depths", "2", "--base-width", "128", "--head-dim",
         "16", "--seeds", "0,1,2"]
"""SP tuned at n = 128 on its own base (every ratio 1): docs/sweep/ablate's sp-* folders."""
MUP16 = ["--param", "mup", "--depths", "2", "--base-width", "16", "--head-dim", "16", "--seeds", "0,1,2"]
"""μP on the ablation's base 16 × 2: docs/sweep/ablate's mup-* folders."""
LLAMA = ["--depths", "2", "--head-dim", "16", "--steps", "200", "--batch-size", "16", "--block-size", "64",
         "--weight-decay", "0.1", "--seeds", "0,1,2"]
DOMAIN = ["--model", "llama", "-O", "adamw", "--depths", "2", "--depth", "2", "--base-depth", "2", "--head-dim", "32",
          "--steps", "1000", "--batch-size", "2", "--block-size", "128", "--weight-decay", "0.1", "--seeds", "0,1,2",
          "--multiplier", "output=1"]
"""docs/sweep/domain/cpu-llama-64-256: the CPU domain-like regime (benchmarks/cpu_domain.sh)."""
CASES = {
    "tuned/adamw": ["-O", "adamw", "--param", "sp", "--param", "mup", "--widths", "32,64,128,256",
                    "--depths", "2,4,8,16", "--log2-lrs=-13,-12,-11,-10,-9,-8,-7,-6,-5", "--seeds", "0,1",
                    "--tune", "output=1,4,16,32,64"],
    "tuned/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "sp", "--param", "mup",
                              "--widths", "32,64,128,256", "--depths", "2,4,8,16",
                              "--log2-lrs=-9,-8,-7,-6,-5,-4,-3", "--seeds", "0,1", "--tune", "output=1,4,16,32,64"],
    "gpu/muon-kimi+adamw": ["--preset", "gpu-8min", "--tune", "output=0.25,0.5,1,4,16"],
    "cpu-long/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "sp", "--param", "mup", "--widths", "32,128",
                                 "--depths", "2", "--batch-size", "16", "--block-size", "256", "--steps", "200",
                                 "--tune", "output=1,4", "--log2-lrs=-8,-7,-6,-5,-4,-3"],
    "cpu-base128/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "sp", "--param", "mup", "--widths", "128,512",
                                    "--depths", "2", "--width", "128", "--base-width", "128", "--base-depth", "2",
                                    "--head-dim", "64", "--tune", "output=0.5,1,4", "--log2-lrs=-9,-8,-7,-6,-5,-4"],
    "cpu-gpulike/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "sp", "--param", "mup", "--widths", "128,256",
                                    *GPULIKE, "--multiplier", "output=1", "--log2-lrs=-8,-7,-6,-5,-4",
                                    "--tune", "lr.hidden_weight=0.5,1,2"],
    "cpu-undo/alpha/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "mup", "--widths", "256", "--width", "256",
                                       "--depths", "2", "--base-width", "128", "--base-depth", "2", "--head-dim", "64",
                                       "--batch-size", "32", "--block-size", "256", "--steps", "200", "--log2-lrs=-6",
                                       "--multiplier", "output=2"],
    "cpu-undo/hidden-lr/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "mup", "--widths", "256", "--width", "256",
                                           "--depths", "2", "--base-width", "128", "--base-depth", "2", "--head-dim", "64",
                                           "--batch-size", "32", "--block-size", "256", "--steps", "200", "--log2-lrs=-6",
                                           "--multiplier", "output=1", "--lr-scale", "hidden_weight=1.4142135623730951"],
    # docs/sweep/gap: the two-seed probes of the GPU gap at n = 256 on the cpu-gpulike setup
    "gap/reference/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "sp", "--param", "mup", *GAP,
                                      "--log2-lrs=-7,-6,-5"],
    "gap/hidden-lr/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "sp", "--param", "mup", "--widths", "128,256",
                                      *GPULIKE, "--multiplier", "output=1", "--log2-lrs=-6,-5,-4", "--seeds", "0,1",
                                      "--tune", "lr.hidden_weight=0.125,0.25,0.5"],
    "gap/init-std/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "mup", *GAP, "--log2-lrs=-6",
                                     "--init-scale", "hidden_weight=1.4142135623730951"],
    "gap/eps/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "sp", "--param", "mup", *GAP, "--log2-lrs=-6",
                                "--eps", "1e-8"],
    "gap/init-tune/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "sp", "--param", "mup", "--widths", "128,256",
                                      *GPULIKE, "--multiplier", "output=1", "--log2-lrs=-6,-5", "--seeds", "0,1",
                                      "--tune", "init.hidden_weight=1,2"],
    "gap/vocab/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "sp", "--param", "mup", *GAP, "--log2-lrs=-6",
                                  "--data", ".cache/bpe-2048", "--vocab-size", "2048"],
    # docs/sweep/gap/gpu: benchmarks/gpu_evidence.sh on one H100 (issue 28)
    "gap/gpu/a/muon-kimi+adamw": ["--preset", "gpu-8min", "--multiplier", "output=1", "--seeds", "0,1,2", "--widths",
                                  "128,1024", "--depths", "2", "--tune", "init.hidden_weight=1,2,4",
                                  "--log2-lrs=-7,-6,-5", "--sp-retune"],
    "gap/gpu/b/muon-kimi+adamw": ["--preset", "gpu-8min", "--param", "sp", "--multiplier", "output=1", "--seeds", "0,1,2",
                                  "--base-width", "1024", "--widths", "1024", "--width", "1024", "--depths", "2",
                                  "--tune", "init.hidden_weight=0.5,1,2", "--log2-lrs=-9,-8,-7"],
    # docs/sweep/ablate/sp-tuned-128: SP tuned at n = 128 over α_out × η (a base of 128: every ratio 1)
    "ablate/sp-tuned-128/adamw": ["-O", "adamw", *SP128, "--log2-lrs=-11,-10,-9,-8", "--tune", "output=1,4,16"],
    "ablate/sp-tuned-128/muon-kimi+adamw": ["-O", "muon-kimi+adamw", *SP128, "--log2-lrs=-7,-6,-5",
                                            "--tune", "output=0.5,1,4"],
    "ablate/mup-retuned-128/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--param", "mup", "--widths", "128", "--width",
                                               "128", "--depths", "2", "--base-width", "16", "--head-dim", "16",
                                               "--multiplier", "output=4", "--log2-lrs=-6,-5,-4,-3", "--seeds", "0,1,2"],
    # SP's σ_hidden tuned at n = 128, the coordinate step after α_out × η (α_out at its optimum)
    "ablate/sp-init-128/muon-kimi+adamw": ["-O", "muon-kimi+adamw", *SP128, "--log2-lrs=-7,-6,-5",
                                           "--multiplier", "output=1", "--tune", "init.hidden_weight=0.5,1,2"],
    "ablate/sp-init-128/adamw": ["-O", "adamw", *SP128, "--log2-lrs=-10,-9,-8", "--multiplier", "output=4",
                                 "--tune", "init.hidden_weight=0.5,1,2"],
    # μP's base (16 × 2) tuned over σ_hidden × the embedding's η × η (α_out 4 from the ablation's base tuning)
    "ablate/mup-init-16/muon-kimi+adamw": ["-O", "muon-kimi+adamw", *MUP16, "--widths", "16", "--width", "16",
                                           "--log2-lrs=-6,-5,-4,-3,-2", "--multiplier", "output=4",
                                           "--tune", "init.hidden_weight=0.125,0.25,0.5,1,2,4",
                                           "--tune", "lr.input_weight=0.25,1,4,16", "--no-sp-retune"],
    # μP's base tuned over the embedding's η too (AdamW, α_out 16), transferred to 128; Muon-Kimi+AdamW's
    # base winner over σ_hidden × the embedding's η × η (mup-init-16) transferred to 128
    "ablate/mup-emb-16-128/adamw": ["-O", "adamw", *MUP16, "--widths", "16,128", "--width", "16",
                                    "--log2-lrs=-7,-6,-5,-4", "--multiplier", "output=16",
                                    "--tune", "lr.input_weight=0.25,1,4,16", "--no-sp-retune"],
    "ablate/mup-tuned-16-128/muon-kimi+adamw": ["-O", "muon-kimi+adamw", *MUP16, "--widths", "128", "--width", "128",
                                                "--log2-lrs=-4", "--multiplier", "output=4",
                                                "--init-scale", "hidden_weight=0.5", "--lr-scale", "input_weight=4"],
    # SP's embedding η tuned at 128 (the coordinate step after α_out × η and σ_hidden)
    "ablate/sp-emb-128/muon-kimi+adamw": ["-O", "muon-kimi+adamw", *SP128, "--log2-lrs=-6", "--multiplier", "output=1",
                                          "--tune", "lr.input_weight=0.25,1,4,16,64"],
    "ablate/sp-emb-128/adamw": ["-O", "adamw", *SP128, "--log2-lrs=-10,-9,-8,-7,-6", "--multiplier", "output=4",
                                "--tune", "lr.input_weight=0.25,1,4,16,64,256"],
    "ablate/mup-init-emb-16-128/adamw": ["-O", "adamw", *MUP16, "--widths", "16,128", "--width", "16",
                                         "--log2-lrs=-6,-5,-4", "--multiplier", "output=16", "--lr-scale",
                                         "input_weight=4", "--tune", "init.hidden_weight=0.5,1,2,4", "--no-sp-retune"],
    "ablate/mup-tuned-16-128-retuned/muon-kimi+adamw": ["-O", "muon-kimi+adamw", *MUP16, "--widths", "128", "--width",
                                                        "128", "--log2-lrs=-5,-4,-3,-2", "--multiplier", "output=4",
                                                        "--init-scale", "hidden_weight=0.5", "--lr-scale",
                                                        "input_weight=4"],
    # the torchtitan-like regime at n = 256: SP tuned there, μP's η re-tuned there
    "ablate/llama-sp-tuned-256/adamw": ["--model", "llama", "-O", "adamw", *LLAMA, "--param", "sp", "--widths", "256",
                                        "--width", "256", "--base-width", "256", "--tune", "output=1,2,4",
                                        "--log2-lrs=-9,-8,-7,-6"],
    "ablate/llama-mup-retuned-256/adamw": ["--model", "llama", "-O", "adamw", *LLAMA, "--param", "mup", "--widths",
                                           "256", "--width", "256", "--base-width", "32", "--multiplier", "output=4",
                                           "--log2-lrs=-6,-5,-4,-3"],
    # SP's σ_hidden, then the embedding's η, tuned at 256 (coordinate steps after α_out × η)
    "ablate/llama-sp-init-256/adamw": ["--model", "llama", "-O", "adamw", *LLAMA, "--param", "sp", "--widths", "256",
                                       "--width", "256", "--base-width", "256", "--log2-lrs=-9,-8,-7",
                                       "--multiplier", "output=2", "--tune", "init.hidden_weight=0.5,1,2,4,8"],
    "ablate/llama-sp-emb-256/adamw": ["--model", "llama", "-O", "adamw", *LLAMA, "--param", "sp", "--widths", "256",
                                      "--width", "256", "--base-width", "256", "--log2-lrs=-8", "--multiplier",
                                      "output=2", "--init-scale", "hidden_weight=2", "--tune",
                                      "lr.input_weight=0.25,1,4,16,64"],
    # μP's base σ_hidden tuned at 32 (α_out 4), transferred to 256
    "ablate/llama-mup-init-32-256/adamw": ["--model", "llama", "-O", "adamw", *LLAMA, "--param", "mup", "--widths",
                                           "32,256", "--width", "32", "--base-width", "32", "--log2-lrs=-6,-5,-4",
                                           "--multiplier", "output=4", "--tune", "init.hidden_weight=1,2,4,8",
                                           "--no-sp-retune"],
    # μP's base winner at 256 with the embedding's η at the base's × 16 and at × 4, × 0.25 (× 1: llama-mup-init-32-256)
    **{f"ablate/llama-mup-tuned-32-256-emb{e}/adamw": ["--model", "llama", "-O", "adamw", *LLAMA, "--param", "mup",
                                                       "--widths", "256", "--width", "256", "--base-width", "32",
                                                       "--log2-lrs=-5", "--multiplier", "output=4", "--init-scale",
                                                       "hidden_weight=4", "--lr-scale", f"input_weight={e}"]
       for e in ("16", "4", "0.25")},
    "ablate/llama-mup-emb-32/adamw": ["--model", "llama", "-O", "adamw", *LLAMA, "--param", "mup", "--widths", "32",
                                      "--width", "32", "--base-width", "32", "--log2-lrs=-6,-5,-4", "--multiplier",
                                      "output=4", "--init-scale", "hidden_weight=4", "--tune",
                                      "lr.input_weight=0.25,1,4,16,64", "--no-sp-retune"],
    # μP with σ_hidden held at the base's tuned value at every width (× 4 × √8 undoes the rule's 1/√8)
    "ablate/llama-mup-sigma-const-256/adamw": ["--model", "llama", "-O", "adamw", *LLAMA, "--param", "mup",
                                               "--widths", "256", "--width", "256", "--base-width", "32",
                                               "--log2-lrs=-5", "--multiplier", "output=4", "--init-scale",
                                               "hidden_weight=11.313708498984761"],
    # docs/sweep/domain/cpu-llama-64-256 (issue 46, item 4 without a device): benchmarks/cpu_domain.sh's three stages
    "domain/cpu-llama-64-256/base/adamw": [*DOMAIN, "--param", "mup", "--widths", "64", "--width", "64", "--base-width",
                                           "64", "--log2-lrs=-9,-8,-7", "--tune", "init.hidden_weight=1"],
    "domain/cpu-llama-64-256/transfer-256/adamw": [*DOMAIN, "--param", "mup", "--param", "sp", "--widths", "256",
                                                   "--width", "256", "--base-width", "64", "--init-scale",
                                                   "hidden_weight=1", "--log2-lrs=-8"],
    "domain/cpu-llama-64-256/mup-retuned-256/adamw": [*DOMAIN, "--param", "mup", "--widths", "256", "--width", "256",
                                                      "--base-width", "64", "--log2-lrs=-9,-7"],
    "domain/cpu-llama-64-256/sp-256/adamw": [*DOMAIN, "--param", "sp", "--widths", "256", "--width", "256",
                                             "--base-width", "256", "--log2-lrs=-10,-9", "--tune", "init.hidden_weight=1"],
    # docs/sweep/output-mult: the one-seed α_out test at n = 256 (its two folders with a target width)
    "output-mult/alpha-1/adamw": ["-O", "adamw", "--param", "sp", "--param", "mup", "--widths", "32,256", "--depths", "2",
                                  "--multiplier", "output=1"],
    "output-mult/alpha-32/adamw": ["-O", "adamw", "--param", "sp", "--param", "mup", "--widths", "32,256", "--depths",
                                   "2", "--multiplier", "output=32", "--log2-lrs=-13,-12,-11,-10,-9,-8,-7,-6,-5"],
    "untuned/adamw": ["-O", "adamw", "--widths", "32,64,128,256"],
    "untuned/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--widths", "32,64,128,256"],
}


# docs/sweep/variants/muon-scale-*: Megatron-LM's Muon scale modes (issue 46, item 5 (iii); benchmarks/muon_scale.sh),
# each tuned at the base 16 (its fitted optimum) and μP-transferred, seeds 0-4
MS_GPT = ["--depths", "2", "--head-dim", "16", "--param", "mup", "--width", "16", "--base-width", "16"]
MS_LLAMA = ["--model", "llama", "--depths", "2", "--head-dim", "16", "--steps", "200", "--batch-size", "16",
            "--block-size", "64", "--weight-decay", "0.1", "--param", "mup", "--width", "16", "--base-width", "16"]
MS_TRANSFER = {"gpt": {"muon-shape+adamw": ("-5", "4"), "muon-unit-rms+adamw": ("-5", "8")},
               "llama": {"muon-shape+adamw": ("-4", "4"), "muon-unit-rms+adamw": ("-4", "4")}}
for _o in ("muon-shape+adamw", "muon-unit-rms+adamw"):
    CASES[f"variants/muon-scale-gpt-16-128/base-16/{_o}"] = [
        "-O", _o, *MS_GPT, "--widths", "16", "--log2-lrs=-7,-6,-5,-4,-3,-2", "--tune", "output=2,4,8,16",
        "--seeds", "0,1,2", "--no-sp-retune"]
    CASES[f"variants/muon-scale-llama-16-64/base-16/{_o}"] = [
        "-O", _o, *MS_LLAMA, "--widths", "16", "--log2-lrs=-7,-6,-5,-4,-3", "--tune", "output=4", "--seeds", "0,1,2",
        "--no-sp-retune"]
    for _regime, _target, _args in (("gpt", "128", MS_GPT), ("llama", "64", MS_LLAMA)):
        _lr, _alpha = MS_TRANSFER[_regime][_o]  # the base tuning's fitted optimum (tuning.json)
        CASES[f"variants/muon-scale-{_regime}-16-{_target}/transfer-{_target}/{_o}"] = [
            "-O", _o, *_args, "--widths", f"16,{_target}", f"--log2-lrs={_lr}", "--multiplier", f"output={_alpha}",
            "--seeds", "0,1,2,3,4"]




PLOTTED = {"tuned/muon-kimi+adamw", "exponents/muon-kimi+adamw", "ablate/cpu-16-128/adamw"}
"""The folders whose plots are drawn as well; the tests compare the text files only, so the
others' plots are written as empty files (the ``unplotted`` fixture, tests/sweep/conftest.py)."""


@pytest.fixture(autouse=True)
def _plots_for_a_few(request):
    callspec = getattr(request.node, "callspec", None)
    folder = callspec.params.get("folder") if callspec is not None else None
    if folder is not None and folder not in PLOTTED:
        request.getfixturevalue("unplotted")


def _rerender(tmp_path: Path, folder: str, args: list[str]) -> tuple[Path, Path]:
    """Copy a committed folder's raw runs into ``tmp_path`` and render them with
    ``--report-only``; returns the committed folder and the re-rendered one."""
    from spectral.cli import main

    src = ROOT / "docs" / "sweep" / folder
    root = tmp_path / "out"
    dst = root / src.name
    dst.mkdir(parents=True)
    for name in ("runs.jsonl", "sweep.json"):
        shutil.copy(src / name, dst / name)
    assert main(["sweep", "--device", "cpu", "--out", str(root), *args, "--report-only"]) == 0
    return src, dst


@pytest.mark.parametrize("folder", sorted(CASES))
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_committed_tables_come_from_the_raw_runs(tmp_path: Path, folder: str, capsys):
    src, dst = _rerender(tmp_path, folder, CASES[folder])
    capsys.readouterr()
    for name in ("summary.md", "drift.json", "tuning.json", "tables.tex"):
        if not (src / name).is_file() and "tune" not in " ".join(CASES[folder]):
            continue  # an untuned sweep has no tuning.json
        assert (dst / name).read_text(encoding="utf-8") == (src / name).read_text(encoding="utf-8"), name
    _same_comparison(src, dst)
    # SP re-tuned at every size: there exactly where the runs hold SP with a non-winning candidate
    if (src / "retuned.json").is_file():
        assert (dst / "retuned.json").read_text(encoding="utf-8") == (src / "retuned.json").read_text(encoding="utf-8")
    else:
        assert not (dst / "retuned.json").exists()


def _same_comparison(src: Path, dst: Path) -> None:
    """comparison.md (spectral.sweep.compare_arms) is committed exactly where the raw runs hold two
    comparable arms, and re-renders byte for byte."""
    if (src / "comparison.md").is_file():
        assert (dst / "comparison.md").read_text(encoding="utf-8") == (src / "comparison.md").read_text(encoding="utf-8")
    else:
        assert not (dst / "comparison.md").exists()


def test_committed_latex_compiles(tmp_path: Path):
    """Every committed tables.tex, in one document: one pdflatex run (each folder a section,
    so a failure's log says which)."""
    from test_render import _pdflatex

    exe = _pdflatex()
    parts = []
    for folder in sorted(CASES):
        tables = (ROOT / "docs" / "sweep" / folder / "tables.tex").read_text(encoding="utf-8")
        assert ("base tuning" in tables) == ("tune" in " ".join(CASES[folder])), folder
        parts.append(f"\\section*{{{folder.replace('_', '-')}}}\n{tables}\n\\clearpage\n")
    doc = ("\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n"
           "\\usepackage[margin=1cm]{geometry}\n\\begin{document}\n" + "".join(parts) + "\\end{document}\n")
    (tmp_path / "t.tex").write_text(doc, encoding="utf-8")
    proc = subprocess.run([exe, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "t.tex"],
                          cwd=tmp_path, capture_output=True, text=True, errors="replace", timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:]


EXPONENT_FIT = ["--threads", "1", "--widths", "32,64,128,256", "--depths", "2,4,8", "--seeds", "0,1",
                "--fit-exponent", "lr.hidden_weight", "--fit-exponent", "lr.input_weight",
                "--fit-exponent", "lr.output_weight", "--log2-factors=-3,-2,-1,0,1,2,3,4"]
EXPONENT_CASES = {
    "exponents/adamw": ["-O", "adamw", "--multiplier", "output=16", "--log2-lrs=-8,-7,-6", *EXPONENT_FIT],
    "exponents/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--multiplier", "output=4", "--log2-lrs=-6,-5,-4",
                                  *EXPONENT_FIT, "--fit-exponent", "init.hidden_weight"],
}
MORE_SEEDS = ["--threads", "1", "--widths", "32,64,128,256", "--depths", "2", "--log2-factors=-3,-2,-1,0,1,2,3,4"]
ADAMW_BASE = ["-O", "adamw", "--multiplier", "output=16", "--log2-lrs=-8,-7,-6"]
MK_BASE = ["-O", "muon-kimi+adamw", "--multiplier", "output=4", "--log2-lrs=-6,-5,-4"]
EXPONENT_CASES |= {  # docs/sweep/exponents/more-seeds: the committed seeds and more, width rows only
    "exponents/more-seeds/hidden/adamw": [*ADAMW_BASE, *MORE_SEEDS, "--seeds", "0,1,2,3", "--fit-exponent", "lr.hidden_weight"],
    "exponents/more-seeds/input/adamw": [*ADAMW_BASE, *MORE_SEEDS, "--seeds", "0,1,2", "--fit-exponent", "lr.input_weight"],
    "exponents/more-seeds/input/muon-kimi+adamw": [*MK_BASE, *MORE_SEEDS, "--seeds", "0,1,2,3,4",
                                                   "--fit-exponent", "lr.input_weight"],
    "exponents/more-seeds/output/muon-kimi+adamw": [*MK_BASE, *MORE_SEEDS, "--seeds", "0,1,2,3,4,5",
                                                    "--fit-exponent", "lr.output_weight"],
}
ROUTER = ["--threads", "1", "--widths", "32,64,128", "--depths", "2", "--seeds", "0,1", "--experts", "4", "--top-k", "2",
          "--fit-exponent", "lr.router_weight", "--log2-factors=-3,-2,-1,0,1,2,3"]
EXPONENT_CASES |= {  # docs/sweep/ablate: the embedding's η exponent at μP's base optimum (AdamW, issue 35)
    "ablate/fit-emb-16-128/adamw": ["-O", "adamw", "--threads", "1", "--widths", "16,32,64,128", "--width", "16",
                                    "--depths", "2", "--base-width", "16", "--head-dim", "16", "--seeds", "0,1,2",
                                    "--log2-lrs=-5", "--multiplier", "output=16", "--lr-scale", "input_weight=4",
                                    "--fit-exponent", "lr.input_weight", "--log2-factors=-2,-1,0,1,2,3,4"],
}
EXPONENT_CASES |= {  # docs/sweep/router: the router's η exponent on the 4-expert MoE
    "router/adamw": ["-O", "adamw", "--multiplier", "output=16", "--log2-lrs=-7", *ROUTER],
    "router/muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--multiplier", "output=4", "--log2-lrs=-5", *ROUTER],
}


@pytest.mark.parametrize("folder", sorted(EXPONENT_CASES))
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_committed_exponents_come_from_the_raw_runs(tmp_path: Path, folder: str, capsys):
    """docs/sweep/exponents: each optimizer's fits re-render byte for byte from its runs.jsonl."""
    src, dst = _rerender(tmp_path, folder, EXPONENT_CASES[folder])
    capsys.readouterr()
    for name in ("exponents.md", "exponents.json"):
        assert (dst / name).read_text(encoding="utf-8") == (src / name).read_text(encoding="utf-8"), name


def _script(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout


@pytest.mark.parametrize("opt", ["adamw", "muon-kimi+adamw"])
def test_held_out_seed_tables_come_from_the_raw_runs(opt: str):
    """docs/sweep/tuned/seed2: the table printed by benchmarks/held_out_seed.py from the
    committed runs is the one in its README, and every close row has its seed-2 runs."""
    table = _script("benchmarks/held_out_seed.py", "report", f"docs/sweep/tuned/{opt}", "docs/sweep/tuned/seed2")
    assert table in (ROOT / "docs/sweep/tuned/seed2/README.md").read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if "| yes |" in line]
    assert rows and not any("not run" in line for line in rows)


def test_machine_check_table_comes_from_the_raw_runs():
    """docs/sweep/tuned/machine-check: benchmarks/compare_runs.py's table is the README's."""
    table = _script(
        "benchmarks/compare_runs.py", "docs/sweep/tuned/machine-check/device-runs.jsonl",
        "docs/sweep/tuned/adamw/runs.jsonl", "docs/sweep/tuned/muon-kimi+adamw/runs.jsonl",
    )
    assert "adamw: 18 runs matched" in table and "muon-kimi+adamw: 14 runs matched" in table
    assert table in (ROOT / "docs/sweep/tuned/machine-check/README.md").read_text(encoding="utf-8")


ABLATE = ["--widths", "16,128", "--depths", "2", "--width", "16", "--base-width", "16", "--head-dim", "16",
          "--seeds", "0,1,2", "--ablate"]
ABLATION_CASES = {  # docs/sweep/ablate: one role-rule at a time swapped to SP's at 8× the base (issue 35)
    "ablate/cpu-16-128/muon-kimi+adamw": ["-O", "muon-kimi+adamw", *ABLATE, "--log2-lrs=-9,-8,-7,-6,-5,-4,-3",
                                          "--tune", "output=1,2,4,8,16", "--ablate-variant", "multiplier.output=-0.5",
                                          "--ablate-variant", "lr.input_weight=-0.5"],
    "ablate/cpu-16-128/adamw": ["-O", "adamw", *ABLATE, "--log2-lrs=-10,-9,-8,-7,-6,-5", "--tune", "output=4,16,32",
                                "--ablate-variant", "lr.input_weight=-0.5", "--ablate-variant", "multiplier.output=-0.5",
                                "--ablate-variant", "init.output=-0.5"],
    # the torchtitan-like regime: spectral sweep --model llama (torchtitan's layout and own init as the base)
    "ablate/llama-32-256/adamw": ["--model", "llama", "-O", "adamw", *LLAMA, "--widths", "32,256", "--width", "32",
                                  "--base-width", "32", "--log2-lrs=-7,-6,-5,-4,-3", "--tune", "output=0.5,1,2,4,8",
                                  "--ablate", "--ablate-variant", "init.output=-0.5",
                                  "--ablate-variant", "multiplier.output=-0.5"],
}

VARIANTS = ["--ablate", "--variants-only", "--ablate-variant", "lr.input_weight=-0.5",
            "--ablate-variant", "init.hidden_weight=0"]
GPT16 = ["--widths", "16,128", "--depths", "2", "--width", "16", "--base-width", "16", "--head-dim", "16"]
ABLATION_CASES |= {  # docs/sweep/variants: u-μP's embedding η and σ_hidden held constant against the rule (issue 46)
    "variants/gpt-adamw-16-128/adamw": ["-O", "adamw", *GPT16, "--log2-lrs=-6", "--multiplier", "output=16",
                                        "--seeds", "0,1,2,3,4,5,6,7", *VARIANTS],
    "variants/gpt-muon-kimi-16-128/muon-kimi+adamw": ["-O", "muon-kimi+adamw", *GPT16, "--log2-lrs=-5", "--multiplier",
                                                      "output=4", "--seeds", "0,1,2,3,4", *VARIANTS],
    "variants/llama-adamw-32-256/adamw": ["--model", "llama", "-O", "adamw", *LLAMA[:-2], "--seeds", "0,1,2,3,4",
                                          "--widths", "32,256", "--width", "32", "--base-width", "32", "--log2-lrs=-5",
                                          "--multiplier", "output=4", *VARIANTS],
}


@pytest.mark.parametrize("folder", sorted(ABLATION_CASES))
def test_committed_ablations_come_from_the_raw_runs(tmp_path: Path, folder: str, capsys):
    """docs/sweep/ablate: each table (and its JSON and base tuning) re-renders byte for byte from its runs.jsonl."""
    src, dst = _rerender(tmp_path, folder, ABLATION_CASES[folder])
    capsys.readouterr()
    for name in ("ablation.md", "ablation.json", "tuning.json"):
        assert (dst / name).read_text(encoding="utf-8") == (src / name).read_text(encoding="utf-8"), name
    _same_comparison(src, dst)
