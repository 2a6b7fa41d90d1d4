#!/usr/bin/env bash
# Every GPU figure the project quotes, in one run on one GPU, well inside 15 minutes.
#
#   bash benchmarks/speed/gpu_check.sh            # on a machine with a GPU, CuPy and a CUDA build of PyTorch
#   bash benchmarks/speed/gpu_check.sh --dry-run  # on a CPU: the same steps, tiny sizes, to check the script itself
#
# Writes $OUT/gpu_results.md (or benchmarks/speed/results/gpu-DATE/ when $OUT is unset): for each step the
# command, its exit status, its wall time and the lines that carry its figures; the full output of each
# step goes to a .log file beside it. Each step has its own time limit, so a slow or failing step
# leaves the others' figures. Steps, in order:
#   0. the machine: GPU, driver, Python, NumPy, CuPy, PyTorch (and whether each sees the GPU)
#   1. the default `train` run on the CPU, started in the background (the BLEU to compare with)
#   2. the `gpu`-marked tests on CuPy (pytest's header must say "on CuPy and a GPU")
#   3. the default `train` run with --device cuda: wall time, BLEU
#   4. the training step, our engine on CuPy against PyTorch CUDA eager on the same model and weights:
#      the paper's base model (config base-gpu: batch 64 × 32 tokens), then at batch 256
#      (tokens/s, ratio, device memory held by each library's pool)
#   5. flash attention against plain attention on CuPy at long lengths (if chapter 13's exist)
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1

if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x .venv/bin/python ]; then PY=$ROOT/.venv/bin/python
else PY=python3; fi
OUT_DIR=${OUT:-$ROOT/benchmarks/speed/results/gpu-$(date -u +%Y%m%d-%H%M)}
mkdir -p "$OUT_DIR"
RESULTS=$OUT_DIR/gpu_results.md
WORK=$(mktemp -d)
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} MPLBACKEND=Agg MINITRANSFORMER_DEVICE=cpu

if [ $DRY = 1 ]; then
  DEVICE=cpu; TRAIN_ARGS=(--preset toy --limit 40); BENCH=(--configs tiny --rounds 1 --threads 1)
  BATCH=8; ATTN=(--device cpu --lengths 128,256 --repeats 1); TESTS=(-k "scatter_add or cupy_arrays")
else
  DEVICE=cuda; TRAIN_ARGS=(); BENCH=(--configs base-gpu --rounds 3 --threads 2)
  BATCH=256; ATTN=(); TESTS=()
fi

say() { printf '%s\n' "$*" | tee -a "$RESULTS"; }

# The whole script stays inside one device call with time to spare for a second try (7.5 minutes by
# default; GPU_CHECK_SECONDS=570 uses most of a 10-minute call): each step gets its own limit,
# cut to what is left of TOTAL_S, and a step with under 20 s left is skipped and says so.
TOTAL_S=${GPU_CHECK_SECONDS:-450}

# lines of a log that carry figures (a progress bar's carriage returns dropped), indented as code
figures() { sed 's/.*\r//' "$1" | grep -E "$2" | tail -n 40 | sed 's/^/    /' | tee -a "$RESULTS"; }

# step NAME LIMIT_S GREP_PATTERN COMMAND...: run it with a time limit, log it, keep the lines matching.
step() {
  local name=$1 limit=$2 pattern=$3; shift 3
  local log=$OUT_DIR/$name.log start=$SECONDS status left=$((TOTAL_S - SECONDS))
  [ "$limit" -gt "$left" ] && limit=$left
  say ""
  say "## $name"
  say ""
  say "    $*"
  say ""
  if [ "$limit" -lt 20 ]; then
    say "skipped: the script's ${TOTAL_S} s were spent"
    return 0
  fi
  timeout "$limit" "$@" > "$log" 2>&1
  status=$?
  say "exit status $status$([ $status = 124 ] && echo " (stopped at its ${limit} s limit)"), wall $((SECONDS - start)) s"
  say ""
  figures "$log" "$pattern"
  return $status
}

say "# GPU check, $(date -u '+%Y-%m-%d %H:%M UTC')$([ $DRY = 1 ] && echo ' — DRY RUN on the CPU, tiny sizes: no GPU figure here')"
say ""
say "repository $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), python: $PY"

# 0. the machine
say ""
say "## machine"
say ""
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 2
  timeout 60 "$PY" - <<'EOF'
import platform, numpy
print('Python', platform.python_version(), '| NumPy', numpy.__version__)
try:
    import cupy
    print('CuPy', cupy.__version__, '| sees', cupy.cuda.runtime.getDeviceCount(), 'GPU(s)')
except Exception as error:
    print('CuPy: not usable:', type(error).__name__, error)
try:
    import torch
    print('PyTorch', torch.__version__, '| CUDA available:', torch.cuda.is_available())
except Exception as error:
    print('PyTorch: not usable:', type(error).__name__, error)
EOF
} > "$OUT_DIR/machine.log" 2>&1
figures "$OUT_DIR/machine.log" '.'

# 1. the CPU run in the background (2 BLAS threads), to compare BLEU with the GPU run of step 3
OPENBLAS_NUM_THREADS=2 timeout $((TOTAL_S - 30)) "$PY" -m minitransformer train --device cpu --out "$WORK/cpu" ${TRAIN_ARGS[@]+"${TRAIN_ARGS[@]}"} \
  > "$OUT_DIR/train-cpu.log" 2>&1 &
CPU_RUN=$!

# 2. the gpu-marked tests, on CuPy
step gpu-tests 70 'gpu tests:|passed|failed|error' "$PY" -m pytest -m gpu -p no:cacheprovider \
  --continue-on-collection-errors ${TESTS[@]+"${TESTS[@]}"}

# 3. the default training run on the GPU
step train-cuda 160 'BLEU|step|took|trained|seconds|minutes|Error|error' \
  "$PY" -m minitransformer train --device "$DEVICE" --out "$WORK/gpu" ${TRAIN_ARGS[@]+"${TRAIN_ARGS[@]}"}

say ""
say "## train-cpu (started in the background before gpu-tests)"
say ""
say "    OPENBLAS_NUM_THREADS=2 $PY -m minitransformer train --device cpu ${TRAIN_ARGS[*]}"
say ""
wait $CPU_RUN
say "exit status $?"
say ""
figures "$OUT_DIR/train-cpu.log" 'BLEU|stopped|Error|error'
say ""
say "BLEU, the CPU run and the GPU run:"
say ""
for run in cpu cuda; do
  say "    $run: $(sed 's/.*\r//' "$OUT_DIR/train-$run.log" 2>/dev/null | grep -oE '^test[a-z_]* .*BLEU [0-9.]+' \
    | sed -E 's/ \(.*\)//' | tr '\n' ';')"
done

# 4. the training step: CuPy against PyTorch CUDA eager
step train-step 90 'Proof|relative|SAME|DIFFERENT|threads|config|-----|^[a-z]|device memory|RSS|Error' \
  "$PY" benchmarks/speed/train_step.py --device "$DEVICE" --malloc default ${BENCH[@]+"${BENCH[@]}"}
step train-step-batch-$BATCH 70 'threads|config|-----|^[a-z]|device memory|RSS|Error' \
  "$PY" benchmarks/speed/train_step.py --device "$DEVICE" --malloc default --skip-proof --batch "$BATCH" ${BENCH[@]+"${BENCH[@]}"}

# 5. flash against plain attention at long lengths
step attention 45 '^\||no flash|Error' "$PY" benchmarks/speed/gpu_attention.py ${ATTN[@]+"${ATTN[@]}"}

rm -rf "$WORK"
say ""
say "full output of each step: $OUT_DIR/*.log"
