#!/bin/bash
# The device check of issue 27 (item 4), one call on a machine with an sm_90 GPU (H200), under
# five minutes. Builds every kernel bench/gpu/prepare.sh generated (in parallel, one nvcc each,
# ptxas registers and spills recorded), then for each:
#   - checks 4093 samples against the host executor (rel. L2 <= 1e-5 fp32, <= 1e-2 fp16,
#     <= 8e-2 fp8 weights) into a NaN-filled output with a guard past its end;
#   - runs 2^22 - 5 samples (grid-stride loop, partial last warp), every output written, and
#     compares them with the fp32 kernel's outputs;
#   - times samples/s at batches 2^16 .. 2^22;
# then PyTorch eager and torch.compile (fp32, fp16), and, where ncu exists, the fused kernel's
# shared-memory wavefronts and tensor-pipe use. Records the GPU's name and clocks. Everything goes
# into one file, $OUT/results.md; exit 1 if a check fails.
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
  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem --format=csv,noheader 2>/dev/null | head -1)"
  echo "(name, driver, SM clock now / max, memory clock now / max); nvcc: $("$NVCC" --version | tail -1)"
  echo
  echo "| what | batch (or check) | ms per batch | G samples/s |"
  echo "|---|---|---|---|"
} > "$R"
# The fp32 kernel first: its 2^22 - 5 outputs are what the others are compared with.
SPECS=("field FIELD 1e-5 kiln-fp32-scalar -" "field16s FIELD16S 1e-2 kiln-fp16-scalar -"
       "field16 FIELD16 1e-2 kiln-fp16-fused-mma -" "field8 FIELD8 8e-2 kiln-fp8-fused-mma -"
       "field16 FIELD16 1e-2 kiln-fp16-fused-mma-2-warps 2" "field16 FIELD16 1e-2 kiln-fp16-fused-mma-8-warps 8"
       "field16w FIELD16W 1e-2 kiln-fp16-wmma -")
for spec in "${SPECS[@]}"; do
  set -- $spec
  warps=""
  [ "$5" != "-" ] && warps="-DKILN_$2_WARPS_PER_BLOCK=$5"
  ( timeout 200 "$NVCC" -O3 -arch=sm_90 -Xptxas -v -I"$P" -DBENCH_NAME=$1 -DBENCH_UPPER=$2 $warps \
      -DBENCH_CU="\"$1.cu\"" bench/gpu/bench_main.cu -o "$OUT/bench_$4" > "$OUT/nvcc_$4.txt" 2>&1 ||
      rm -f "$OUT/bench_$4" ) &
done
wait
for spec in "${SPECS[@]}"; do
  set -- $spec
  if [ ! -x "$OUT/bench_$4" ]; then
    echo "| $4 | nvcc failed: $(grep -m1 error "$OUT/nvcc_$4.txt") | | |" >> "$R"
    status=1
    continue
  fi
  grep -A3 "kiln_$1_kernel" "$OUT/nvcc_$4.txt" | grep -E "registers|spill" | sed "s/^/<!-- $4: /; s/$/ -->/" >> "$R"
  if [ "$4" = kiln-fp32-scalar ]; then
    timeout 60 "$OUT/bench_$4" "$P/xyz.f32" "$P/ref.f32" $3 $4 - "$OUT/big_fp32.f32" >> "$R" || status=1
  else
    timeout 60 "$OUT/bench_$4" "$P/xyz.f32" "$P/ref.f32" $3 $4 "$OUT/big_fp32.f32" >> "$R" || status=1
  fi
done
if command -v ncu > /dev/null && [ -x "$OUT/bench_kiln-fp16-fused-mma" ]; then
  echo >> "$R"
  echo "ncu, the fused fp16 kernel (first launch of the check):" >> "$R"
  timeout 120 ncu --launch-count 1 --kernel-name regex:kiln_field16_kernel \
    --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
    "$OUT/bench_kiln-fp16-fused-mma" "$P/xyz.f32" "$P/ref.f32" 1e-2 ncu 2>&1 | grep -E "^ +[a-z_]+__" | sed 's/^/    /' >> "$R" || true
fi
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  timeout 200 python3 bench/gpu/torch_bench.py "$P" >> "$R" 2> "$OUT/torch_stderr.txt" ||
    echo "| torch | failed or timed out (see torch_stderr.txt) | | |" >> "$R"
else
  echo "| torch | PyTorch with CUDA is not installed here | | |" >> "$R"
fi
if [ -f "$P/static/report.md" ]; then
  echo >> "$R"
  cat "$P/static/report.md" >> "$R"
fi
cat "$R"
exit $status
