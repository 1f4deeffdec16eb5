// kiln serve (the CompilerGym service, DESIGN.md 2.6) and kiln tune (its search client).
#include <grpc/grpc.h>
#include <grpc/support/log.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "cli/commands.h"
#include "cli/common.h"
#include "gym/service.h"
#include "gym/tune.h"
#include "passes/pipeline.h"
#include "support/file_io.h"
#include "support/process.h"

namespace kiln::cli {
namespace {

struct ServeCliOptions {
  std::string address = "127.0.0.1:50051", stats_file, cc = "cc";
  size_t max_sessions = 4096, max_benchmark_bytes = size_t{256} << 20,
         max_total_benchmark_bytes = size_t{1} << 30;
  long planner_steps = 2000;
  uint64_t seed = 0;
};

gym::ServiceOptions ServiceOptionsOf(const ServeCliOptions& o) {
  gym::ServiceOptions so;
  so.environment.cc = o.cc;
  so.environment.planner_steps = o.planner_steps;
  so.max_sessions = o.max_sessions;
  so.max_benchmark_bytes = o.max_benchmark_bytes;
  so.max_total_benchmark_bytes = o.max_total_benchmark_bytes;
  so.seed = o.seed;
  so.service_version = std::string("kiln-gym ") + kKilnVersion;
  so.compiler_version = std::string("kiln ") + kKilnVersion;
  return so;
}

// gRPC's own log lines would break the one-line error contract; kiln reports what fails itself.
void QuietGrpcLogs() {
  gpr_set_log_function([](gpr_log_func_args*) {});
}

// gRPC unlinks an existing unix socket file before it binds, which would take the address from a
// service listening there: refuse a socket that answers, and any file that is not a socket.
Status CheckUnixAddress(const std::string& address) {
  if (address.rfind("unix:", 0) != 0) return OkStatus();
  const std::string path = address.rfind("unix://", 0) == 0 ? address.substr(7) : address.substr(5);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return OkStatus();  // nothing there yet
  if (!S_ISSOCK(st.st_mode))
    return Error("--address " + address + ": " + path + " exists and is not a socket");
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof(sa.sun_path))
    return Error("--address " + address + ": the path is too long");
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return OkStatus();
  const bool live = connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0;
  close(fd);
  if (live)
    return Error("--address " + address + ": cannot listen there (in use by another process)");
  return OkStatus();  // a stale socket file: gRPC replaces it
}

std::unique_ptr<grpc::Server> BuildServer(gym::Service* service, const std::string& address,
                                          int* port) {
  grpc::ServerBuilder b;
  // gRPC sets SO_REUSEPORT by default, which lets a second service bind a port in use and share
  // its connections; kiln refuses a taken port instead.
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  b.RegisterService(service);
  b.SetMaxReceiveMessageSize(-1);  // benchmarks are bounded by --max-benchmark-bytes instead
  b.SetMaxSendMessageSize(-1);
  return b.BuildAndStart();
}

int ServeMain(const ServeCliOptions& o) {
  if (o.planner_steps < 1) return Fail(Error("--planner-steps must be at least 1"));
  QuietGrpcLogs();
  // SIGTERM / SIGINT are taken by sigwait below; the gRPC threads started next inherit the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  gym::Service service(ServiceOptionsOf(o));
  Status st = service.Init();
  if (!st.ok()) return Fail(st);
  if (Status u = CheckUnixAddress(o.address); !u.ok()) return Fail(u);
  int port = 0;
  auto server = BuildServer(&service, o.address, &port);
  if (!server || port == 0)
    return Fail(Error("--address " + o.address +
                      ": cannot listen there (in use by another process, or not an "
                      "address of this machine)"));
  std::string shown = o.address;
  if (shown.rfind("unix:", 0) != 0)
    shown = shown.substr(0, shown.rfind(':')) + ":" + std::to_string(port);
  std::fprintf(stderr, "kiln serve: listening on %s\n", shown.c_str());
  std::fflush(stderr);
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "kiln serve: %s, shutting down (%zu sessions open)\n",
               sig == SIGTERM ? "SIGTERM" : "SIGINT", service.num_sessions());
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();
  if (!o.stats_file.empty()) {
    Status w = WriteFile(o.stats_file, service.stats().ToJson());
    if (!w.ok()) return Fail(w);
  }
  return 0;
}

// What tune found and what it wrote: the printed pipeline is the file's, parsed back.
void PrintTuneResult(const std::string& model, const gym::TuneResult& r, const std::string& out) {
  const bool ms = r.observation == "Runtime";
  const char* unit = ms ? " ms" : " bytes";
  const int digits = ms ? 3 : 0;
  std::string how;  // how the decision was taken, for a measured objective
  if (r.margin > 0) {
    how = "the " + std::to_string(static_cast<int>(r.margin * 100 + 0.5)) + "% noise margin";
    if (r.confirm_rounds > 0)
      how += ", medians of " + std::to_string(r.confirm_rounds) + " alternating timings";
  }
  if (r.improved) {
    double gain = r.baseline > 0 ? (r.baseline - r.best) / r.baseline * 100 : 0;
    std::printf(
        "%s: %s default pipeline %.*f%s, best %.*f%s (%.2f%% better%s%s) after %d evaluations\n",
        model.c_str(), r.observation.c_str(), digits, r.baseline, unit, digits, r.best, unit, gain,
        how.empty() ? "" : ", beyond ", how.c_str(), r.evaluations);
  } else {
    std::printf(
        "%s: %s: no sequence beat the default pipeline (%.*f%s)%s%s after %d evaluations; keeping "
        "the "
        "default\n",
        model.c_str(), r.observation.c_str(), digits, r.baseline, unit, how.empty() ? "" : " by ",
        how.c_str(), r.evaluations);
  }
  auto p = passes::ParsePipeline(r.pipeline_json, out);
  std::string passes_list;
  if (p.ok())
    for (const auto& name : p->passes) passes_list += (passes_list.empty() ? "" : ", ") + name;
  std::printf("pipeline written to %s: passes [%s], planner %s%s (kiln compile --pipeline %s)\n",
              out.c_str(), passes_list.c_str(), p.ok() ? p->planner.c_str() : "?",
              p.ok() && !p->reorder ? ", file order" : "", out.c_str());
}

struct TuneCliOptions {
  std::string model, objective, output, dask;
  std::vector<std::string> connect;
  int budget = 100, jobs = 2, max_length = 0;
  uint64_t seed = 0;
  long planner_steps = 2000;
  bool quiet = false;
};

// Writes the pipeline file and says what tune found.
int WriteTuneResult(const TuneCliOptions& o, const gym::TuneResult& r) {
  std::filesystem::path mp(o.model);
  std::string out = o.output.empty() ? mp.stem().string() + ".pipeline.json" : o.output;
  Status w = WriteFile(out, r.pipeline_json);
  if (!w.ok()) return Fail(w);
  PrintTuneResult(o.model, r, out);
  return 0;
}

// kiln tune --dask: the search runs in the Python package (kiln.tune with a dask.distributed
// Client, python/kiln/_dask_tune.py), which prints its result as JSON. Its errors are its own
// one-line messages.
Expected<gym::TuneResult> TuneOnDask(const TuneCliOptions& o) {
#ifdef KILN_PYTHON_EXECUTABLE
  const std::string json_path =
      std::filesystem::temp_directory_path() / ("kiln-tune-" + std::to_string(getpid()) + ".json");
  std::string pythonpath = KILN_PYTHON_PATH;
  if (const char* p = std::getenv("PYTHONPATH"); p && *p) pythonpath += std::string(":") + p;
  const int rc = RunProcess(
      {KILN_PYTHON_EXECUTABLE, "-m", "kiln._dask_tune", "--scheduler", o.dask, "--objective",
       o.objective, "--budget", std::to_string(o.budget), "--seed", std::to_string(o.seed),
       "--max-length", std::to_string(o.max_length), "--planner-steps",
       std::to_string(o.planner_steps), o.quiet || !isatty(2) ? "--quiet" : "--progress", o.model},
      json_path, false, {{"PYTHONPATH", pythonpath}});
  auto text = ReadFile(json_path);
  std::filesystem::remove(json_path);
  if (rc == 127 || rc < 0)
    return Error(std::string("--dask: cannot run ") + KILN_PYTHON_EXECUTABLE +
                 " with the kiln package");
  if (rc != 0) return Error("");  // the Python side printed its error
  if (!text.ok()) return text.status();
  auto r = gym::TuneResultFromJson(*text);
  if (!r.ok())
    return Error("--dask: the Python search gave no result (" + r.status().message() + ")");
  return r;
#else
  return Error(
      "--dask: this kiln was built without its Python package (python3-dev, pybind11-dev)");
#endif
}

int TuneMain(const TuneCliOptions& o) {
  std::filesystem::path mp(o.model);
  if (mp.extension() != ".onnx") return Fail(Error(o.model + ": kiln tune takes an .onnx model"));
  auto bytes = ReadFile(o.model);
  if (!bytes.ok()) return Fail(bytes.status());
  if (!o.dask.empty()) {
    if (!o.connect.empty()) return Fail(Error("--dask and --connect exclude each other"));
    auto r = TuneOnDask(o);
    if (!r.ok()) return r.status().message().empty() ? 1 : Fail(r.status());
    return WriteTuneResult(o, *r);
  }
  QuietGrpcLogs();
  // Without --connect, one service runs in this process and the workers reach it in memory.
  std::unique_ptr<gym::Service> local;
  std::unique_ptr<grpc::Server> server;
  std::vector<std::unique_ptr<gym::GymClient>> owned;
  if (o.connect.empty()) {
    ServeCliOptions so;
    so.planner_steps = o.planner_steps;
    local = std::make_unique<gym::Service>(ServiceOptionsOf(so));
    Status st = local->Init();
    if (!st.ok()) return Fail(st);
    grpc::ServerBuilder b;
    b.RegisterService(local.get());
    b.SetMaxReceiveMessageSize(-1);
    server = b.BuildAndStart();
    if (!server) return Fail(Error("cannot start the in-process gym service"));
    for (int j = 0; j < o.jobs; ++j)
      owned.push_back(
          std::make_unique<gym::GymClient>(server->InProcessChannel(grpc::ChannelArguments())));
  } else {
    for (int j = 0; j < o.jobs; ++j) {  // workers spread over the replicas round-robin
      auto c = gym::GymClient::Connect(o.connect[j % o.connect.size()]);
      if (!c.ok()) return Fail(c.status());
      owned.push_back(std::move(*c));
    }
  }
  std::vector<gym::GymClient*> clients;
  for (auto& c : owned) clients.push_back(c.get());
  std::string uri = "benchmark://tune/" + mp.stem().string();
  size_t replicas = o.connect.empty() ? 1 : std::min(o.connect.size(), clients.size());
  for (size_t i = 0; i < replicas; ++i) {  // client i reaches replica i
    Status st = clients[i]->AddBenchmark(uri, *bytes);
    if (!st.ok()) return Fail(st);
  }
  gym::TuneOptions to;
  to.objective = o.objective;
  to.budget = o.budget;
  to.seed = o.seed;
  to.max_length = o.max_length;
  const bool bar = !o.quiet && isatty(2);
  if (bar)
    to.progress = [](int done, int total, double best) {
      int w = 30, filled = total > 0 ? std::min(w, done * w / total) : w;
      std::fprintf(stderr, "\r[%s%s] %d/%d  best %.6g ", std::string(filled, '#').c_str(),
                   std::string(w - filled, '.').c_str(), done, total, best);
    };
  auto r = gym::Tune(clients, uri, to);
  if (bar) std::fprintf(stderr, "\n");
  if (server) server->Shutdown();
  if (!r.ok()) return Fail(Error(o.model + ": " + r.status().message()));
  return WriteTuneResult(o, *r);
}

}  // namespace

void AddServeCommand(CLI::App& app, int& rc) {
  auto* c = app.add_subcommand("serve", "run the CompilerGym optimization service (gRPC)");
  auto o = std::make_shared<ServeCliOptions>();
  c->add_option("--address", o->address,
                "host:port to listen on (port 0: any free port), or unix:PATH");
  c->add_option("--max-sessions", o->max_sessions,
                "sessions held at once before RESOURCE_EXHAUSTED")
      ->check(IntegerIn(1, 1000000000));
  c->add_option("--max-benchmark-bytes", o->max_benchmark_bytes, "largest model AddBenchmark takes")
      ->check(IntegerIn(1, kMaxBytesOption));
  c->add_option("--max-total-benchmark-bytes", o->max_total_benchmark_bytes,
                "model bytes all added benchmarks may hold together")
      ->check(IntegerIn(1, kMaxBytesOption));
  c->add_option("--stats-file", o->stats_file,
                "on shutdown, write server-side call times here (JSON)");
  c->add_option("--cc", o->cc, "C compiler for the CodeSizeBytes observation");
  c->add_option("--planner-steps", o->planner_steps,
                "search steps per planner (deterministic plans)")
      ->check(IntegerIn(1, 1000000000));
  c->add_option("--seed", o->seed, "picks the benchmark of a session that names none")
      ->check(UnsignedInteger());
  c->callback([&rc, o] { rc = ServeMain(*o); });
}

void AddTuneCommand(CLI::App& app, int& rc) {
  auto* c = app.add_subcommand("tune",
                               "search pass sequences and planner choices through the gym service");
  auto o = std::make_shared<TuneCliOptions>();
  c->add_option("MODEL", o->model, "model file (.onnx)")->required();
  c->add_option("--objective", o->objective, "what to minimize")
      ->required()
      ->check(OneOf({"arena", "codesize", "latency"}));
  c->add_option("--budget", o->budget, "candidate sequences evaluated")
      ->check(IntegerIn(2, 1000000));
  c->add_option("--seed", o->seed, "random search seed")->check(UnsignedInteger());
  c->add_option("--jobs", o->jobs, "sessions evaluated at once")->check(IntegerIn(1, 256));
  c->add_option("--max-length", o->max_length,
                "longest random sequence (default: the number of actions)")
      ->check(IntegerIn(0, 1000000));
  c->add_option("--connect", o->connect,
                "gym services to use (host:port, repeatable) instead of an in-process one");
  c->add_option("--dask", o->dask,
                "evaluate candidates on a Dask cluster's workers (its scheduler, "
                "tcp://HOST:8786) through the Python package");
  c->add_option("-o,--output", o->output,
                "pipeline file to write (default MODEL_STEM.pipeline.json)");
  c->add_option("--planner-steps", o->planner_steps,
                "search steps per planner of the in-process service")
      ->check(IntegerIn(1, 1000000000));
  c->add_flag("-q,--quiet", o->quiet, "no progress bar");
  c->callback([&rc, o] { rc = TuneMain(*o); });
}

}  // namespace kiln::cli
