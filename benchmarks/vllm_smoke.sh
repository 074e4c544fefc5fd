#!/usr/bin/env bash
# GPU smoke test of the model path (needs an NVIDIA GPU, vLLM and realbench installed):
# builds a tiny random Qwen2-VL-class model locally (no download), serves it with vLLM, runs agent
# steps and judge calls through realbench's client, and prints latency and throughput.
#
#   bash benchmarks/vllm_smoke.sh [OUT_DIR]        (default /tmp/realbench-vllm-smoke)
#   PORT=8011 PYTHON=python3 STEPS=6 CONCURRENCY=8 JUDGE_CALLS=8 bash benchmarks/vllm_smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-/tmp/realbench-vllm-smoke}"
PY="${PYTHON:-python3}"
PORT="${PORT:-8011}"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "error: no NVIDIA GPU visible (nvidia-smi); this smoke test needs one" >&2
  exit 3
fi
if ! command -v vllm >/dev/null 2>&1; then
  echo "error: vLLM is not installed; on this GPU machine run: $PY -m pip install vllm" >&2
  exit 3
fi
"$PY" -c "import realbench" 2>/dev/null || { echo "error: realbench is not importable; run: $PY -m pip install -e ." >&2; exit 3; }

mkdir -p "$OUT"
echo "== building a tiny random Qwen2-VL in $OUT/tiny-qwen2-vl"
"$PY" benchmarks/vllm_smoke.py make-model "$OUT/tiny-qwen2-vl"
echo "== serving it with vLLM on port $PORT and driving it"
"$PY" benchmarks/vllm_smoke.py serve-and-drive "$OUT/tiny-qwen2-vl" --port "$PORT" \
  --steps "${STEPS:-6}" --concurrency "${CONCURRENCY:-8}" --judge-calls "${JUDGE_CALLS:-8}"
echo "== report: $OUT/vllm_smoke.json (server log: $OUT/vllm.log)"
