# Sourced by the GPU scripts run on a lent device (the library's `device` tool): $OUT made,
# the wheels the device image lacks installed from the carried .whl/ folder when pydantic
# or pytorch-optimizer is missing, and unbuffered Python output (logs arrive as written).
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
if ! python3 -c "import pydantic, pytorch_optimizer" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
