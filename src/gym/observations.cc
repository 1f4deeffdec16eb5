// The observation spaces of the environment and how each is computed.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>
#include <set>
#include <unordered_map>

#include "codegen/c/c_backend.h"
#include "gym/op_count_order.h"
#include "gym/state.h"
#include "ops/op.h"
#include "planner/memory_planner.h"
#include "runtime/executor.h"
#include "support/file_io.h"
#include "support/process.h"
#include "support/sha1.h"

namespace kiln::gym {
namespace {

namespace fs = std::filesystem;
using Kind = ObservationValue::Kind;

enum Space {
  kIr,
  kIrSha1,
  kOpCount,
  kFeatures,
  kArenaBytes,
  kArenaLowerBoundBytes,
  kParamBytes,
  kCodeSizeBytes,
  kRuntime,
  kPipeline,
  kCortexM4Instructions,
  kNumSpaces
};

const char* const kFeatureNames[] = {"nodes (all graphs)",
                                     "nodes (main graph)",
                                     "values (main graph)",
                                     "constants (all graphs)",
                                     "parameter elements",
                                     "parameter bytes",
                                     "intermediate bytes (main graph)",
                                     "input bytes",
                                     "output bytes",
                                     "subgraphs",
                                     "largest rank",
                                     "distinct op types"};
constexpr size_t kNumFeatures = sizeof(kFeatureNames) / sizeof(kFeatureNames[0]);

// The positions of OpCount: the frozen list, then any registered op it lacks (sorted; the gym
// test makes sure a new op is appended to the list instead).
const std::vector<std::string>& OpOrder() {
  static const std::vector<std::string> kOps = [] {
    std::vector<std::string> v = OpCountOrder();
    const std::set<std::string> listed(v.begin(), v.end());
    std::vector<std::string> extra;
    for (const std::string& name : ops::OpRegistry::Global().Names())
      if (!listed.count(name)) extra.push_back(name);
    std::sort(extra.begin(), extra.end());
    v.insert(v.end(), extra.begin(), extra.end());
    return v;
  }();
  return kOps;
}

// The position of each op in OpOrder.
const std::unordered_map<std::string, size_t>& OpPositions() {
  static const std::unordered_map<std::string, size_t> kPositions = [] {
    std::unordered_map<std::string, size_t> p;
    for (size_t i = 0; i < OpOrder().size(); ++i) p.emplace(OpOrder()[i], i);
    return p;
  }();
  return kPositions;
}

void ForEachGraph(const ir::Graph& g, const std::function<void(const ir::Graph&)>& f) {
  f(g);
  for (const auto& n : g.nodes)
    for (const auto& [k, a] : n.attrs) {
      if (a.g) ForEachGraph(*a.g, f);
      for (const auto& sg : a.graphs) ForEachGraph(*sg, f);
    }
}

size_t ValueBytes(const ir::Value& v) {
  if (v.type.kind != ir::TypeInfo::Kind::kTensor || !v.type.shape_known()) return 0;
  return static_cast<size_t>(NumElements(v.type.dims)) * DTypeSize(v.type.dtype);
}

// The values of g that something reads: a node, a subgraph (implicit inputs) or the graph's
// outputs. A constant nothing reads after a pass is not stored by any backend.
std::vector<char> Read(const ir::Graph& g) {
  std::vector<char> read(g.values.size(), 0);
  for (int v : g.outputs) read[v] = 1;
  for (const auto& n : g.nodes) {
    for (int v : n.inputs)
      if (v >= 0) read[v] = 1;
    for (int v : n.implicit_inputs)
      if (v >= 0) read[v] = 1;
  }
  return read;
}

// Calls f on every constant that is read.
void ForEachConstant(const ir::Model& m, const std::function<void(const Tensor&)>& f) {
  ForEachGraph(*m.graph, [&](const ir::Graph& g) {
    std::vector<char> read = Read(g);
    for (size_t i = 0; i < g.values.size(); ++i)
      if (read[i] && g.values[i].constant && g.values[i].constant->kind() == Tensor::Kind::kTensor)
        f(*g.values[i].constant);
  });
}

// Distinct constant storage (identical constants that share bytes count once).
int64_t ParamBytes(const ir::Model& m) {
  std::set<const void*> seen;
  int64_t bytes = 0;
  ForEachConstant(m, [&](const Tensor& t) {
    if (seen.insert(t.raw()).second) bytes += static_cast<int64_t>(t.nbytes());
  });
  return bytes;
}

std::string IrText(const ir::Model& m) { return ir::PrintModel(m); }

// The hash covers the printed IR and every constant's bytes (the print shows constants' types
// only).
std::string IrHash(const ir::Model& m) {
  std::string all = IrText(m);
  ForEachConstant(m, [&](const Tensor& t) {
    if (!t.is_string()) {
      all.append(static_cast<const char*>(t.raw()), t.nbytes());
      return;
    }
    for (int64_t i = 0; i < t.size(); ++i)  // each string with its length, so none run together
      all.append(std::to_string(t.strings()[i].size()) + ":" + t.strings()[i]);
  });
  return Sha1Hex(all);
}

std::vector<int64_t> OpCounts(const ir::Model& m) {
  std::vector<int64_t> counts(OpOrder().size(), 0);
  ForEachGraph(*m.graph, [&](const ir::Graph& g) {
    for (const auto& n : g.nodes) {
      std::string key = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
      auto it = OpPositions().find(key);
      if (it != OpPositions().end()) ++counts[it->second];
    }
  });
  return counts;
}

std::vector<int64_t> Features(const ir::Model& m) {
  std::vector<int64_t> f(kNumFeatures, 0);
  const ir::Graph& main = *m.graph;
  std::set<std::string> ops;
  int64_t graphs = 0;
  ForEachGraph(main, [&](const ir::Graph& g) {
    ++graphs;
    f[0] += static_cast<int64_t>(g.nodes.size());
    for (const auto& n : g.nodes) ops.insert(n.domain + "." + n.op_type);
    for (const auto& v : g.values)
      f[10] = std::max<int64_t>(f[10], static_cast<int64_t>(v.type.dims.size()));
  });
  ForEachConstant(m, [&](const Tensor& t) {
    ++f[3];
    f[4] += t.size();
  });
  f[1] = static_cast<int64_t>(main.nodes.size());
  f[2] = static_cast<int64_t>(main.values.size());
  f[5] = ParamBytes(m);
  for (const auto& v : main.values)
    if (v.producer >= 0) f[6] += static_cast<int64_t>(ValueBytes(v));
  for (int v : main.RuntimeInputs()) f[7] += static_cast<int64_t>(ValueBytes(main.values[v]));
  for (int v : main.outputs) f[8] += static_cast<int64_t>(ValueBytes(main.values[v]));
  f[9] = graphs - 1;
  f[11] = static_cast<int64_t>(ops.size());
  return f;
}

// Runs a command without a shell; true when it exits 0. Its output goes to `log`.
bool RunCommand(const std::vector<std::string>& argv, const std::string& log) {
  return RunProcess(argv, log, true) == 0;
}

// Bytes of the allocated, file-backed sections (text, rodata, data) of an ELF object: what the
// code occupies in flash.
Expected<int64_t> ElfLoadedBytes(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string b, ReadFile(path));
  auto u16 = [&](size_t o) {
    return o + 2 <= b.size() ? uint16_t(uint8_t(b[o]) | uint8_t(b[o + 1]) << 8) : 0;
  };
  auto u32 = [&](size_t o) {
    return o + 4 <= b.size() ? uint32_t(u16(o)) | uint32_t(u16(o + 2)) << 16 : 0;
  };
  auto u64 = [&](size_t o) { return uint64_t(u32(o)) | uint64_t(u32(o + 4)) << 32; };
  if (b.size() < 64 ||
      b.compare(0, 4,
                "\x7f"
                "ELF") != 0 ||
      b[4] != 2 || b[5] != 1)
    return Error(path + ": not a little-endian 64-bit ELF object");
  uint64_t shoff = u64(0x28);
  uint16_t shentsize = u16(0x3a), shnum = u16(0x3c);
  int64_t total = 0;
  for (uint16_t i = 0; i < shnum; ++i) {
    size_t s = static_cast<size_t>(shoff) + size_t(i) * shentsize;
    if (s + 64 > b.size()) return Error(path + ": truncated section table");
    uint32_t type = u32(s + 4);
    uint64_t flags = u64(s + 8), size = u64(s + 0x20);
    const uint64_t kAlloc = 2;
    const uint32_t kProgBits = 1;
    if ((flags & kAlloc) && type == kProgBits) total += static_cast<int64_t>(size);
  }
  return total;
}

// The state's generated C (codegen/c, for `cpu`) written into a new scratch folder *dir, which
// the caller removes.
GymStatus WriteGeneratedC(const Environment& env, const ir::Model& model,
                          const std::string& planner, bool reorder, const std::string& space,
                          const std::string& cpu, fs::path* dir) {
  codegen::c::CompileOptions co;
  co.cpu = cpu;
  co.name = "gym_model";
  co.kiln_version = "gym";
  co.plan.planner = planner;
  co.plan.reorder = reorder;
  co.plan.max_steps = env.options().planner_steps;
  auto compiled = codegen::c::CompileToC(ir::CloneModel(model), co);
  if (!compiled.ok())
    return GymStatus::Error(Code::kFailedPrecondition, space + ": " + compiled.status().message());
  char tmpl[] = "/tmp/kiln-gym-XXXXXX";
  if (!mkdtemp(tmpl))
    return GymStatus::Error(Code::kInternal, space + ": cannot create a scratch folder");
  *dir = tmpl;
  for (const auto& f : compiled->files) {
    Status st = WriteFile((*dir / f.name).string(), f.text);
    if (!st.ok()) return GymStatus::Error(Code::kInternal, space + ": " + st.message());
  }
  return {};
}

GymStatus CodeSize(const Environment& env, const ir::Model& model, const std::string& planner,
                   bool reorder, int64_t* out) {
  fs::path dir;
  GymStatus result =
      WriteGeneratedC(env, model, planner, reorder, "CodeSizeBytes", "generic", &dir);
  *out = 0;
  for (const char* unit : {"gym_model.c", "gym_model_params.c"}) {
    if (!result.ok()) break;
    std::string obj = (dir / unit).string() + ".o";
    if (!RunCommand({env.options().cc, "-std=c99", "-Os", "-c", (dir / unit).string(), "-o", obj},
                    (dir / "cc.log").string())) {
      auto log = ReadFile((dir / "cc.log").string());
      result = GymStatus::Error(
          Code::kInternal, "CodeSizeBytes: " + env.options().cc + " failed on the generated C: " +
                               (log.ok() ? log->substr(0, 400) : std::string("?")));
      break;
    }
    auto bytes = ElfLoadedBytes(obj);
    if (!bytes.ok())
      result = GymStatus::Error(Code::kInternal, "CodeSizeBytes: " + bytes.status().message());
    else
      *out += *bytes;
  }
  std::error_code ec;
  if (!dir.empty()) fs::remove_all(dir, ec);
  return result;
}

// A main for the generated model that runs it R times (R its argument) on fixed pseudo-random
// float inputs (zeros for other types).
constexpr char kCortexM4Main[] = R"(#include <stdlib.h>
#include "gym_model.h"
static uint8_t arena[KILN_GYM_MODEL_WORKSPACE_SIZE + 1] __attribute__((aligned(16)));
int main(int argc, char **argv) {
  const kiln_model_descriptor *d = &kiln_gym_model_descriptor;
  struct kiln_gym_model_inputs in;
  struct kiln_gym_model_outputs out;
  struct kiln_gym_model_workspace ws;
  uint32_t seed = 12345u;
  int runs = argc > 1 ? atoi(argv[1]) : 1, i, r;
  for (i = 0; i < d->num_inputs; ++i) {
    size_t n = d->inputs[i].size_bytes, k;
    uint8_t *p = (uint8_t *)calloc(n + 1, 1);
    if (!p) return 3;
    if (d->inputs[i].dtype == 1)
      for (k = 0; k < n / 4; ++k) {
        seed = seed * 1664525u + 1013904223u;
        ((float *)p)[k] = (float)(seed >> 8) / 8388608.0f - 1.0f;
      }
    kiln_gym_model_set_input(&in, i, p);
  }
  for (i = 0; i < d->num_outputs; ++i) {
    void *p = malloc(d->outputs[i].size_bytes + 1);
    if (!p) return 3;
    kiln_gym_model_set_output(&out, i, p);
  }
  ws.arena = arena;
  for (r = 0; r < runs; ++r)
    if (kiln_gym_model_run(&in, &out, &ws) != KILN_OK) return 2;
  return 0;
}
)";

// Instructions one inference of the generated C executes on the emulated Cortex-M4: the
// program run for R = 3 minus R = 1, halved (scripts/cortex_m4_run --count-instructions).
GymStatus CortexM4Instructions(const Environment& env, const ir::Model& model,
                               const std::string& planner, bool reorder, int64_t* out) {
  const std::string runner = env.options().cortex_m4_run.empty()
                                 ? std::string(KILN_SCRIPTS_DIR) + "/cortex_m4_run"
                                 : env.options().cortex_m4_run;
  const std::string space = "CortexM4Instructions";
  fs::path dir;
  GymStatus result = WriteGeneratedC(env, model, planner, reorder, space, "cortex-m4", &dir);
  if (result.ok()) {
    Status st = WriteFile((dir / "gym_main.c").string(), kCortexM4Main);
    if (!st.ok()) result = GymStatus::Error(Code::kInternal, space + ": " + st.message());
  }
  const std::string elf = (dir / "gym_model.elf").string(), log = (dir / "run.log").string();
  if (result.ok() &&
      !RunCommand({runner, "--out", elf, "--no-run", "--", "-I" + dir.string(),
                   (dir / "gym_model.c").string(), (dir / "gym_model_params.c").string(),
                   (dir / "gym_main.c").string()},
                  log)) {
    auto text = ReadFile(log);
    result = GymStatus::Error(Code::kFailedPrecondition,
                              space + ": building for the Cortex-M4 failed (needs " + runner +
                                  ", arm-none-eabi-gcc and libnewlib-arm-none-eabi): " +
                                  (text.ok() ? text->substr(0, 400) : std::string("?")));
  }
  int64_t counts[2] = {0, 0};
  for (int k = 0; k < 2 && result.ok(); ++k) {
    const std::string runs = k == 0 ? "1" : "3";
    bool ran = RunCommand(
        {runner, "--count-instructions", "--timeout", "600", "--elf", elf, "--run", runs}, log);
    auto text = ReadFile(log);
    const size_t at = text.ok() ? text->find("kiln instructions: ") : std::string::npos;
    if (!ran || at == std::string::npos) {
      result = GymStatus::Error(Code::kFailedPrecondition,
                                space + ": running on qemu-system-arm failed: " +
                                    (text.ok() ? text->substr(0, 400) : std::string("?")));
      break;
    }
    counts[k] = std::atoll(text->c_str() + at + std::string("kiln instructions: ").size());
  }
  *out = (counts[1] - counts[0]) / 2;
  std::error_code ec;
  if (!dir.empty()) fs::remove_all(dir, ec);
  return result;
}

GymStatus Runtime(const Environment& env, const ir::Model& model, const std::string& planner,
                  bool reorder, double* ms) {
  runtime::ExecutorOptions eo;
  eo.planner = planner;
  eo.reorder = reorder;
  eo.planner_steps = env.options().planner_steps;
  auto exec = runtime::Executor::Create(ir::CloneModel(model), eo);
  if (!exec.ok())
    return GymStatus::Error(Code::kFailedPrecondition, "Runtime: " + exec.status().message());
  std::vector<Tensor> inputs;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (int v : (*exec)->input_values()) {
    const ir::TypeInfo& t = (*exec)->value(v).type;
    Tensor x(t.dtype, t.dims);  // zeros: safe for index-like integer inputs
    if (t.dtype == DType::kFloat32)
      for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = uni(rng);
    inputs.push_back(std::move(x));
  }
  std::vector<double> times;
  for (int r = 0; r <= env.options().runtime_runs; ++r) {
    std::vector<Tensor> outputs;
    auto t0 = std::chrono::steady_clock::now();
    Status st = (*exec)->Run(inputs, &outputs);
    auto t1 = std::chrono::steady_clock::now();
    if (!st.ok()) return GymStatus::Error(Code::kFailedPrecondition, "Runtime: " + st.message());
    if (r > 0)
      times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());  // r 0 warms up
  }
  std::sort(times.begin(), times.end());
  *ms = times[times.size() / 2];
  return {};
}

ObservationValue Int(int64_t v) {
  ObservationValue o;
  o.kind = Kind::kScalarInt64;
  o.scalar_int = v;
  return o;
}

ObservationSpaceInfo Space(std::string name, Kind kind, std::string description) {
  ObservationSpaceInfo s;
  s.name = std::move(name);
  s.kind = kind;
  s.description = std::move(description);
  s.default_value.kind = kind;
  s.min = 0;
  s.max = -1;  // +inf
  return s;
}

}  // namespace

std::vector<ObservationSpaceInfo> MakeObservationSpaces() {
  std::vector<ObservationSpaceInfo> v(kNumSpaces);
  v[kIr] = Space("Ir", Kind::kString, "the model as kiln prints it (kiln inspect)");
  v[kIrSha1] =
      Space("IrSha1", Kind::kString, "SHA-1 of the printed IR and every constant's bytes (hex)");
  v[kIrSha1].min = v[kIrSha1].max = 40;
  v[kOpCount] =
      Space("OpCount", Kind::kInt64List,
            "nodes per op type, all graphs, at the frozen positions of gym/op_count_order.cc "
            "(version " +
                std::to_string(kOpCountVersion) + ": sorted names; new ops appended)");
  v[kOpCount].list_length = OpOrder().size();
  v[kOpCount].default_value.ints.assign(OpOrder().size(), 0);
  v[kFeatures] = Space("Features", Kind::kInt64List, "");
  v[kFeatures].list_length = kNumFeatures;
  v[kFeatures].default_value.ints.assign(kNumFeatures, 0);
  for (size_t i = 0; i < kNumFeatures; ++i)
    v[kFeatures].description += std::string(i ? ", " : "") + kFeatureNames[i];
  v[kArenaBytes] =
      Space("ArenaBytes", Kind::kScalarInt64, "the main graph's planned arena (kiln plan)");
  v[kArenaLowerBoundBytes] = Space("ArenaLowerBoundBytes", Kind::kScalarInt64,
                                   "the largest sum of bytes live at once in that schedule");
  v[kParamBytes] = Space("ParamBytes", Kind::kScalarInt64, "bytes of distinct constant storage");
  v[kCodeSizeBytes] = Space(
      "CodeSizeBytes", Kind::kScalarInt64,
      "text+rodata+data of the generated C (NAME.c and NAME_params.c) at -Os with the host cc");
  v[kCodeSizeBytes].platform_dependent = true;  // the host compiler decides
  v[kRuntime] = Space("Runtime", Kind::kScalarDouble, "median ms of the host executor, 1 thread");
  v[kRuntime].deterministic = false;
  v[kRuntime].platform_dependent = true;
  v[kPipeline] =
      Space("Pipeline", Kind::kString,
            "the pipeline file (JSON) that reproduces this state: kiln compile --pipeline FILE");
  v[kPipeline].opaque_data_format = "json";
  v[kCortexM4Instructions] =
      Space("CortexM4Instructions", Kind::kScalarInt64,
            "instructions one inference of the generated C executes on qemu's Cortex-M4 "
            "(mps2-an386, arm-none-eabi-gcc -O2; exact, scripts/qemu_insn_count.c)");
  v[kCortexM4Instructions].platform_dependent = true;  // the cross compiler decides
  return v;
}

GymStatus ComputeObservation(const Environment& env, const State& state, const std::string& planner,
                             bool reorder, int space, ObservationValue* out) {
  if (space == kPipeline)
    return GymStatus::Error(Code::kInternal, "Pipeline is the session's, not the state's");
  const bool planned = space == kArenaBytes || space == kArenaLowerBoundBytes ||
                       space == kCodeSizeBytes || space == kCortexM4Instructions;
  std::string key =
      std::to_string(space) + (planned ? "|" + planner + (reorder ? "|r" : "|f") : "");
  // The greedy planners take microseconds: only search planners' plans are worth keeping.
  const bool cheap_plan = planner == "none" || planner == "tflm" || planner == "greedy-size" ||
                          planner == "greedy-conflicts";
  const bool cache = space != kRuntime &&
                     !(cheap_plan && (space == kArenaBytes || space == kArenaLowerBoundBytes));
  if (cache && state.Cached(key, out)) return {};
  const ir::Model& m = state.model();
  ObservationValue v;
  v.kind = env.observation_spaces()[space].kind;
  switch (space) {
    case kIr:
      v.str = IrText(m);
      break;
    case kIrSha1:
      v.str = IrHash(m);
      break;
    case kOpCount:
      v.ints = OpCounts(m);
      break;
    case kFeatures:
      v.ints = Features(m);
      break;
    case kArenaBytes:
    case kArenaLowerBoundBytes: {
      auto sched = state.Schedule(reorder);
      auto plan = planner::PlanMemory(sched->buffers.buffers, planner, env.options().planner_steps);
      if (!plan.ok())
        return GymStatus::Error(Code::kInternal, "ArenaBytes: " + plan.status().message());
      if (cache) {
        state.Cache(std::to_string(kArenaBytes) + key.substr(key.find('|')),
                    Int(static_cast<int64_t>(plan->arena_bytes)));
        state.Cache(std::to_string(kArenaLowerBoundBytes) + key.substr(key.find('|')),
                    Int(static_cast<int64_t>(plan->lower_bound_bytes)));
      }
      v = Int(
          static_cast<int64_t>(space == kArenaBytes ? plan->arena_bytes : plan->lower_bound_bytes));
      break;
    }
    case kParamBytes:
      v = Int(ParamBytes(m));
      break;
    case kCodeSizeBytes: {
      GymStatus st = CodeSize(env, m, planner, reorder, &v.scalar_int);
      if (!st.ok()) return st;
      break;
    }
    case kRuntime: {
      GymStatus st = Runtime(env, m, planner, reorder, &v.scalar_double);
      if (!st.ok()) return st;
      break;
    }
    case kCortexM4Instructions: {
      GymStatus st = CortexM4Instructions(env, m, planner, reorder, &v.scalar_int);
      if (!st.ok()) return st;
      break;
    }
  }
  if (cache) state.Cache(key, v);
  *out = std::move(v);
  return {};
}

}  // namespace kiln::gym
