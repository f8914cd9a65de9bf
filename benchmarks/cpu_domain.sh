#!/usr/bin/env bash
# Issue 46, item 4, without a device: the longest CPU domain-like regime that fits one session on this
# project's CPU (2 cores shared by five sessions): docs/sweep/domain/README.md (its cost, its results).
#
# Regime: spectral sweep --model llama (torchtitan's Llama3 layout and own init), AdamW, weight decay 0.1,
# head dim 32, depth 2, 1,000 steps of 2 × 128 bytes of the stdlib (vocabulary 256), base width 64,
# target 256 (4×), seeds 0, 1, 2, α_out 1, one thread, nice 19.
#   1. μP tuned at the base 64 over log2 η ∈ {-9, -8, -7} (9 runs); the winner is the fitted optimum
#      (--base-optimum fit; the one-value --tune init.hidden_weight=1 is what makes the sweep write
#      its tuning.json, σ_hidden is not searched).
#   2. μP transferred to 256 at the winner's η, and SP with the same η (SP transferred): 6 runs.
#   3. SP tuned at 256 with as many runs as μP's base sweep: log2 η ∈ {E-2, E-1} here (6 runs) and E,
#      SP transferred's 3 runs of stage 2 (E the base winner, -8). The session that ran it first called
#      this stage with {E-1, E+1}; after seed 0 (-7: 2.421, -9: 1.781, SP transferred's -8: 2.009) it
#      moved the grid down ({E-2, E-1}); the seed-0 run at -7 stays in runs.jsonl as spent compute.
# Every finished run is in runs.jsonl: calling the script again resumes where it stopped. The
# comparison: python -m spectral.cli.compare_arms docs/sweep/domain/cpu-llama-64-256/compare/*/spec.json
#
#   usage:  bash benchmarks/cpu_domain.sh            (OUT=folder to write elsewhere)
set -euo pipefail
export OMP_NUM_THREADS=1
D=${OUT:-docs/sweep/domain/cpu-llama-64-256}
PY=${PY:-.venv/bin/python}
S=(nice -n 19 "$PY" -m spectral sweep)
COMMON=(--model llama -O adamw --depths 2 --depth 2 --base-depth 2 --head-dim 32 --steps 1000 --batch-size 2
        --block-size 128 --weight-decay 0.1 --seeds 0,1,2 --threads 1 --multiplier output=1 --no-progress)
"${S[@]}" --out "$D/base" "${COMMON[@]}" --param mup --widths 64 --width 64 --base-width 64 --log2-lrs=-9,-8,-7 \
    --tune init.hidden_weight=1
E=$("$PY" -c "import json, sys; print(json.load(open(sys.argv[1]))['winner_log2_lr'])" "$D/base/adamw/tuning.json")
"${S[@]}" --out "$D/transfer-256" "${COMMON[@]}" --param mup --param sp --widths 256 --width 256 --base-width 64 \
    --init-scale hidden_weight=1 --log2-lrs="$E"
"${S[@]}" --out "$D/sp-256" "${COMMON[@]}" --param sp --widths 256 --width 256 --base-width 256 \
    --log2-lrs="$((E - 2)),$((E - 1))" --tune init.hidden_weight=1
