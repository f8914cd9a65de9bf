#!/usr/bin/env bash
# Issue 46, item 4: μP against SP in the regime Tensor Programs V claims for transfer, on a lent
# GPU (H100/H200). NOT RUN: no device was lent to the session that wrote it (see the estimate
# below and docs/transfer.md, "What μP buys here").
#
# Regime: spectral sweep --model llama (torchtitan's Llama3 layout and own init as the base),
# AdamW with weight decay 0.1, head dim 64, depth 4, 1,000 steps of 32 × 128 bytes of the stdlib
# (vocabulary 256: bytes, not BPE), base width 256, targets 1024 and 2048, seeds 0, 1, 2.
#   1. μP tuned at the base 256: log2 η ∈ {-8, -7, -6} × σ_hidden factor ∈ {1, 2} (α_out 1):
#      18 runs; the winner is the fitted optimum (--base-optimum fit, its tuning.json).
#   2. μP transferred to 1024 at the winner (3 runs), then SP with the same base values (SP
#      transferred: the same base runs, so the same FLOPs; 3 runs).
#   3. SP tuned at 1024 with the same number of runs as μP's base sweep: log2 η ∈ {-10, -9, -8} ×
#      σ_hidden factor ∈ {1, 2}: 18 runs. Its comparison.md gives SP's expected best of k at μP's
#      FLOPs (k = floor of the FLOPs ratio, exact expectation over this search set).
#   4. The same at 2048 (μP transferred 3 runs, SP transferred 3, SP tuned 18), if the budget allows.
# Each stage runs under `timeout` against BUDGET seconds of this call; every finished run is in
# runs.jsonl, so calling the script again resumes where it stopped (a stage already done trains
# nothing). The comparisons are rendered afterwards on a CPU (the last lines below; the folders'
# runs.jsonl come back under $OUT).
#
# Estimate (printed first, by `spectral sweep --estimate` on the device, before anything trains).
# From the committed H200 timings (docs/sweep/gpu/estimate.txt: Muon-Kimi+AdamW, 32 × 256 tokens,
# 7.7 ms a step at 128 × 2, 17.4 at 128 × 4, 28.3 at 1024 × 2), taking AdamW's step as no slower
# and scaling by depth and tokens: about 12 ms a step at 256 × 4, 35 ms at 1024 × 4 and 100 ms at
# 2048 × 4 with 32 × 128 tokens, so 12 s, 35 s and 100 s a run of 1,000 steps:
#   stage 1: 18 × 12 s = 216 s; stage 2: 6 × 35 s = 210 s; stage 3: 18 × 35 s = 630 s;
#   stage 4: 6 × 100 s + 18 × 100 s = 2,400 s.
# So one 8-minute call (BUDGET 450 s) covers stages 1 and 2 (≈ 430 s); stage 3 needs two more
# calls and 2048 about five: ≈ 3,500 s of training in all. A CPU --estimate of stage 1 on this
# project's shared 2-core CPU: docs/sweep/domain/README.md.
#
#   usage (device):    OUT=… bash benchmarks/gpu_domain.sh      (carry .whl as device_env.sh says)
#   estimate only:     ESTIMATE_ONLY=1 DEVICE=cpu WIDTHS=256 THREADS=1 bash benchmarks/gpu_domain.sh
set -uo pipefail
# shellcheck source=benchmarks/device_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
R=${RESULTS:-/tmp/gpu-domain}
BUDGET=${BUDGET:-450}
DEVICE=${DEVICE:-cuda}
PY=${PY:-python3}
mkdir -p "$R"
T0=$(date +%s)
COMMON=(--model llama -O adamw --depths 4 --depth 4 --base-depth 4 --head-dim 64 --steps 1000
        --batch-size 32 --block-size 128 --weight-decay 0.1 --seeds 0,1,2 --device "$DEVICE"
        --multiplier output=1 --no-progress)
[ -n "${THREADS:-}" ] && COMMON+=(--threads "$THREADS")
BASE=(--param mup --widths 256 --width 256 --base-width 256 --log2-lrs=-8,-7,-6 --tune init.hidden_weight=1,2
      --no-sp-retune)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
step() {  # run one stage under the time left; a stage that does not fit is left for the next call
    local t; t=$(left)
    if [ "$t" -le 30 ]; then echo "skipped (budget): $*"; return 1; fi
    echo "+ $* (at most ${t} s)"
    timeout "$t" "$PY" -m spectral sweep "$@"
}
winner() {  # "SIGMA LOG2_LR" of the base tuning (its fitted winner)
    "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['winner'].split('=')[1], d['winner_log2_lr']); print('edges:', d['edges'], 'fit:', d['fit'], file=sys.stderr)" "$R/base/adamw/tuning.json"
}
echo "== estimate (nothing trained) =="
"$PY" -m spectral sweep --out "$R/base" "${COMMON[@]}" "${BASE[@]}" --estimate
for n in ${WIDTHS:-1024 2048}; do
    [ "$n" = 256 ] && continue
    "$PY" -m spectral sweep --out "$R/sp-$n" "${COMMON[@]}" --param sp --widths "$n" --width "$n" --base-width "$n" \
        --log2-lrs=-10,-9,-8 --tune init.hidden_weight=1,2 --estimate
done
[ -n "${ESTIMATE_ONLY:-}" ] && exit 0
echo "== stage 1: μP at the base 256 =="
step --out "$R/base" "${COMMON[@]}" "${BASE[@]}" || exit 0
read -r S E < <(winner) || exit 1
for n in 1024 2048; do
    echo "== stage 2/4: μP and SP transferred to $n (σ × $S, log2 η $E) =="
    step --out "$R/transfer-$n" "${COMMON[@]}" --param mup --param sp --widths "$n" --width "$n" --base-width 256 \
        --init-scale hidden_weight="$S" --log2-lrs="$E" || continue
    echo "== stage 3/4: SP tuned at $n, as many runs as μP's base sweep =="
    step --out "$R/sp-$n" "${COMMON[@]}" --param sp --widths "$n" --width "$n" --base-width "$n" \
        --log2-lrs=-10,-9,-8 --tune init.hidden_weight=1,2 || continue
done
echo "exit after $(( $(date +%s) - T0 )) s"
for d in "$R"/*/adamw; do
    name=$(basename "$(dirname "$d")")
    cp "$d/runs.jsonl" "$OUT/$name-runs.jsonl" 2>/dev/null
    cp "$d/tuning.json" "$OUT/$name-tuning.json" 2>/dev/null
done
ls -la "$OUT"
# Afterwards, on a CPU: put each $OUT/NAME-runs.jsonl at docs/sweep/domain/NAME/adamw/runs.jsonl,
# render each folder with its command and --report-only, and write a spec like
# docs/sweep/ablate/compare/llama-32-256/spec.json (μP: spent base, target transfer-N mup; SP
# transferred: spent base, target transfer-N sp; SP tuned: target sp-N), then
# python -m spectral.sweep.compare_arms docs/sweep/domain/compare/*/spec.json
