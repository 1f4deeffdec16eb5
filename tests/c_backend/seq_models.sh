#!/bin/sh
# The C backend's sequence-model emitters (Attention, RotaryEmbedding, RMSNormalization, the
# losses, RNN / GRU / LSTM) through generated C: the models of gen_seq_models.py against the host
# executor.
# Usage: seq_models.sh KILN WORK_DIR [test-onnx options...]
set -eu
kiln=$1 work=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
python3 "$here/gen_seq_models.py" "$work/models"
exec "$kiln" test-onnx --backend c -j 2 "$@" "$work"/models/*.json
