// Tensor: a dtype, concrete dims and a pointer to contiguous row-major data. The bytes are owned
// (a heap buffer), borrowed from a mapped file (kept alive by `keep_alive`), or a plain view into
// an arena (no keep-alive; the caller guarantees lifetime). Copies share the bytes.
// A STRING tensor holds std::string elements, always owned on the heap: DTypeSize is 0 for it, so
// code that moves bytes sees none, and only ops that declare kTakesStrings (ops/op_traits.h) are
// given one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/half.h"

namespace kiln {

using Dims = std::vector<int64_t>;

int64_t NumElements(const Dims& dims);
std::string DimsToString(const Dims& dims);

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled owned tensor.
  Tensor(DType dtype, Dims dims);
  // A view of memory owned elsewhere.
  static Tensor View(DType dtype, Dims dims, void* data,
                     std::shared_ptr<const void> keep_alive = {});
  // An owned copy of `bytes` (must be NumElements * DTypeSize bytes; for STRING, that many
  // std::string).
  static Tensor Copy(DType dtype, Dims dims, const void* bytes);
  template <class T>
  static Tensor FromVector(DType dtype, Dims dims, const std::vector<T>& v) {
    return Copy(dtype, std::move(dims), v.data());
  }

  // A runtime value is a tensor, a sequence of tensors (ONNX sequence type) or an empty optional.
  enum class Kind { kTensor, kSequence, kNone };
  static Tensor Sequence(DType elem_dtype, std::vector<Tensor> items);
  static Tensor None();
  Kind kind() const { return kind_; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_none() const { return kind_ == Kind::kNone; }
  // Items of a sequence (empty for other kinds).
  const std::vector<Tensor>& items() const;

  bool defined() const { return kind_ != Kind::kTensor || dtype_ != DType::kUndefined; }
  DType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  int64_t dim(int i) const { return dims_[i]; }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t size() const { return NumElements(dims_); }
  size_t nbytes() const { return static_cast<size_t>(size()) * DTypeSize(dtype_); }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <class T>
  T* data() {
    return static_cast<T*>(data_);
  }
  template <class T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }

  bool is_string() const { return kind_ == Kind::kTensor && dtype_ == DType::kString; }
  std::string* strings() { return data<std::string>(); }
  const std::string* strings() const { return data<std::string>(); }
  // True when both have the same kind, dtype, dims and elements (strings by value).
  bool SameContents(const Tensor& other) const;

  // Same bytes, other dims (element count must match).
  Tensor Reshaped(Dims dims) const;
  // A deep copy that owns its bytes.
  Tensor Clone() const;
  // Reads element i converted to double / int64 (any numeric dtype).
  double GetDouble(int64_t i) const;
  int64_t GetInt(int64_t i) const;
  // Reads the whole tensor as int64 values (any integer dtype).
  std::vector<int64_t> ToInt64Vector() const;
  // True when the bytes stay valid without the arena (owned, mapped, or not a plain tensor).
  bool owns_or_keeps_alive() const { return kind_ != Kind::kTensor || keep_alive_ != nullptr; }
  // True when this tensor is the only holder of the bytes it owns (no copy shares them).
  bool sole_owner() const { return kind_ == Kind::kTensor && keep_alive_.use_count() == 1; }

 private:
  Kind kind_ = Kind::kTensor;
  DType dtype_ = DType::kUndefined;  // for a sequence: the element dtype
  Dims dims_;
  std::shared_ptr<const std::vector<Tensor>> items_;
  void* data_ = nullptr;
  std::shared_ptr<const void> keep_alive_;
};

}  // namespace kiln
