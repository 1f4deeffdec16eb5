#!/bin/sh
# The C backend's indexing, resize and quantization emitters through generated C: the models of
# gen_indexing_models.py against the host executor, and the onnx-node tests whose sizes come from
# an input (Resize / Upsample scales and sizes, OneHot depth) with those inputs made constants,
# against the reference outputs; gather tests with constant indices too.
# Usage: indexing_models.sh KILN CONFORMANCE_DIR WORK_DIR [test-onnx options...]
set -eu
kiln=$1 conf=$2/onnx-node work=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
freeze=$here/../../scripts/freeze_test_inputs.py
rm -rf "$work"
mkdir -p "$work/frozen"
python3 "$here/gen_indexing_models.py" "$work/models"
for t in "$conf"/test_resize_* "$conf"/test_upsample_*; do
  python3 "$freeze" "$t" "$work/frozen/$(basename "$t")" '*'
done
for t in "$conf"/test_onehot_*; do python3 "$freeze" "$t" "$work/frozen/$(basename "$t")" depth; done
for t in "$conf"/test_gather_elements_* "$conf"/test_gathernd_*; do
  python3 "$freeze" "$t" "$work/frozen/$(basename "$t")_const" indices
done
exec "$kiln" test-onnx --backend c -j 2 "$@" "$work"/models/*.json "$work"/frozen/*
