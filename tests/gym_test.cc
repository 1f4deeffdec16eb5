// The optimization service through a real gRPC channel (in-process), the environment's
// semantics, the tuner, and the pipeline files they write.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "frontend/onnx_import.h"
#include "gym/client.h"
#include "gym/op_count_order.h"
#include "gym/service.h"
#include "gym/tune.h"
#include "ops/op.h"
#include "passes/infer_shapes.h"
#include "passes/pipeline.h"
#include "planner/plan_graph.h"
#include "test_models.h"

namespace kiln::gym {
namespace {

namespace cg = compiler_gym;

// x[1,4,6,6] -> Conv -> BatchNormalization -> Identity -> Relu, plus two identical Relu(x) read by
// an Add: passes have something to do (fold-batchnorm, eliminate-identities, CSE).
std::string BatchNormModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("bn");
  *g->add_input() = testing::FloatInfo("x", {1, 4, 6, 6});
  *g->add_output() = testing::FloatInfo("y", {1, 4, 6, 6});
  *g->add_output() = testing::FloatInfo("z", {1, 4, 6, 6});
  auto init = [&](const std::string& name, std::vector<int64_t> dims, float base) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) t->add_dims(d), n *= d;
    for (int64_t i = 0; i < n; ++i) t->add_float_data(base + 0.01f * static_cast<float>(i % 7));
  };
  init("w", {4, 4, 3, 3}, -0.03f);
  init("scale", {4}, 0.9f);
  init("bias", {4}, 0.1f);
  init("mean", {4}, 0.05f);
  init("var", {4}, 1.2f);
  auto node = [&](const std::string& op, const std::string& name, std::vector<std::string> in,
                  std::vector<std::string> out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  };
  auto* conv = node("Conv", "conv", {"x", "w"}, {"c"});
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  node("BatchNormalization", "bn", {"c", "scale", "bias", "mean", "var"}, {"b"});
  node("Identity", "id", {"b"}, {"i"});
  node("Relu", "relu", {"i"}, {"y"});
  node("Relu", "r1", {"x"}, {"p"});
  node("Relu", "r2", {"x"}, {"q"});
  node("Add", "add", {"p", "q"}, {"z"});
  return m.SerializeAsString();
}

class GymTest : public ::testing::Test {
 protected:
  void Start(ServiceOptions o = {}) {
    service_ = std::make_unique<Service>(std::move(o));
    ASSERT_TRUE(service_->Init().ok());
    grpc::ServerBuilder b;
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
    client_ = MakeClient();
    auto s = client_->GetSpaces();
    ASSERT_TRUE(s.ok()) << s.status().message();
    spaces_ = *s;
    stub_ = cg::CompilerGymService::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }
  std::unique_ptr<GymClient> MakeClient() {
    return std::make_unique<GymClient>(server_->InProcessChannel(grpc::ChannelArguments()));
  }
  int A(const std::string& name) {
    int a = spaces_.Action(name);
    EXPECT_GE(a, 0) << name;
    return a;
  }
  int O(const std::string& name) {
    int o = spaces_.Observation(name);
    EXPECT_GE(o, 0) << name;
    return o;
  }
  // Steps and returns the observations as text (scalars and strings).
  std::vector<std::string> StepObs(int64_t s, std::vector<int> actions,
                                   std::vector<std::string> names, StepOutcome* outcome = nullptr) {
    std::vector<int> idx;
    for (auto& n : names) idx.push_back(O(n));
    auto r = client_->Step(s, actions, idx);
    EXPECT_TRUE(r.ok()) << r.status().message();
    std::vector<std::string> out;
    if (!r.ok()) return out;
    for (auto& o : r->observations)
      out.push_back(o.value_case() == cg::Observation::kStringValue
                        ? o.string_value()
                        : std::to_string(*ObservationNumber(o)));
    if (outcome) *outcome = *r;
    return out;
  }
  grpc::StatusCode StepCode(int64_t s, std::vector<int> actions, std::vector<int> obs) {
    grpc::ClientContext ctx;
    cg::StepRequest req;
    cg::StepReply reply;
    req.set_session_id(s);
    for (int a : actions) req.add_action(a);
    for (int o : obs) req.add_observation_space(o);
    return stub_->Step(&ctx, req, &reply).error_code();
  }
  grpc::StatusCode AddCode(const std::string& uri, const std::string& contents,
                           const std::string& file_uri = "") {
    grpc::ClientContext ctx;
    cg::AddBenchmarkRequest req;
    cg::AddBenchmarkReply reply;
    auto* b = req.add_benchmark();
    b->set_uri(uri);
    if (!file_uri.empty())
      b->mutable_program()->set_uri(file_uri);
    else
      b->mutable_program()->set_contents(contents);
    return stub_->AddBenchmark(&ctx, req, &reply).error_code();
  }

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GymClient> client_;
  std::unique_ptr<cg::CompilerGymService::Stub> stub_;
  Spaces spaces_;
};

// OpCount's positions are a contract with trained agents: version 1's stay where they are, and
// every op kiln registers has one (a new op is appended to gym/op_count_order.cc).
TEST(OpCount, PositionsAreFrozenAndCoverEveryOp) {
  const std::vector<std::string>& order = gym::OpCountOrder();
  std::set<std::string> listed;
  for (const std::string& name : order) EXPECT_TRUE(listed.insert(name).second) << name;
  for (const std::string& name : ops::OpRegistry::Global().Names())
    EXPECT_TRUE(listed.count(name)) << name << ": append it to gym/op_count_order.cc";
  ASSERT_GE(order.size(), 205u);
  EXPECT_EQ(order[0], "Abs");
  EXPECT_EQ(order[35], "Conv");
  EXPECT_EQ(order[93], "MatMul");
  EXPECT_EQ(order[141], "Relu");
  EXPECT_EQ(order[204], "com.microsoft.Gelu");
}

TEST(GymProto, IsTheSeedByteForByte) {
  std::ifstream seed(std::string(KILN_SOURCE_DIR) + "/../shared/seeds/002_880d9173cf36d5ff.txt");
  if (!seed) GTEST_SKIP() << "seed folder not here";
  std::ifstream proto(std::string(KILN_SOURCE_DIR) + "/src/gym/compiler_gym_service.proto");
  std::stringstream a, b;
  a << seed.rdbuf();
  b << proto.rdbuf();
  std::string s = a.str();
  ASSERT_EQ(s.rfind("compiler_gym_service.proto\n\n", 0), 0u);  // the seed opens with the file name
  EXPECT_EQ(s.substr(std::string("compiler_gym_service.proto\n\n").size()), b.str());
}

TEST_F(GymTest, SpacesListPassesPlannersAndHonestFlags) {
  Start();
  for (const auto& p : passes::RegisteredPasses()) EXPECT_GE(spaces_.Action(p.name), 0) << p.name;
  for (const auto& p : planner::PlannerNames()) EXPECT_GE(spaces_.Action("planner:" + p), 0) << p;
  EXPECT_GE(spaces_.Action("schedule:file-order"), 0);
  for (const char* n :
       {"Ir", "IrSha1", "OpCount", "Features", "ArenaBytes", "ArenaLowerBoundBytes", "ParamBytes",
        "CodeSizeBytes", "Runtime", "Pipeline", "CortexM4Instructions"}) {
    int o = O(n);
    if (o < 0) continue;
    const auto& s = spaces_.observations[o];
    bool measured = std::string(n) == "Runtime";
    EXPECT_EQ(s.deterministic(), !measured) << n;
    EXPECT_EQ(s.platform_dependent(), measured || std::string(n) == "CodeSizeBytes" ||
                                          std::string(n) == "CortexM4Instructions")
        << n;
    EXPECT_NE(s.default_value().value_case(), cg::Observation::VALUE_NOT_SET) << n;
  }
  EXPECT_EQ(spaces_.observations[O("OpCount")].int64_range_list().range_size(),
            spaces_.observations[O("OpCount")].default_value().int64_list().value_size());
  auto b = client_->GetBenchmarks();
  ASSERT_TRUE(b.ok());
  EXPECT_NE(std::find(b->begin(), b->end(), "benchmark://kiln-v0/kws_cnn"), b->end());
}

TEST_F(GymTest, EpisodeForkAndPipelineReplay) {
  Start();
  ASSERT_TRUE(client_->AddBenchmark("benchmark://test/bn", BatchNormModel()).ok());
  auto s = client_->StartSession("benchmark://test/bn");
  ASSERT_TRUE(s.ok());
  auto first = StepObs(*s, {}, {"IrSha1", "ArenaBytes", "ParamBytes"});
  ASSERT_EQ(first.size(), 3u);
  // A pass that has nothing to do says so, and changes no observation.
  StepOutcome r;
  auto same = StepObs(*s, {A("cancel-transposes")}, {"IrSha1"}, &r);
  EXPECT_TRUE(r.action_had_no_effect);
  EXPECT_EQ(same[0], first[0]);
  // Fork, then only the fork folds the BatchNormalization.
  auto f = client_->Fork(*s);
  ASSERT_TRUE(f.ok());
  auto forked = StepObs(*f, {A("fold-batchnorm")}, {"IrSha1", "ParamBytes"}, &r);
  EXPECT_FALSE(r.action_had_no_effect);
  EXPECT_NE(forked[0], first[0]);
  EXPECT_LT(std::stoll(forked[1]), std::stoll(first[2]));
  EXPECT_EQ(StepObs(*s, {}, {"IrSha1"})[0], first[0]) << "the parent changed with its fork";
  // Play the fork to the end: every pass until none changes anything.
  int steps = 0;
  for (; steps < 50 && !r.end_of_session; ++steps)
    StepObs(*f,
            {A("eliminate-identities"), A("eliminate-common-subexpressions"),
             A("eliminate-dead-nodes"), A("fuse-conv-activation")},
            {"ArenaBytes"}, &r);
  EXPECT_TRUE(r.end_of_session);
  StepObs(*f, {A("planner:greedy-size")}, {}, &r);
  EXPECT_TRUE(r.end_of_session);  // planner choices change no IR
  // The Pipeline observation replays to the same IR and arena.
  auto obs = StepObs(*f, {}, {"Pipeline", "ArenaBytes", "Ir"});
  auto p = passes::ParsePipeline(obs[0], "Pipeline");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->planner, "greedy-size");
  std::string bytes = BatchNormModel();
  auto m = frontend::ParseOnnxModel(bytes.data(), bytes.size(), "", "bn");
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(passes::InferShapes(*m).ok());
  ASSERT_TRUE(passes::RunPasses(*m, p->passes).ok());
  EXPECT_EQ(ir::PrintModel(*m), obs[2]);
  planner::PlanOptions po;
  po.planner = p->planner;
  po.reorder = p->reorder;
  po.max_steps = p->planner_steps;
  auto gp = planner::PlanGraph(*m->graph, po);
  ASSERT_TRUE(gp.ok());
  EXPECT_EQ(static_cast<long long>(gp->plan.arena_bytes), std::stoll(obs[1]));
  EXPECT_TRUE(client_->EndSession(*f).ok());
  EXPECT_TRUE(client_->EndSession(*s).ok());
}

TEST_F(GymTest, SymbolicInputDimsAreFixedAtOneAndThePipelineSaysSo) {
  Start();
  auto s = client_->StartSession("benchmark://kiln-v0/mlp_field");
  ASSERT_TRUE(s.ok());
  auto obs = StepObs(*s, {}, {"Ir", "Pipeline"});
  ASSERT_EQ(obs.size(), 2u);
  EXPECT_NE(obs[0].find("%xyz: FLOAT[1,3]"), std::string::npos) << obs[0].substr(0, 200);
  auto p = passes::ParsePipeline(obs[1], "Pipeline");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->shapes.count("xyz"), 1u);
  EXPECT_EQ(p->shapes.at("xyz"), (Dims{1, 3}));
  EXPECT_TRUE(passes::ParsePipeline(passes::PipelineToJson(*p), "again").ok());
}

TEST(PipelineFile, MalformedFilesAreOneLineErrors) {
  for (const char* text :
       {"", "[]", "{}", "{\"kiln_pipeline\": 2}", "{\"kiln_pipeline\": 1, \"passes\": [\"nope\"]}",
        "{\"kiln_pipeline\": 1, \"passes\": \"fold-constants\"}",
        "{\"kiln_pipeline\": 1, \"planner_steps\": -1}",
        "{\"kiln_pipeline\": 1, \"shapes\": {\"x\": [1, -2]}}",
        "{\"kiln_pipeline\": 1, \"extra\": 0}"}) {
    auto p = passes::ParsePipeline(text, "p.json");
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.status().message().rfind("p.json: ", 0), 0u) << p.status().message();
    EXPECT_EQ(p.status().message().find('\n'), std::string::npos);
  }
  auto ok = passes::ParsePipeline(
      "{\"kiln_pipeline\": 1, \"passes\": [\"fold-batchnorm\"], \"reorder\": false}", "p");
  ASSERT_TRUE(ok.ok());
  EXPECT_FALSE(ok->reorder);
  EXPECT_EQ(ok->planner, "default");
}

TEST_F(GymTest, ErrorsAnswerForTheirCallOnly) {
  ServiceOptions o;
  o.max_sessions = 3;
  o.max_benchmark_bytes = 100000;
  o.max_total_benchmark_bytes = 150000;
  Start(o);
  auto s = client_->StartSession("benchmark://kiln-v0/kws_cnn");
  ASSERT_TRUE(s.ok());
  std::string sha = StepObs(*s, {}, {"IrSha1"})[0];
  using C = grpc::StatusCode;
  EXPECT_EQ(StepCode(*s + 100, {}, {}), C::NOT_FOUND);
  EXPECT_EQ(StepCode(*s, {A("fold-constants"), 9999}, {}), C::OUT_OF_RANGE);
  EXPECT_EQ(StepCode(*s, {-1}, {}), C::OUT_OF_RANGE);
  EXPECT_EQ(StepCode(*s, {A("fold-constants")}, {9999}), C::OUT_OF_RANGE);
  EXPECT_EQ(StepObs(*s, {}, {"IrSha1"})[0], sha) << "a failed Step changed the session";
  {
    grpc::ClientContext ctx;
    cg::StartSessionRequest req;
    cg::StartSessionReply reply;
    req.set_benchmark("benchmark://kiln-v0/kws_cnn");
    req.set_action_space(1);
    EXPECT_EQ(stub_->StartSession(&ctx, req, &reply).error_code(), C::OUT_OF_RANGE);
  }
  {
    grpc::ClientContext ctx;
    cg::ForkSessionRequest req;
    cg::ForkSessionReply reply;
    req.set_session_id(424242);
    EXPECT_EQ(stub_->ForkSession(&ctx, req, &reply).error_code(), C::NOT_FOUND);
  }
  EXPECT_FALSE(client_->EndSession(424242).ok());
  EXPECT_FALSE(client_->StartSession("benchmark://nowhere/x").ok());
  EXPECT_EQ(AddCode("benchmark://bad/bytes", "this is not a model"), C::INVALID_ARGUMENT);
  EXPECT_EQ(AddCode("http://bad/uri", BatchNormModel()), C::INVALID_ARGUMENT);
  EXPECT_EQ(AddCode("benchmark://bad/scheme", "", "http://example.com/m.onnx"),
            C::INVALID_ARGUMENT);
  EXPECT_EQ(AddCode("benchmark://bad/missing", "", "file:///nonexistent/m.onnx"),
            C::INVALID_ARGUMENT);
  EXPECT_EQ(AddCode("benchmark://bad/big", std::string(200000, 'x')), C::RESOURCE_EXHAUSTED);
  // Each model is small enough, but not all of them together.
  std::string bn = BatchNormModel();
  for (int i = 0; (i + 1) * bn.size() <= 100000 * 2; ++i) {
    auto code = AddCode("benchmark://many/" + std::to_string(i), bn);
    if ((i + 1) * bn.size() <= 150000) {
      EXPECT_EQ(code, C::OK) << i;
    } else {
      EXPECT_EQ(code, C::RESOURCE_EXHAUSTED) << i;
    }
  }
  EXPECT_EQ(AddCode("benchmark://many/0", bn), C::OK) << "replacing one takes no more room";
  std::string truncated = BatchNormModel();
  truncated.resize(truncated.size() / 2);
  EXPECT_EQ(AddCode("benchmark://bad/truncated", truncated), C::INVALID_ARGUMENT);
  auto s2 = client_->Fork(*s);
  auto s3 = client_->StartSession("");  // the service picks a benchmark
  ASSERT_TRUE(s2.ok() && s3.ok());
  EXPECT_FALSE(client_->StartSession("benchmark://kiln-v0/kws_cnn").ok()) << "past --max-sessions";
  EXPECT_FALSE(client_->Fork(*s).ok()) << "past --max-sessions";
  // The service still serves every session.
  EXPECT_EQ(StepObs(*s2, {}, {"IrSha1"})[0], sha);
  grpc::ClientContext ctx;
  cg::EndSessionRequest req;
  cg::EndSessionReply reply;
  req.set_session_id(*s3);
  ASSERT_TRUE(stub_->EndSession(&ctx, req, &reply).ok());
  EXPECT_EQ(reply.remaining_sessions(), 2);
  EXPECT_TRUE(client_->StartSession("benchmark://kiln-v0/mlp_field").ok());
}

TEST_F(GymTest, FailingPassAndObservationAreErrorsOfThatCall) {
  ServiceOptions o;
  o.environment.passes = passes::RegisteredPasses();
  o.environment.passes.push_back({"always-fails", "fails", [](ir::Model&) -> Expected<bool> {
                                    return Error("this pass refuses");
                                  }});
  Start(o);
  auto s = client_->StartSession("benchmark://kiln-v0/kws_cnn");
  ASSERT_TRUE(s.ok());
  std::string sha = StepObs(*s, {}, {"IrSha1"})[0];
  EXPECT_EQ(StepCode(*s, {A("fold-constants"), A("always-fails")}, {}), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(StepObs(*s, {}, {"IrSha1"})[0], sha);
  // CodeSizeBytes of a model the C backend cannot emit (NonZero: a data-dependent size).
  onnx::ModelProto m = testing::EmptyModel("nz");
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {4});
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  auto* n = g->add_node();
  n->set_op_type("NonZero");
  n->add_input("x");
  n->add_output("y");
  ASSERT_TRUE(client_->AddBenchmark("benchmark://test/nonzero", m.SerializeAsString()).ok());
  auto nz = client_->StartSession("benchmark://test/nonzero");
  ASSERT_TRUE(nz.ok());
  EXPECT_EQ(StepCode(*nz, {}, {O("CodeSizeBytes")}), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(StepObs(*nz, {}, {"ArenaBytes"}).size(), 1u);
}

// The generated C built for and run on the emulated Cortex-M4: one inference's instructions,
// the same in every session; a model the C backend cannot emit is a failed precondition.
TEST_F(GymTest, CortexM4InstructionsCountsOneInference) {
#ifndef KILN_CORTEX_M4_RUN
  GTEST_SKIP() << "arm-none-eabi-gcc or qemu-system-arm not found";
#else
  Start();
  std::string counts[2];
  for (std::string& count : counts) {
    auto s = client_->StartSession("benchmark://kiln-v0/kws_cnn");
    ASSERT_TRUE(s.ok());
    auto obs = StepObs(*s, {}, {"CortexM4Instructions"});
    ASSERT_EQ(obs.size(), 1u);
    count = obs[0];
  }
  EXPECT_EQ(counts[0], counts[1]);
  // kws_cnn: about 2.7 M multiply-adds in float.
  EXPECT_GT(std::stoll(counts[0]), 2700000);
  EXPECT_LT(std::stoll(counts[0]), 200000000);
#endif
}

TEST_F(GymTest, ManySessionsFromManyThreads) {
  Start();
  ASSERT_TRUE(client_->AddBenchmark("benchmark://test/bn", BatchNormModel()).ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0}, done{0};
  std::vector<std::string> shas(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      auto c = MakeClient();
      for (int k = 0; k < 10; ++k) {
        auto s = c->StartSession(k % 2 ? "benchmark://test/bn" : "benchmark://kiln-v0/kws_cnn");
        if (!s.ok()) {
          ++failures;
          continue;
        }
        std::vector<int> seq = {A("fold-constants"), A("eliminate-identities"),
                                A("planner:greedy-size")};
        auto r = c->Step(*s, seq, {O("ArenaBytes"), O("IrSha1")});
        auto f = c->Fork(*s);
        if (!r.ok() || !f.ok() || !c->Step(*f, {A("fold-batchnorm")}, {O("ArenaBytes")}).ok())
          ++failures;
        if (r.ok() && k == 1) shas[t] = r->observations[1].string_value();
        if (!c->EndSession(*s).ok() || (f.ok() && !c->EndSession(*f).ok())) ++failures;
        ++done;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(done.load(), 80);
  for (int t = 1; t < 8; ++t) EXPECT_EQ(shas[t], shas[0]) << "the same steps gave different IR";
  EXPECT_EQ(service_->num_sessions(), 0u);
}

TEST_F(GymTest, TuneBeatsOrMatchesTheDefaultAndIsDeterministic) {
  Start();
  ASSERT_TRUE(client_->AddBenchmark("benchmark://test/bn", BatchNormModel()).ok());
  auto c2 = MakeClient();
  std::vector<GymClient*> clients = {client_.get(), c2.get()};
  TuneOptions o;
  o.objective = "arena";
  o.budget = 40;
  o.seed = 7;
  auto a = Tune(clients, "benchmark://test/bn", o);
  auto b = Tune(clients, "benchmark://test/bn", o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().message();
  EXPECT_LE(a->best, a->baseline);
  EXPECT_EQ(a->best, b->best);
  EXPECT_EQ(a->best_actions, b->best_actions);
  EXPECT_EQ(a->pipeline_json, b->pipeline_json);
  EXPECT_TRUE(passes::ParsePipeline(a->pipeline_json, "tune").ok());
  EXPECT_EQ(a->improved, a->best < a->baseline);
  o.objective = "speed";
  EXPECT_FALSE(Tune(clients, "benchmark://test/bn", o).ok());
}

// The tuner in this process (LocalEvaluator, what the Python package and its Dask workers run)
// reaches the result it reaches through the service, at any number of threads.
TEST_F(GymTest, TuneInProcessEqualsTuneThroughTheService) {
  Start();
  const std::string bytes = BatchNormModel();
  ASSERT_TRUE(client_->AddBenchmark("benchmark://test/bn", bytes).ok());
  std::vector<GymClient*> clients = {client_.get()};
  TuneOptions o;
  o.objective = "arena";
  o.budget = 40;
  o.seed = 11;
  auto remote = Tune(clients, "benchmark://test/bn", o);
  ASSERT_TRUE(remote.ok()) << remote.status().message();
  Environment env;
  auto model = frontend::ParseOnnxModel(bytes.data(), bytes.size(), "", "bn");
  ASSERT_TRUE(model.ok());
  BenchmarkModel benchmark;
  ASSERT_TRUE(env.MakeBenchmark("benchmark://test/bn", std::move(*model), &benchmark).ok());
  for (int jobs : {1, 3}) {
    LocalEvaluator local(env, benchmark, jobs);
    auto r = Tune(local, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->best, remote->best);
    EXPECT_EQ(r->best_actions, remote->best_actions);
    EXPECT_EQ(r->pipeline_json, remote->pipeline_json);
    EXPECT_EQ(r->evaluations, remote->evaluations);
  }
}

TEST(TuneResultJson, RoundTripsAndRefusesWhatIsNotAResult) {
  TuneResult r;
  r.observation = "CodeSizeBytes";
  r.baseline = 95092;
  r.best = 94924;
  r.improved = true;
  r.best_actions = {"fold-constants", "planner:coloring"};
  r.pipeline_json = "{\"kiln_pipeline\": 1}";
  r.evaluations = 40;
  auto back = TuneResultFromJson(TuneResultToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->observation, r.observation);
  EXPECT_EQ(back->best, r.best);
  EXPECT_EQ(back->best_actions, r.best_actions);
  EXPECT_EQ(back->pipeline_json, r.pipeline_json);
  EXPECT_EQ(back->evaluations, 40);
  EXPECT_FALSE(TuneResultFromJson("[1, 2]").ok());
  EXPECT_FALSE(TuneResultFromJson("{\"best\": \"x\"}").ok());
  EXPECT_FALSE(TuneResultFromJson("not json").ok());
}

// Where nothing beats the default, the result is the default pipeline itself, never an empty or
// shorter one that merely ties it.
TEST_F(GymTest, TuneKeepsTheDefaultWhenNothingBeatsIt) {
  Start();
  ASSERT_TRUE(
      client_->AddBenchmark("benchmark://test/relu", testing::AddReluModel(64).SerializeAsString())
          .ok());
  std::vector<GymClient*> clients = {client_.get()};
  for (const char* objective : {"arena", "latency"}) {
    TuneOptions o;
    o.objective = objective;
    o.budget = 30;
    auto r = Tune(clients, "benchmark://test/relu", o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto p = passes::ParsePipeline(r->pipeline_json, "tune");
    ASSERT_TRUE(p.ok());
    if (!r->improved) {
      EXPECT_EQ(p->passes, passes::DefaultPipeline().passes) << objective;
      EXPECT_EQ(r->best, r->baseline) << objective;
    } else {
      EXPECT_LT(r->best, r->baseline * (1 - r->margin)) << objective;
    }
    EXPECT_EQ(r->margin > 0, std::string(objective) == "latency");
  }
}

}  // namespace
}  // namespace kiln::gym
