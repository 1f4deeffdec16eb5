// Device check and timing of one generated kiln kernel (one input, one output), built by run.sh:
//   nvcc -O3 -arch=sm_90 -I PREPARED -DBENCH_NAME=field -DBENCH_UPPER=FIELD -DBENCH_CU='"field.cu"'
// Usage: bench_NAME CHECK_IN.f32 REF_OUT.f32 TOLERANCE LABEL [BIG_REF.f32|- [BIG_OUT.f32]]
// Prints markdown table rows:
//   - the check: rel. L2 error against the host executor on the check samples (4093: the last
//     warp is partial), into an output buffer filled with a NaN sentinel, plus a guard past the
//     end that must stay untouched;
//   - the large batch: 2^22 - 5 samples (a partial last warp and the grid-stride loop), every
//     output written, compared with BIG_REF.f32 (the fp32 kernel's outputs) when given, its own
//     outputs written to BIG_OUT.f32 when given;
//   - samples/s at batches 2^16 .. 2^22.
#include BENCH_CU

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define KCAT2(a, b, c) a##b##c
#define KCAT(a, b, c) KCAT2(a, b, c)
#define FN(suffix) KCAT(kiln_, BENCH_NAME, suffix)
#define MACRO(suffix) KCAT(KILN_, BENCH_UPPER, suffix)

static const long kIn = MACRO(_INPUT0_ELEMENTS), kOut = MACRO(_OUTPUT0_ELEMENTS);

#define CHECK(call)                                                                         \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                \
      std::printf("| %s | CUDA error %s at line %d | | |\n", label, cudaGetErrorString(e_), \
                  __LINE__);                                                                \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

static double RelL2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

// Runs n samples into a sentinel-filled output (plus `guard` floats past the end); false when a
// sample is left unwritten (NaN) or the guard changed.
static bool RunChecked(void* w, const float* d_in, float* d_out, long n, long guard,
                       std::vector<float>* got, const char* label) {
  KCAT(struct kiln_, BENCH_NAME, _inputs) inputs = {d_in};
  KCAT(struct kiln_, BENCH_NAME, _outputs) outputs = {d_out};
  if (cudaMemset(d_out, 0xff, (n * kOut + guard) * sizeof(float)) != cudaSuccess) return false;
  if (FN(_run)(w, &inputs, &outputs, n, 0) != KILN_OK || cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("| %s | run of %ld samples failed | | |\n", label, n);
    return false;
  }
  got->resize(n * kOut + guard);
  if (cudaMemcpy(got->data(), d_out, got->size() * sizeof(float), cudaMemcpyDeviceToHost) !=
      cudaSuccess)
    return false;
  long unwritten = 0, touched = 0;
  for (long i = 0; i < n * kOut; ++i) unwritten += std::isnan((*got)[i]) ? 1 : 0;
  for (long i = n * kOut; i < n * kOut + guard; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &(*got)[i], 4);
    touched += bits != 0xffffffffu;
  }
  got->resize(n * kOut);
  if (unwritten || touched)
    std::printf(
        "| %s | %ld samples: %ld outputs NaN or unwritten, %ld guard floats written | | |\n", label,
        n, unwritten, touched);
  return unwritten == 0 && touched == 0;
}

static std::vector<float> ReadF32(const char* path) {
  std::vector<float> v;
  FILE* f = std::fopen(path, "rb");
  if (!f) return v;
  std::fseek(f, 0, SEEK_END);
  long bytes = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  v.resize(bytes / 4);
  if (std::fread(v.data(), 4, v.size(), f) != v.size()) v.clear();
  std::fclose(f);
  return v;
}

__global__ void Fill(float* p, long n) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = (float)((i * 2654435761u) % 2001u) / 1000.0f - 1.0f;
}

int main(int argc, char** argv) {
  if (argc < 5 || argc > 7) return 2;
  const char* label = argv[4];
  const double tol = std::atof(argv[3]);
  std::vector<float> in = ReadF32(argv[1]), ref = ReadF32(argv[2]);
  const long check_n = (long)(in.size() / kIn);
  if (check_n == 0 || (long)ref.size() != check_n * kOut) {
    std::printf("| %s | check data missing or of the wrong size | | |\n", label);
    return 1;
  }
  const long max_n = 1L << 22, big_n = max_n - 5, guard = 64;
  void* w = nullptr;
  if (FN(_upload_weights)(&w) != KILN_OK) {
    std::printf("| %s | upload_weights failed | | |\n", label);
    return 1;
  }
  float *d_in = nullptr, *d_out = nullptr;
  CHECK(cudaMalloc(&d_in, max_n * kIn * sizeof(float)));
  CHECK(cudaMalloc(&d_out, (max_n * kOut + guard) * sizeof(float)));
  KCAT(struct kiln_, BENCH_NAME, _inputs) inputs = {d_in};
  KCAT(struct kiln_, BENCH_NAME, _outputs) outputs = {d_out};

  // Correctness against the host executor's outputs on the same samples.
  CHECK(cudaMemcpy(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<float> got;
  bool ok = RunChecked(w, d_in, d_out, check_n, guard, &got, label);
  const double err = ok ? RelL2(got, ref) : NAN;
  ok = ok && err <= tol;
  std::printf("| %s | check: %ld samples, rel. L2 error %.3g (limit %g): %s | | |\n", label,
              check_n, err, tol, ok ? "PASS" : "FAIL");

  // The large batch on device-resident inputs, against the fp32 kernel's outputs.
  Fill<<<(unsigned)((max_n * kIn + 255) / 256), 256>>>(d_in, max_n * kIn);
  CHECK(cudaDeviceSynchronize());
  bool big_ok = RunChecked(w, d_in, d_out, big_n, guard, &got, label);
  if (big_ok && argc >= 7) {
    FILE* f = std::fopen(argv[6], "wb");
    big_ok = f && std::fwrite(got.data(), 4, got.size(), f) == got.size();
    if (f) std::fclose(f);
  }
  if (big_ok && argc >= 6 && std::strcmp(argv[5], "-") != 0) {
    std::vector<float> big_ref = ReadF32(argv[5]);
    double e = big_ref.size() == got.size() ? RelL2(got, big_ref) : NAN;
    big_ok = e <= tol;
    std::printf("| %s | 2^22 - 5 samples against the fp32 kernel: rel. L2 error %.3g: %s | | |\n",
                label, e, big_ok ? "PASS" : "FAIL");
  } else {
    std::printf("| %s | 2^22 - 5 samples, every output written: %s | | |\n", label,
                big_ok ? "PASS" : "FAIL");
  }

  // Throughput.
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int p = 16; p <= 22; ++p) {
    const long n = 1L << p;
    for (int k = 0; k < 3; ++k) FN(_run)(w, &inputs, &outputs, n, 0);
    const int iters = 20;
    CHECK(cudaEventRecord(a));
    for (int k = 0; k < iters; ++k) FN(_run)(w, &inputs, &outputs, n, 0);
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaGetLastError());
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    ms /= iters;
    std::printf("| %s | 2^%d | %.4f | %.3f |\n", label, p, ms, n / (ms * 1e-3) / 1e9);
  }
  FN(_free_weights)(w);
  return ok && big_ok ? 0 : 1;
}
