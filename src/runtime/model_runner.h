// A model ready to run on inputs of given dims: one executor for the whole batch or, where the
// inputs' leading dim is a batch of independent rows larger than a tile, tiles of rows through a
// tile's executor (runtime/batch_tiling.h). `kiln run`, `kiln bench` and the Python
// InferenceSession run models through it, so they give the same outputs.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "runtime/batch_tiling.h"
#include "runtime/executor.h"

namespace kiln::runtime {

// Batches up to this many rows always run whole; larger ones stream in tiles where the model
// allows.
constexpr int64_t kMinTileRows = 64;

class ModelRunner {
 public:
  // `input_dims`: the runtime inputs' full dims for the run (graph order), or empty where they are
  // not all known (then the model runs whole).
  static Expected<std::unique_ptr<ModelRunner>> Create(ir::Model model,
                                                       const ExecutorOptions& options,
                                                       const std::vector<Dims>& input_dims);
  // The executor of the whole batch, or of one tile.
  Executor& executor() { return tiled_ ? tiled_->tile_executor() : *exec_; }
  // Rows per tile; 0 when the batch runs whole.
  int64_t tile_rows() const { return tiled_ ? tiled_->tile_rows() : 0; }
  // progress(done_rows, total_rows) after each tile of a tiled run.
  Status Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs,
             const std::function<void(int64_t, int64_t)>& progress = {}) {
    return tiled_ ? tiled_->Run(inputs, outputs, progress) : exec_->Run(inputs, outputs);
  }

 private:
  ModelRunner() = default;
  std::unique_ptr<Executor> exec_;
  std::unique_ptr<TiledRunner> tiled_;
};

}  // namespace kiln::runtime
