#include "ir/tensor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "ir/small_float.h"
#include "support/status.h"

namespace kiln {

int64_t NumElements(const Dims& dims) {
  // Saturates instead of overflowing: dims from a malformed file can multiply past int64.
  int64_t n = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  return n;
}

std::string DimsToString(const Dims& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugeTensorBytes = size_t{16} << 20;
}  // namespace

Tensor::Tensor(DType dtype, Dims dims) : dtype_(dtype), dims_(std::move(dims)) {
  // Dims from a malformed file can overflow the element count: refuse like a failed allocation.
  int64_t count = 1;
  for (int64_t d : dims_) {
    if (d < 0 || (d > 0 && count > (int64_t{1} << 42) / d)) throw std::bad_alloc();
    count *= d;
  }
  if (dtype_ == DType::kString) {
    auto strings = std::shared_ptr<std::string[]>(new std::string[count < 1 ? 1 : count]);
    data_ = strings.get();
    keep_alive_ = std::shared_ptr<const void>(strings, strings.get());
    return;
  }
  size_t n = nbytes();
  if (n >= kHugeTensorBytes) {
    // Large tensors (a fully connected layer's weights) on 2 MB pages where the kernel allows:
    // streaming them then takes a TLB miss per 2 MB rather than per 4 KB.
    void* p = nullptr;
    if (posix_memalign(&p, kHugePage, n) != 0) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);
#endif
    std::memset(p, 0, n);
    auto buf = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
    data_ = buf.get();
    keep_alive_ = std::shared_ptr<const void>(buf, buf.get());
    return;
  }
  // Always allocate at least 16 bytes so empty tensors have a valid, aligned pointer.
  auto buf =
      std::shared_ptr<uint8_t[]>(new (std::align_val_t(64)) uint8_t[n < 16 ? 16 : n](),
                                 [](uint8_t* p) { operator delete[](p, std::align_val_t(64)); });
  data_ = buf.get();
  keep_alive_ = std::shared_ptr<const void>(buf, buf.get());
}

Tensor Tensor::View(DType dtype, Dims dims, void* data, std::shared_ptr<const void> keep_alive) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.data_ = data;
  t.keep_alive_ = std::move(keep_alive);
  return t;
}

Tensor Tensor::Copy(DType dtype, Dims dims, const void* bytes) {
  Tensor t(dtype, std::move(dims));
  if (dtype == DType::kString)
    std::copy_n(static_cast<const std::string*>(bytes), t.size(), t.strings());
  else if (t.nbytes() > 0)
    std::memcpy(t.data_, bytes, t.nbytes());
  return t;
}

bool Tensor::SameContents(const Tensor& other) const {
  if (kind_ != other.kind_ || dtype_ != other.dtype_ || dims_ != other.dims_) return false;
  if (kind_ == Kind::kSequence) {
    const auto &a = items(), &b = other.items();
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!a[i].SameContents(b[i])) return false;
    return true;
  }
  if (kind_ == Kind::kNone || data_ == other.data_) return true;
  if (is_string()) return std::equal(strings(), strings() + size(), other.strings());
  return nbytes() == 0 || (data_ && other.data_ && std::memcmp(data_, other.data_, nbytes()) == 0);
}

Tensor Tensor::Sequence(DType elem_dtype, std::vector<Tensor> items) {
  Tensor t;
  t.kind_ = Kind::kSequence;
  t.dtype_ = elem_dtype;
  t.items_ = std::make_shared<const std::vector<Tensor>>(std::move(items));
  return t;
}

Tensor Tensor::None() {
  Tensor t;
  t.kind_ = Kind::kNone;
  return t;
}

const std::vector<Tensor>& Tensor::items() const {
  static const std::vector<Tensor> kEmpty;
  return items_ ? *items_ : kEmpty;
}

Tensor Tensor::Reshaped(Dims dims) const {
  KILN_CHECK(NumElements(dims) == size(), "reshape changes element count");
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

Tensor Tensor::Clone() const {
  if (kind_ == Kind::kSequence) {
    std::vector<Tensor> items;
    for (const auto& t : this->items()) items.push_back(t.Clone());
    return Sequence(dtype_, std::move(items));
  }
  if (kind_ == Kind::kNone) return None();
  return Copy(dtype_, dims_, data_);
}

double Tensor::GetDouble(int64_t i) const {
  switch (dtype_) {
    case DType::kFloat32:
      return data<float>()[i];
    case DType::kFloat64:
      return data<double>()[i];
    case DType::kFloat16:
      return static_cast<float>(data<Float16>()[i]);
    case DType::kBFloat16:
      return static_cast<float>(data<BFloat16>()[i]);
    case DType::kInt8:
      return data<int8_t>()[i];
    case DType::kInt16:
      return data<int16_t>()[i];
    case DType::kInt32:
      return data<int32_t>()[i];
    case DType::kInt64:
      return static_cast<double>(data<int64_t>()[i]);
    case DType::kUInt8:
      return data<uint8_t>()[i];
    case DType::kUInt16:
      return data<uint16_t>()[i];
    case DType::kUInt32:
      return data<uint32_t>()[i];
    case DType::kUInt64:
      return static_cast<double>(data<uint64_t>()[i]);
    case DType::kBool:
      return data<uint8_t>()[i] ? 1.0 : 0.0;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat4E2M1:
    case DType::kFloat8E8M0:
      return SmallFloatToFloat(dtype_, data<uint8_t>()[i]);
    case DType::kInt4:
    case DType::kInt2:
      return data<int8_t>()[i];
    case DType::kUInt4:
    case DType::kUInt2:
      return data<uint8_t>()[i];
    default:
      KILN_CHECK(false, "GetDouble on unsupported dtype");
  }
}

int64_t Tensor::GetInt(int64_t i) const {
  switch (dtype_) {
    case DType::kInt4:
    case DType::kInt2:
    case DType::kInt8:
      return data<int8_t>()[i];
    case DType::kInt16:
      return data<int16_t>()[i];
    case DType::kInt32:
      return data<int32_t>()[i];
    case DType::kInt64:
      return data<int64_t>()[i];
    case DType::kUInt4:
    case DType::kUInt2:
    case DType::kUInt8:
      return data<uint8_t>()[i];
    case DType::kUInt16:
      return data<uint16_t>()[i];
    case DType::kUInt32:
      return data<uint32_t>()[i];
    case DType::kUInt64:
      return static_cast<int64_t>(data<uint64_t>()[i]);
    case DType::kBool:
      return data<uint8_t>()[i] ? 1 : 0;
    default:
      return static_cast<int64_t>(GetDouble(i));
  }
}

std::vector<int64_t> Tensor::ToInt64Vector() const {
  std::vector<int64_t> v(static_cast<size_t>(size()));
  for (int64_t i = 0; i < size(); ++i) v[i] = GetInt(i);
  return v;
}

}  // namespace kiln
