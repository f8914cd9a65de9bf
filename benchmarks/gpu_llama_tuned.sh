#!/usr/bin/env bash
# Issue 35's torchtitan-like regime on a lent GPU, both sides tuned on every knob μP's transfer
# scales (η, α_out, σ_hidden, the embedding's η), in one call of under 10 minutes: spectral
# sweep --model llama (torchtitan's Llama3 layout, names and default init, kept as the base),
# AdamW with weight decay 0.1, base 128 x 2 -> n = 1024 (8x), head dim 64, 200 steps of
# 32 x 256 bytes, three seeds. The same coordinate steps as the CPU's (docs/sweep/ablate/README.md,
# "Both sides tuned on every knob"), each starting from the previous step's winner (read from
# its tuning.json):
#   mu-P at the base 128: alpha_out x eta, then sigma_hidden x eta, then the embedding's eta x
#   eta; transferred to n = 1024 at the base-optimal eta;
#   SP at n = 1024: alpha_out x eta, then sigma_hidden, then the embedding's eta (at the winner's eta).
# A winner on the edge of its grid is printed ("edges") and is a bound, not an optimum.
# Estimate (no device was lent when this was written): from the H200 step times of
# docs/sweep/gpu/estimate.txt (7.7 ms a step at 128, 28.3 ms at 1024, taken as equal for the
# Llama's AdamW step): mu-P base 45 + 36 + 36 runs x 200 x 7.7 ms = 180 s; transfer 3 x 200 x
# 28.3 ms = 17 s; SP 18 + 12 + 9 runs x 200 x 28.3 ms = 221 s; about 7 min of training plus
# start-up. Step 0 times a few steps at each width on the device (--estimate) first.
# BASE, TARGET, HEAD_DIM, STEPS, BATCH, BLOCK override the regime (a CPU smoke run of the flow:
# BASE=16 TARGET=32 HEAD_DIM=16 STEPS=2 BATCH=2 BLOCK=16 bash benchmarks/gpu_llama_tuned.sh).
#
#   usage (device): bash benchmarks/gpu_llama_tuned.sh   (carry .whl: pydantic & pytorch-optimizer wheels)
#   render afterwards on the CPU: each folder's command (in its summary.md) with --report-only
set -uo pipefail
# shellcheck source=benchmarks/device_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
RUN=/tmp/gpu-llama-tuned
rm -rf "$RUN"
B=${BASE:-128}
T=${TARGET:-1024}
COMMON="--model llama -O adamw --depths 2 --head-dim ${HEAD_DIM:-64} --steps ${STEPS:-200} --batch-size ${BATCH:-32}
  --block-size ${BLOCK:-256} --n-bytes 16777216 --weight-decay 0.1 --seeds 0,1,2 --no-progress"
MUP="$COMMON --param mup --widths $B --width $B --base-width $B --no-sp-retune"
SP="$COMMON --param sp --widths $T --width $T --base-width $T"
winner() {  # the winning value and log2 eta of a folder's tuning.json: "VALUE LOG2_LR"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['winner'].split('=')[1], d['winner_log2_lr']); print('edges:', d['edges'], file=sys.stderr)" "$1/adamw/tuning.json"
}
around() { echo "$(($1 - 1)),$1,$(($1 + 1))"; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
start=$(date +%s)
# shellcheck disable=SC2086
{
    python3 -m spectral sweep --out "$RUN/est" $MUP --log2-lrs=-6 --estimate
    python3 -m spectral sweep --out "$RUN/est" $SP --log2-lrs=-9 --estimate
    # mu-P at the base
    python3 -m spectral sweep --out "$RUN/mup-alpha" $MUP --log2-lrs=-8,-7,-6,-5,-4 --tune output=1,2,4
    read -r A E < <(winner "$RUN/mup-alpha")
    python3 -m spectral sweep --out "$RUN/mup-init" $MUP --multiplier output="$A" --log2-lrs="$(around "$E")" \
        --tune init.hidden_weight=1,2,4,8
    read -r S E < <(winner "$RUN/mup-init")
    python3 -m spectral sweep --out "$RUN/mup-emb" $MUP --multiplier output="$A" --init-scale hidden_weight="$S" \
        --log2-lrs="$(around "$E")" --tune lr.input_weight=0.25,1,4,16
    read -r M E < <(winner "$RUN/mup-emb")
    python3 -m spectral sweep --out "$RUN/mup-1024" $COMMON --param mup --widths "$T" --width "$T" --base-width "$B" \
        --multiplier output="$A" --init-scale hidden_weight="$S" --lr-scale input_weight="$M" --log2-lrs="$E"
    # SP at the target
    python3 -m spectral sweep --out "$RUN/sp-alpha" $SP --log2-lrs=-10,-9,-8 --tune output=1,2
    read -r A E < <(winner "$RUN/sp-alpha")
    python3 -m spectral sweep --out "$RUN/sp-init" $SP --multiplier output="$A" --log2-lrs="$E" \
        --tune init.hidden_weight=1,2,4,8
    read -r S E < <(winner "$RUN/sp-init")
    python3 -m spectral sweep --out "$RUN/sp-emb" $SP --multiplier output="$A" --init-scale hidden_weight="$S" \
        --log2-lrs="$E" --tune lr.input_weight=0.25,1,4
} 2>&1 | tee "$OUT/log.txt"
echo "exit after $(( $(date +%s) - start )) s" | tee -a "$OUT/log.txt"
for d in "$RUN"/*/adamw; do
    name=$(basename "$(dirname "$d")")
    cp "$d/runs.jsonl" "$OUT/$name-runs.jsonl" 2>/dev/null
    cp "$d/tuning.json" "$OUT/$name-tuning.json" 2>/dev/null
done
ls -la "$OUT"
