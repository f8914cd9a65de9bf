#!/usr/bin/env bash
# torchtitan's stock Trainer on one GPU through the generated Muon-Kimi + AdamW module
# (issue 37, docs/torchtitan.md): the same registry function and checks as
# tests/codegen/test_torchtitan.py's CPU run, at widths 256 and 1024 (base 64 x 2), depth 8,
# 20 steps each; torchtitan finds the GPU itself (tests/titan_worker.py shims the device
# only where there is no CUDA). Writes OUT/titan-W.json (every group's numbers, every init
# std, the losses) and prints one summary line per width.
#
#   usage (device, from the repository root, spectral and torchtitan installed):
#       OUT=/tmp/titan bash benchmarks/titan_gpu.sh
#   smoke test (CPU, about 30 s): WIDTHS=128 DEPTH=4 STEPS=3 PY=.venv/bin/python bash benchmarks/titan_gpu.sh
set -euo pipefail
OUT=${OUT:-/tmp/titan}
PY=${PY:-python}
[[ $PY == */* ]] && PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")  # usable after cd
mkdir -p "$OUT"
ROOT=$(pwd)
"$PY" -m spectral codegen muon-kimi --others adamw --base-width 64 --base-depth 2 \
    --framework torchtitan -o "$OUT/mup_titan.py" --force
for W in ${WIDTHS:-256 1024}; do
    (cd "$OUT" && TITAN_WIDTH=$W TITAN_DEPTH=${DEPTH:-8} TITAN_STEPS=${STEPS:-20} \
        PYTHONPATH="$OUT:$ROOT/tests" timeout 240 "$PY" "$ROOT/tests/titan_worker.py" \
        "$OUT/titan-$W.json" --module titan_worker --config tiny \
        --optimizer.lr 3e-3 --training.max-norm inf)
    "$PY" - "$OUT/titan-$W.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
per_token = [x / (4 * 32) for x in r["losses"]]
muon = sorted({g["lr"] for g in r["groups"].values() if g["optimizer"] == "Muon"})
print(f"width {r['width']} depth {r['depth']} on {r['device']}: {r['steps']} steps, "
      f"loss/token {per_token[0]:.3f} -> {per_token[-1]:.3f}, Muon lrs {muon}, "
      f"all moved: {all(r['moved'].values())}")
PYEOF
done
