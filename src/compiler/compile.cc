#include "compiler/compile.h"

#include "passes/fold_constants.h"
#include "passes/fuse_conv_global_pool.h"
#include "passes/fuse_pad_conv.h"
#include "passes/pipeline.h"
#include "passes/store_weights.h"

namespace kiln::compiler {

const std::vector<std::string>& HostFusions() {
  static const std::vector<std::string> kPasses = {
      "fuse-layernorm",  "fuse-groupnorm",      "fold-batchnorm", "fuse-channel-shuffle",
      "fuse-gelu",       "fuse-hardswish",      "fuse-swish",     "fuse-transpose-matmul",
      "fuse-matmul-add", "fuse-conv-activation"};
  return kPasses;
}

planner::PlanOptions TargetPlanOptions(const CompileOptions& o) {
  planner::PlanOptions po = o.plan;
  if (o.target == Target::kCuda) {
    // Every value is a per-thread slot, inputs and outputs too; one slot per colour.
    po = {};
    po.planner = "coloring";
    po.include_io = true;
  }
  // ops/conv.cc's FusedConv reads Z before it writes Y.
  if (o.target == Target::kHost) po.fused_conv_in_place = true;
  return po;
}

namespace {

// The lowering, in place: shape inference, the pipeline's passes and the target's own.
Status Lower(ir::Model& model, const CompileOptions& o) {
  const bool host = o.target == Target::kHost && o.host_passes;
  passes::PipelineOptions po;
  po.dump_ir_after = o.dump_ir_after;
  // 1. Every value's type and dims, with the caller's input dims.
  KILN_RETURN_IF_ERROR(passes::InferShapes(model, o.shapes));
  if (o.after_shapes) KILN_RETURN_IF_ERROR(o.after_shapes(model));
  // 2. Host and C: a QDQ model's Conv and MatMul on int8 arithmetic (int8 weights in flash for
  //    a microcontroller), before fold-constants turns the int8 weights into float.
  if (host || o.target == Target::kC)
    KILN_RETURN_IF_ERROR(passes::RunPasses(model, {"fuse-qdq"}, po));
  // 3. The pipeline's passes (the verifier runs after each).
  KILN_RETURN_IF_ERROR(passes::RunPasses(model, o.passes, po));
  // 4. Folding. Generated code cannot evaluate Shape & co at run time, so C and CUDA fold what
  //    the pipeline's fold-constants may have left; the host folds everything computable from
  //    constants whatever its size, since weights an exporter wrote as ConstantOfShape or Expand
  //    would otherwise be rebuilt on every run.
  if (host) {
    KILN_RETURN_IF_ERROR(passes::FoldConstants(model, size_t{1} << 30));
  } else if (o.target == Target::kC || o.target == Target::kCuda) {
    KILN_RETURN_IF_ERROR(passes::FoldConstants(model));
  }
  //    Then a zero Pad before a Conv becomes the Conv's own pads (exact; once pads are constant).
  if (host || o.target == Target::kC || o.target == Target::kCuda)
    KILN_RETURN_IF_ERROR(passes::FusePadConv(model).status());
  // 5. Host: its fusions (one kernel where there were two or three, fewer intermediates; they
  //    round differently, by a few ulp).
  if (host) {
    KILN_RETURN_IF_ERROR(passes::RunPasses(model, HostFusions(), po));
    // After fuse-conv-activation, whose FusedConv it takes in; not an action of the gym's.
    KILN_RETURN_IF_ERROR(passes::FuseConvGlobalPool(model).status());
  }
  return OkStatus();
}

// The plan of g and, recursively, of its subgraphs, into *program.
Status PlanGraphs(const ir::Graph& g, const CompileOptions& o, Program* program) {
  for (const ir::Node& node : g.nodes)
    for (const auto& [name, a] : node.attrs) {
      if (a.g) KILN_RETURN_IF_ERROR(PlanGraphs(*a.g, o, program));
      for (const auto& sg : a.graphs) KILN_RETURN_IF_ERROR(PlanGraphs(*sg, o, program));
    }
  GraphProgram gp;
  planner::PlanOptions po = TargetPlanOptions(o);
  // Host: the layouts first, since a Concat whose inputs interleave plans differently.
  if (o.target == Target::kHost) {
    gp.layout = ChooseHostLayout(g, o.channels_last, po.aliasing);
    po.concat_placement = gp.layout.concat_placement;
  }
  KILN_ASSIGN_OR_RETURN(gp.plan, planner::PlanGraph(g, po));
  if (o.target == Target::kHost) SettleConcats(g, gp.plan, &gp.layout);
  program->graphs[&g] = std::move(gp);
  return OkStatus();
}

// Strings live on the heap, which generated code has none of: C and CUDA refuse them.
Status CheckNoStrings(const ir::Graph& g, const char* target) {
  for (const ir::Value& v : g.values)
    if (v.type.dtype == DType::kString || (v.type.elem && v.type.elem->dtype == DType::kString) ||
        (v.constant && v.constant->is_string()))
      return Error("value '" + v.name +
                   "' is a string tensor: strings run on the host only, not "
                   "in --target " +
                   std::string(target));
  for (const ir::Node& node : g.nodes)
    for (const auto& [name, a] : node.attrs) {
      if (a.g) KILN_RETURN_IF_ERROR(CheckNoStrings(*a.g, target));
      for (const auto& sg : a.graphs) KILN_RETURN_IF_ERROR(CheckNoStrings(*sg, target));
    }
  return OkStatus();
}

}  // namespace

Expected<Program> Compile(ir::Model model, const CompileOptions& o) {
  Program program;
  program.target = o.target;
  // 1-5. Lowering.
  KILN_RETURN_IF_ERROR(Lower(model, o));
  if (o.target == Target::kC || o.target == Target::kCuda)
    KILN_RETURN_IF_ERROR(CheckNoStrings(*model.graph, o.target == Target::kC ? "c" : "cuda"));
  if (o.weight_storage != DType::kUndefined) {
    if (o.target != Target::kPipeline)
      return Error("narrow weight storage is for programs (.kiln); --target c has its own");
    KILN_RETURN_IF_ERROR(passes::StoreWeightsNarrow(model, o.weight_storage));
  }
  // 6. The target's own checks of what it was given to emit.
  if (o.before_plan) KILN_RETURN_IF_ERROR(o.before_plan(model));
  // 7. Every graph's schedule, buffers and offsets (and the host's layouts), with a search
  //    bounded by steps, not time: the same plan on every machine.
  program.model = std::move(model);
  KILN_RETURN_IF_ERROR(PlanGraphs(*program.model.graph, o, &program));
  return program;
}

}  // namespace kiln::compiler
