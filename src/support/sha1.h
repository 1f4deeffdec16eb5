// SHA-1 (FIPS 180-4) as a hex string: the optimization service's IrSha1 observation (CompilerGym's
// LLVM environment names its IR hash the same way). Not used for security.
#pragma once

#include <string>

namespace kiln {

std::string Sha1Hex(const std::string& data);

}  // namespace kiln
