// The portable C99 kernels (src/kernels/reference/*.c), embedded in kiln at build time so that
// `kiln compile` can emit exactly the kernels a model uses. Each file is one kernel family:
// `static` functions named kiln_<file>_*, self-contained C99 over <stdint.h>, <stddef.h>,
// <string.h> and <math.h>. A file may start with a line `/* needs: a b */` naming the kernel
// files it calls.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "support/status.h"

namespace kiln::codegen::c {

// The source text of kernel file `name` (without ".c"); nullptr when there is none.
const std::string* KernelSource(const std::string& name);
// The kernels to emit for `wanted`, with what they need, each after its dependencies and
// otherwise in name order (deterministic). An unknown name is a compiler bug.
std::vector<std::string> KernelClosure(const std::set<std::string>& wanted);
// The test driver (driver/kiln_driver.c): a main() that runs a generated model on files.
const std::string& DriverSource();

}  // namespace kiln::codegen::c
