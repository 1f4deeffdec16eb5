#include <gtest/gtest.h>

#include <cmath>

#include "ir/graph.h"
#include "ir/half.h"
#include "ir/small_float.h"
#include "ir/subbyte.h"
#include "ir/tensor.h"

namespace kiln {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType t : {DType::kFloat32, DType::kInt64, DType::kBool, DType::kBFloat16}) {
    EXPECT_EQ(DTypeFromName(DTypeName(t)), t);
  }
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeFromName("NOPE"), DType::kUndefined);
}

constexpr DType kFloat8Kinds[] = {DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
                                  DType::kFloat8E5M2FNUZ};

// Every code decodes to a value that encodes back to it, with and without saturation (NaNs to
// the kind's NaN; E5M2's infinities stay infinite only without saturation).
TEST(Float8, EveryCodeRoundTrips) {
  for (DType t : kFloat8Kinds) {
    const bool uz = t == DType::kFloat8E4M3FNUZ || t == DType::kFloat8E5M2FNUZ;
    for (int code = 0; code < 256; ++code) {
      const float v = SmallFloatToFloat(t, static_cast<uint8_t>(code));
      for (bool saturate : {false, true}) {
        const uint8_t back = FloatToSmallFloat(t, v, saturate);
        if (std::isnan(v)) {
          EXPECT_TRUE(std::isnan(SmallFloatToFloat(t, back))) << DTypeName(t) << " " << code;
          if (uz) {
            EXPECT_EQ(back, 0x80);
          }
        } else if (std::isinf(v)) {
          EXPECT_EQ(t, DType::kFloat8E5M2);
          EXPECT_EQ(back, saturate ? (code & 0x80) | 0x7B : code) << code;
        } else {
          EXPECT_EQ(back, code) << DTypeName(t) << " " << code << " " << v;
        }
      }
    }
  }
}

TEST(Float8, RoundsToNearestEvenAndSaturatesAsCastSays) {
  const DType fn = DType::kFloat8E4M3FN, e5 = DType::kFloat8E5M2;
  const DType fnuz = DType::kFloat8E4M3FNUZ, e5uz = DType::kFloat8E5M2FNUZ;
  EXPECT_EQ(SmallFloatMax(fn), 448.0f);
  EXPECT_EQ(SmallFloatMax(fnuz), 240.0f);
  EXPECT_EQ(SmallFloatMax(e5), 57344.0f);
  EXPECT_EQ(SmallFloatMax(e5uz), 57344.0f);
  EXPECT_EQ(FloatToSmallFloat(fn, 448, false), 0x7E);
  EXPECT_EQ(FloatToSmallFloat(fn, 464, false), 0x7E);  // the tie between 448 and 480: even
  EXPECT_EQ(FloatToSmallFloat(fn, 465, true), 0x7E);
  EXPECT_EQ(FloatToSmallFloat(fn, 465, false), 0x7F);  // NaN
  EXPECT_EQ(FloatToSmallFloat(fn, -1e9, true), 0xFE);
  EXPECT_EQ(FloatToSmallFloat(fn, -INFINITY, true), 0xFE);
  EXPECT_EQ(FloatToSmallFloat(fn, INFINITY, false), 0x7F);
  EXPECT_EQ(FloatToSmallFloat(fn, std::ldexp(1.0, -9), true), 0x01);   // the smallest subnormal
  EXPECT_EQ(FloatToSmallFloat(fn, std::ldexp(1.0, -10), true), 0x00);  // half of it: even
  EXPECT_EQ(FloatToSmallFloat(fn, std::ldexp(3.0, -10), true), 0x02);  // 1.5 of it: even
  EXPECT_EQ(FloatToSmallFloat(fn, -0.0, true), 0x80);
  EXPECT_EQ(FloatToSmallFloat(fn, 1.0625, true), 0x38);  // 1 + 1/16: tie to 1.0
  EXPECT_EQ(FloatToSmallFloat(fn, 1.1875, true), 0x3A);  // 1 + 3/16: tie to 1.25
  EXPECT_EQ(FloatToSmallFloat(e5, 61440, false), 0x7C);  // past the max: inf
  EXPECT_EQ(FloatToSmallFloat(e5, 61440, true), 0x7B);
  EXPECT_EQ(FloatToSmallFloat(e5, -INFINITY, false), 0xFC);
  EXPECT_EQ(FloatToSmallFloat(e5, -INFINITY, true), 0xFB);
  EXPECT_EQ(FloatToSmallFloat(fnuz, -0.0, true), 0x00);  // no negative zero
  EXPECT_EQ(FloatToSmallFloat(fnuz, -INFINITY, true), 0xFF);
  EXPECT_EQ(FloatToSmallFloat(fnuz, INFINITY, false), 0x80);
  EXPECT_EQ(FloatToSmallFloat(e5uz, NAN, false), 0x80);
  EXPECT_EQ(FloatToSmallFloat(e5uz, 1e6, true), 0x7F);
  EXPECT_EQ(FloatToSmallFloat(e5uz, -1e6, false), 0x80);
  EXPECT_TRUE(std::isnan(SmallFloatToFloat(fnuz, 0x80)));
}

TEST(Float4, EveryCodeRoundTripsAndOverflowSaturates) {
  const DType t = DType::kFloat4E2M1;
  const float values[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int code = 0; code < 16; ++code) {
    EXPECT_EQ(SmallFloatToFloat(t, static_cast<uint8_t>(code)), values[code]) << code;
    EXPECT_EQ(FloatToSmallFloat(t, values[code], false), code);
  }
  EXPECT_EQ(SmallFloatMax(t), 6.0f);
  EXPECT_EQ(FloatToSmallFloat(t, 5.0, false), 0x6);  // the tie between 4 and 6: even
  EXPECT_EQ(FloatToSmallFloat(t, 1e6, false), 0x7);  // no infinity: saturates either way
  EXPECT_EQ(FloatToSmallFloat(t, -INFINITY, true), 0xF);
  EXPECT_EQ(FloatToSmallFloat(t, NAN, true), 0x8);   // no NaN: -0, as the ONNX reference
  EXPECT_EQ(FloatToSmallFloat(t, 0.25, true), 0x0);  // the tie between 0 and 0.5: even
}

TEST(Float8E8M0, PowersOfTwoRoundedByTheMode) {
  const DType t = DType::kFloat8E8M0;
  EXPECT_EQ(SmallFloatToFloat(t, 127), 1.0f);
  EXPECT_EQ(SmallFloatToFloat(t, 0), std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isnan(SmallFloatToFloat(t, 0xFF)));
  EXPECT_EQ(SmallFloatMax(t), std::ldexp(1.0f, 127));
  using R = E8M0Rounding;
  EXPECT_EQ(FloatToSmallFloat(t, 1.0, true, R::kUp), 127);
  EXPECT_EQ(FloatToSmallFloat(t, 1.1, true, R::kUp), 128);
  EXPECT_EQ(FloatToSmallFloat(t, 1.9, true, R::kDown), 127);
  EXPECT_EQ(FloatToSmallFloat(t, -3.0, true, R::kDown), 128);  // no sign: |x|
  EXPECT_EQ(FloatToSmallFloat(t, 1.4, true, R::kNearest), 127);
  EXPECT_EQ(FloatToSmallFloat(t, 1.6, true, R::kNearest), 128);
  EXPECT_EQ(FloatToSmallFloat(t, 1.5, true, R::kNearest), 128);  // a tie: the even exponent
  EXPECT_EQ(FloatToSmallFloat(t, 3.0, true, R::kNearest), 128);
  EXPECT_EQ(FloatToSmallFloat(t, 0.0, true, R::kUp), 0);
  EXPECT_EQ(FloatToSmallFloat(t, std::nan(""), true, R::kUp), 0xFF);
  EXPECT_EQ(FloatToSmallFloat(t, 3e38, true, R::kUp), 0xFE);  // 2^128 saturates
  EXPECT_EQ(FloatToSmallFloat(t, 3e38, false, R::kUp), 0xFF);
  EXPECT_EQ(FloatToSmallFloat(t, INFINITY, true, R::kDown), 0xFE);
}

TEST(SubByte, UnpacksLowBitsFirstAndWrapsAsCast) {
  const uint8_t packed[] = {0x87, 0x1F};  // INT4: 7, -8, -1, 1
  uint8_t out[4];
  UnpackSubByte(DType::kInt4, packed, 4, out);
  EXPECT_EQ(static_cast<int8_t>(out[0]), 7);
  EXPECT_EQ(static_cast<int8_t>(out[1]), -8);
  EXPECT_EQ(static_cast<int8_t>(out[2]), -1);
  EXPECT_EQ(static_cast<int8_t>(out[3]), 1);
  UnpackSubByte(DType::kUInt4, packed, 3, out);
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[1], 8);
  EXPECT_EQ(out[2], 15);
  const uint8_t two[] = {0xE4};  // UINT2: 0, 1, 2, 3; INT2: 0, 1, -2, -1
  UnpackSubByte(DType::kUInt2, two, 4, out);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], i);
  UnpackSubByte(DType::kInt2, two, 4, out);
  EXPECT_EQ(static_cast<int8_t>(out[2]), -2);
  EXPECT_EQ(static_cast<int8_t>(out[3]), -1);
  EXPECT_EQ(PackedBytes(DType::kInt4, 5), 3);
  EXPECT_EQ(PackedBytes(DType::kInt2, 5), 2);
  EXPECT_EQ(WrapToSubByte(DType::kInt4, -9), 7);
  EXPECT_EQ(WrapToSubByte(DType::kInt4, 8), -8);
  EXPECT_EQ(WrapToSubByte(DType::kUInt4, 17), 1);
  EXPECT_EQ(WrapToSubByte(DType::kInt2, 2), -2);
  EXPECT_EQ(WrapToSubByte(DType::kUInt2, -1), 3);
  int64_t lo, hi;
  SubByteIntRange(DType::kInt4, &lo, &hi);
  EXPECT_EQ(lo, -8);
  EXPECT_EQ(hi, 7);
  SubByteIntRange(DType::kUInt2, &lo, &hi);
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 3);
}

TEST(Half, RoundTripsRepresentableValues) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f}) {
    EXPECT_EQ(static_cast<float>(Float16(f)), f) << f;
  }
  EXPECT_TRUE(std::isinf(static_cast<float>(Float16(1e6f))));
  EXPECT_TRUE(std::isnan(static_cast<float>(Float16(NAN))));
  // Round to nearest even: 1 + 2^-11 is halfway between 1 and the next half.
  EXPECT_EQ(static_cast<float>(Float16(1.0f + 1.0f / 2048)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(3.140625f)), 3.140625f);
}

TEST(Tensor, OwnsViewsAndClones) {
  Tensor t(DType::kFloat32, {2, 3});
  EXPECT_EQ(t.size(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  t.data<float>()[4] = 7.0f;
  Tensor r = t.Reshaped({3, 2});
  EXPECT_EQ(r.data<float>()[4], 7.0f);  // shares bytes
  Tensor c = t.Clone();
  c.data<float>()[4] = 1.0f;
  EXPECT_EQ(t.data<float>()[4], 7.0f);
  Tensor s = Tensor::Sequence(DType::kFloat32, {t, c});
  EXPECT_TRUE(s.is_sequence());
  EXPECT_EQ(s.items().size(), 2u);
  EXPECT_TRUE(Tensor::None().defined());
}

TEST(Graph, VerifyRejectsUseBeforeDefinition) {
  ir::Graph g;
  int a = g.AddValue("a", ir::TypeInfo::Tensor(DType::kFloat32, {1}));
  int b = g.AddValue("b");
  int c = g.AddValue("c");
  g.inputs = {a};
  ir::Node n1;
  n1.op_type = "Relu";
  n1.name = "second";
  n1.inputs = {b};
  n1.outputs = {c};
  ir::Node n0;
  n0.op_type = "Relu";
  n0.name = "first";
  n0.inputs = {a};
  n0.outputs = {b};
  g.nodes = {n1, n0};
  g.values[b].producer = 1;
  g.values[c].producer = 0;
  g.outputs = {c};
  Status st = ir::Verify(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("node 'second'"), std::string::npos) << st.message();
  auto order = g.TopologicalOrder();
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(*order, (std::vector<int>{1, 0}));
}

TEST(Graph, TopologicalOrderFindsCycles) {
  ir::Graph g;
  int a = g.AddValue("a");
  int b = g.AddValue("b");
  ir::Node n0, n1;
  n0.op_type = n1.op_type = "Relu";
  n0.name = "x";
  n1.name = "y";
  n0.inputs = {b};
  n0.outputs = {a};
  n1.inputs = {a};
  n1.outputs = {b};
  g.values[a].producer = 0;
  g.values[b].producer = 1;
  g.nodes = {n0, n1};
  auto order = g.TopologicalOrder();
  ASSERT_FALSE(order.ok());
  EXPECT_NE(order.status().message().find("cycle"), std::string::npos);
}

TEST(Graph, PrinterShowsNodesAndTypes) {
  ir::Model m;
  m.opsets[""] = 17;
  m.graph = std::make_shared<ir::Graph>();
  ir::Graph& g = *m.graph;
  int a = g.AddValue("x", ir::TypeInfo::Tensor(DType::kFloat32, {2, 3}));
  int b = g.AddValue("y", ir::TypeInfo::Tensor(DType::kFloat32, {2, 3}));
  g.inputs = {a};
  ir::Node n;
  n.op_type = "Relu";
  n.name = "act";
  n.inputs = {a};
  n.outputs = {b};
  g.nodes.push_back(n);
  g.values[b].producer = 0;
  g.outputs = {b};
  std::string text = ir::PrintModel(m);
  EXPECT_NE(text.find("%y: FLOAT[2,3] = Relu(%x)"), std::string::npos) << text;
  EXPECT_NE(text.find("ai.onnx:17"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln
