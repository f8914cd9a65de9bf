"""The same sweep runs trained on two machines: how far apart are their losses?

    .venv/bin/python benchmarks/compare_runs.py OTHER.jsonl REFERENCE.jsonl [REFERENCE.jsonl ...]

Matches the runs of OTHER with those of the references by key (a key hashes everything
that determines a run, so equal keys are the same run: same model, data, seed, optimizer
and η) and prints, per matched run, both final validation losses and their difference, then
the largest and median absolute difference per optimizer. Used for the machine check of
docs/sweep/tuned (the lent device's CPU cores against this repository's development machine).
"""

from __future__ import annotations

import sys

from spectral.sweep.records import read_runs


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    other = read_runs(argv[0])
    reference = {r["key"]: r for path in argv[1:] for r in read_runs(path)}
    print("| optimizer | n | L | seed | log2 η | reference | other | other − reference |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    diffs: dict[str, list[float]] = {}
    for run in sorted(
        other,
        key=lambda r: (r["optimizer"], r["width"], r["depth"], r["settings"]["seed"], r["log2_lr"]),
    ):
        ref = reference.get(run["key"])
        if ref is None:
            continue
        d = run["val_loss"] - ref["val_loss"]
        diffs.setdefault(run["optimizer"], []).append(abs(d))
        print(
            f"| {run['optimizer']} | {run['width']} | {run['depth']} | {run['settings']['seed']} | "
            f"{run['log2_lr']} | {ref['val_loss']:.4f} | {run['val_loss']:.4f} | {d:+.4f} |"
        )
    print()
    for opt, ds in sorted(diffs.items()):
        ds.sort()
        print(
            f"{opt}: {len(ds)} runs matched; |difference| max {ds[-1]:.4f}, median {ds[len(ds) // 2]:.4f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
