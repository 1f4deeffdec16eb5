#include "gym/client.h"

#include <chrono>

namespace kiln::gym {
namespace {

namespace cg = compiler_gym;

const char* CodeName(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    default:
      return "ERROR";
  }
}

Status FromGrpc(const grpc::Status& s, const std::string& call, const std::string& address) {
  if (s.ok()) return OkStatus();
  return Error(call + " at " + address + ": " + CodeName(s.error_code()) + ": " +
               s.error_message());
}

}  // namespace

int Spaces::Action(const std::string& name) const {
  for (size_t i = 0; i < actions.size(); ++i)
    if (actions[i] == name) return static_cast<int>(i);
  return -1;
}

int Spaces::Observation(const std::string& name) const {
  for (size_t i = 0; i < observations.size(); ++i)
    if (observations[i].name() == name) return static_cast<int>(i);
  return -1;
}

GymClient::GymClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(cg::CompilerGymService::NewStub(channel)) {}

Expected<std::unique_ptr<GymClient>> GymClient::Connect(const std::string& address,
                                                        double timeout_s) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  auto deadline = std::chrono::system_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  if (!channel->WaitForConnected(deadline))
    return Error("cannot reach a gym service at " + address + " within " +
                 std::to_string(static_cast<int>(timeout_s + 0.5)) + " s");
  auto c = std::make_unique<GymClient>(channel);
  c->address_ = address;
  return c;
}

Expected<Spaces> GymClient::GetSpaces() {
  grpc::ClientContext ctx;
  cg::GetSpacesRequest req;
  cg::GetSpacesReply reply;
  KILN_RETURN_IF_ERROR(FromGrpc(stub_->GetSpaces(&ctx, req, &reply), "GetSpaces", address_));
  if (reply.action_space_list_size() < 1)
    return Error("GetSpaces at " + address_ + ": no action space");
  Spaces s;
  for (const auto& a : reply.action_space_list(0).action()) s.actions.push_back(a);
  for (const auto& o : reply.observation_space_list()) s.observations.push_back(o);
  return s;
}

Status GymClient::AddBenchmark(const std::string& uri, const std::string& onnx_bytes) {
  grpc::ClientContext ctx;
  cg::AddBenchmarkRequest req;
  cg::AddBenchmarkReply reply;
  auto* b = req.add_benchmark();
  b->set_uri(uri);
  b->mutable_program()->set_contents(onnx_bytes);
  return FromGrpc(stub_->AddBenchmark(&ctx, req, &reply), "AddBenchmark", address_);
}

Expected<int64_t> GymClient::StartSession(const std::string& benchmark) {
  grpc::ClientContext ctx;
  cg::StartSessionRequest req;
  cg::StartSessionReply reply;
  req.set_benchmark(benchmark);
  KILN_RETURN_IF_ERROR(FromGrpc(stub_->StartSession(&ctx, req, &reply), "StartSession", address_));
  return reply.session_id();
}

Expected<StepOutcome> GymClient::Step(int64_t session, const std::vector<int>& actions,
                                      const std::vector<int>& observation_spaces) {
  grpc::ClientContext ctx;
  cg::StepRequest req;
  cg::StepReply reply;
  req.set_session_id(session);
  for (int a : actions) req.add_action(a);
  for (int o : observation_spaces) req.add_observation_space(o);
  KILN_RETURN_IF_ERROR(FromGrpc(stub_->Step(&ctx, req, &reply), "Step", address_));
  StepOutcome out;
  out.end_of_session = reply.end_of_session();
  out.action_had_no_effect = reply.action_had_no_effect();
  for (const auto& o : reply.observation()) out.observations.push_back(o);
  if (out.observations.size() != observation_spaces.size())
    return Error("Step at " + address_ + ": asked for " +
                 std::to_string(observation_spaces.size()) + " observations, got " +
                 std::to_string(out.observations.size()));
  return out;
}

Expected<int64_t> GymClient::Fork(int64_t session) {
  grpc::ClientContext ctx;
  cg::ForkSessionRequest req;
  cg::ForkSessionReply reply;
  req.set_session_id(session);
  KILN_RETURN_IF_ERROR(FromGrpc(stub_->ForkSession(&ctx, req, &reply), "ForkSession", address_));
  return reply.session_id();
}

Status GymClient::EndSession(int64_t session) {
  grpc::ClientContext ctx;
  cg::EndSessionRequest req;
  cg::EndSessionReply reply;
  req.set_session_id(session);
  return FromGrpc(stub_->EndSession(&ctx, req, &reply), "EndSession", address_);
}

Expected<std::vector<std::string>> GymClient::GetBenchmarks() {
  grpc::ClientContext ctx;
  cg::GetBenchmarksRequest req;
  cg::GetBenchmarksReply reply;
  KILN_RETURN_IF_ERROR(
      FromGrpc(stub_->GetBenchmarks(&ctx, req, &reply), "GetBenchmarks", address_));
  return std::vector<std::string>(reply.benchmark().begin(), reply.benchmark().end());
}

Expected<double> ObservationNumber(const cg::Observation& o) {
  if (o.value_case() == cg::Observation::kScalarInt64) return static_cast<double>(o.scalar_int64());
  if (o.value_case() == cg::Observation::kScalarDouble) return o.scalar_double();
  return Error("the observation is not a scalar");
}

}  // namespace kiln::gym
