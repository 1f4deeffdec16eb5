// Attention's geometry and attributes (opset 23/24), read and checked once from the node and its
// input dims: the plan the host kernel (ops/matmul_attention.cc) and the C emitter (codegen/c) both
// read. Inputs are [B, heads, seq, head_size] (4-D) or [B, seq, heads * head_size] (3-D, with
// q_num_heads / kv_num_heads).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::ops {

struct AttentionShape {
  bool is3d = false;
  // Batch, query and key-value heads, query and new key lengths, past length, total key length
  // (P + Skv), and the head sizes of Q / K and of V.
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Skv = 0, P = 0, T = 0, D = 0, Dv = 0;
  Dims mask;  // attn_mask dims, empty if none
  // The attributes: which stage of the scores output 3 holds (0..3), the causal mask, the scale
  // of Q K^T (1 / sqrt(D) unless given) and the soft cap (0: none).
  int64_t qk_output_mode = 0;
  bool causal = false;
  double scale = 1, softcap = 0;
};

// in: the dims of inputs 0..6 (null where absent). "" or what is malformed.
std::string MakeAttentionShape(const ir::Node& n, const std::vector<const Dims*>& in,
                               AttentionShape* s);

}  // namespace kiln::ops
