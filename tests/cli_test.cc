// Runs the kiln binary the way users do and checks exit codes and one-line error messages.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "frontend/npy.h"
#include "passes/pipeline.h"
#include "support/file_io.h"
#include "test_models.h"

namespace kiln {
namespace {

TEST_F(CliTest, HelpForEveryVerb) {
  for (const char* verb :
       {"run", "bench", "test-onnx", "inspect", "convert", "plan", "ops", "compile"}) {
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
                    " -o " + file("m.json"))
                .code,
            0);
  ExpectUserError("run " + file("m.json"), "no --weights");
  ExpectUserError("run " + file("m.json") + " --weights " + file("nope.safetensors"),
                  "cannot open");
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
  ExpectUserError("run " + file("m.onnx") + " --input nothere=" + file("junk.npy"),
                  "no input of that name");
  ExpectUserError("run " + file("m.onnx") + " --shape x=4,a", "not a dimension");
  ExpectUserError("run " + file("m.onnx") + " --shape q=4", "no input of that name");
  ExpectUserError("run " + file("m.onnx") + " --shape x=4,4", "rank");
}

// Checks a `kiln plan --json` answer from its buffers list alone: every buffer inside the arena,
// and no two buffers that are live together overlap unless one shares the other's bytes by
// design (alias_of, followed to the root).
void CheckPlanJson(const std::string& json_text, const std::string& what) {
  auto j = nlohmann::json::parse(json_text);
  ASSERT_TRUE(j.contains("arena_bytes") && j.contains("lower_bound_bytes") &&
              j.contains("planner"));
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
  std::vector<std::string> models = {
      std::string(KILN_SOURCE_DIR) + "/models/kws_cnn.onnx",
      std::string(KILN_SOURCE_DIR) + "/models/mlp_field.onnx --shape xyz=256,3"};
  std::string zoo = std::string(KILN_SOURCE_DIR) + "/../shared/conformance/onnx-light/";
  for (const char* m :
       {"test_inception_v1", "test_densenet121", "test_resnet50", "test_shufflenet"})
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

// `kiln plan --target T` reports the plan that target runs: the workspace the generated C
// declares, and the arena the host executor allocates.
TEST_F(CliTest, PlanForATargetIsThePlanItEmits) {
  const std::string node = std::string(KILN_SOURCE_DIR) + "/../shared/conformance/onnx-node/";
  std::vector<std::string> models = {
      std::string(KILN_SOURCE_DIR) + "/models/kws_cnn.onnx",
      std::string(KILN_SOURCE_DIR) + "/models/mlp_field.onnx --shape xyz=16,3"};
  // Scratch (recurrences, Det), subgraphs (If, Scan), strided convolutions, a zoo model.
  for (const char* m :
       {"test_lstm_defaults", "test_gru_with_initial_bias", "test_if", "test_scan9_sum",
        "test_conv_with_strides_padding", "test_det_2d", "test_einsum_batch_matmul"})
    if (fs::exists(node + m)) models.push_back(node + m + "/model.onnx");
  const std::string zoo = std::string(KILN_SOURCE_DIR) + "/../shared/conformance/onnx-light/";
  if (fs::exists(zoo + "test_squeezenet")) models.push_back(zoo + "test_squeezenet/model.onnx");
  for (const auto& m : models) {
    Result c = RunKiln("plan " + m + " --target c --json");
    ASSERT_EQ(c.code, 0) << m << ": " << c.err;
    CheckPlanJson(c.out, m + " --target c");
    auto cj = nlohmann::json::parse(c.out);
    EXPECT_EQ(cj["target"], "c");
    EXPECT_GE(cj["workspace_bytes"].get<size_t>(), cj["arena_bytes"].get<size_t>()) << m;
    fs::remove_all(file("gen"));
    Result gen = RunKiln("compile " + m + " --target c --name net --out " + file("gen"));
    ASSERT_EQ(gen.code, 0) << m << ": " << gen.err;
    auto header = ReadFile(file("gen/net.h"));
    ASSERT_TRUE(header.ok());
    const std::string define = "#define KILN_NET_WORKSPACE_SIZE ";
    size_t at = header->find(define);
    ASSERT_NE(at, std::string::npos) << m;
    EXPECT_EQ(std::stoull(header->substr(at + define.size())), cj["workspace_bytes"].get<size_t>())
        << m;

    Result h = RunKiln("plan " + m + " --target host --json");
    ASSERT_EQ(h.code, 0) << m << ": " << h.err;
    CheckPlanJson(h.out, m + " --target host");
    Result bench = RunKiln("bench " + m + " --iterations 1");
    ASSERT_EQ(bench.code, 0) << m << ": " << bench.err;
    EXPECT_EQ(nlohmann::json::parse(h.out)["arena_bytes"],
              nlohmann::json::parse(bench.out)["arena_bytes"])
        << m;
  }
  Result cu = RunKiln("plan " + models[0] + " --target cuda --json");
  ASSERT_EQ(cu.code, 0) << cu.err;
  CheckPlanJson(cu.out, "kws_cnn --target cuda");
  bool has_input = false;  // the CUDA plan gives inputs and outputs slots too
  auto cj = nlohmann::json::parse(cu.out);
  for (const auto& b : cj["buffers"]) has_input = has_input || b["name"] == "mfcc";
  EXPECT_TRUE(has_input);
  ExpectUserError("plan " + models[0] + " --target cuda --include-io", "--include-io goes with");
  ExpectUserError("plan " + models[0] + " --target gpu", "--target");
}

TEST_F(CliTest, ShippedModelRunsFromOnnxAndFromJson) {
  std::string model = std::string(KILN_SOURCE_DIR) + "/models/kws_cnn.onnx";
  Result a = RunKiln("run " + model + " --output-dir " + file("a"));
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(RunKiln("convert " + model + " --to json --weights " + file("k.safetensors") + " -o " +
                    file("k.json"))
                .code,
            0);
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

std::string Model(const std::string& name) {
  return std::string(KILN_SOURCE_DIR) + "/models/" + name;
}

// A `kiln serve` started in the background, stopped (SIGTERM) when the object goes.
class BackgroundServe {
 public:
  BackgroundServe(const std::string& args, const std::string& err_file) : err_file_(err_file) {
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 2);
      std::string cmd = std::string("exec ") + KILN_BINARY + " serve " + args;
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~BackgroundServe() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  // The address from "kiln serve: listening on ADDRESS" (empty when it did not start in 60 s).
  std::string Address() {
    for (int i = 0; i < 600; ++i) {
      auto text = ReadFile(err_file_);
      const std::string tag = "listening on ";
      if (text.ok() && text->find(tag) != std::string::npos) {
        std::string rest = text->substr(text->find(tag) + tag.size());
        return rest.substr(0, rest.find('\n'));
      }
      usleep(100000);
    }
    return "";
  }

 private:
  std::string err_file_;
  pid_t pid_ = -1;
};

TEST_F(CliTest, TwoServicesNeverShareAnAddress) {
  BackgroundServe first("--address 127.0.0.1:0", file("first.err"));
  const std::string address = first.Address();
  ASSERT_FALSE(address.empty()) << *ReadFile(file("first.err"));
  Result r = RunKiln("serve --address " + address, "", 60);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("kiln: --address " + address + ": cannot listen there"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // A unix socket a service listens on is not taken over either; a stale one is reused.
  BackgroundServe unix_first("--address unix:" + file("gym.sock"), file("unix.err"));
  ASSERT_FALSE(unix_first.Address().empty()) << *ReadFile(file("unix.err"));
  r = RunKiln("serve --address unix:" + file("gym.sock"), "", 60);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("in use"), std::string::npos) << r.err;
  Write("not_a_socket", "data");
  ExpectUserError("serve --address unix:" + file("not_a_socket"), "is not a socket");
  EXPECT_EQ(*ReadFile(file("not_a_socket")), "data");
}

TEST_F(CliTest, OptionErrorsAreOneKilnLine) {
  const std::string m = Model("kws_cnn.onnx");
  const std::pair<std::string, std::string> cases[] = {
      {"run " + m + " --threads 0",
       "kiln: --threads: '0' is not allowed; give an integer from 1 to 64 (kiln run --help)"},
      {"run " + m + " --threads abc", "--threads: 'abc' is not allowed"},
      {"run " + m + " --threads -1", "--threads"},
      {"run " + m + " --threads 100000",
       "--threads: '100000' is not allowed; give an integer from 1 to 64"},
      {"bench " + m + " --iterations 0", "--iterations: '0' is not allowed"},
      {"test-onnx " + file("") + " --rtol -1", "--rtol"},
      {"verify " + file("x.bpte") + " --atol nan",
       "--atol: 'nan' is not allowed; give a number >= 0"},
      {"compile " + m + " --target fortran --name k --out " + file("o"),
       "--target: 'fortran' is not allowed"},
      {"frobnicate", "kiln: unknown verb 'frobnicate'; the verbs are run, bench"},
      {"", "kiln: no verb given"},
      {"run", "MODEL"},
      {"run " + m + " --bogus", "kiln: unexpected argument '--bogus' (kiln run --help"},
  };
  for (const auto& [args, want] : cases) {
    Result r = RunKiln(args);
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_EQ(r.err.rfind("kiln", 0), 0u) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  }
  Result ok = RunKiln("bench " + m + " --threads 2 --iterations 1");
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(nlohmann::json::parse(ok.out)["threads"], 2);
}

TEST_F(CliTest, FindingAModelsInputs) {
  const std::string mlp = Model("mlp_field.onnx");
  ExpectUserError("run " + mlp + " --shape xyz=99999999999999999999999,3",
                  "dimension 99999999999999999999999 of input 'xyz' is out of range");
  ExpectUserError("run " + mlp + " --shape xyz=4398046511105,3", "out of range");
  Write("m.onnx", testing::AddReluModel(4).SerializeAsString());
  Tensor x = Tensor::FromVector<float>(DType::kFloat32, {4}, {-1, 0, 1, 2});
  Write("x.npy", frontend::SerializeNpy(x));
  ExpectUserError("run " + file("m.onnx") + " --input nothere=" + file("x.npy"),
                  "--input nothere: the model has no input of that name; its inputs are x (");
  ExpectUserError("run " + file("m.onnx") + " --shape q=4",
                  "--shape q: the model has no input of that name; its inputs are x (");
  // The only input needs no name.
  Result r = RunKiln("run " + file("m.onnx") + " --input " + file("x.npy") + " --output-dir " +
                     file("bare"));
  ASSERT_EQ(r.code, 0) << r.err;
  Result named = RunKiln("run " + file("m.onnx") + " --input x=" + file("x.npy") +
                         " --output-dir " + file("named"));
  ASSERT_EQ(named.code, 0) << named.err;
  EXPECT_EQ(*ReadFile(file("bare/output_0.npy")), *ReadFile(file("named/output_0.npy")));
  ASSERT_EQ(
      RunKiln("bundle " + file("m.onnx") + " --input " + file("x.npy") + " -o " + file("m.bpte"))
          .code,
      0);
  // Several inputs: a bare FILE is refused with the list.
  auto two = testing::AddReluModel(4);
  two.mutable_graph()->mutable_initializer()->Clear();
  *two.mutable_graph()->add_input() = testing::FloatInfo("w", {4});
  Write("two.onnx", two.SerializeAsString());
  ExpectUserError("run " + file("two.onnx") + " --input " + file("x.npy"),
                  "the model has 2 inputs; give NAME=FILE");
  // inspect lists inputs and outputs for every format, and as JSON.
  ASSERT_EQ(
      RunKiln("compile " + file("m.onnx") + " --target program --name m --out " + file("p")).code,
      0);
  for (const std::string& f : {file("m.onnx"), file("p/m.kiln"), file("m.bpte")}) {
    Result s = RunKiln("inspect " + f + " --summary");
    ASSERT_EQ(s.code, 0) << f << s.err;
    EXPECT_NE(s.out.find("input  'x': "), std::string::npos) << f << "\n" << s.out;
    EXPECT_NE(s.out.find("output 'y': "), std::string::npos) << f << "\n" << s.out;
    Result j = RunKiln("inspect " + f + " --json");
    ASSERT_EQ(j.code, 0) << f << j.err;
    auto doc = nlohmann::json::parse(j.out);
    EXPECT_EQ(doc["inputs"][0]["name"], "x") << f;
    EXPECT_EQ(doc["inputs"][0]["dims"], nlohmann::json::array({4})) << f;
    EXPECT_EQ(doc["outputs"][0]["name"], "y") << f;
    EXPECT_EQ(doc["ops"]["Relu"], 1) << f;
  }
  Result sym = RunKiln("inspect " + mlp + " --json");
  ASSERT_EQ(sym.code, 0) << sym.err;
  auto dims = nlohmann::json::parse(sym.out)["inputs"][0]["dims"];
  EXPECT_TRUE(dims[0].is_string() || dims[0].is_null()) << dims;
}

TEST_F(CliTest, OutputsGoWhereTheySay) {
  fs::create_directories(file("work"));
  Result r = RunKiln("run " + Model("kws_cnn.onnx"), file("work"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote output_0.npy and outputs.json to " + file("work")), std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(file("work/output_0.npy")));
  // convert without -o writes into the current folder, not next to the model.
  fs::create_directories(file("src"));
  Write("src/m.onnx", testing::AddReluModel(4).SerializeAsString());
  r = RunKiln("convert " + file("src/m.onnx") + " --to json --weights w.safetensors", file("work"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(file("work/m.json")));
  EXPECT_FALSE(fs::exists(file("src/m.json")));
  EXPECT_NE(r.out.find(file("work/m.json")), std::string::npos) << r.out;
  // A folder without tests is an error.
  fs::create_directories(file("empty/sub"));
  ExpectUserError("test-onnx " + file("empty"), "no tests found under " + file("empty"));
}

// Generated files name the model by file name and SHA-256 and record path arguments by their
// file names: the same command from two folders, by absolute and by relative paths, writes the
// same bytes, and no folder of this machine appears in them.
TEST_F(CliTest, GeneratedCodeDoesNotDependOnTheFolder) {
  for (const char* sub : {"one", "two/deeper"}) fs::create_directories(file(sub));
  fs::copy_file(Model("mlp_field.onnx"), file("one/m.onnx"));
  fs::copy_file(Model("mlp_field.onnx"), file("two/deeper/m.onnx"));
  for (const char* target : {"c", "cuda"}) {
    const std::string args =
        std::string(" --shape xyz=1,3 --target ") + target + " --name relu --out gen";
    Result a = RunKiln("compile " + file("one/m.onnx") + args, file("one"));
    Result b = RunKiln("compile m.onnx" + args, file("two/deeper"));
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(b.code, 0) << b.err;
    int files = 0;
    for (const auto& e : fs::directory_iterator(file("one/gen"))) {
      auto x = ReadFile(e.path().string());
      auto y = ReadFile(file("two/deeper/gen/") + e.path().filename().string());
      ASSERT_TRUE(x.ok() && y.ok()) << e.path();
      EXPECT_EQ(*x, *y) << e.path();
      EXPECT_EQ(x->find(dir_.string()), std::string::npos) << e.path();
      ++files;
    }
    EXPECT_GE(files, 2) << target;
    auto header = ReadFile(file("one/gen/relu.h"));
    ASSERT_TRUE(header.ok());
    EXPECT_NE(header->find("model:   m.onnx (sha256 "), std::string::npos) << *header;
    fs::remove_all(file("one/gen"));
    fs::remove_all(file("two/deeper/gen"));
  }
}

// kiln ops: every op with the backends that run it; --backend lists one backend's ops; --json.
TEST_F(CliTest, OpsListsWhatEachBackendRuns) {
  Result r = RunKiln("ops");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\nRelu "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" ops: host "), std::string::npos);
  for (const char* backend : {"host", "c", "cuda"}) {
    r = RunKiln(std::string("ops --backend ") + backend);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(("\n" + r.out).find("\nMatMul\n"), std::string::npos) << backend;
  }
  r = RunKiln("ops --backend cuda");
  EXPECT_EQ(("\n" + r.out).find("\nLoop\n"), std::string::npos);  // not in the CUDA emitter
  r = RunKiln("ops --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"op\": \"Relu\""), std::string::npos);
  ExpectUserError("ops --backend gpu", "--backend");
}

// What tune prints is what it writes, and it never writes a pipeline worse than the default.
TEST_F(CliTest, TuneNeverWritesWorseThanTheDefault) {
  Write("m.onnx", testing::AddReluModel(64).SerializeAsString());
  auto arena = [&](const std::string& pipeline) {
    Result p = RunKiln("plan " + file("m.onnx") + " --json" +
                       (pipeline.empty() ? "" : " --pipeline " + pipeline));
    EXPECT_EQ(p.code, 0) << p.err;
    return nlohmann::json::parse(p.out)["arena_bytes"].get<size_t>();
  };
  const std::vector<std::string> defaults = passes::DefaultPipeline().passes;
  for (const std::string objective : {"arena", "latency"}) {
    const std::string out = file(objective + ".json");
    Result r = RunKiln("tune " + file("m.onnx") + " --objective " + objective +
                       " --budget 6 --jobs 1 -q -o " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    auto written = passes::LoadPipelineFile(out);
    ASSERT_TRUE(written.ok()) << written.status().message();
    std::string listed;
    for (const auto& p : written->passes) listed += (listed.empty() ? "" : ", ") + p;
    EXPECT_NE(r.out.find("pipeline written to " + out + ": passes [" + listed + "], planner " +
                         written->planner),
              std::string::npos)
        << r.out;
    if (r.out.find("no sequence beat the default pipeline") != std::string::npos) {
      EXPECT_EQ(written->passes, defaults) << r.out;
    } else {
      EXPECT_NE(r.out.find("better"), std::string::npos) << r.out;
    }
    EXPECT_LE(arena(out), arena("")) << objective;
  }
  Result lat = RunKiln("tune " + file("m.onnx") +
                       " --objective latency --budget 6 --jobs 1 -q -o " + file("l.json"));
  EXPECT_NE(lat.out.find("the 3% noise margin"), std::string::npos) << lat.out;
}

// A batch of 100,000 rows streams through tiles of the neural-field MLP: the same rows as a small
// run of the same inputs (random inputs are a prefix of each other), in a tile's arena.
TEST_F(CliTest, LargeBatchesStreamInTiles) {
  const std::string mlp = Model("mlp_field.onnx");
  Result big = RunKiln("run " + mlp + " --shape xyz=100000,3 --output-dir " + file("big"));
  ASSERT_EQ(big.code, 0) << big.err;
  Result small = RunKiln("run " + mlp + " --shape xyz=50,3 --output-dir " + file("small"));
  ASSERT_EQ(small.code, 0) << small.err;
  auto a = frontend::LoadNpyFile(file("big/output_0.npy"));
  auto b = frontend::LoadNpyFile(file("small/output_0.npy"));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->dim(0), 100000);
  const int64_t n = b->size();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(a->data<float>()[i], b->data<float>()[i],
                1e-5 * (1 + std::fabs(b->data<float>()[i])))
        << i;
  Result bench = RunKiln("bench " + mlp + " --shape xyz=100000,3 --iterations 1");
  ASSERT_EQ(bench.code, 0) << bench.err;
  auto j = nlohmann::json::parse(bench.out);
  ASSERT_TRUE(j.contains("tile_rows")) << bench.out;
  EXPECT_LT(j["tile_rows"].get<int64_t>(), 100000);
  EXPECT_LT(j["arena_bytes"].get<int64_t>(), int64_t{32} << 20);
}

}  // namespace
}  // namespace kiln
