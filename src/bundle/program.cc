#include "bundle/program.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <set>
#include <string_view>
#include <unordered_map>

#include "bundle/aligned_bytes.h"
#include "bundle/sha256.h"
#include "ir/subbyte.h"
#include "kiln_program_generated.h"

static_assert(FLATBUFFERS_LITTLEENDIAN,
              "kiln reads FlatBuffers vectors and constants as little-endian bytes");
#include "support/file_io.h"

namespace kiln::bundle {

namespace fb = kiln::program_fb;

namespace {

constexpr size_t kDataAlignment = 16;
// Nested sequence/optional types and sequence constants.
constexpr int kMaxTypeDepth = 16;
constexpr size_t kMaxRank = 256;
// FlatBuffers offsets are 32-bit signed: a buffer must stay below 2 GiB. Leave room for the graph.
constexpr size_t kMaxDataBytes = (size_t{1} << 31) - (size_t{256} << 20);
constexpr int kLastDType = static_cast<int>(DType::kInt2);

bool ValidDType(int32_t d) {
  return d >= 0 && d <= kLastDType && DTypeName(static_cast<DType>(d)) != "UNKNOWN";
}

// Where the seal's digests lie in the program's bytes (after the verifier, or in bytes kiln wrote).
Expected<SealOffsets> SealOffsetsOf(const fb::Program* p, const uint8_t* base) {
  const fb::Seal* seal = p->seal();
  if (!seal || !seal->program_sha256())
    return Error("the program carries no integrity digest (written by another tool, or altered)");
  if (seal->program_sha256()->size() != 32) return Error("its digest has the wrong size");
  SealOffsets so;
  so.program_digest = static_cast<size_t>(seal->program_sha256()->data() - base);
  if (seal->bundle_sha256()) {
    if (seal->bundle_sha256()->size() != 32) return Error("its bundle digest has the wrong size");
    so.bundled = true;
    so.bundle_digest = static_cast<size_t>(seal->bundle_sha256()->data() - base);
    if (so.bundle_digest < so.program_digest + 32 && so.program_digest < so.bundle_digest + 32)
      return Error("its digests overlap");
  }
  if (seal->test_data_sha256() && seal->test_data_sha256()->size() % 32 != 0)
    return Error("its test-data digests are not whole");
  return so;
}

// ---------------------------------------------------------------------------------------------
// Writing

class Writer {
 public:
  explicit Writer(const ir::Model& model) : model_(model), fbb_(1 << 16) {}

  Expected<std::string> Write(const planner::GraphPlan& plan, const planner::PlanOptions& po,
                              const ProgramMetadata& md) {
    KILN_ASSIGN_OR_RETURN(auto graph, WriteGraph(*model_.graph, 0));
    std::vector<flatbuffers::Offset<fb::Opset>> opsets;
    for (const auto& [domain, version] : model_.opsets)
      opsets.push_back(fb::CreateOpset(fbb_, fbb_.CreateString(domain), version));
    auto opsets_off = fbb_.CreateVector(opsets);
    auto model_off = fb::CreateModel(fbb_, model_.ir_version, opsets_off,
                                     fbb_.CreateString(model_.producer_name),
                                     fbb_.CreateString(model_.producer_version), graph);
    auto schedule = fbb_.CreateVector(plan.schedule.order);
    std::vector<flatbuffers::Offset<fb::PlanBuffer>> buffers;
    for (const auto& b : plan.plan.buffers)
      buffers.push_back(fb::CreatePlanBuffer(fbb_, fbb_.CreateString(b.name), b.value, b.size,
                                             b.offset, b.first_use, b.last_use, b.alias_of,
                                             b.alias_offset));
    auto buffers_off = fbb_.CreateVector(buffers);
    auto plan_off = fb::CreateMemoryPlan(
        fbb_, fbb_.CreateString(plan.plan.planner), po.reorder, po.aliasing, plan.plan.arena_bytes,
        plan.plan.lower_bound_bytes, plan.schedule.peak_bytes, plan.schedule.original_peak,
        plan.schedule.exact, buffers_off);
    // The data section: every distinct constant at a 16-byte aligned offset, zero padding between.
    fbb_.ForceVectorAlignment(data_size_, 1, kDataAlignment);
    uint8_t* data = nullptr;
    auto data_off = fbb_.CreateUninitializedVector(data_size_, 1, &data);
    if (data_size_ > 0) {
      std::memset(data, 0, data_size_);
      for (const auto& c : chunks_)
        if (c.size > 0) std::memcpy(data + c.offset, c.bytes, c.size);
    }
    auto hash = fbb_.CreateVector(reinterpret_cast<const uint8_t*>(md.source_sha256.data()),
                                  md.source_sha256.size());
    auto root = fb::CreateProgram(fbb_, kProgramSchemaVersion, fbb_.CreateString(md.kiln_version),
                                  fbb_.CreateString(md.source_name), hash, model_off, schedule,
                                  plan_off, data_off, WriteSeal(md));
    fbb_.Finish(root, kProgramIdentifier);
    if (fbb_.GetSize() >= (size_t{1} << 31) - 1)
      return Error("the program is larger than the 2 GiB a FlatBuffers file can hold");
    std::string out(reinterpret_cast<const char*>(fbb_.GetBufferPointer()), fbb_.GetSize());
    auto* bytes = reinterpret_cast<uint8_t*>(out.data());
    KILN_ASSIGN_OR_RETURN(SealOffsets seal, SealOffsetsOf(fb::GetProgram(bytes), bytes));
    WriteProgramDigest(bytes, out.size(), seal);
    return out;
  }

 private:
  // The digest fields, blank until the bytes they cover are final.
  flatbuffers::Offset<fb::Seal> WriteSeal(const ProgramMetadata& md) {
    static const uint8_t kBlank[32] = {};
    auto program_digest = fbb_.CreateVector(kBlank, sizeof(kBlank));
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> bundle_digest, test_digests;
    if (md.bundled) {
      bundle_digest = fbb_.CreateVector(kBlank, sizeof(kBlank));
      std::vector<uint8_t> flat;
      for (const Digest& d : md.test_data_sha256) flat.insert(flat.end(), d.begin(), d.end());
      test_digests = fbb_.CreateVector(flat);
    }
    return fb::CreateSeal(fbb_, program_digest, bundle_digest, test_digests);
  }

  struct Chunk {
    const uint8_t* bytes;
    size_t size;
    size_t offset;
  };

  // The offset of `t`'s bytes in the data section, sharing the range of identical bytes.
  Expected<size_t> Place(const Tensor& t, const std::string& what) {
    size_t n = t.nbytes();
    const uint8_t* p = static_cast<const uint8_t*>(t.raw());
    if (n > 0 && !p) return Error(what + ": constant has no data");
    if (n == 0) return size_t{0};
    auto same = by_pointer_.find({p, n});
    if (same != by_pointer_.end()) return same->second;
    size_t h = std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(p), n));
    for (size_t i : by_hash_[h]) {
      const Chunk& c = chunks_[i];
      if (c.size == n && std::memcmp(c.bytes, p, n) == 0) {
        by_pointer_[{p, n}] = c.offset;
        return c.offset;
      }
    }
    size_t offset = (data_size_ + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
    if (offset + n > kMaxDataBytes)
      return Error(what + ": the constants exceed the " + std::to_string(kMaxDataBytes >> 20) +
                   " MiB a program file can hold");
    by_hash_[h].push_back(chunks_.size());
    chunks_.push_back({p, n, offset});
    by_pointer_[{p, n}] = offset;
    data_size_ = offset + n;
    return offset;
  }

  flatbuffers::Offset<fb::TypeInfo> WriteType(const ir::TypeInfo& t) {
    flatbuffers::Offset<fb::TypeInfo> elem = 0;
    if (t.elem) elem = WriteType(*t.elem);
    auto dims = fbb_.CreateVector(t.dims);
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>> symbols = 0;
    bool any_symbol = false;
    for (const auto& s : t.symbols) any_symbol = any_symbol || !s.empty();
    if (any_symbol) symbols = fbb_.CreateVectorOfStrings(t.symbols);
    return fb::CreateTypeInfo(fbb_, static_cast<fb::TypeKind>(t.kind),
                              static_cast<int32_t>(t.dtype), t.has_shape, dims, symbols, elem);
  }

  Expected<flatbuffers::Offset<fb::Constant>> WriteConstant(const Tensor& t,
                                                            const std::string& what) {
    if (t.is_none()) return fb::CreateConstant(fbb_, fb::ConstantKind_None);
    if (t.is_sequence()) {
      std::vector<flatbuffers::Offset<fb::Constant>> items;
      for (const auto& item : t.items()) {
        if (item.kind() != Tensor::Kind::kTensor)
          return Error(what + ": a sequence constant holds a non-tensor item");
        KILN_ASSIGN_OR_RETURN(auto off, WriteConstant(item, what));
        items.push_back(off);
      }
      auto items_off = fbb_.CreateVector(items);
      return fb::CreateConstant(fbb_, fb::ConstantKind_Sequence, static_cast<int32_t>(t.dtype()), 0,
                                0, 0, items_off);
    }
    if (t.is_string()) {
      std::vector<std::string> elements(t.strings(), t.strings() + t.size());
      auto dims = fbb_.CreateVector(t.dims());
      auto strings = fbb_.CreateVectorOfStrings(elements);
      return fb::CreateConstant(fbb_, fb::ConstantKind_Tensor, static_cast<int32_t>(t.dtype()),
                                dims, 0, 0, 0, strings);
    }
    if (IsSubByteDType(t.dtype())) {  // packed, as TensorProto holds them
      auto& packed = packed_.emplace_back(static_cast<size_t>(PackedBytes(t.dtype(), t.size())));
      PackSubByte(t.dtype(), t.data<uint8_t>(), t.size(), packed.data());
      const Tensor bytes =
          Tensor::View(DType::kUInt8, {static_cast<int64_t>(packed.size())}, packed.data());
      KILN_ASSIGN_OR_RETURN(size_t offset, Place(bytes, what));
      auto dims = fbb_.CreateVector(t.dims());
      return fb::CreateConstant(fbb_, fb::ConstantKind_Tensor, static_cast<int32_t>(t.dtype()),
                                dims, offset, packed.size());
    }
    if (DTypeSize(t.dtype()) == 0)
      return Error(what + ": a program cannot store constants of element type " +
                   std::string(DTypeName(t.dtype())));
    KILN_ASSIGN_OR_RETURN(size_t offset, Place(t, what));
    auto dims = fbb_.CreateVector(t.dims());
    return fb::CreateConstant(fbb_, fb::ConstantKind_Tensor, static_cast<int32_t>(t.dtype()), dims,
                              offset, t.nbytes());
  }

  Expected<flatbuffers::Offset<fb::Attribute>> WriteAttribute(const std::string& key,
                                                              const ir::Attribute& a,
                                                              const std::string& where, int depth) {
    using K = ir::Attribute::Kind;
    flatbuffers::Offset<flatbuffers::String> s = 0;
    flatbuffers::Offset<fb::Constant> t = 0;
    flatbuffers::Offset<fb::Graph> g = 0;
    flatbuffers::Offset<flatbuffers::Vector<float>> floats = 0;
    flatbuffers::Offset<flatbuffers::Vector<int64_t>> ints = 0;
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>> strings = 0;
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Constant>>> tensors = 0;
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Graph>>> graphs = 0;
    std::string what = where + " attribute " + key;
    switch (a.kind) {
      case K::kString:
        s = fbb_.CreateString(a.s);
        break;
      case K::kTensor: {
        KILN_ASSIGN_OR_RETURN(t, WriteConstant(a.t, what));
        break;
      }
      case K::kGraph: {
        if (!a.g) return Error(what + ": graph attribute without a graph");
        KILN_ASSIGN_OR_RETURN(g, WriteGraph(*a.g, depth + 1));
        break;
      }
      case K::kFloats:
        floats = fbb_.CreateVector(a.floats);
        break;
      case K::kInts:
        ints = fbb_.CreateVector(a.ints);
        break;
      case K::kStrings:
        strings = fbb_.CreateVectorOfStrings(a.strings);
        break;
      case K::kTensors: {
        std::vector<flatbuffers::Offset<fb::Constant>> v;
        for (const auto& x : a.tensors) {
          KILN_ASSIGN_OR_RETURN(auto off, WriteConstant(x, what));
          v.push_back(off);
        }
        tensors = fbb_.CreateVector(v);
        break;
      }
      case K::kGraphs: {
        std::vector<flatbuffers::Offset<fb::Graph>> v;
        for (const auto& x : a.graphs) {
          if (!x) return Error(what + ": graph attribute without a graph");
          KILN_ASSIGN_OR_RETURN(auto off, WriteGraph(*x, depth + 1));
          v.push_back(off);
        }
        graphs = fbb_.CreateVector(v);
        break;
      }
      default:
        break;
    }
    auto name = fbb_.CreateString(key);
    return fb::CreateAttribute(fbb_, name, static_cast<fb::AttributeKind>(a.kind), a.f, a.i, s, t,
                               g, floats, ints, strings, tensors, graphs);
  }

  Expected<flatbuffers::Offset<fb::Graph>> WriteGraph(const ir::Graph& g, int depth) {
    if (depth > kMaxSubgraphDepth)
      return Error("subgraphs nest deeper than " + std::to_string(kMaxSubgraphDepth) + " levels");
    std::string gl = "graph '" + g.name + "'";
    std::vector<flatbuffers::Offset<fb::Value>> values;
    values.reserve(g.values.size());
    for (const auto& v : g.values) {
      flatbuffers::Offset<fb::Constant> c = 0;
      if (v.constant) {
        KILN_ASSIGN_OR_RETURN(c, WriteConstant(*v.constant, gl + " value '" + v.name + "'"));
      }
      auto type = WriteType(v.type);
      values.push_back(fb::CreateValue(fbb_, fbb_.CreateString(v.name), type, c));
    }
    auto values_off = fbb_.CreateVector(values);
    std::vector<flatbuffers::Offset<fb::Node>> nodes;
    nodes.reserve(g.nodes.size());
    for (const auto& n : g.nodes) {
      std::vector<flatbuffers::Offset<fb::Attribute>> attrs;
      for (const auto& [key, a] : n.attrs) {  // std::map: sorted by name
        KILN_ASSIGN_OR_RETURN(auto off, WriteAttribute(key, a, n.Label(g), depth));
        attrs.push_back(off);
      }
      auto attrs_off = fbb_.CreateVector(attrs);
      nodes.push_back(fb::CreateNode(fbb_, fbb_.CreateString(n.name), fbb_.CreateString(n.op_type),
                                     fbb_.CreateString(n.domain), fbb_.CreateVector(n.inputs),
                                     fbb_.CreateVector(n.outputs), attrs_off,
                                     fbb_.CreateVector(n.implicit_inputs)));
    }
    auto nodes_off = fbb_.CreateVector(nodes);
    std::vector<fb::Capture> captures;
    for (auto [local, outer] : g.captures) captures.emplace_back(local, outer);
    return fb::CreateGraph(fbb_, fbb_.CreateString(g.name), values_off, nodes_off,
                           fbb_.CreateVector(g.inputs), fbb_.CreateVector(g.outputs),
                           fbb_.CreateVectorOfStructs(captures));
  }

  struct PairHash {
    size_t operator()(const std::pair<const uint8_t*, size_t>& k) const {
      return std::hash<const void*>()(k.first) ^ (k.second * 0x9E3779B97F4A7C15ull);
    }
  };

  const ir::Model& model_;
  flatbuffers::FlatBufferBuilder fbb_;
  std::vector<Chunk> chunks_;
  std::deque<std::vector<uint8_t>> packed_;  // sub-byte constants packed, until Finish copies them
  std::unordered_map<size_t, std::vector<size_t>> by_hash_;
  std::unordered_map<std::pair<const uint8_t*, size_t>, size_t, PairHash> by_pointer_;
  size_t data_size_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Reading

class Reader {
 public:
  Reader(const uint8_t* bytes, size_t size, std::shared_ptr<const void> keep_alive,
         std::string label)
      : bytes_(bytes),
        size_(size),
        p_(fb::GetProgram(bytes)),
        keep_alive_(std::move(keep_alive)),
        label_(std::move(label)) {
    if (p_->data()) {
      data_ = p_->data()->data();
      data_size_ = p_->data()->size();
    }
  }

  Expected<Program> Read() {
    Program prog;
    prog.metadata.schema_version = p_->schema_version();
    if (p_->schema_version() != kProgramSchemaVersion)
      return Fail("program schema version " + std::to_string(p_->schema_version()) +
                  "; this kiln reads version " + std::to_string(kProgramSchemaVersion));
    KILN_RETURN_IF_ERROR(CheckSeal(&prog));
    if (p_->kiln_version()) prog.metadata.kiln_version = p_->kiln_version()->str();
    if (p_->source_name()) prog.metadata.source_name = p_->source_name()->str();
    if (p_->source_sha256()) {
      if (p_->source_sha256()->size() != 0 && p_->source_sha256()->size() != 32)
        return Fail("the source hash has " + std::to_string(p_->source_sha256()->size()) +
                    " bytes, not 32");
      prog.metadata.source_sha256.assign(reinterpret_cast<const char*>(p_->source_sha256()->data()),
                                         p_->source_sha256()->size());
    }
    const fb::Model* m = p_->model();
    if (!m) return Fail("the program has no model");
    if (!m->graph()) return Fail("the program has no graph");
    prog.model.ir_version = m->ir_version();
    if (m->producer_name()) prog.model.producer_name = m->producer_name()->str();
    if (m->producer_version()) prog.model.producer_version = m->producer_version()->str();
    prog.model.source_path = label_;
    if (m->opsets()) {
      for (const fb::Opset* o : *m->opsets()) {
        std::string domain = o->domain() ? o->domain()->str() : "";
        if (!prog.model.opsets.emplace(domain, o->version()).second)
          return Fail("opset domain '" + domain + "' is listed twice");
      }
    }
    KILN_ASSIGN_OR_RETURN(prog.model.graph, ReadGraph(m->graph(), nullptr, 0));
    Status st = ir::Verify(*prog.model.graph);
    if (!st.ok()) return Fail(st.message());
    KILN_RETURN_IF_ERROR(ReadSchedule(*prog.model.graph, &prog));
    KILN_RETURN_IF_ERROR(ReadPlan(*prog.model.graph, &prog));
    prog.stats.data_bytes = data_size_;
    prog.stats.constants = constants_;
    prog.stats.unique_constants = ranges_.size();
    return prog;
  }

 private:
  Status Fail(const std::string& msg) const { return Error(label_ + ": " + msg); }

  // Before anything else is read: a program whose bytes were altered is reported as such.
  Status CheckSeal(Program* prog) {
    auto seal = SealOffsetsOf(p_, bytes_);
    if (!seal.ok()) return Fail(seal.status().message());
    Digest got = Sha256WithBlanks(bytes_, size_, {seal->program_digest});
    if (std::memcmp(got.data(), bytes_ + seal->program_digest, got.size()) != 0)
      return Fail("altered or corrupt: its bytes do not match the SHA-256 digest it carries (" +
                  HexString(bytes_ + seal->program_digest, 8) + "..., the bytes hash to " +
                  HexString(got.data(), 8) + "...)");
    prog->seal = *seal;
    prog->metadata.bundled = seal->bundled;
    if (const auto* tests = p_->seal()->test_data_sha256())
      for (size_t i = 0; i + 32 <= tests->size(); i += 32) {
        Digest d;
        std::memcpy(d.data(), tests->data() + i, d.size());
        prog->metadata.test_data_sha256.push_back(d);
      }
    return OkStatus();
  }

  // The FlatBuffers verifier checks vectors for 4-byte alignment only: a forged file can hold a
  // [long] whose elements are not 8-byte aligned, so elements are copied as bytes (little-endian,
  // as FlatBuffers stores them and kiln runs).
  template <class T>
  static std::vector<T> ToVector(const flatbuffers::Vector<T>* v) {
    static_assert(flatbuffers::is_scalar<T>::value, "vectors of scalars only");
    if (!v || v->size() == 0) return {};
    std::vector<T> out(v->size());
    std::memcpy(out.data(), v->Data(), v->size() * sizeof(T));
    return out;
  }
  static std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

  Expected<ir::TypeInfo> ReadType(const fb::TypeInfo* t, const std::string& where, int depth) {
    ir::TypeInfo out;
    if (!t) return out;
    if (depth > kMaxTypeDepth) return Fail(where + ": type nests too deeply");
    if (t->kind() < fb::TypeKind_MIN || t->kind() > fb::TypeKind_MAX)
      return Fail(where + ": unknown type kind " + std::to_string(t->kind()));
    out.kind = static_cast<ir::TypeInfo::Kind>(t->kind());
    if (!ValidDType(t->dtype()))
      return Fail(where + ": unknown element type " + std::to_string(t->dtype()));
    out.dtype = static_cast<DType>(t->dtype());
    out.has_shape = t->has_shape();
    out.dims = ToVector(t->dims());
    if (out.dims.size() > kMaxRank)
      return Fail(where + ": rank " + std::to_string(out.dims.size()) + " is too large");
    for (int64_t d : out.dims)
      if (d < -1) return Fail(where + ": dim " + std::to_string(d) + " is negative");
    if (t->symbols() && t->symbols()->size() > 0) {
      if (t->symbols()->size() != out.dims.size())
        return Fail(where + ": " + std::to_string(t->symbols()->size()) + " dim symbols for rank " +
                    std::to_string(out.dims.size()));
      for (const auto* s : *t->symbols()) out.symbols.push_back(Str(s));
    } else {
      out.symbols.assign(out.dims.size(), "");
    }
    if (t->elem()) {
      KILN_ASSIGN_OR_RETURN(auto elem, ReadType(t->elem(), where, depth + 1));
      out.elem = std::make_shared<ir::TypeInfo>(std::move(elem));
    }
    return out;
  }

  Expected<Tensor> ReadConstant(const fb::Constant* c, const std::string& where, int depth) {
    if (!c) return Fail(where + ": missing constant");
    if (depth > kMaxTypeDepth) return Fail(where + ": constant nests too deeply");
    switch (c->kind()) {
      case fb::ConstantKind_None:
        return Tensor::None();
      case fb::ConstantKind_Sequence: {
        if (!ValidDType(c->dtype()) || DTypeSize(static_cast<DType>(c->dtype())) == 0)
          return Fail(where + ": sequence constant of unknown element type " +
                      std::to_string(c->dtype()));
        std::vector<Tensor> items;
        if (c->items()) {
          for (const fb::Constant* item : *c->items()) {
            if (!item || item->kind() != fb::ConstantKind_Tensor)
              return Fail(where + ": a sequence constant item is not a tensor");
            KILN_ASSIGN_OR_RETURN(Tensor t, ReadConstant(item, where, depth + 1));
            items.push_back(std::move(t));
          }
        }
        return Tensor::Sequence(static_cast<DType>(c->dtype()), std::move(items));
      }
      case fb::ConstantKind_Tensor:
        break;
      default:
        return Fail(where + ": unknown constant kind " + std::to_string(c->kind()));
    }
    const bool strings = c->dtype() == static_cast<int32_t>(DType::kString);
    if (!ValidDType(c->dtype()) || (DTypeSize(static_cast<DType>(c->dtype())) == 0 && !strings))
      return Fail(where + ": constant of unknown or unstorable element type " +
                  std::to_string(c->dtype()));
    DType dtype = static_cast<DType>(c->dtype());
    Dims dims = ToVector(c->dims());
    if (dims.size() > kMaxRank)
      return Fail(where + ": constant rank " + std::to_string(dims.size()) + " is too large");
    // The element count as kiln's Tensor counts it (it refuses past 2^42 elements on the way).
    uint64_t elems = 1;
    for (int64_t d : dims) {
      if (d < 0) return Fail(where + ": constant dim " + std::to_string(d) + " is negative");
      if (d > 0 && elems > (uint64_t{1} << 42) / static_cast<uint64_t>(d))
        return Fail(where + ": constant dims " + DimsToString(dims) + " are too large");
      elems *= static_cast<uint64_t>(d);
    }
    if (strings) {
      const uint64_t have = c->strings() ? c->strings()->size() : 0;
      if (have != elems || c->size() != 0)
        return Fail(where + ": STRING constant " + DimsToString(dims) + " should have " +
                    std::to_string(elems) + " strings and no bytes, the file has " +
                    std::to_string(have) + " and " + std::to_string(c->size()));
      ++constants_;
      Tensor t(dtype, dims);
      for (uint64_t i = 0; i < elems; ++i) t.strings()[i] = c->strings()->Get(i)->str();
      return t;
    }
    // Sub-byte types are stored packed, as TensorProto holds them.
    const bool packed = IsSubByteDType(dtype);
    uint64_t bytes =
        packed ? static_cast<uint64_t>(PackedBytes(dtype, static_cast<int64_t>(elems))) : 0;
    if ((!packed &&
         __builtin_mul_overflow(elems, static_cast<uint64_t>(DTypeSize(dtype)), &bytes)) ||
        bytes != c->size())
      return Fail(where + ": constant " + std::string(DTypeName(dtype)) + DimsToString(dims) +
                  " should have " + std::to_string(bytes) + " bytes, the file says " +
                  std::to_string(c->size()));
    if (c->offset() % kDataAlignment != 0)
      return Fail(where + ": constant offset " + std::to_string(c->offset()) +
                  " is not 16-byte aligned");
    if (bytes > 0 && reinterpret_cast<uintptr_t>(data_) % kDataAlignment != 0)
      return Fail("the data section does not start 16-byte aligned");
    if (c->offset() > data_size_ || c->size() > data_size_ - c->offset())
      return Fail(where + ": constant bytes [" + std::to_string(c->offset()) + ", +" +
                  std::to_string(c->size()) + ") lie outside the " + std::to_string(data_size_) +
                  "-byte data section");
    ++constants_;
    if (bytes == 0) return Tensor(dtype, dims);
    ranges_.insert(c->offset());
    const uint8_t* p = data_ + c->offset();
    if (packed) {
      Tensor t(dtype, std::move(dims));
      UnpackSubByte(dtype, p, t.size(), t.data<uint8_t>());
      return t;
    }
    if (keep_alive_)
      return Tensor::View(dtype, std::move(dims), const_cast<uint8_t*>(p), keep_alive_);
    return Tensor::Copy(dtype, std::move(dims), p);
  }

  Expected<ir::Attribute> ReadAttribute(const fb::Attribute* a, const ir::Graph* g,
                                        const std::string& where, int depth) {
    using K = ir::Attribute::Kind;
    ir::Attribute out;
    if (a->kind() < fb::AttributeKind_MIN || a->kind() > fb::AttributeKind_MAX)
      return Fail(where + ": unknown attribute kind " + std::to_string(a->kind()));
    out.kind = static_cast<K>(a->kind());
    switch (out.kind) {
      case K::kFloat:
        out.f = a->f();
        break;
      case K::kInt:
        out.i = a->i();
        break;
      case K::kString:
        out.s = Str(a->s());
        break;
      case K::kTensor: {
        KILN_ASSIGN_OR_RETURN(out.t, ReadConstant(a->t(), where, 0));
        if (out.t.kind() != Tensor::Kind::kTensor)
          return Fail(where + ": tensor attribute is not a tensor");
        break;
      }
      case K::kGraph: {
        if (!a->g()) return Fail(where + ": graph attribute without a graph");
        KILN_ASSIGN_OR_RETURN(out.g, ReadGraph(a->g(), g, depth + 1));
        break;
      }
      case K::kFloats:
        out.floats = ToVector(a->floats());
        break;
      case K::kInts:
        out.ints = ToVector(a->ints());
        break;
      case K::kStrings:
        if (a->strings())
          for (const auto* s : *a->strings()) out.strings.push_back(Str(s));
        break;
      case K::kTensors:
        if (a->tensors()) {
          for (const fb::Constant* c : *a->tensors()) {
            KILN_ASSIGN_OR_RETURN(Tensor t, ReadConstant(c, where, 0));
            if (t.kind() != Tensor::Kind::kTensor)
              return Fail(where + ": tensor attribute is not a tensor");
            out.tensors.push_back(std::move(t));
          }
        }
        break;
      case K::kGraphs:
        if (a->graphs()) {
          for (const fb::Graph* sg : *a->graphs()) {
            if (!sg) return Fail(where + ": graph attribute without a graph");
            KILN_ASSIGN_OR_RETURN(auto sub, ReadGraph(sg, g, depth + 1));
            out.graphs.push_back(std::move(sub));
          }
        }
        break;
      default:
        break;
    }
    return out;
  }

  Expected<std::shared_ptr<ir::Graph>> ReadGraph(const fb::Graph* fg, const ir::Graph* parent,
                                                 int depth) {
    if (depth > kMaxSubgraphDepth)
      return Fail("subgraphs nest deeper than " + std::to_string(kMaxSubgraphDepth) + " levels");
    auto g = std::make_shared<ir::Graph>();
    g->name = Str(fg->name());
    g->parent = parent;
    std::string gl = "graph '" + g->name + "'";
    if (fg->values()) {
      g->values.reserve(fg->values()->size());
      for (const fb::Value* fv : *fg->values()) {
        ir::Value v;
        v.name = Str(fv->name());
        std::string where = gl + " value " + std::to_string(g->values.size()) + " '" + v.name + "'";
        KILN_ASSIGN_OR_RETURN(v.type, ReadType(fv->type(), where, 0));
        if (fv->constant()) {
          KILN_ASSIGN_OR_RETURN(Tensor t, ReadConstant(fv->constant(), where, 0));
          v.constant = std::move(t);
        }
        g->values.push_back(std::move(v));
      }
    }
    const int nv = static_cast<int>(g->values.size());
    auto check_index = [&](int v, int lo, const std::string& what) -> Status {
      if (v < lo || v >= nv)
        return Fail(what + " refers to value " + std::to_string(v) + " of " + std::to_string(nv));
      return OkStatus();
    };
    g->inputs = ToVector(fg->inputs());
    for (int v : g->inputs) KILN_RETURN_IF_ERROR(check_index(v, 0, gl + " input"));
    g->outputs = ToVector(fg->outputs());
    for (int v : g->outputs) KILN_RETURN_IF_ERROR(check_index(v, 0, gl + " output"));
    if (fg->captures()) {
      if (!parent && fg->captures()->size() > 0)
        return Fail(gl + ": the main graph cannot capture values");
      for (const fb::Capture* c : *fg->captures()) {
        KILN_RETURN_IF_ERROR(check_index(c->local(), 0, gl + " capture"));
        if (c->outer() < 0 || c->outer() >= static_cast<int>(parent->values.size()))
          return Fail(gl + ": a capture refers to outer value " + std::to_string(c->outer()) +
                      " of " + std::to_string(parent->values.size()));
        g->captures.emplace_back(c->local(), c->outer());
      }
    }
    if (fg->nodes()) {
      g->nodes.reserve(fg->nodes()->size());
      for (const fb::Node* fn : *fg->nodes()) {
        ir::Node n;
        n.name = Str(fn->name());
        n.op_type = Str(fn->op_type());
        n.domain = Str(fn->domain());
        std::string where = gl + " node " + std::to_string(g->nodes.size()) + " '" + n.name + "'";
        if (n.op_type.empty()) return Fail(where + ": no op type");
        n.inputs = ToVector(fn->inputs());
        for (int v : n.inputs)
          KILN_RETURN_IF_ERROR(check_index(v, -1, where + " (" + n.op_type + ") input"));
        n.outputs = ToVector(fn->outputs());
        for (int v : n.outputs)
          KILN_RETURN_IF_ERROR(check_index(v, -1, where + " (" + n.op_type + ") output"));
        n.implicit_inputs = ToVector(fn->implicit_inputs());
        for (int v : n.implicit_inputs)
          KILN_RETURN_IF_ERROR(check_index(v, 0, where + " (" + n.op_type + ") implicit input"));
        if (fn->attributes()) {
          for (const fb::Attribute* fa : *fn->attributes()) {
            std::string key = Str(fa->name());
            if (key.empty()) return Fail(where + ": an attribute without a name");
            KILN_ASSIGN_OR_RETURN(ir::Attribute a,
                                  ReadAttribute(fa, g.get(), where + " attribute " + key, depth));
            if (!n.attrs.emplace(key, std::move(a)).second)
              return Fail(where + ": attribute " + key + " is given twice");
          }
        }
        for (int v : n.outputs) {
          if (v < 0) continue;
          ir::Value& val = g->values[v];
          if (val.producer >= 0 || val.constant)
            return Fail(where + ": output '" + val.name + "' is already defined");
          val.producer = static_cast<int>(g->nodes.size());
        }
        g->nodes.push_back(std::move(n));
      }
    }
    return g;
  }

  Status ReadSchedule(const ir::Graph& g, Program* prog) {
    std::vector<int> order = ToVector(p_->schedule());
    const size_t nn = g.nodes.size();
    if (order.size() != nn)
      return Fail("the schedule lists " + std::to_string(order.size()) + " nodes; the graph has " +
                  std::to_string(nn));
    std::vector<char> seen(nn, 0), available(g.values.size(), 0);
    for (size_t v = 0; v < g.values.size(); ++v) available[v] = g.values[v].producer < 0;
    for (size_t pos = 0; pos < order.size(); ++pos) {
      int n = order[pos];
      if (n < 0 || static_cast<size_t>(n) >= nn || seen[n])
        return Fail("the schedule is not an order of the graph's nodes (position " +
                    std::to_string(pos) + ")");
      seen[n] = 1;
      const ir::Node& node = g.nodes[n];
      for (const auto* list : {&node.inputs, &node.implicit_inputs})
        for (int v : *list)
          if (v >= 0 && !available[v])
            return Fail("the schedule runs " + node.Label(g) + " before the producer of '" +
                        g.values[v].name + "'");
      for (int v : node.outputs)
        if (v >= 0) available[v] = 1;
    }
    prog->schedule.order = std::move(order);
    return OkStatus();
  }

  Status ReadPlan(const ir::Graph& g, Program* prog) {
    const fb::MemoryPlan* mp = p_->plan();
    if (!mp) return Fail("the program has no memory plan");
    planner::Plan& plan = prog->plan;
    plan.planner = Str(mp->planner());
    plan.arena_bytes = mp->arena_bytes();
    plan.lower_bound_bytes = mp->lower_bound_bytes();
    prog->plan_options.planner = plan.planner.empty() ? "default" : plan.planner;
    prog->plan_options.reorder = mp->reorder();
    prog->plan_options.aliasing = mp->aliasing();
    prog->schedule.peak_bytes = mp->peak_bytes();
    prog->schedule.original_peak = mp->file_order_peak_bytes();
    prog->schedule.exact = mp->exact_schedule();
    constexpr uint64_t kMaxArena = uint64_t{1} << 48;
    if (plan.arena_bytes > kMaxArena) return Fail("the memory plan's arena is implausibly large");
    const int nb = mp->buffers() ? static_cast<int>(mp->buffers()->size()) : 0;
    const int positions = static_cast<int>(g.nodes.size());
    std::vector<char> planned(g.values.size(), 0);  // one buffer per value at most
    for (int i = 0; i < nb; ++i) {
      const fb::PlanBuffer* fbuf = mp->buffers()->Get(i);
      planner::Buffer b;
      b.name = Str(fbuf->name());
      std::string where = "memory plan buffer " + std::to_string(i) + " '" + b.name + "'";
      b.value = fbuf->value();
      if (b.value < 0 || b.value >= static_cast<int>(g.values.size()))
        return Fail(where + ": value " + std::to_string(b.value) + " is out of range");
      if (planned[b.value]++)
        return Fail(where + ": value '" + g.values[b.value].name + "' has two buffers");
      b.size = fbuf->size();
      b.offset = fbuf->offset();
      if (b.size > plan.arena_bytes || b.offset > plan.arena_bytes - b.size)
        return Fail(where + ": [" + std::to_string(b.offset) + ", +" + std::to_string(b.size) +
                    ") lies outside the " + std::to_string(plan.arena_bytes) + "-byte arena");
      b.first_use = fbuf->first_use();
      b.last_use = fbuf->last_use();
      if (b.first_use < 0 || b.last_use < b.first_use || b.last_use > positions)
        return Fail(where + ": lifetime " + std::to_string(b.first_use) + ".." +
                    std::to_string(b.last_use) + " is outside the schedule");
      b.alias_of = fbuf->alias_of();
      b.alias_offset = fbuf->alias_offset();
      if (b.alias_of < -1 || b.alias_of >= nb || b.alias_of == i)
        return Fail(where + ": alias_of " + std::to_string(b.alias_of) + " is out of range");
      if (b.alias_offset > plan.arena_bytes) return Fail(where + ": alias offset is out of range");
      plan.buffers.push_back(std::move(b));
    }
    for (int i = 0; i < nb; ++i) {  // alias chains end
      int steps = 0;
      for (int j = i; plan.buffers[j].alias_of >= 0; j = plan.buffers[j].alias_of)
        if (++steps > nb)
          return Fail("memory plan buffer '" + plan.buffers[i].name + "': alias_of forms a cycle");
    }
    Status st = planner::VerifyNoOverlap(plan.buffers, plan.arena_bytes);
    if (!st.ok()) return Fail("the memory plan is invalid: " + st.message());
    return OkStatus();
  }

  const uint8_t* bytes_;
  size_t size_;
  const fb::Program* p_;
  std::shared_ptr<const void> keep_alive_;
  std::string label_;
  const uint8_t* data_ = nullptr;
  size_t data_size_ = 0;
  size_t constants_ = 0;
  std::set<uint64_t> ranges_;
};

}  // namespace

bool LooksLikeProgram(const uint8_t* data, size_t size) {
  return size >= 8 && flatbuffers::BufferHasIdentifier(data, kProgramIdentifier);
}

Expected<std::string> HashSourceFiles(const std::string& model_path,
                                      const std::string& weights_path) {
  Sha256 h;
  for (const std::string& path : {model_path, weights_path}) {
    if (path.empty()) continue;
    KILN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
    h.Update(file->data(), file->size());
  }
  auto digest = h.Finish();
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

Expected<std::string> SerializeProgram(const ir::Model& model, const planner::GraphPlan& plan,
                                       const planner::PlanOptions& plan_options,
                                       const ProgramMetadata& metadata) {
  KILN_CHECK(model.graph != nullptr, "a model without a graph");
  KILN_CHECK(plan.schedule.order.size() == model.graph->nodes.size(),
             "the plan is not of this graph");
  Writer w(model);
  return w.Write(plan, plan_options, metadata);
}

Expected<Program> LoadProgram(const uint8_t* data, size_t size,
                              std::shared_ptr<const void> keep_alive, const std::string& label) {
  if (size < 8)
    return Error(label + ": truncated: " + std::to_string(size) +
                 " bytes is too short for a kiln program");
  if (!flatbuffers::BufferHasIdentifier(data, kProgramIdentifier)) {
    std::string id;
    for (int i = 4; i < 8; ++i) {
      char ch = static_cast<char>(data[i]);
      id += (ch >= 32 && ch < 127) ? std::string(1, ch) : "\\x" + HexString(data + i, 1);
    }
    return Error(label + ": not a kiln program (file identifier '" + id + "', expected '" +
                 kProgramIdentifier + "')");
  }
  if (size >= (size_t{1} << 31))
    return Error(label + ": " + std::to_string(size) +
                 " bytes is larger than a program file can be");
  data = internal::Aligned16(data, size, &keep_alive);
  // Depth: a subgraph level nests three tables (Graph, Node, Attribute). Tables: every table
  // takes at least 4 bytes and kiln never shares one, so a file holds at most size / 4; the bound
  // stops a forged file from referencing one subgraph many times over.
  flatbuffers::Verifier verifier(data, size, /*max_depth=*/4 * kMaxSubgraphDepth + 64,
                                 /*max_tables=*/size / 4 + 64);
  if (!fb::VerifyProgramBuffer(verifier))
    return Error(label +
                 ": corrupt or truncated kiln program (the FlatBuffers verifier rejects it)");
  Reader r(data, size, std::move(keep_alive), label);
  KILN_ASSIGN_OR_RETURN(Program prog, r.Read());
  prog.stats.file_bytes = size;
  return prog;
}

Expected<std::string> ReserializeProgram(const Program& program, const ProgramMetadata& metadata) {
  planner::GraphPlan plan;
  plan.schedule = program.schedule;
  plan.plan = program.plan;
  return SerializeProgram(program.model, plan, program.plan_options, metadata);
}

Expected<SealOffsets> FindSeal(const uint8_t* data, size_t size) {
  flatbuffers::Verifier verifier(data, size, /*max_depth=*/4 * kMaxSubgraphDepth + 64,
                                 /*max_tables=*/size / 4 + 64);
  if (!fb::VerifyProgramBuffer(verifier))
    return Error("corrupt kiln program (the FlatBuffers verifier rejects it)");
  return SealOffsetsOf(fb::GetProgram(data), data);
}

void WriteProgramDigest(uint8_t* data, size_t size, const SealOffsets& seal) {
  Digest d = Sha256WithBlanks(data, size, {seal.program_digest});
  std::memcpy(data + seal.program_digest, d.data(), d.size());
}

Status ResealProgram(uint8_t* data, size_t size) {
  KILN_ASSIGN_OR_RETURN(SealOffsets seal, FindSeal(data, size));
  WriteProgramDigest(data, size, seal);
  return OkStatus();
}

Expected<Program> LoadProgramFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  return LoadProgram(file->data(), file->size(), file, path);
}

}  // namespace kiln::bundle
