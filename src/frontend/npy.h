// NumPy .npy files (format versions 1-3), little-endian, C order, any kiln dtype.
#pragma once

#include <string>

#include "ir/tensor.h"
#include "support/status.h"

namespace kiln::frontend {

Expected<Tensor> ParseNpy(const void* data, size_t size, const std::string& label);
Expected<Tensor> LoadNpyFile(const std::string& path);
// The .npy bytes of `t`; an 8-bit float tensor is written as its values in float32, a string
// tensor as NumPy's '<U<n>' text (UTF-8 decoded; '<U' and '|S' are read back as strings).
std::string SerializeNpy(const Tensor& t);

}  // namespace kiln::frontend
