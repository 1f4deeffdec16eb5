#include "runtime/model_runner.h"

namespace kiln::runtime {

Expected<std::unique_ptr<ModelRunner>> ModelRunner::Create(ir::Model model,
                                                           const ExecutorOptions& options,
                                                           const std::vector<Dims>& input_dims) {
  std::unique_ptr<ModelRunner> r(new ModelRunner());
  if (!input_dims.empty() && !input_dims[0].empty() && input_dims[0][0] > kMinTileRows) {
    auto tiled = TiledRunner::Create(model, options, input_dims);
    if (tiled.ok() && (*tiled)->tile_rows() < input_dims[0][0]) r->tiled_ = std::move(*tiled);
  }
  if (!r->tiled_) {
    KILN_ASSIGN_OR_RETURN(r->exec_, Executor::Create(std::move(model), options));
  }
  return r;
}

}  // namespace kiln::runtime
