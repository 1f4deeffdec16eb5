// Runs the kiln binary the way users do and checks exit codes and one-line error messages.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "frontend/npy.h"
#include "support/file_io.h"
#include "cli_fixture.h"
#include "test_models.h"

namespace kiln {
namespace {

TEST_F(CliTest, HelpForEveryVerb) {
  for (const char* verb : {"run", "bench", "test-onnx", "inspect", "convert", "plan", "compile"}) {
    Result r = RunKiln(std::string(verb) + " --help");
    EXPECT_EQ(r.code, 0) << verb;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << verb;
  }
}

TEST_F(CliTest, MalformedModelFiles) {
  std::string good = testing::AddReluModel().SerializeAsString();
  ExpectUserError("run " + file("missing.onnx"), "cannot open");
  Write("trunc.onnx", good.substr(0, good.size() - 7));
  ExpectUserError("run " + file("trunc.onnx"), "trunc.onnx");
  Write("magic.onnx", "\x89PNG\r\n\x1a\n not a model");
  ExpectUserError("inspect " + file("magic.onnx"), "magic.onnx");
  Write("bad.json", "{\"graph\": {\"node\": [}");
  ExpectUserError("run " + file("bad.json"), "not valid JSON");
  auto cyc = testing::AddReluModel();
  cyc.mutable_graph()->mutable_node(0)->set_input(0, "y");
  Write("cycle.onnx", cyc.SerializeAsString());
  ExpectUserError("run " + file("cycle.onnx"), "cycle");
  auto unk = testing::AddReluModel();
  unk.mutable_graph()->mutable_node(1)->set_op_type("FrobnicateV9");
  Write("unknown.onnx", unk.SerializeAsString());
  ExpectUserError("run " + file("unknown.onnx"), "unsupported operator FrobnicateV9");
}

TEST_F(CliTest, MissingOrOutOfRangeWeights) {
  Write("m.onnx", testing::AddReluModel().SerializeAsString());
  ASSERT_EQ(RunKiln("convert " + file("m.onnx") + " --to json --weights " + file("m.safetensors") +
                " -o " + file("m.json")).code, 0);
  ExpectUserError("run " + file("m.json"), "no --weights");
  ExpectUserError("run " + file("m.json") + " --weights " + file("nope.safetensors"), "cannot open");
  auto st = ReadFile(file("m.safetensors"));
  ASSERT_TRUE(st.ok());
  Write("short.safetensors", st->substr(0, st->size() - 4));
  ExpectUserError("run " + file("m.json") + " --weights " + file("short.safetensors"), "outside");
}

TEST_F(CliTest, BadInputsAndShapes) {
  Write("m.onnx", testing::AddReluModel(4).SerializeAsString());
  Tensor wrong(DType::kFloat32, {5});
  Write("wrong.npy", frontend::SerializeNpy(wrong));
  ExpectUserError("run " + file("m.onnx") + " --input x=" + file("wrong.npy"), "expected shape");
  Tensor ints(DType::kInt32, {4});
  Write("ints.npy", frontend::SerializeNpy(ints));
  ExpectUserError("run " + file("m.onnx") + " --input x=" + file("ints.npy"), "expected FLOAT");
  Write("junk.npy", "definitely not numpy");
  ExpectUserError("run " + file("m.onnx") + " --input x=" + file("junk.npy"), "bad magic");
  ExpectUserError("run " + file("m.onnx") + " --input nothere=" + file("junk.npy"), "no input of that name");
  ExpectUserError("run " + file("m.onnx") + " --shape x=4,a", "not a dimension");
  ExpectUserError("run " + file("m.onnx") + " --shape q=4", "no input of that name");
  ExpectUserError("run " + file("m.onnx") + " --shape x=4,4", "rank");
}

// Checks a `kiln plan --json` answer from its buffers list alone: every buffer inside the arena,
// and no two buffers that are live together overlap unless one shares the other's bytes by
// design (alias_of, followed to the root).
void CheckPlanJson(const std::string& json_text, const std::string& what) {
  auto j = nlohmann::json::parse(json_text);
  ASSERT_TRUE(j.contains("arena_bytes") && j.contains("lower_bound_bytes") && j.contains("planner"));
  const auto& bufs = j["buffers"];
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < bufs.size(); ++i) index[bufs[i]["name"].get<std::string>()] = i;
  auto root = [&](size_t i) {
    for (int steps = 0; !bufs[i]["alias_of"].is_null() && steps < 1000; ++steps)
      i = index.at(bufs[i]["alias_of"].get<std::string>());
    return i;
  };
  size_t arena = j["arena_bytes"].get<size_t>();
  EXPECT_GE(arena, j["lower_bound_bytes"].get<size_t>()) << what;
  for (size_t a = 0; a < bufs.size(); ++a) {
    size_t ao = bufs[a]["offset"], as = bufs[a]["size"];
    EXPECT_LE(ao + as, arena) << what << " " << bufs[a]["name"];
    for (size_t b = a + 1; b < bufs.size(); ++b) {
      if (root(a) == root(b)) continue;
      int af = bufs[a]["first_use"], al = bufs[a]["last_use"];
      int bf = bufs[b]["first_use"], bl = bufs[b]["last_use"];
      if (af > bl || bf > al) continue;
      size_t bo = bufs[b]["offset"], bs = bufs[b]["size"];
      EXPECT_TRUE(ao + as <= bo || bo + bs <= ao)
          << what << ": " << bufs[a]["name"] << " and " << bufs[b]["name"] << " overlap";
    }
  }
}

TEST_F(CliTest, PlansHaveNoOverlapFromTheBuffersListAlone) {
  std::vector<std::string> models = {std::string(KILN_SOURCE_DIR) + "/models/kws_cnn.onnx",
                                     std::string(KILN_SOURCE_DIR) + "/models/mlp_field.onnx --shape xyz=256,3"};
  std::string zoo = std::string(KILN_SOURCE_DIR) + "/../shared/conformance/onnx-light/";
  for (const char* m : {"test_inception_v1", "test_densenet121", "test_resnet50", "test_shufflenet"})
    if (fs::exists(zoo + m)) models.push_back(zoo + m + "/model.onnx");
  for (const auto& m : models) {
    for (const char* planner : {"default", "tflm", "coloring", "greedy-conflicts"}) {
      Result r = RunKiln("plan " + m + " --json --planner " + planner);
      ASSERT_EQ(r.code, 0) << m << ": " << r.err;
      CheckPlanJson(r.out, m + " " + planner);
    }
  }
  Result io = RunKiln("plan " + models[0] + " --json --include-io");
  ASSERT_EQ(io.code, 0) << io.err;
  CheckPlanJson(io.out, "include-io");
  auto ij = nlohmann::json::parse(io.out);
  bool has_input = false, has_output = false;
  for (const auto& b : ij["buffers"]) {
    has_input = has_input || (b["name"] == "mfcc" && b["first_use"] == 0);
    has_output = has_output || (b["name"] == "probs" && b["last_use"] == ij["schedule"].size());
  }
  EXPECT_TRUE(has_input && has_output) << io.out.substr(0, 400);
  Result svg = RunKiln("plan " + models[0] + " --svg " + file("plan.svg"));
  ASSERT_EQ(svg.code, 0);
  auto text = ReadFile(file("plan.svg"));
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("<svg"), std::string::npos);
  EXPECT_NE(text->find("conv1"), std::string::npos);
  ExpectUserError("plan " + models[0] + " --planner magic", "unknown planner 'magic'");
}

TEST_F(CliTest, ShippedModelRunsFromOnnxAndFromJson) {
  std::string model = std::string(KILN_SOURCE_DIR) + "/models/kws_cnn.onnx";
  Result a = RunKiln("run " + model + " --output-dir " + file("a"));
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(RunKiln("convert " + model + " --to json --weights " + file("k.safetensors") + " -o " +
                    file("k.json")).code, 0);
  Result b = RunKiln("run " + file("k.json") + " --weights " + file("k.safetensors") +
                     " --output-dir " + file("b"));
  ASSERT_EQ(b.code, 0) << b.err;
  auto x = frontend::LoadNpyFile(file("a/output_0.npy"));
  auto y = frontend::LoadNpyFile(file("b/output_0.npy"));
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_EQ(x->dims(), (Dims{1, 12}));
  EXPECT_EQ(std::memcmp(x->raw(), y->raw(), x->nbytes()), 0);
  auto names = ReadFile(file("a/outputs.json"));
  ASSERT_TRUE(names.ok());
  EXPECT_NE(names->find("\"probs\""), std::string::npos);
}

}  // namespace
}  // namespace kiln
