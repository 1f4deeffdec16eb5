#include "passes/lower.h"

#include "passes/fold_constants.h"
#include "passes/pipeline.h"

namespace kiln::passes {

const std::vector<std::string>& HostFusions() {
  static const std::vector<std::string> kPasses = {
      "fuse-layernorm",  "fuse-groupnorm",      "fold-batchnorm", "fuse-channel-shuffle",
      "fuse-gelu",       "fuse-hardswish",      "fuse-swish",     "fuse-transpose-matmul",
      "fuse-matmul-add", "fuse-conv-activation"};
  return kPasses;
}

Status Lower(ir::Model& model, const LowerOptions& o) {
  const bool host = o.target == Target::kHost && o.host_passes;
  PipelineOptions po;
  po.dump_ir_after = o.dump_ir_after;
  // 1. Every value's type and dims, with the caller's input dims.
  KILN_RETURN_IF_ERROR(InferShapes(model, o.shapes));
  if (o.after_shapes) KILN_RETURN_IF_ERROR(o.after_shapes(model));
  // 2. Host: a QDQ model's Conv and MatMul on int8 arithmetic, before fold-constants turns the
  //    int8 weights into float.
  if (host) KILN_RETURN_IF_ERROR(RunPasses(model, {"fuse-qdq"}, po));
  // 3. The pipeline's passes (the verifier runs after each).
  KILN_RETURN_IF_ERROR(RunPasses(model, o.passes, po));
  // 4. Folding. Generated code cannot evaluate Shape & co at run time, so C and CUDA fold what
  //    the pipeline's fold-constants may have left; the host folds everything computable from
  //    constants whatever its size, since weights an exporter wrote as ConstantOfShape or Expand
  //    would otherwise be rebuilt on every run.
  if (host) {
    KILN_RETURN_IF_ERROR(FoldConstants(model, size_t{1} << 30));
  } else if (o.target != Target::kHost) {
    KILN_RETURN_IF_ERROR(FoldConstants(model));
  }
  // 5. Host: its fusions (one kernel where there were two or three, fewer intermediates; they
  //    round differently, by a few ulp).
  if (host) KILN_RETURN_IF_ERROR(RunPasses(model, HostFusions(), po));
  return OkStatus();
}

}  // namespace kiln::passes
