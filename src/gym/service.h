// `kiln serve`: the CompilerGym service (seed 002, DESIGN.md 2.6) over the environment.
//
// Sessions live in one table; each has its own lock, so many sessions are stepped from many client
// threads at once and a slow observation (CodeSizeBytes compiles C) holds only its own session.
// Every call that fails answers a gRPC status for that call only: NOT_FOUND for unknown sessions
// and benchmarks, OUT_OF_RANGE for bad action / observation / action-space indices,
// INVALID_ARGUMENT for malformed benchmarks, RESOURCE_EXHAUSTED past the limits, INTERNAL for a
// failing pass, FAILED_PRECONDITION for an observation the model does not allow (CodeSizeBytes of
// a model the C backend cannot emit). A Step that fails changes nothing. The service keeps no
// state but the sessions and the benchmarks, so replicas behind one client scale out.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "compiler_gym_service.grpc.pb.h"
#include "gym/environment.h"

namespace kiln::gym {

struct ServiceOptions {
  EnvironmentOptions environment;
  size_t max_sessions = 4096;
  size_t max_benchmark_bytes = size_t{256} << 20;      // one benchmark's model file
  size_t max_benchmarks = 1024;                        // added with AddBenchmark
  size_t max_total_benchmark_bytes = size_t{1} << 30;  // all added benchmarks' model files
  uint64_t seed = 0;  // picks a benchmark when a session names none
  std::string service_version, compiler_version;
};

// Server-side handler time per method (for `kiln serve --stats-file`).
class CallStats {
 public:
  void Record(const char* method, double us);
  std::string ToJson() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<double>> samples_;
};

class Service final : public compiler_gym::CompilerGymService::Service {
 public:
  explicit Service(ServiceOptions options);
  // The built-in benchmarks (benchmark://kiln-v0/<name>, the models kiln ships) are loaded here.
  Status Init();
  const CallStats& stats() const { return stats_; }
  size_t num_sessions() const;

  using Ctx = grpc::ServerContext;
  grpc::Status GetVersion(Ctx*, const compiler_gym::GetVersionRequest*,
                          compiler_gym::GetVersionReply*) override;
  grpc::Status GetSpaces(Ctx*, const compiler_gym::GetSpacesRequest*,
                         compiler_gym::GetSpacesReply*) override;
  grpc::Status StartSession(Ctx*, const compiler_gym::StartSessionRequest*,
                            compiler_gym::StartSessionReply*) override;
  grpc::Status ForkSession(Ctx*, const compiler_gym::ForkSessionRequest*,
                           compiler_gym::ForkSessionReply*) override;
  grpc::Status EndSession(Ctx*, const compiler_gym::EndSessionRequest*,
                          compiler_gym::EndSessionReply*) override;
  grpc::Status Step(Ctx*, const compiler_gym::StepRequest*, compiler_gym::StepReply*) override;
  grpc::Status GetBenchmarks(Ctx*, const compiler_gym::GetBenchmarksRequest*,
                             compiler_gym::GetBenchmarksReply*) override;
  grpc::Status AddBenchmark(Ctx*, const compiler_gym::AddBenchmarkRequest*,
                            compiler_gym::AddBenchmarkReply*) override;

 private:
  struct SessionSlot {
    std::mutex mu;
    std::unique_ptr<Session> session;
  };
  std::shared_ptr<SessionSlot> FindSession(int64_t id) const;
  grpc::Status AddSession(std::unique_ptr<Session> s, int64_t* id);
  GymStatus LoadBenchmark(const compiler_gym::Benchmark& b, BenchmarkModel* out) const;

  ServiceOptions options_;
  Environment env_;
  CallStats stats_;
  mutable std::mutex mu_;  // guards the tables below
  std::map<std::string, BenchmarkModel> benchmarks_;
  std::map<std::string, size_t> added_bytes_;  // uri -> model file bytes, for added benchmarks
  std::map<int64_t, std::shared_ptr<SessionSlot>> sessions_;
  int64_t next_session_ = 1;
  std::mt19937_64 rng_;
};

grpc::Status ToGrpc(const GymStatus& s);

}  // namespace kiln::gym
