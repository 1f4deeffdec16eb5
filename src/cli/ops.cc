// kiln ops: which operators each backend runs (the host executor's registry, the C and CUDA
// emitters' tables), so that a user knows before compiling whether a model can go there.
#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "codegen/c/node_emitter.h"
#include "codegen/cuda/cuda_emit.h"
#include "ops/op.h"

namespace kiln::cli {
namespace {

struct OpsCliOptions {
  std::string backend;  // "" lists all three
  bool json = false;
};

// Per op ("op" or "domain.op"): host, c, cuda.
std::map<std::string, std::array<bool, 3>> SupportTable() {
  std::map<std::string, std::array<bool, 3>> t;
  for (const auto& n : ops::OpRegistry::Global().Names()) t[n][0] = true;
  for (const auto& n : codegen::c::EmitterRegistry::Global().Names()) t[n][1] = true;
  for (const auto& n : codegen::cuda::EmittedOps()) t[n][2] = true;
  return t;
}

int OpsMain(const OpsCliOptions& o) {
  const auto table = SupportTable();
  const char* names[3] = {"host", "c", "cuda"};
  int column = -1;
  for (int b = 0; b < 3; ++b)
    if (o.backend == names[b]) column = b;
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [op, s] : table) {
      if (column >= 0 && !s[column]) continue;
      out.push_back({{"op", op}, {"host", s[0]}, {"c", s[1]}, {"cuda", s[2]}});
    }
    std::printf("%s\n", nlohmann::json{{"ops", out}}.dump(1).c_str());
    return 0;
  }
  if (column >= 0) {
    for (const auto& [op, s] : table)
      if (s[column]) std::printf("%s\n", op.c_str());
    return 0;
  }
  int count[3] = {0, 0, 0};
  std::printf("%-40s %-5s %-5s %s\n", "op", "host", "c", "cuda");
  for (const auto& [op, s] : table) {
    std::printf("%-40s %-5s %-5s %s\n", op.c_str(), s[0] ? "yes" : "-", s[1] ? "yes" : "-",
                s[2] ? "yes" : "-");
    for (int b = 0; b < 3; ++b) count[b] += s[b];
  }
  std::printf("%zu ops: host %d, c %d, cuda %d\n", table.size(), count[0], count[1], count[2]);
  return 0;
}

}  // namespace

void AddOpsCommand(CLI::App& app, int& rc) {
  auto* c = app.add_subcommand("ops", "list the operators each backend runs (host, c, cuda)");
  auto o = std::make_shared<OpsCliOptions>();  // owned by the callback
  c->add_option("--backend", o->backend, "only the ops of this backend, one per line")
      ->check(OneOf({"host", "c", "cuda"}));
  c->add_flag("--json", o->json, "one JSON object: ops, each with host, c and cuda");
  c->callback([&rc, o] { rc = OpsMain(*o); });
}

}  // namespace kiln::cli
