#!/usr/bin/env bash
# The GPU preset on a lent GPU machine (the library's `device` tool), in one call of under
# 10 minutes: time the plan with --estimate, then run it under a hard limit, and bring back
# the raw runs and the logs ($OUT: at most 8 files). Reports are rendered afterwards, on the
# CPU, from the raw runs: `spectral sweep --preset gpu-8min --out docs/sweep/gpu --report-only`.
#
#   usage (device): bash benchmarks/gpu_sweep.sh      (carry .whl: pydantic & pytorch-optimizer wheels)
set -uo pipefail
# shellcheck source=benchmarks/device_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
LIMIT=${LIMIT:-480}         # seconds for the sweep itself
RUN=/tmp/gpu-sweep          # results folder (copied to $OUT at the end)
rm -rf "$RUN"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__)" | tee -a "$OUT/gpu.txt"

# 1. the plan, timed here: per-step seconds at every size × runs × steps
python3 -m spectral sweep --preset gpu-8min --out "$RUN" --estimate ${SMOKE:-} 2>&1 | tee "$OUT/estimate.txt"

# 2. the sweep, killed at LIMIT s if the estimate was wrong (resumable: what finished is kept)
start=$(date +%s)
timeout "$LIMIT" python3 -m spectral sweep --preset gpu-8min --out "$RUN" --no-progress ${SMOKE:-} 2>&1 | tee "$OUT/log.txt"
echo "exit $? after $(( $(date +%s) - start )) s" | tee -a "$OUT/log.txt"

o="$RUN/muon-kimi+adamw"
cp "$o/runs.jsonl" "$o/sweep.json" "$OUT/" 2>/dev/null
ls -la "$OUT"
