// A C++ client of the CompilerGym service (any server speaking seed 002: kiln serve, or the
// in-process one kiln tune starts). Errors carry the gRPC status name and message.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "compiler_gym_service.grpc.pb.h"
#include "support/status.h"

namespace kiln::gym {

struct Spaces {
  std::vector<std::string> actions;  // of action space 0
  std::vector<compiler_gym::ObservationSpace> observations;
  int Action(const std::string& name) const;       // -1 when absent
  int Observation(const std::string& name) const;  // -1 when absent
};

struct StepOutcome {
  bool end_of_session = false, action_had_no_effect = false;
  std::vector<compiler_gym::Observation> observations;
};

class GymClient {
 public:
  explicit GymClient(std::shared_ptr<grpc::Channel> channel);
  // Connects to host:port (or unix:PATH), waiting up to `timeout_s` for the server.
  static Expected<std::unique_ptr<GymClient>> Connect(const std::string& address,
                                                      double timeout_s = 10);

  Expected<Spaces> GetSpaces();
  Status AddBenchmark(const std::string& uri, const std::string& onnx_bytes);
  Expected<int64_t> StartSession(const std::string& benchmark);
  Expected<StepOutcome> Step(int64_t session, const std::vector<int>& actions,
                             const std::vector<int>& observation_spaces);
  Expected<int64_t> Fork(int64_t session);
  Status EndSession(int64_t session);
  Expected<std::vector<std::string>> GetBenchmarks();
  const std::string& address() const { return address_; }

 private:
  std::unique_ptr<compiler_gym::CompilerGymService::Stub> stub_;
  std::string address_;
};

// An observation as a double (scalars; list and string observations are not objectives).
Expected<double> ObservationNumber(const compiler_gym::Observation& o);

}  // namespace kiln::gym
