#!/usr/bin/env bash
# Issue 35's torchtitan-like regime on a lent GPU (the library's `device` tool), in one call of
# under 10 minutes: spectral sweep --model llama (torchtitan's Llama3 layout, names and default
# init, kept as the base), AdamW with weight decay 0.1, base 128 x 2 -> n = 1024 (8x), head dim
# 64, 200 steps of 32 x 256 bytes, three seeds:
#   1. the base tuned (alpha_out x eta) and, at n = 1024, mu-P at the base-optimal eta with one
#      role-rule at a time swapped to SP's, plus the readout-init and output-multiplier
#      variants at n^-1/2 (--ablate);
#   2. SP tuned at n = 1024 over eta x alpha_out.
# Estimate (no device was lent when this was written): from the H200 step times of
# docs/sweep/gpu/estimate.txt (gpu-8min's GPT, same tokens a step: 7.7 ms at 128, 28.3 ms at
# 1024 with Muon; AdamW's step is cheaper, the Llama's SwiGLU a little dearer, so taken
# as equal): 45 base runs x 200 x 7.7 ms = 69 s; 27 ablation runs (9 distinct swaps x 3
# seeds; the no-op swaps reuse mu-P's runs) x 200 x 28.3 ms = 153 s; 36 SP runs x 200 x
# 28.3 ms = 204 s; about 7.1 min of training plus start-up. Step 0 below times the plan on
# the device itself (--estimate) before anything trains; each sweep is resumable and
# killed at its limit, so what finished comes back.
#
#   usage (device): bash benchmarks/gpu_llama_ablate.sh   (carry .whl: pydantic & pytorch-optimizer wheels)
#   render afterwards on the CPU: spectral sweep <the same arguments> --out docs/sweep/ablate/gpu-llama --report-only
set -uo pipefail
# shellcheck source=benchmarks/device_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
RUN=/tmp/gpu-llama
rm -rf "$RUN"
COMMON="--model llama -O adamw --depths 2 --head-dim 64 --steps 200 --batch-size 32 --block-size 256
  --n-bytes 16777216 --weight-decay 0.1 --seeds 0,1,2 --no-progress"
ABLATE="$COMMON --widths 128,1024 --width 128 --base-width 128 --log2-lrs=-9,-8,-7,-6,-5
  --tune output=0.5,1,2 --ablate --ablate-variant init.output=-0.5 --ablate-variant multiplier.output=-0.5"
SP="$COMMON --param sp --widths 1024 --width 1024 --base-width 1024 --log2-lrs=-11,-10,-9,-8 --tune output=0.5,1,2"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
# shellcheck disable=SC2086
{
    python3 -m spectral sweep --out "$RUN/ablate" $ABLATE --estimate
    python3 -m spectral sweep --out "$RUN/sp" $SP --estimate
} 2>&1 | tee "$OUT/estimate.txt"
start=$(date +%s)
# shellcheck disable=SC2086
timeout "${LIMIT_ABLATE:-270}" python3 -m spectral sweep --out "$RUN/ablate" $ABLATE 2>&1 | tee "$OUT/log-ablate.txt"
# shellcheck disable=SC2086
timeout "${LIMIT_SP:-200}" python3 -m spectral sweep --out "$RUN/sp" $SP 2>&1 | tee "$OUT/log-sp.txt"
echo "exit $? after $(( $(date +%s) - start )) s" | tee -a "$OUT/log-sp.txt"
cp "$RUN/ablate/adamw/runs.jsonl" "$OUT/ablate-runs.jsonl" 2>/dev/null
cp "$RUN/sp/adamw/runs.jsonl" "$OUT/sp-runs.jsonl" 2>/dev/null
ls -la "$OUT"
