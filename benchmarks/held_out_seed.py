"""A third seed where μP and re-tuned SP are within twice their seed spread (issue 28).

    .venv/bin/python benchmarks/held_out_seed.py plan   SWEEP_DIR SEED_DIR   # the sweep commands to run
    .venv/bin/python benchmarks/held_out_seed.py report SWEEP_DIR SEED_DIR   # the table, once they ran

SWEEP_DIR is one optimizer's folder of a `spectral sweep --tune` run with SP re-tuned at every
size (its `retuned.json`, `sweep.json` and `runs.jsonl`, seeds 0 and 1); SEED_DIR the folder the
planned commands write to. A row (one size of one axis) is *close* when |μP − SP re-tuned| is
below twice its seed spread (the larger of the two seeds' differences of μP's and of SP's
chosen cell). For a close row the cells chosen on seeds 0 and 1 (SP: the re-tuned candidate and
η; μP: the base winner and its best η at that size) are trained again with seed 2. The cells
are not re-chosen with seed 2, so seed 2 is held out: it tests the choice rather than
re-making it, and it carries none of the winner's curse that choosing on it would add.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from spectral.sweep.records import read_runs

SEED = 2


def _cells(sweep: Path) -> tuple[dict, list[dict]]:
    """The sweep's settings and, per non-base row, the chosen cells and the spread."""
    cfg = json.loads((sweep / "sweep.json").read_text(encoding="utf-8"))["config"]
    winner = cfg["multiplier"]["output"]
    losses: dict[tuple, dict[int, float]] = defaultdict(dict)
    for r in read_runs(sweep / "runs.jsonl"):
        out = r["settings"]["multiplier"]["output"]
        key = (r["parameterization"], out, r["width"], r["depth"], r["log2_lr"])
        losses[key][r["settings"]["seed"]] = r["val_loss"]
    rows = []
    for row in json.loads((sweep / "retuned.json").read_text(encoding="utf-8")):
        axis, size = row["axis"], row["size"]
        if size == (cfg["base_width"] if axis == "width" else cfg["base_depth"]):
            continue
        width, depth = (size, cfg["base_depth"]) if axis == "width" else (cfg["base_width"], size)
        label = row["retuned_label"]  # "output=4, log2 η -7"
        sp_out = float(label.split(",")[0].split("=")[1])
        sp_lr = int(label.rsplit(" ", 1)[1])
        mup = {
            lr: seeds
            for (p, out, w, d, lr), seeds in losses.items()
            if p == "mup" and out == winner and (w, d) == (width, depth) and {0, 1} <= set(seeds)
        }
        mup_lr = min(mup, key=lambda lr: (mup[lr][0] + mup[lr][1]) / 2)
        sp = losses[("sp", sp_out, width, depth, sp_lr)]
        spread = max(abs(sp[0] - sp[1]), abs(mup[mup_lr][0] - mup[mup_lr][1]))
        rows.append(
            dict(
                axis=axis,
                size=size,
                width=width,
                depth=depth,
                sp_out=sp_out,
                sp_lr=sp_lr,
                mup_out=winner,
                mup_lr=mup_lr,
                sp=sp,
                mup=mup[mup_lr],
                spread=spread,
                gap=row["mup_minus_retuned"],
                close=abs(row["mup_minus_retuned"]) < 2 * spread,
            )
        )
    return cfg, rows


def _fmt(x: float) -> str:
    return f"{x:g}"


def plan(sweep: Path, out: Path) -> int:
    cfg, rows = _cells(sweep)
    common = (
        f"--threads 1 -O {cfg['optimizer']} --base-width {cfg['base_width']} "
        f"--base-depth {cfg['base_depth']} --seeds {SEED} --no-progress"
    )
    for row in rows:
        if not row["close"]:
            continue
        sizes = (
            f"--widths {row['width']} --depths {row['depth']} --width {cfg['base_width']}"
            if row["axis"] == "width"
            else f"--widths {cfg['base_width']} --depths {row['depth']} --width {cfg['base_width']}"
        )
        for p, o, lr in (
            ("sp", row["sp_out"], row["sp_lr"]),
            ("mup", row["mup_out"], row["mup_lr"]),
        ):
            print(
                f"spectral sweep --out {out} {common} --param {p} {sizes} --multiplier output={_fmt(o)} "
                f"--log2-lrs={lr}"
            )
    return 0


def report(sweep: Path, out: Path) -> int:
    cfg, rows = _cells(sweep)
    third: dict[tuple, float] = {}
    for r in read_runs(out / cfg["optimizer"] / "runs.jsonl"):
        if r["settings"]["seed"] == SEED:
            key = (
                r["parameterization"],
                r["settings"]["multiplier"]["output"],
                r["width"],
                r["depth"],
                r["log2_lr"],
            )
            third[key] = r["val_loss"]
    print(
        f"| axis | size | seed spread | μP − SP (seeds 0, 1) | close? | SP cell | μP cell | "
        f"SP seed {SEED} | μP seed {SEED} | μP − SP, seed {SEED} | μP − SP, seeds 0-{SEED} |"
    )
    print("|---|---|---:|---:|---|---|---|---:|---:|---:|---:|")
    for row in rows:
        name = "n" if row["axis"] == "width" else "L"
        cells = (
            f"output={_fmt(row['sp_out'])}, {row['sp_lr']} | output={_fmt(row['mup_out'])}, "
            f"{row['mup_lr']}"
        )
        head = (
            f"| {row['axis']} | {name} = {row['size']} | {row['spread']:.3f} | {row['gap']:+.3f} | "
            f"{'yes' if row['close'] else 'no'} | {cells} |"
        )
        sp3 = third.get(("sp", row["sp_out"], row["width"], row["depth"], row["sp_lr"]))
        mup3 = third.get(("mup", row["mup_out"], row["width"], row["depth"], row["mup_lr"]))
        if not row["close"]:
            print(head + " – | – | – | – |")
        elif sp3 is None or mup3 is None:
            print(head + " not run | not run | – | – |")
        else:
            mean3 = (sum(row["mup"].values()) + mup3) / 3 - (sum(row["sp"].values()) + sp3) / 3
            print(head + f" {sp3:.3f} | {mup3:.3f} | {mup3 - sp3:+.3f} | {mean3:+.3f} |")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in ("plan", "report"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    return (plan if argv[0] == "plan" else report)(Path(argv[1]), Path(argv[2]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
