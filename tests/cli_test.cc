// Runs the kiln binary the way users do and checks exit codes and one-line error messages.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "frontend/npy.h"
#include "support/file_io.h"
#include "test_models.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result RunKiln(const std::string& args) {
  static int counter = 0;
  std::string err_file = (fs::temp_directory_path() / ("kiln_cli_err_" + std::to_string(getpid()) +
                                                       "_" + std::to_string(counter++))).string();
  std::string cmd = std::string(KILN_BINARY) + " " + args + " 2>" + err_file;
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto e = ReadFile(err_file);
  r.err = e.ok() ? *e : "";
  fs::remove(err_file);
  return r;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln_cli_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& n) { return (dir_ / n).string(); }
  void Write(const std::string& n, const std::string& bytes) { ASSERT_TRUE(WriteFile(file(n), bytes).ok()); }
  // A user error: exit code 1 and exactly one line on stderr that contains `what`.
  void ExpectUserError(const std::string& args, const std::string& what) {
    Result r = RunKiln(args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << args << "\nstderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  fs::path dir_;
};

TEST_F(CliTest, HelpForEveryVerb) {
  for (const char* verb : {"run", "bench", "test-onnx", "inspect", "convert"}) {
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

}  // namespace
}  // namespace kiln
