#!/bin/sh
# The C backend's misc emitters (emit_misc.cc: GridSample, AffineGrid, DFT / STFT, windows,
# MelWeightMatrix, Det, Trilu, ReverseSequence, the ai.onnx.ml ops) through generated C: the models
# of gen_misc_models.py against the host executor, and the onnx-node tests of those ops whose sizes
# come from an input (DFT length, STFT frame step, window size, AffineGrid size, ...) with the
# integer inputs made constants, against the reference outputs.
# Usage: misc_models.sh KILN CONFORMANCE_DIR WORK_DIR [test-onnx options...]
set -eu
kiln=$1 conf=$2/onnx-node work=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
python3 "$here/gen_misc_models.py" "$work/models"
"$kiln" test-onnx --backend c -j 2 "$@" "$work"/models/*.json
# test_dft_inverse*: the host misses the reference there too (values near zero, see
# tests/conformance); the affine_grid *_expanded forms keep an If whose output type is unknown.
tests=$(cd "$conf" && ls -d test_affine_grid_2d test_affine_grid_2d_align_corners test_affine_grid_3d \
  test_affine_grid_3d_align_corners test_ai_onnx_ml_array_feature_extractor test_ai_onnx_ml_binarizer \
  test_ai_onnx_ml_tree_ensemble_* test_blackmanwindow* test_hannwindow* test_hammingwindow* \
  test_melweightmatrix test_center_crop_pad* test_det_* test_dft test_dft_axis* test_dft_irfft* \
  test_dft_opset19 test_dft_rfft* test_stft* test_gridsample* test_reversesequence* test_tril* test_triu*)
exec "$kiln" test-onnx --backend c --const-int-inputs -j 2 "$@" $(for t in $tests; do echo "$conf/$t"; done)
