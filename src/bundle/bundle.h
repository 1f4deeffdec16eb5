// The bundled program (`.bpte`, DESIGN.md section 2.3): a serialized `.kiln` program plus test
// input / expected-output sets, in ExecuTorch's BundledProgram FlatBuffers schema
// (bundled_program_schema.fbs, the seed schema byte for byte; file identifier "BP06"), so any
// reader flatc generates from that schema reads kiln's bundles.
//
// Layout kiln writes: `program` holds the .kiln bytes (16-byte aligned); one
// BundledExecutionPlanTest, method "forward"; one BundledIOSet per test set with the inputs in
// graph order (a rank-0 INT64 / BOOL / DOUBLE input as an Int / Bool / Double value, everything
// else a Tensor) and the expected outputs as Tensors; sizes are the dims, dim_order the identity,
// data the row-major little-endian bytes, 16-byte aligned.
//
// Reading: the FlatBuffers verifier runs first, then the identifier, version and method, then the
// program (bundle/program.h), then every test set against the program's inputs and outputs (count,
// element type and shape). Every failure is a Status whose message starts with the file's label.
//
// Integrity: the program inside carries the SHA-256 of the whole bundle (its digest fields read as
// zeros) and of every test tensor (element type, dims, bytes), so that any altered byte is refused
// and, when it lies in test data, the tensor is named. A program kiln did not seal for a bundle
// (another tool's bundle around a .kiln) carries neither; its own digest is still checked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bundle/program.h"
#include "ir/graph.h"
#include "support/status.h"

namespace kiln::bundle {

// The BundledProgram.version kiln writes and reads.
constexpr uint32_t kBundleSchemaVersion = 0;
constexpr const char* kBundleIdentifier = "BP06";
constexpr const char* kMethodName = "forward";

struct TestSet {
  std::vector<Tensor> inputs;            // one per graph input a caller feeds, graph order
  std::vector<Tensor> expected_outputs;  // one per graph output
};

struct Bundle {
  uint32_t version = kBundleSchemaVersion;
  std::string method_name;
  Program program;
  // The serialized program inside the file (valid while keep_alive lives).
  const uint8_t* program_data = nullptr;
  size_t program_size = 0;
  std::shared_ptr<const void> keep_alive;
  std::vector<TestSet> test_sets;
  size_t file_bytes = 0;
};

// ExecuTorch's ScalarType for a kiln element type, or -1 when there is none.
int ScalarTypeOf(DType t);
// The kiln element type of a ScalarType, or kUndefined when kiln has none.
DType DTypeOfScalarType(int scalar_type);
// "FLOAT", "LONG", ...; "" for unknown values.
const char* ScalarTypeName(int scalar_type);

// Checks that every test set agrees with the graph's runtime inputs and outputs in count, element
// type and shape (dims the graph leaves unknown take any size).
Status CheckTestSets(const ir::Graph& g, const std::vector<TestSet>& sets,
                     const std::string& label);

// Writes a bundle. `program_bytes` is a serialized .kiln program whose main graph is `g`.
Expected<std::string> SerializeBundle(const std::string& program_bytes, const ir::Graph& g,
                                      const std::vector<TestSet>& sets);

// Recomputes the digests of bundle bytes edited in place (bundles forged on purpose: fuzzing,
// tests). SerializeBundle seals what it writes.
Status ResealBundle(uint8_t* data, size_t size);

// Reads a bundle; its program's constants borrow the bytes when they are aligned (see
// LoadProgram), test-set tensors are copies.
Expected<Bundle> LoadBundle(const uint8_t* data, size_t size,
                            std::shared_ptr<const void> keep_alive, const std::string& label);
Expected<Bundle> LoadBundleFile(const std::string& path);

// True when the bytes carry the .bpte file identifier (the file may still be invalid).
bool LooksLikeBundle(const uint8_t* data, size_t size);

}  // namespace kiln::bundle
