#!/bin/bash
# The device check of issue 8 (item 6), one call on a machine with an sm_90 GPU (H200), under five
# minutes: builds the kernels bench/gpu/prepare.sh generated on the CPU, checks them against the
# host executor's outputs (rel. L2 <= 1e-5 fp32, <= 1e-2 fp16, <= 5e-2 fp8 weights), times
# samples/s at batches 2^16 .. 2^22 against PyTorch eager and torch.compile (fp32, fp16), and writes $OUT/results.md.
#   bench/gpu/run.sh [PREPARED]     (default build/gpu_prepared; carry it along)
set -u
P=${1:-build/gpu_prepared}
OUT=${OUT:-/tmp/kiln_gpu_bench}
mkdir -p "$OUT"
R="$OUT/results.md"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
status=0
if [ ! -f "$P/field.cu" ]; then
  echo "no $P/field.cu: run bench/gpu/prepare.sh on the CPU machine first and carry $P" | tee "$R"
  exit 1
fi
{
  echo "# kiln --target cuda: models/mlp_field.onnx"
  echo
  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1); nvcc: $("$NVCC" --version | tail -1)"
  echo
  echo "| what | batch (or check) | ms per batch | G samples/s |"
  echo "|---|---|---|---|"
} > "$R"
# fp8 has no tolerance in the issue: E4M3 weights put the host check at about 3e-2.
# The tensor-core kernel also at 2 and 8 warps per block (a build-time macro): occupancy against
# the staged weights each block holds. The builds run side by side, the timings one at a time.
SPECS=("field FIELD 1e-5 kiln-fp32 -" "field16s FIELD16S 1e-2 kiln-fp16-scalar -"
       "field16 FIELD16 1e-2 kiln-fp16-tensor-cores -" "field8 FIELD8 5e-2 kiln-fp8-tensor-cores -"
       "field16 FIELD16 1e-2 kiln-fp16-tensor-cores-2-warps 2" "field16 FIELD16 1e-2 kiln-fp16-tensor-cores-8-warps 8")
for spec in "${SPECS[@]}"; do
  set -- $spec
  warps=""
  [ "$5" != "-" ] && warps="-DKILN_$2_WARPS_PER_BLOCK=$5"
  ( timeout 150 "$NVCC" -O3 -arch=sm_90 -Xptxas -v -I"$P" -DBENCH_NAME=$1 -DBENCH_UPPER=$2 $warps \
      -DBENCH_CU="\"$1.cu\"" bench/gpu/bench_main.cu -o "$OUT/bench_$4" > "$OUT/nvcc_$4.txt" 2>&1 ||
      rm -f "$OUT/bench_$4" ) &
done
wait
for spec in "${SPECS[@]}"; do
  set -- $spec
  if [ ! -x "$OUT/bench_$4" ]; then
    echo "| $4 | nvcc failed (see nvcc_$4.txt) | | |" >> "$R"
    status=1
    continue
  fi
  grep -A3 "kiln_$1_kernel" "$OUT/nvcc_$4.txt" | grep -E "registers|spill" | sed "s/^/<!-- $4: /; s/$/ -->/" >> "$R"
  timeout 60 "$OUT/bench_$4" "$P/xyz.f32" "$P/ref.f32" $3 $4 >> "$R" || status=1
done
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  timeout 200 python3 bench/gpu/torch_bench.py "$P" >> "$R" 2> "$OUT/torch_stderr.txt" ||
    echo "| torch | failed or timed out (see torch_stderr.txt) | | |" >> "$R"
else
  echo "| torch | PyTorch with CUDA is not installed here | | |" >> "$R"
fi
cat "$R"
exit $status
