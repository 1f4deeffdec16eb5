#include <gtest/gtest.h>

#include <cmath>

#include "ir/float8.h"
#include "ir/graph.h"
#include "ir/half.h"
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
      const float v = Float8ToFloat(t, static_cast<uint8_t>(code));
      for (bool saturate : {false, true}) {
        const uint8_t back = FloatToFloat8(t, v, saturate);
        if (std::isnan(v)) {
          EXPECT_TRUE(std::isnan(Float8ToFloat(t, back))) << DTypeName(t) << " " << code;
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
  EXPECT_EQ(Float8Max(fn), 448.0f);
  EXPECT_EQ(Float8Max(fnuz), 240.0f);
  EXPECT_EQ(Float8Max(e5), 57344.0f);
  EXPECT_EQ(Float8Max(e5uz), 57344.0f);
  EXPECT_EQ(FloatToFloat8(fn, 448, false), 0x7E);
  EXPECT_EQ(FloatToFloat8(fn, 464, false), 0x7E);  // the tie between 448 and 480: even
  EXPECT_EQ(FloatToFloat8(fn, 465, true), 0x7E);
  EXPECT_EQ(FloatToFloat8(fn, 465, false), 0x7F);  // NaN
  EXPECT_EQ(FloatToFloat8(fn, -1e9, true), 0xFE);
  EXPECT_EQ(FloatToFloat8(fn, -INFINITY, true), 0xFE);
  EXPECT_EQ(FloatToFloat8(fn, INFINITY, false), 0x7F);
  EXPECT_EQ(FloatToFloat8(fn, std::ldexp(1.0, -9), true), 0x01);   // the smallest subnormal
  EXPECT_EQ(FloatToFloat8(fn, std::ldexp(1.0, -10), true), 0x00);  // half of it: even
  EXPECT_EQ(FloatToFloat8(fn, std::ldexp(3.0, -10), true), 0x02);  // 1.5 of it: even
  EXPECT_EQ(FloatToFloat8(fn, -0.0, true), 0x80);
  EXPECT_EQ(FloatToFloat8(fn, 1.0625, true), 0x38);  // 1 + 1/16: tie to 1.0
  EXPECT_EQ(FloatToFloat8(fn, 1.1875, true), 0x3A);  // 1 + 3/16: tie to 1.25
  EXPECT_EQ(FloatToFloat8(e5, 61440, false), 0x7C);  // past the max: inf
  EXPECT_EQ(FloatToFloat8(e5, 61440, true), 0x7B);
  EXPECT_EQ(FloatToFloat8(e5, -INFINITY, false), 0xFC);
  EXPECT_EQ(FloatToFloat8(e5, -INFINITY, true), 0xFB);
  EXPECT_EQ(FloatToFloat8(fnuz, -0.0, true), 0x00);  // no negative zero
  EXPECT_EQ(FloatToFloat8(fnuz, -INFINITY, true), 0xFF);
  EXPECT_EQ(FloatToFloat8(fnuz, INFINITY, false), 0x80);
  EXPECT_EQ(FloatToFloat8(e5uz, NAN, false), 0x80);
  EXPECT_EQ(FloatToFloat8(e5uz, 1e6, true), 0x7F);
  EXPECT_EQ(FloatToFloat8(e5uz, -1e6, false), 0x80);
  EXPECT_TRUE(std::isnan(Float8ToFloat(fnuz, 0x80)));
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
