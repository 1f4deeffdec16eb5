// The `.kiln` program file: a model after kiln's passes (shape inference), the schedule and memory
// plan of its main graph, and its constants, as FlatBuffers (schema: kiln_program.fbs, file
// identifier "KILN"). `kiln run MODEL.kiln` runs it without the ONNX file and gets the same bits as
// from the ONNX file: the graph, attributes and constant bytes are stored exactly.
//
// Loading never trusts the bytes: the FlatBuffers verifier runs first, then every field is
// validated (identifier, schema version, value/node indices, dtypes and dims, constant ranges
// inside the data section, subgraph nesting depth, the schedule as a topological order, the memory
// plan by planner::VerifyNoOverlap) and the graph by ir::Verify. Every failure is a Status whose
// message starts with the file's label.
//
// Integrity: every program carries the SHA-256 of its own bytes (the digest field read as zeros),
// checked on load right after the verifier, so that any altered byte is reported as such rather
// than read as a different, valid program. A program inside a .bpte also carries the digest of the
// whole bundle and one per test tensor (bundle/bundle.h checks those).
//
// FlatBuffers stays inside this folder: this header exposes only kiln types.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bundle/sha256.h"
#include "ir/graph.h"
#include "planner/plan_graph.h"
#include "support/status.h"

namespace kiln::bundle {

// Readers refuse other versions.
constexpr uint32_t kProgramSchemaVersion = 2;
constexpr const char* kProgramIdentifier = "KILN";
// How deep If/Loop/Scan bodies may nest in a program file.
constexpr int kMaxSubgraphDepth = 32;

struct ProgramMetadata {
  uint32_t schema_version = kProgramSchemaVersion;
  std::string kiln_version;
  std::string source_name;    // the file the program was compiled from
  std::string source_sha256;  // 32 raw bytes, or empty when unknown
  // Sealed for a bundle: the program carries a bundle digest and these test-tensor digests (set by
  // set, inputs then expected outputs). Written by SerializeBundle; read back on load.
  bool bundled = false;
  std::vector<Digest> test_data_sha256;
};

// Where the integrity digests lie in a program's bytes (offsets from its first byte, 32 bytes
// each).
struct SealOffsets {
  size_t program_digest = 0;
  size_t bundle_digest = 0;  // valid when bundled
  bool bundled = false;
};

struct ProgramStats {
  size_t file_bytes = 0;
  size_t data_bytes = 0;        // the constant data section, padding included
  size_t constants = 0;         // constant tensors (initializers and tensor attributes)
  size_t unique_constants = 0;  // distinct byte ranges in the data section
};

struct Program {
  ProgramMetadata metadata;
  ir::Model model;
  // The main graph's schedule and memory plan as stored, and the options that made them.
  planner::Schedule schedule;
  planner::Plan plan;
  planner::PlanOptions plan_options;
  ProgramStats stats;
  SealOffsets seal;
};

// The SHA-256 of a model file and, when given, its weights file (hashed after it).
Expected<std::string> HashSourceFiles(const std::string& model_path,
                                      const std::string& weights_path);

// Serializes a model (shapes inferred) and the plan of its main graph (PlanGraph of
// *model.graph with `plan_options`). Fails for models past FlatBuffers' 2 GiB limit and for
// constants kiln cannot store as flat bytes.
Expected<std::string> SerializeProgram(const ir::Model& model, const planner::GraphPlan& plan,
                                       const planner::PlanOptions& plan_options,
                                       const ProgramMetadata& metadata);

// Reads a program from bytes. Constant tensors borrow the bytes (kept alive by `keep_alive`; they
// are copied when it is null); bytes that do not start 16-byte aligned are copied to an aligned
// buffer first. `label` names the file in error messages.
Expected<Program> LoadProgram(const uint8_t* data, size_t size,
                              std::shared_ptr<const void> keep_alive, const std::string& label);
// Maps the file and reads it.
Expected<Program> LoadProgramFile(const std::string& path);

// Re-serializes a loaded program with `metadata` (e.g. to seal it for a bundle).
Expected<std::string> ReserializeProgram(const Program& program, const ProgramMetadata& metadata);

// Where the digests lie in a program's bytes (the FlatBuffers verifier runs first).
Expected<SealOffsets> FindSeal(const uint8_t* data, size_t size);
// Computes a program's own digest and writes it into its bytes (after a bundle digest was patched
// in).
void WriteProgramDigest(uint8_t* data, size_t size, const SealOffsets& seal);
// FindSeal, then WriteProgramDigest: program bytes edited in place made whole again (fuzzing,
// tests).
Status ResealProgram(uint8_t* data, size_t size);

// True when the bytes carry the .kiln file identifier (the file may still be invalid).
bool LooksLikeProgram(const uint8_t* data, size_t size);

}  // namespace kiln::bundle
