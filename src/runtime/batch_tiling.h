// Streaming a batch through the host executor in tiles: when the leading dim of every runtime
// input is a batch of independent samples, a batch too large for one arena runs as tiles of rows,
// each through an executor planned for one tile (and one more for the remainder), the outputs
// copied into place. Memory is the inputs, the outputs and one tile's arena; the rows stay in
// cache between the layers of a tile.
//
// Independence is decided on the graph, never assumed: shapes are inferred at two batch sizes and
// a value carries the batch when its dims differ between them, which must be on axis 0 only and
// equal to the batch. Every node that reads a batch-carrying value must be an op that treats rows
// independently (element-wise, GEMMs on rows, convolutions and pooling over N, normalizations and
// softmax over other axes, shape ops that keep axis 0, ...) and write a batch-carrying output; ops
// that can mix rows without changing a shape are checked by their attributes (Softmax or
// LayerNormalization over axis 0, CumSum along it, BatchNormalization in training, seq-first
// RNNs, ...). Shape / Size of a batch-carrying value may only feed shape inputs. Subgraphs, and
// any op not known to be row-independent, make a model untileable.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/executor.h"

namespace kiln::runtime {

// Why `model` cannot stream its inputs' leading dim ("" when it can). `input_dims` are the runtime
// inputs' full dims for the run (graph order); each must have rank >= 1.
std::string BatchTilingRefusal(const ir::Model& model, const std::vector<Dims>& input_dims);

class TiledRunner {
 public:
  // The tile's rows: enough that one tile's arena is about `target_arena_bytes`, within
  // [min_rows, max_rows]. Fails when the model cannot be tiled (BatchTilingRefusal).
  static Expected<std::unique_ptr<TiledRunner>> Create(const ir::Model& model,
                                                       ExecutorOptions options,
                                                       const std::vector<Dims>& input_dims,
                                                       size_t target_arena_bytes = size_t{8} << 20);
  // Runs the whole batch; progress(done_rows, total_rows) after each tile when given.
  Status Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs,
             const std::function<void(int64_t, int64_t)>& progress = {});
  int64_t tile_rows() const { return tile_rows_; }
  // The executor of a full tile (its arena, plan, model and profile).
  Executor& tile_executor() { return *tile_; }

 private:
  TiledRunner() = default;
  ir::Model model_;
  ExecutorOptions options_;
  std::vector<Dims> input_dims_;
  int64_t tile_rows_ = 0, batch_ = 0;
  std::unique_ptr<Executor> tile_, rest_;
};

}  // namespace kiln::runtime
