#include "bundle/bundle.h"

#include <cstring>

#include "bundle/aligned_bytes.h"
#include "bundled_program_schema_generated.h"
#include "support/file_io.h"

namespace kiln::bundle {

namespace bp = bundled_program_flatbuffer;
namespace et = executorch_flatbuffer;

namespace {

constexpr size_t kTensorAlignment = 16;
constexpr size_t kMaxRank = 255;  // dim_order is [ubyte]

struct ScalarTypeEntry {
  DType dtype;
  int scalar_type;
  const char* name;
};

// DESIGN.md 2.3: ExecuTorch's values. Entries without a kiln dtype are listed for their names.
constexpr ScalarTypeEntry kScalarTypes[] = {
    {DType::kUInt8, 0, "BYTE"},
    {DType::kInt8, 1, "CHAR"},
    {DType::kInt16, 2, "SHORT"},
    {DType::kInt32, 3, "INT"},
    {DType::kInt64, 4, "LONG"},
    {DType::kFloat16, 5, "HALF"},
    {DType::kFloat32, 6, "FLOAT"},
    {DType::kFloat64, 7, "DOUBLE"},
    {DType::kBool, 11, "BOOL"},
    {DType::kUndefined, 12, "QINT8"},
    {DType::kUndefined, 13, "QUINT8"},
    {DType::kUndefined, 14, "QINT32"},
    {DType::kBFloat16, 15, "BFLOAT16"},
    {DType::kUndefined, 16, "QUINT4X2"},
    {DType::kUndefined, 17, "QUINT2X4"},
    {DType::kUndefined, 22, "BITS16"},
    {DType::kFloat8E5M2, 23, "FLOAT8E5M2"},
    {DType::kFloat8E4M3FN, 24, "FLOAT8E4M3FN"},
    {DType::kFloat8E5M2FNUZ, 25, "FLOAT8E5M2FNUZ"},
    {DType::kFloat8E4M3FNUZ, 26, "FLOAT8E4M3FNUZ"},
    {DType::kUInt16, 27, "UINT16"},
    {DType::kUInt32, 28, "UINT32"},
    {DType::kUInt64, 29, "UINT64"},
};

std::string TypeString(DType t, const Dims& dims) {
  return std::string(DTypeName(t)) + DimsToString(dims);
}

// The bundle encodes a graph input of this type as an Int / Bool / Double value.
bp::ValueUnion ScalarEncoding(const ir::TypeInfo& t) {
  if (t.kind != ir::TypeInfo::Kind::kTensor || !t.has_shape || !t.dims.empty())
    return bp::ValueUnion_Tensor;
  switch (t.dtype) {
    case DType::kInt64:
      return bp::ValueUnion_Int;
    case DType::kBool:
      return bp::ValueUnion_Bool;
    case DType::kFloat64:
      return bp::ValueUnion_Double;
    default:
      return bp::ValueUnion_Tensor;
  }
}

Status CheckOne(const ir::Value& v, const Tensor& t, const std::string& where) {
  if (t.kind() != Tensor::Kind::kTensor)
    return Error(where + " '" + v.name + "': a bundle holds tensors only");
  const ir::TypeInfo& ty = v.type;
  if (ty.kind != ir::TypeInfo::Kind::kTensor)
    return Error(where + " '" + v.name +
                 "': the program's value is a sequence or optional, which a "
                 "bundle cannot hold");
  bool ok = ty.dtype == DType::kUndefined || ty.dtype == t.dtype();
  if (ok && ty.has_shape) {
    ok = ty.dims.size() == t.dims().size();
    for (size_t d = 0; ok && d < t.dims().size(); ++d)
      ok = ty.dims[d] < 0 || ty.dims[d] == t.dims()[d];
  }
  if (!ok)
    return Error(where + " '" + v.name + "': the program expects " + ty.ToString() +
                 ", the test set holds " + TypeString(t.dtype(), t.dims()));
  return OkStatus();
}

// A test tensor's digest: element type, rank, dims and bytes.
Digest TensorDigest(const Tensor& t) {
  Sha256 h;
  const int32_t head[2] = {static_cast<int32_t>(t.dtype()), t.rank()};
  h.Update(head, sizeof(head));
  for (int d = 0; d < t.rank(); ++d) {
    const int64_t dim = t.dim(d);
    h.Update(&dim, sizeof(dim));
  }
  h.Update(t.raw(), t.nbytes());
  return h.Finish();
}

std::vector<Digest> TestDataDigests(const std::vector<TestSet>& sets) {
  std::vector<Digest> out;
  for (const auto& s : sets) {
    for (const auto& t : s.inputs) out.push_back(TensorDigest(t));
    for (const auto& t : s.expected_outputs) out.push_back(TensorDigest(t));
  }
  return out;
}

// Names the first test tensor whose digest differs from the one the program carries ("" if none).
std::string AlteredTestTensor(const ir::Graph& g, const std::vector<TestSet>& sets,
                              const std::vector<Digest>& want) {
  std::vector<int> feeds = g.RuntimeInputs();
  size_t i = 0;
  for (size_t k = 0; k < sets.size(); ++k) {
    const std::string set = "test set " + std::to_string(k);
    for (size_t j = 0; j < sets[k].inputs.size(); ++j, ++i)
      if (i >= want.size() || TensorDigest(sets[k].inputs[j]) != want[i])
        return set + " input " +
               (j < feeds.size() ? "'" + g.values[feeds[j]].name + "'" : std::to_string(j));
    for (size_t j = 0; j < sets[k].expected_outputs.size(); ++j, ++i)
      if (i >= want.size() || TensorDigest(sets[k].expected_outputs[j]) != want[i])
        return set + " expected output " +
               (j < g.outputs.size() ? "'" + g.values[g.outputs[j]].name + "'" : std::to_string(j));
  }
  return i == want.size() ? "" : "the number of test tensors";
}

Expected<flatbuffers::Offset<bp::Value>> WriteValue(flatbuffers::FlatBufferBuilder& fbb,
                                                    const Tensor& t, bp::ValueUnion encoding,
                                                    const std::string& where) {
  switch (encoding) {
    case bp::ValueUnion_Int:
      return bp::CreateValue(fbb, encoding, bp::CreateInt(fbb, t.data<int64_t>()[0]).Union());
    case bp::ValueUnion_Bool:
      return bp::CreateValue(fbb, encoding, bp::CreateBool(fbb, t.data<uint8_t>()[0] != 0).Union());
    case bp::ValueUnion_Double:
      return bp::CreateValue(fbb, encoding, bp::CreateDouble(fbb, t.data<double>()[0]).Union());
    default:
      break;
  }
  int st = ScalarTypeOf(t.dtype());
  if (st < 0)
    return Error(where + ": element type " + std::string(DTypeName(t.dtype())) +
                 " has no ScalarType");
  if (t.rank() > static_cast<int>(kMaxRank))
    return Error(where + ": rank " + std::to_string(t.rank()) + " is too large");
  std::vector<int32_t> sizes;
  std::vector<uint8_t> dim_order;
  for (int d = 0; d < t.rank(); ++d) {
    if (t.dim(d) > INT32_MAX)
      return Error(where + ": dim " + std::to_string(t.dim(d)) +
                   " does not fit a bundle's int sizes");
    sizes.push_back(static_cast<int32_t>(t.dim(d)));
    dim_order.push_back(static_cast<uint8_t>(d));
  }
  auto sizes_off = fbb.CreateVector(sizes);
  fbb.ForceVectorAlignment(t.nbytes(), 1, kTensorAlignment);
  auto data_off = fbb.CreateVector(static_cast<const uint8_t*>(t.raw()), t.nbytes());
  auto order_off = fbb.CreateVector(dim_order);
  auto tensor =
      bp::CreateTensor(fbb, static_cast<et::ScalarType>(st), sizes_off, data_off, order_off);
  return bp::CreateValue(fbb, bp::ValueUnion_Tensor, tensor.Union());
}

Expected<Tensor> ReadValue(const bp::Value* v, const std::string& where) {
  if (!v) return Error(where + ": missing value");
  // A union may name its type and still hold no table (the verifier accepts that).
  if (v->val_type() != bp::ValueUnion_NONE && !v->val())
    return Error(where + ": the value's union holds no table");
  switch (v->val_type()) {
    case bp::ValueUnion_Int: {
      Tensor t(DType::kInt64, {});
      t.data<int64_t>()[0] = v->val_as_Int()->int_val();
      return t;
    }
    case bp::ValueUnion_Bool: {
      Tensor t(DType::kBool, {});
      t.data<uint8_t>()[0] = v->val_as_Bool()->bool_val() ? 1 : 0;
      return t;
    }
    case bp::ValueUnion_Double: {
      Tensor t(DType::kFloat64, {});
      t.data<double>()[0] = v->val_as_Double()->double_val();
      return t;
    }
    case bp::ValueUnion_Tensor:
      break;
    default:
      return Error(where + ": the value holds no tensor or scalar");
  }
  const bp::Tensor* ft = v->val_as_Tensor();
  int st = static_cast<int>(ft->scalar_type());
  DType dtype = DTypeOfScalarType(st);
  if (dtype == DType::kUndefined) {
    std::string name = ScalarTypeName(st);
    return Error(where + ": scalar type " + std::to_string(st) +
                 (name.empty() ? "" : " (" + name + ")") + " has no kiln element type");
  }
  Dims dims;
  if (ft->sizes()) {
    if (ft->sizes()->size() > kMaxRank)
      return Error(where + ": rank " + std::to_string(ft->sizes()->size()) + " is too large");
    for (int32_t d : *ft->sizes()) {
      if (d < 0) return Error(where + ": size " + std::to_string(d) + " is negative");
      dims.push_back(d);
    }
  }
  if (ft->dim_order() && ft->dim_order()->size() > 0) {
    bool identity = ft->dim_order()->size() == dims.size();
    for (size_t d = 0; identity && d < dims.size(); ++d) identity = ft->dim_order()->Get(d) == d;
    if (!identity)
      return Error(
          where + ": dim_order is not the identity (kiln reads contiguous row-major tensors only)");
  }
  // The element count as kiln's Tensor counts it (it refuses past 2^42 elements on the way).
  uint64_t elems = 1;
  for (int64_t d : dims) {
    if (d > 0 && elems > (uint64_t{1} << 42) / static_cast<uint64_t>(d))
      return Error(where + ": sizes " + DimsToString(dims) + " are too large");
    elems *= static_cast<uint64_t>(d);
  }
  size_t have = ft->data() ? ft->data()->size() : 0;
  uint64_t want = elems * DTypeSize(dtype);
  if (want != have)
    return Error(where + ": " + TypeString(dtype, dims) + " needs " + std::to_string(want) +
                 " bytes of data, it has " + std::to_string(have));
  return Tensor::Copy(dtype, dims, have ? ft->data()->data() : nullptr);
}

Expected<std::vector<TestSet>> ReadTestSets(const bp::BundledExecutionPlanTest* plan,
                                            const std::string& label) {
  std::vector<TestSet> sets;
  if (!plan->test_sets()) return sets;
  for (const bp::BundledIOSet* s : *plan->test_sets()) {
    TestSet ts;
    std::string where = label + ": test set " + std::to_string(sets.size());
    if (s->inputs())
      for (const bp::Value* v : *s->inputs()) {
        KILN_ASSIGN_OR_RETURN(Tensor t,
                              ReadValue(v, where + " input " + std::to_string(ts.inputs.size())));
        ts.inputs.push_back(std::move(t));
      }
    if (s->expected_outputs())
      for (const bp::Value* v : *s->expected_outputs()) {
        KILN_ASSIGN_OR_RETURN(
            Tensor t,
            ReadValue(v, where + " output " + std::to_string(ts.expected_outputs.size())));
        ts.expected_outputs.push_back(std::move(t));
      }
    sets.push_back(std::move(ts));
  }
  return sets;
}

}  // namespace

int ScalarTypeOf(DType t) {
  for (const auto& e : kScalarTypes)
    if (e.dtype == t && t != DType::kUndefined) return e.scalar_type;
  return -1;
}

DType DTypeOfScalarType(int scalar_type) {
  for (const auto& e : kScalarTypes)
    if (e.scalar_type == scalar_type) return e.dtype;
  return DType::kUndefined;
}

const char* ScalarTypeName(int scalar_type) {
  for (const auto& e : kScalarTypes)
    if (e.scalar_type == scalar_type) return e.name;
  return "";
}

bool LooksLikeBundle(const uint8_t* data, size_t size) {
  return size >= 8 && flatbuffers::BufferHasIdentifier(data, kBundleIdentifier);
}

Status CheckTestSets(const ir::Graph& g, const std::vector<TestSet>& sets,
                     const std::string& label) {
  std::vector<int> inputs = g.RuntimeInputs();
  for (size_t k = 0; k < sets.size(); ++k) {
    const TestSet& s = sets[k];
    std::string where = label + ": test set " + std::to_string(k);
    if (s.inputs.size() != inputs.size())
      return Error(where + " has " + std::to_string(s.inputs.size()) +
                   " inputs; the program takes " + std::to_string(inputs.size()));
    if (s.expected_outputs.size() != g.outputs.size())
      return Error(where + " has " + std::to_string(s.expected_outputs.size()) +
                   " expected outputs; the program has " + std::to_string(g.outputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i)
      KILN_RETURN_IF_ERROR(
          CheckOne(g.values[inputs[i]], s.inputs[i], where + " input " + std::to_string(i)));
    for (size_t i = 0; i < g.outputs.size(); ++i)
      KILN_RETURN_IF_ERROR(CheckOne(g.values[g.outputs[i]], s.expected_outputs[i],
                                    where + " output " + std::to_string(i)));
  }
  return OkStatus();
}

Expected<std::string> SerializeBundle(const std::string& unsealed_program, const ir::Graph& g,
                                      const std::vector<TestSet>& sets) {
  KILN_RETURN_IF_ERROR(CheckTestSets(g, sets, "bundle"));
  // The program is written again, sealed for this bundle: it carries the test tensors' digests and
  // room for the bundle's own.
  std::shared_ptr<const void> borrowed(std::shared_ptr<void>(), unsealed_program.data());
  KILN_ASSIGN_OR_RETURN(Program loaded,
                        LoadProgram(reinterpret_cast<const uint8_t*>(unsealed_program.data()),
                                    unsealed_program.size(), borrowed, "bundle program"));
  ProgramMetadata md = loaded.metadata;
  md.bundled = true;
  md.test_data_sha256 = TestDataDigests(sets);
  KILN_ASSIGN_OR_RETURN(std::string program_bytes, ReserializeProgram(loaded, md));
  size_t total = program_bytes.size();
  for (const auto& s : sets) {
    for (const auto& t : s.inputs) total += t.nbytes() + 64;
    for (const auto& t : s.expected_outputs) total += t.nbytes() + 64;
  }
  if (total >= (size_t{1} << 31) - (size_t{16} << 20))
    return Error("the bundle would exceed the 2 GiB a FlatBuffers file can hold");
  flatbuffers::FlatBufferBuilder fbb(total + 4096);
  std::vector<int> inputs = g.RuntimeInputs();
  std::vector<flatbuffers::Offset<bp::BundledIOSet>> io_sets;
  for (size_t k = 0; k < sets.size(); ++k) {
    std::vector<flatbuffers::Offset<bp::Value>> ins, outs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const ir::Value& v = g.values[inputs[i]];
      std::string where = "test set " + std::to_string(k) + " input '" + v.name + "'";
      KILN_ASSIGN_OR_RETURN(auto off,
                            WriteValue(fbb, sets[k].inputs[i], ScalarEncoding(v.type), where));
      ins.push_back(off);
    }
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      std::string where =
          "test set " + std::to_string(k) + " output '" + g.values[g.outputs[i]].name + "'";
      KILN_ASSIGN_OR_RETURN(
          auto off, WriteValue(fbb, sets[k].expected_outputs[i], bp::ValueUnion_Tensor, where));
      outs.push_back(off);
    }
    auto ins_off = fbb.CreateVector(ins);
    auto outs_off = fbb.CreateVector(outs);
    io_sets.push_back(bp::CreateBundledIOSet(fbb, ins_off, outs_off));
  }
  auto sets_off = fbb.CreateVector(io_sets);
  auto method = fbb.CreateString(kMethodName);
  std::vector<flatbuffers::Offset<bp::BundledExecutionPlanTest>> plans{
      bp::CreateBundledExecutionPlanTest(fbb, method, sets_off)};
  auto plans_off = fbb.CreateVector(plans);
  fbb.ForceVectorAlignment(program_bytes.size(), 1, 16);
  auto program = fbb.CreateVector(reinterpret_cast<const uint8_t*>(program_bytes.data()),
                                  program_bytes.size());
  auto root = bp::CreateBundledProgram(fbb, kBundleSchemaVersion, plans_off, program);
  bp::FinishBundledProgramBuffer(fbb, root);
  std::string out(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
  KILN_RETURN_IF_ERROR(ResealBundle(reinterpret_cast<uint8_t*>(out.data()), out.size()));
  return out;
}

Status ResealBundle(uint8_t* data, size_t size) {
  flatbuffers::Verifier verifier(data, size, /*max_depth=*/64, /*max_tables=*/size / 4 + 64);
  if (!bp::VerifyBundledProgramBuffer(verifier) || !bp::GetBundledProgram(data)->program())
    return Error("not a bundle with a program");
  const auto* program = bp::GetBundledProgram(data)->program();
  uint8_t* prog = data + (program->data() - data);
  KILN_ASSIGN_OR_RETURN(SealOffsets seal, FindSeal(prog, program->size()));
  if (seal.bundled) {
    // The bundle's digest (both digest fields blank) into the program, then the program's own.
    const size_t at = static_cast<size_t>(prog - data);
    Digest d = Sha256WithBlanks(data, size, {at + seal.program_digest, at + seal.bundle_digest});
    std::memcpy(prog + seal.bundle_digest, d.data(), d.size());
  }
  WriteProgramDigest(prog, program->size(), seal);
  return OkStatus();
}

Expected<Bundle> LoadBundle(const uint8_t* data, size_t size,
                            std::shared_ptr<const void> keep_alive, const std::string& label) {
  if (size < 8)
    return Error(label + ": truncated: " + std::to_string(size) +
                 " bytes is too short for a bundled program");
  if (!bp::BundledProgramBufferHasIdentifier(data)) {
    std::string id;
    for (int i = 4; i < 8; ++i) {
      char ch = static_cast<char>(data[i]);
      id += (ch >= 32 && ch < 127) ? ch : '?';
    }
    return Error(label + ": not a bundled program (file identifier '" + id + "', expected '" +
                 kBundleIdentifier + "')");
  }
  if (size >= (size_t{1} << 31))
    return Error(label + ": " + std::to_string(size) + " bytes is larger than a bundle can be");
  data = internal::Aligned16(data, size, &keep_alive);
  flatbuffers::Verifier verifier(data, size, /*max_depth=*/64, /*max_tables=*/size / 4 + 64);
  if (!bp::VerifyBundledProgramBuffer(verifier))
    return Error(label +
                 ": corrupt or truncated bundled program (the FlatBuffers verifier rejects it)");
  const bp::BundledProgram* root = bp::GetBundledProgram(data);
  Bundle b;
  b.file_bytes = size;
  b.version = root->version();
  if (b.version != kBundleSchemaVersion)
    return Error(label + ": bundled program version " + std::to_string(b.version) +
                 "; kiln reads version " + std::to_string(kBundleSchemaVersion));
  if (!root->execution_plan_tests() || root->execution_plan_tests()->size() == 0)
    return Error(label + ": the bundle has no execution plan tests");
  const bp::BundledExecutionPlanTest* plan = root->execution_plan_tests()->Get(0);
  b.method_name = plan->method_name() ? plan->method_name()->str() : "";
  if (b.method_name != kMethodName)
    return Error(label + ": the bundle tests method '" + b.method_name +
                 "'; kiln programs have only '" + kMethodName + "'");
  if (!root->program() || root->program()->size() == 0)
    return Error(label + ": the bundle holds no program");
  b.program_data = root->program()->data();
  b.program_size = root->program()->size();
  b.keep_alive = keep_alive;
  KILN_ASSIGN_OR_RETURN(
      b.program, LoadProgram(b.program_data, b.program_size, keep_alive, label + " program"));
  // The program's seal covers every other byte of the bundle; a mismatch names what was altered.
  bool intact = true;
  if (b.program.seal.bundled) {
    const size_t at = static_cast<size_t>(b.program_data - data);
    const SealOffsets& seal = b.program.seal;
    Digest got = Sha256WithBlanks(data, size, {at + seal.program_digest, at + seal.bundle_digest});
    intact = std::memcmp(got.data(), data + at + seal.bundle_digest, got.size()) == 0;
  }
  auto sets = ReadTestSets(plan, label);
  if (!intact) {
    const std::string tensor = sets.ok() ? AlteredTestTensor(*b.program.model.graph, *sets,
                                                             b.program.metadata.test_data_sha256)
                                         : "";
    const std::string what = !tensor.empty() ? tensor + " no longer matches its SHA-256 digest"
                             : sets.ok()
                                 ? "the bytes around its program and test data no longer match the "
                                   "bundle's SHA-256 digest"
                                 : "its bytes no longer match the bundle's SHA-256 digest (" +
                                       sets.status().message() + ")";
    return Error(label + ": altered or corrupt: " + what);
  }
  if (!sets.ok()) return sets.status();
  b.test_sets = std::move(*sets);
  KILN_RETURN_IF_ERROR(CheckTestSets(*b.program.model.graph, b.test_sets, label));
  return b;
}

Expected<Bundle> LoadBundleFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  return LoadBundle(file->data(), file->size(), file, path);
}

}  // namespace kiln::bundle
