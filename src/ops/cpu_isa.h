// The instruction sets the fast kernels (gemm_kernels, conv_depthwise, vector_math) are compiled
// for, chosen at run time: the build has no -march flags, so one binary runs on any x86-64 and
// uses AVX-512 or AVX2 where the CPU has them. Kernels take an Isa argument (kAuto: the best this
// CPU runs) so that tests can run every path the machine supports.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KILN_X86_DISPATCH 1
#else
#define KILN_X86_DISPATCH 0
#endif

namespace kiln::ops {

enum class Isa { kAuto, kBaseline, kAvx2, kAvx512 };  // kAvx2 and kAvx512 include FMA

Isa BestIsa();
bool IsaSupported(Isa isa);  // kAuto always is
const char* IsaName(Isa isa);
// The ISA to run: `isa`, or the best one for kAuto or an ISA this CPU lacks.
Isa ResolveIsa(Isa isa);

}  // namespace kiln::ops
