#include "ops/cpu_isa.h"

namespace kiln::ops {
namespace {

bool CpuHas(Isa isa) {
#if KILN_X86_DISPATCH
  switch (isa) {
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    default:
      return true;
  }
#else
  return isa == Isa::kBaseline || isa == Isa::kAuto;
#endif
}

}  // namespace

Isa BestIsa() {
  static const Isa best = CpuHas(Isa::kAvx512) ? Isa::kAvx512
                          : CpuHas(Isa::kAvx2) ? Isa::kAvx2
                                               : Isa::kBaseline;
  return best;
}

bool IsaSupported(Isa isa) { return isa == Isa::kAuto || CpuHas(isa); }

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
      return "auto";
    case Isa::kBaseline:
      return "baseline";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

Isa ResolveIsa(Isa isa) { return isa == Isa::kAuto || !CpuHas(isa) ? BestIsa() : isa; }

}  // namespace kiln::ops
