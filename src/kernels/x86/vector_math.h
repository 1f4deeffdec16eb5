// Float32 element-wise math over arrays, with run-time ISA dispatch (AVX-512F, AVX2 + FMA, a
// baseline build; chosen by __builtin_cpu_supports, no -march). Kernels only: no framework types.
//
// Accuracy against libm in double (tests/vector_math_test.cc, measured max): exp 1 ulp (Cody-Waite
// reduction, degree-6 polynomial, 2^n applied in two steps so denormal results are rounded once),
// log 1 ulp, sigmoid 2.4, tanh 1.3, sin / cos 1.5 (|x| > 8192 and non-finite x go to libm per
// element), tan 3 (libm beyond |x| 128 and within 1e-4 of a zero or pole, where the reduction's
// error would show), erf 7 (5.4 with FMA; absolute error < 5e-7), gelu 4 ulp or 2e-7 absolute
// (x < -2, where 1 + erf cancels, is done with erfc in double per element), asin 2.3, acos 1.3,
// atan 2.7; sqrt, floor, ceil and round are exact. NaN propagates; +-inf and denormals
// give libm's answers. The cheap maps (Relu, Clip, ...) and Add / Sub / Mul / Div are the scalar
// code's IEEE operations, bit for bit (HardSigmoid's alpha x + beta may contract to an FMA).
//
// Every function takes the ISA as a last argument (kAuto: the best this CPU runs); the tests pass
// each supported one. y may equal x (in place); other overlap is not allowed. Results depend only
// on the values and the ISA, never on n or alignment (tails run the vector body on a padded copy).
#pragma once

#include <cstdint>

#include "kernels/x86/cpu_isa.h"

namespace kiln::ops {

void ExpF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void LogF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void SigmoidF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
// y = x * sigmoid(alpha * x) (Swish / SiLU).
void SwishF32(const float* x, float* y, int64_t n, float alpha, Isa isa = Isa::kAuto);
// Swish (alpha 1) in place on channels [c0, c1) of `pixels` pixels `stride` floats apart (a
// channels-last convolution's output, maybe a slice of a wider tensor): one pass when contiguous.
void SwishPixelsF32(float* y, int64_t pixels, int64_t stride, int64_t c0, int64_t c1);
void TanhF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
// Softplus log(1 + exp(x)) and Mish x tanh(softplus(x)).
void SoftplusF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void MishF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void ErfF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
// y = 0.5 x (1 + erf(x / sqrt 2)), or with tanh_approx 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
// x^3))).
void GeluF32(const float* x, float* y, int64_t n, bool tanh_approx, Isa isa = Isa::kAuto);
// sqrt correctly rounded (the ISA's instruction); asin, acos and atan by Cephes' single-precision
// reductions and polynomials.
void SqrtF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
// floor, ceil and round half to even (Round), exact.
void FloorF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void CeilF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void RoundF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void AsinF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void AcosF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void AtanF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void SinF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void CosF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void TanF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
// cosh and sinh through the vector exp (a few ulp), sinh's small arguments by its series.
void CoshF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void SinhF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
// The exponential linear units, through e^x - 1 accurate near 0: Elu x < 0 ? alpha (e^x - 1) : x;
// Selu gamma (x > 0 ? x : alpha (e^x - 1)); Celu x > 0 ? x : alpha (e^(x / alpha) - 1).
void EluF32(const float* x, float* y, int64_t n, float alpha, Isa isa = Isa::kAuto);
void SeluF32(const float* x, float* y, int64_t n, float alpha, float gamma, Isa isa = Isa::kAuto);
void CeluF32(const float* x, float* y, int64_t n, float alpha, Isa isa = Isa::kAuto);

// Cheap maps. Relu: x > 0 ? x : 0. LeakyRelu: x < 0 ? alpha x : x. Clip: compare-and-replace
// (NaN kept; lo > hi gives hi). HardSigmoid: max(0, min(1, alpha x + beta)).
// HardSwish: x * max(0, min(1, x / 6 + 0.5)).
void ReluF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);
void LeakyReluF32(const float* x, float* y, int64_t n, float alpha, Isa isa = Isa::kAuto);
void ClipF32(const float* x, float* y, int64_t n, float lo, float hi, Isa isa = Isa::kAuto);
void HardSigmoidF32(const float* x, float* y, int64_t n, float alpha, float beta,
                    Isa isa = Isa::kAuto);
void HardSwishF32(const float* x, float* y, int64_t n, Isa isa = Isa::kAuto);

// kMaxSkipNaN: a running maximum a taking b as the pools do (b where b > a or a is NaN, so NaN
// is skipped unless every value is).
enum class VecBinOp { kAdd, kSub, kMul, kDiv, kMaxSkipNaN };
// o[i] = a[i] op b[i].
void BinaryF32(VecBinOp op, const float* a, const float* b, float* o, int64_t n,
               Isa isa = Isa::kAuto);
// o[i] = s op b[i] (scalar_first) or b[i] op s.
void BinaryScalarF32(VecBinOp op, float s, const float* b, float* o, int64_t n, bool scalar_first,
                     Isa isa = Isa::kAuto);

// Row reductions for Softmax and global pooling.
float MaxF32(const float* x, int64_t n, Isa isa = Isa::kAuto);  // n >= 1; NaN-propagating
// The sum of x[0..n) in float, lane-wise partial sums added in lane order, then the tail.
float SumF32(const float* x, int64_t n, Isa isa = Isa::kAuto);
// y[i] = exp(x[i] - m); returns the sum of the y[i] (accumulated in a fixed lane order).
// Softmax of each of `rows` contiguous rows of len floats (y may be x).
void SoftmaxRowsF32(const float* x, float* y, int64_t rows, int64_t len, Isa isa = Isa::kAuto);

// float32 to IEEE float16 bits and back, bit for bit as ir/half.h's FloatToHalfBits and
// HalfBitsToFloat (NaNs included): F16C's conversions on AVX2 and AVX-512 CPUs, else those.
void FloatsToHalves(const float* x, uint16_t* y, int64_t n, Isa isa = Isa::kAuto);
void HalvesToFloats(const uint16_t* x, float* y, int64_t n, Isa isa = Isa::kAuto);
float ExpSubSumF32(const float* x, float* y, int64_t n, float m, Isa isa = Isa::kAuto);

}  // namespace kiln::ops
