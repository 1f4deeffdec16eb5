#include "gym/service.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "frontend/model_loader.h"
#include "frontend/onnx_import.h"

namespace kiln::gym {

namespace {

namespace cg = compiler_gym;
constexpr const char* kBuiltinPrefix = "benchmark://kiln-v0/";
constexpr const char* kActionSpaceName = "kiln";

// Times one handler for CallStats.
class Timer {
 public:
  Timer(CallStats& stats, const char* method)
      : stats_(stats), method_(method), start_(std::chrono::steady_clock::now()) {}
  ~Timer() {
    std::chrono::duration<double, std::micro> d = std::chrono::steady_clock::now() - start_;
    stats_.Record(method_, d.count());
  }

 private:
  CallStats& stats_;
  const char* method_;
  std::chrono::steady_clock::time_point start_;
};

void SetObservation(const ObservationValue& v, cg::Observation* o) {
  using Kind = ObservationValue::Kind;
  switch (v.kind) {
    case Kind::kInt64List:
      for (int64_t x : v.ints) o->mutable_int64_list()->add_value(x);
      if (v.ints.empty()) o->mutable_int64_list();
      break;
    case Kind::kDoubleList:
      for (double x : v.doubles) o->mutable_double_list()->add_value(x);
      if (v.doubles.empty()) o->mutable_double_list();
      break;
    case Kind::kString:
      o->set_string_value(v.str);
      break;
    case Kind::kBinary:
      o->set_binary_value(v.str);
      break;
    case Kind::kScalarInt64:
      o->set_scalar_int64(v.scalar_int);
      break;
    case Kind::kScalarDouble:
      o->set_scalar_double(v.scalar_double);
      break;
  }
}

void SetRange(double min, double max, cg::ScalarRange* r) {
  r->mutable_min()->set_value(min);
  if (max >= min) r->mutable_max()->set_value(max);  // unset max = +inf
}

void SetSpace(const ObservationSpaceInfo& s, cg::ObservationSpace* o) {
  using Kind = ObservationValue::Kind;
  o->set_name(s.name);
  switch (s.kind) {
    case Kind::kInt64List:
    case Kind::kDoubleList: {
      auto* list = s.kind == Kind::kInt64List ? o->mutable_int64_range_list()
                                              : o->mutable_double_range_list();
      for (size_t i = 0; i < s.list_length; ++i) SetRange(s.min, s.max, list->add_range());
      break;
    }
    case Kind::kString:
      SetRange(s.min, s.max, o->mutable_string_size_range());
      break;
    case Kind::kBinary:
      SetRange(s.min, s.max, o->mutable_binary_size_range());
      break;
    case Kind::kScalarInt64:
      SetRange(s.min, s.max, o->mutable_scalar_int64_range());
      break;
    case Kind::kScalarDouble:
      SetRange(s.min, s.max, o->mutable_scalar_double_range());
      break;
  }
  o->set_opaque_data_format(s.opaque_data_format);
  o->set_deterministic(s.deterministic);
  o->set_platform_dependent(s.platform_dependent);
  SetObservation(s.default_value, o->mutable_default_value());
}

}  // namespace

grpc::Status ToGrpc(const GymStatus& s) {
  using G = grpc::StatusCode;
  G code = G::OK;
  switch (s.code) {
    case Code::kOk:
      return grpc::Status::OK;
    case Code::kInvalidArgument:
      code = G::INVALID_ARGUMENT;
      break;
    case Code::kNotFound:
      code = G::NOT_FOUND;
      break;
    case Code::kOutOfRange:
      code = G::OUT_OF_RANGE;
      break;
    case Code::kFailedPrecondition:
      code = G::FAILED_PRECONDITION;
      break;
    case Code::kResourceExhausted:
      code = G::RESOURCE_EXHAUSTED;
      break;
    case Code::kInternal:
      code = G::INTERNAL;
      break;
  }
  return grpc::Status(code, s.message);
}

// ---------------------------------------------------------------------------------------------
// CallStats

void CallStats::Record(const char* method, double us) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& v = samples_[method];
  if (v.size() < 1000000)
    v.push_back(us);  // bounded: a long-running server keeps the first million
}

std::string CallStats::ToJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [name, samples] : samples_) {
    std::vector<double> v = samples;  // sorted copy (clang 14 cannot capture a structured binding)
    std::sort(v.begin(), v.end());
    auto at = [&](double q) {
      return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
    };
    j[name] = {
        {"calls", v.size()}, {"median_us", at(0.5)}, {"p90_us", at(0.9)}, {"max_us", v.back()}};
  }
  return j.dump() + "\n";
}

// ---------------------------------------------------------------------------------------------
// Service

Service::Service(ServiceOptions options)
    : options_(std::move(options)), env_(options_.environment), rng_(options_.seed) {}

Status Service::Init() {
  for (const auto& [name, bytes] : BuiltinBenchmarkFiles()) {
    std::string uri = kBuiltinPrefix + name;
    auto model = frontend::ParseOnnxModel(bytes.data(), bytes.size(), "", uri);
    if (!model.ok()) return model.status();
    BenchmarkModel b;
    GymStatus st = env_.MakeBenchmark(uri, std::move(*model), &b);
    if (!st.ok()) return Error(st.message);
    benchmarks_[uri] = std::move(b);
  }
  return OkStatus();
}

size_t Service::num_sessions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

std::shared_ptr<Service::SessionSlot> Service::FindSession(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

grpc::Status Service::AddSession(std::unique_ptr<Session> s, int64_t* id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sessions_.size() >= options_.max_sessions)
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "the service holds " + std::to_string(sessions_.size()) +
                            " sessions (--max-sessions); end some first");
  auto slot = std::make_shared<SessionSlot>();
  slot->session = std::move(s);
  *id = next_session_++;
  sessions_[*id] = std::move(slot);
  return grpc::Status::OK;
}

grpc::Status Service::GetVersion(Ctx*, const cg::GetVersionRequest*, cg::GetVersionReply* reply) {
  Timer t(stats_, "GetVersion");
  reply->set_service_version(options_.service_version);
  reply->set_compiler_version(options_.compiler_version);
  return grpc::Status::OK;
}

grpc::Status Service::GetSpaces(Ctx*, const cg::GetSpacesRequest*, cg::GetSpacesReply* reply) {
  Timer t(stats_, "GetSpaces");
  auto* a = reply->add_action_space_list();
  a->set_name(kActionSpaceName);
  for (const auto& name : env_.actions()) a->add_action(name);
  for (const auto& s : env_.observation_spaces()) SetSpace(s, reply->add_observation_space_list());
  return grpc::Status::OK;
}

grpc::Status Service::StartSession(Ctx*, const cg::StartSessionRequest* req,
                                   cg::StartSessionReply* reply) {
  Timer t(stats_, "StartSession");
  if (req->action_space() != 0)
    return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "action space " +
                                                            std::to_string(req->action_space()) +
                                                            " does not exist (there is one: 0)");
  BenchmarkModel b;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (benchmarks_.empty())
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no benchmarks");
    if (req->benchmark().empty()) {
      auto it = benchmarks_.begin();
      std::advance(it, static_cast<long>(rng_() % benchmarks_.size()));
      b = it->second;
    } else {
      auto it = benchmarks_.find(req->benchmark());
      if (it == benchmarks_.end())
        return grpc::Status(grpc::StatusCode::NOT_FOUND,
                            "unknown benchmark '" + req->benchmark() + "'");
      b = it->second;
    }
  }
  int64_t id = 0;
  grpc::Status st = AddSession(std::make_unique<Session>(env_, b), &id);
  if (!st.ok()) return st;
  reply->set_session_id(id);
  reply->set_benchmark(b.uri);
  return grpc::Status::OK;
}

grpc::Status Service::ForkSession(Ctx*, const cg::ForkSessionRequest* req,
                                  cg::ForkSessionReply* reply) {
  Timer t(stats_, "ForkSession");
  auto slot = FindSession(req->session_id());
  if (!slot)
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "no session " + std::to_string(req->session_id()));
  std::unique_ptr<Session> copy;
  {
    std::lock_guard<std::mutex> lock(slot->mu);
    copy = slot->session->Fork();
  }
  int64_t id = 0;
  grpc::Status st = AddSession(std::move(copy), &id);
  if (!st.ok()) return st;
  reply->set_session_id(id);
  return grpc::Status::OK;
}

grpc::Status Service::EndSession(Ctx*, const cg::EndSessionRequest* req,
                                 cg::EndSessionReply* reply) {
  Timer t(stats_, "EndSession");
  std::shared_ptr<SessionSlot> slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(req->session_id());
    if (it == sessions_.end())
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "no session " + std::to_string(req->session_id()));
    slot = std::move(it->second);
    sessions_.erase(it);
    reply->set_remaining_sessions(static_cast<int32_t>(sessions_.size()));
  }
  std::lock_guard<std::mutex> lock(slot->mu);  // a Step in flight finishes before the session goes
  slot->session.reset();
  return grpc::Status::OK;
}

grpc::Status Service::Step(Ctx*, const cg::StepRequest* req, cg::StepReply* reply) {
  Timer t(stats_, "Step");
  auto slot = FindSession(req->session_id());
  if (!slot)
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "no session " + std::to_string(req->session_id()));
  const int spaces = static_cast<int>(env_.observation_spaces().size());
  for (int s : req->observation_space())
    if (s < 0 || s >= spaces)
      return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "observation space " + std::to_string(s) +
                                                              " does not exist (0.." +
                                                              std::to_string(spaces - 1) + ")");
  std::lock_guard<std::mutex> lock(slot->mu);
  if (!slot->session)
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "session " + std::to_string(req->session_id()) + " ended");
  // Step a copy and keep it only when every observation succeeds: a failed call changes nothing.
  std::unique_ptr<Session> next = slot->session->Fork();
  StepResult r;
  GymStatus st = next->Step({req->action().begin(), req->action().end()}, &r);
  if (!st.ok()) return ToGrpc(st);
  for (int s : req->observation_space()) {
    ObservationValue v;
    st = next->Observe(s, &v);
    if (!st.ok()) return ToGrpc(st);
    SetObservation(v, reply->add_observation());
  }
  reply->set_end_of_session(r.end_of_session);
  reply->set_action_had_no_effect(r.action_had_no_effect);
  slot->session = std::move(next);
  return grpc::Status::OK;
}

grpc::Status Service::GetBenchmarks(Ctx*, const cg::GetBenchmarksRequest*,
                                    cg::GetBenchmarksReply* reply) {
  Timer t(stats_, "GetBenchmarks");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [uri, b] : benchmarks_) reply->add_benchmark(uri);
  return grpc::Status::OK;
}

GymStatus Service::LoadBenchmark(const cg::Benchmark& b, BenchmarkModel* out) const {
  const std::string& uri = b.uri();
  if (uri.rfind("benchmark://", 0) != 0 || uri.size() == std::string("benchmark://").size())
    return GymStatus::Error(Code::kInvalidArgument,
                            "benchmark uri '" + uri + "' must be benchmark://NAME");
  Expected<ir::Model> model = Error("");
  if (b.program().has_contents()) {
    const std::string& bytes = b.program().contents();
    if (bytes.size() > options_.max_benchmark_bytes)
      return GymStatus::Error(Code::kResourceExhausted,
                              uri + ": " + std::to_string(bytes.size()) +
                                  " bytes is more than --max-benchmark-bytes " +
                                  std::to_string(options_.max_benchmark_bytes));
    model = frontend::ParseOnnxModel(bytes.data(), bytes.size(), "", uri);
    out->source_bytes = bytes.size();
  } else if (b.program().has_uri()) {
    const std::string& file = b.program().uri();
    if (file.rfind("file://", 0) != 0)
      return GymStatus::Error(Code::kInvalidArgument,
                              uri + ": program uri '" + file + "' is not file://PATH");
    std::string path = file.substr(7);
    std::error_code ec;
    auto size = std::filesystem::file_size(path, ec);
    if (ec)
      return GymStatus::Error(Code::kInvalidArgument, uri + ": " + path + ": " + ec.message());
    if (size > options_.max_benchmark_bytes)
      return GymStatus::Error(Code::kResourceExhausted,
                              uri + ": " + path + " is more than --max-benchmark-bytes");
    model = frontend::LoadModel(path);
    out->source_bytes = static_cast<size_t>(size);
  } else {
    return GymStatus::Error(Code::kInvalidArgument, uri + ": the benchmark has no program");
  }
  if (!model.ok())
    return GymStatus::Error(Code::kInvalidArgument, uri + ": " + model.status().message());
  size_t bytes = out->source_bytes;
  GymStatus st = env_.MakeBenchmark(uri, std::move(*model), out);
  out->source_bytes = bytes;
  return st;
}

grpc::Status Service::AddBenchmark(Ctx*, const cg::AddBenchmarkRequest* req,
                                   cg::AddBenchmarkReply*) {
  Timer t(stats_, "AddBenchmark");
  // All or nothing: every benchmark is validated before any is added.
  std::vector<BenchmarkModel> loaded(req->benchmark_size());
  for (int i = 0; i < req->benchmark_size(); ++i) {
    GymStatus st = LoadBenchmark(req->benchmark(i), &loaded[i]);
    if (!st.ok()) return ToGrpc(st);
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, size_t> bytes = added_bytes_;  // a uri given again replaces the old one
  for (const auto& b : loaded) bytes[b.uri] = b.source_bytes;
  size_t total = 0;
  for (const auto& [uri, n] : bytes) total += n;
  if (bytes.size() > options_.max_benchmarks)
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "the service holds " + std::to_string(added_bytes_.size()) +
                            " added benchmarks (limit " + std::to_string(options_.max_benchmarks) +
                            ")");
  if (total > options_.max_total_benchmark_bytes)
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "added benchmarks would hold " + std::to_string(total) +
                            " bytes of models, more than --max-total-benchmark-bytes " +
                            std::to_string(options_.max_total_benchmark_bytes));
  added_bytes_ = std::move(bytes);
  for (auto& b : loaded) benchmarks_[b.uri] = std::move(b);
  return grpc::Status::OK;
}

}  // namespace kiln::gym
