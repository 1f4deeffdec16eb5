#!/bin/sh
# The C backend's conv-family emitters (Conv, ConvTranspose, the pools, ConvInteger, QLinearConv)
# through generated C: the models of gen_conv_models.py against the host executor.
# Usage: conv_models.sh KILN WORK_DIR [test-onnx options...]
#   e.g. conv_models.sh build/kiln /tmp/conv --cc tests/cortex_m4/cc --c-run tests/cortex_m4/run
set -eu
kiln=$1 work=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
python3 "$here/gen_conv_models.py" "$work/models"
exec "$kiln" test-onnx --backend c -j 2 "$@" "$work"/models/*.json
