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

// The best ISA this CPU runs; kBaseline where the calling thread runs the reference kernels.
Isa BestIsa();
bool IsaSupported(Isa isa);  // kAuto always is
const char* IsaName(Isa isa);
// The ISA to run: `isa`, or the best one for kAuto or an ISA this CPU lacks.
Isa ResolveIsa(Isa isa);

// Which kernels the host runs: kFast (SIMD for the best ISA, oneDNN, packed weights, Winograd,
// threads) or kReference, the oracle the fast ones are tested against: the portable C99 kernels
// of src/kernels/reference where an op has one (float Conv and ConvTranspose, the GEMM behind
// MatMul, Gemm, Einsum, attention and the recurrent ops), the unary ops' formulas, and the
// baseline-ISA loops elsewhere, on one thread, without oneDNN. The choice belongs to the calling
// thread: the executor sets it around the nodes it runs (ExecutorOptions::kernels), and the
// thread pool runs a reference caller's chunks inline.
enum class KernelSet { kFast, kReference };
KernelSet ActiveKernels();
inline bool ReferenceKernels() { return ActiveKernels() == KernelSet::kReference; }
// Sets the calling thread's kernel set for its own lifetime.
class ScopedKernelSet {
 public:
  explicit ScopedKernelSet(KernelSet k);
  ~ScopedKernelSet();
  ScopedKernelSet(const ScopedKernelSet&) = delete;
  ScopedKernelSet& operator=(const ScopedKernelSet&) = delete;

 private:
  KernelSet previous_;
};

}  // namespace kiln::ops
