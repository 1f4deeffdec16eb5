#include "kernels/x86/cpu_isa.h"

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

thread_local KernelSet t_kernels = KernelSet::kFast;

}  // namespace

Isa BestIsa() {
  static const Isa best = CpuHas(Isa::kAvx512) ? Isa::kAvx512
                          : CpuHas(Isa::kAvx2) ? Isa::kAvx2
                                               : Isa::kBaseline;
  return ReferenceKernels() ? Isa::kBaseline : best;
}

KernelSet ActiveKernels() { return t_kernels; }

ScopedKernelSet::ScopedKernelSet(KernelSet k) : previous_(t_kernels) { t_kernels = k; }

ScopedKernelSet::~ScopedKernelSet() { t_kernels = previous_; }

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

Isa ResolveIsa(Isa isa) {
  return isa == Isa::kAuto || !CpuHas(isa) || ReferenceKernels() ? BestIsa() : isa;
}

}  // namespace kiln::ops
