// Device check and timing of one generated kiln kernel (one input, one output), built by run.sh:
//   nvcc -O3 -arch=sm_90 -I PREPARED -DBENCH_NAME=field -DBENCH_UPPER=FIELD -DBENCH_CU='"field.cu"'
// Usage: bench_NAME CHECK_IN.f32 REF_OUT.f32 TOLERANCE LABEL
// Prints markdown table rows: the check (rel. L2 error against the host executor) and samples/s
// at batches 2^16 .. 2^22.
#include BENCH_CU

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define KCAT2(a, b, c) a##b##c
#define KCAT(a, b, c) KCAT2(a, b, c)
#define FN(suffix) KCAT(kiln_, BENCH_NAME, suffix)
#define MACRO(suffix) KCAT(KILN_, BENCH_UPPER, suffix)

static const long kIn = MACRO(_INPUT0_ELEMENTS), kOut = MACRO(_OUTPUT0_ELEMENTS);

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      std::printf("| %s | CUDA error %s at line %d | | |\n", label, cudaGetErrorString(e_), __LINE__); \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

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
  if (argc != 5) return 2;
  const char* label = argv[4];
  const double tol = std::atof(argv[3]);
  std::vector<float> in = ReadF32(argv[1]), ref = ReadF32(argv[2]);
  const long check_n = (long)(in.size() / kIn);
  if (check_n == 0 || (long)ref.size() != check_n * kOut) {
    std::printf("| %s | check data missing or of the wrong size | | |\n", label);
    return 1;
  }
  const long max_n = 1L << 22;
  void* w = nullptr;
  if (FN(_upload_weights)(&w) != KILN_OK) {
    std::printf("| %s | upload_weights failed | | |\n", label);
    return 1;
  }
  float *d_in = nullptr, *d_out = nullptr;
  CHECK(cudaMalloc(&d_in, max_n * kIn * sizeof(float)));
  CHECK(cudaMalloc(&d_out, max_n * kOut * sizeof(float)));
  KCAT(struct kiln_, BENCH_NAME, _inputs) inputs = {d_in};
  KCAT(struct kiln_, BENCH_NAME, _outputs) outputs = {d_out};

  // Correctness against the host executor's outputs on the same samples.
  CHECK(cudaMemcpy(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice));
  if (FN(_run)(w, &inputs, &outputs, check_n, 0) != KILN_OK) {
    std::printf("| %s | run failed | | |\n", label);
    return 1;
  }
  CHECK(cudaDeviceSynchronize());
  std::vector<float> got(ref.size());
  CHECK(cudaMemcpy(got.data(), d_out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  const double err = std::sqrt(num / den);
  std::printf("| %s | check: %ld samples, rel. L2 error %.3g (limit %g): %s | | |\n", label, check_n, err, tol,
              err <= tol ? "PASS" : "FAIL");

  // Throughput on device-resident inputs.
  Fill<<<(unsigned)((max_n * kIn + 255) / 256), 256>>>(d_in, max_n * kIn);
  CHECK(cudaDeviceSynchronize());
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
  return err <= tol ? 0 : 1;
}
