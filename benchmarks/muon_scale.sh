#!/usr/bin/env bash
# Issue 46, item 5 (iii): Megatron-LM's Muon scale switch trained, on this project's CPU (2 cores shared by
# four sessions): docs/sweep/variants/README.md, section (iii), says what it gave and what it cost.
#
# Two sweep optimizers, each a real torch.optim.Muon(adjust_lr_fn="original") on the hidden matrices and
# AdamW on every other role (spectral/sweep/muon_scale.py): -O muon-shape+adamw steps a matrix by
# sqrt(max(1, n_out/n_in)) U V^T (shape_scaling), -O muon-unit-rms+adamw by sqrt(n_out/n_in) U V^T
# (unit_rms_norm; the 4n -> n down-projection's step x 1/2). Each η is derived by the engine from its
# declaration, tuned at the base, then μP-transferred, seeds 0-4. Two regimes:
#   gpt:   the reference GPT, 16 -> 128 (8x), 120 steps of 16 x 64 bytes, λ 0 (docs/sweep/variants' GPT):
#          base tuning α_out ∈ {2, 4, 8, 16} × log2 η ∈ {-7 … -2}, seeds 0-2 (72 runs per optimizer);
#   llama: the torchtitan-like Llama, 16 -> 64 (4x), 200 steps, λ 0.1 (docs/sweep/variants' Llama recipe at
#          smaller widths: torch.optim.Muon's bfloat16 Newton-Schulz on this CPU timed 8.7 s a step at
#          n = 256 (--estimate: 145 min for one optimizer's five target runs) and 1.2 s at 128 (21 min),
#          more than this session's CPU budget for both optimizers):
#          base tuning log2 η ∈ {-7 … -3} at α_out 4 (the AdamW Llama's base pick; not searched here),
#          seeds 0-2 (15 runs per optimizer).
# The winner of each base tuning is the fitted optimum (--base-optimum fit, tuning.json); the transfer
# trains seeds 0-2 of both optimizers and regimes first, then 3-4 (partial results as they come). Every finished run
# is in runs.jsonl: calling the script again resumes where it stopped. The comparisons:
#   python -m spectral.cli.compare_arms docs/sweep/variants/muon-scale-*/compare/spec.json
#
#   usage:  bash benchmarks/muon_scale.sh [gpt|llama|all]      (OUT=folder to write elsewhere)
set -euo pipefail
export OMP_NUM_THREADS=1
WHICH=${1:-all}
ROOT=${OUT:-docs/sweep/variants}
PY=${PY:-.venv/bin/python}
S=(nice -n 19 "$PY" -m spectral sweep)
OPTS=(muon-shape+adamw muon-unit-rms+adamw)
winner() {  # the base tuning's winner: "LOG2_LR ALPHA_OUT"
    "$PY" -c "import json, sys; t = json.load(open(sys.argv[1])); print(t['winner_log2_lr'], t['winner'].split('=')[1])" \
        "$1/tuning.json"
}
GPT=(muon-scale-gpt-16-128 16 128 --depths 2 --head-dim 16 --threads 1 --no-progress)
LLAMA=(muon-scale-llama-16-64 16 64 --model llama --depths 2 --head-dim 16 --steps 200 --batch-size 16 --block-size 64
       --weight-decay 0.1 --threads 1 --no-progress)
base() {  # NAME BASE TARGET COMMON-ARGS... ; the grid in $GRID
    local D="$ROOT/$1" b=$2; shift 3
    "${S[@]}" --out "$D/base-$b" "$@" -O "${OPTS[0]}" -O "${OPTS[1]}" --param mup --widths "$b" --width "$b" \
        --base-width "$b" "${GRID[@]}" --seeds 0,1,2 --no-sp-retune
}
transfer() {  # SEEDS NAME BASE TARGET COMMON-ARGS...
    local seeds=$1 D="$ROOT/$2" b=$3 t=$4; shift 4
    for o in "${OPTS[@]}"; do
        read -r E A < <(winner "$D/base-$b/$o")
        "${S[@]}" --out "$D/transfer-$t" "$@" -O "$o" --param mup --widths "$b,$t" --width "$b" --base-width "$b" \
            --log2-lrs="$E" --multiplier output="$A" --seeds "$seeds"
    done
}
run() {  # REGIME-ARRAY-NAME STAGE
    local -n r=$1
    case $2 in
        base) if [ "$1" = GPT ]; then GRID=(--log2-lrs=-7,-6,-5,-4,-3,-2 --tune output=2,4,8,16)
              else GRID=(--log2-lrs=-7,-6,-5,-4,-3 --tune output=4); fi
              base "${r[@]}" ;;
        *) transfer "$2" "${r[@]}" ;;
    esac
}
case $WHICH in
    gpt) REGIMES=(GPT) ;;
    llama) REGIMES=(LLAMA) ;;
    *) REGIMES=(GPT LLAMA) ;;
esac
# both bases, then seeds 0-2 of both regimes, then seeds 3-4: partial results as they come
for stage in base 0,1,2 0,1,2,3,4; do
    for regime in "${REGIMES[@]}"; do run "$regime" "$stage"; done
done
