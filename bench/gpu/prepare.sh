#!/bin/sh
# Run on the CPU machine before the device call: writes PREPARED (default build/gpu_prepared)
# with the generated kernels of models/mlp_field.onnx (scalar path fp32 and fp16; fused MLP on
# mma.sync fp16 and fp8; WMMA warp steps fp16), 4093 check samples (the last warp partial), the
# host executor's outputs for them, the weights as safetensors for the PyTorch baseline, and the
# static performance report (static_report.py) of the same kernels.
# Then carry PREPARED to the GPU machine and run bench/gpu/run.sh PREPARED there.
set -eu
KILN=${KILN:-build/kiln}
P=${1:-build/gpu_prepared}
M=models/mlp_field.onnx
N=4093
rm -rf "$P"
mkdir -p "$P"
"$KILN" compile "$M" --target cuda --name field --out "$P"
"$KILN" compile "$M" --target cuda --name field16s --precision fp16 --tensor-cores off --out "$P"
"$KILN" compile "$M" --target cuda --name field16 --precision fp16 --tensor-cores on --out "$P"
"$KILN" compile "$M" --target cuda --name field8 --precision fp8 --tensor-cores on --out "$P"
"$KILN" compile "$M" --target cuda --name field16w --precision fp16 --tensor-cores wmma --out "$P"
python3 bench/gpu/npy.py make $N "$P/xyz.npy" "$P/xyz.f32"
"$KILN" run "$M" --shape xyz=$N,3 --input xyz="$P/xyz.npy" --output-dir "$P/ref"
python3 bench/gpu/npy.py raw "$P/ref/output_0.npy" "$P/ref.f32"
"$KILN" convert "$M" --to json --weights "$P/field.safetensors" -o "$P/field.json"
python3 bench/gpu/static_report.py --kiln "$KILN" --out "$P/static" "$M" > /dev/null || true
echo "prepared $P: $(ls "$P" | tr '\n' ' ')"
