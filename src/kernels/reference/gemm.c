/* gemm: the plain GEMM C[M,N] += alpha * op(A) * op(B), defined per element type by
 * KILN_GEMM_DEFINE (gemm_f32.c, gemm_f64.c). Element (i, k) of op(A) is A[i * sam + k * sak],
 * element (k, j) of op(B) is B[k * sbk + j * sbn]; C is dense row-major with N columns.
 * When B's rows are contiguous the loops run i-k-j (the inner loop walks a row of B and a row
 * of C; four k steps at a time, so each C element is loaded and stored once per four products),
 * otherwise i-j-k dot products (rows of A and B^T contiguous). Accumulates in T. */
#define KILN_GEMM_DEFINE(S, T)                                                                   \
  static void kiln_gemm_##S##_run(size_t M, size_t N, size_t K, T alpha, const T* A, size_t sam, \
                                  size_t sak, const T* B, size_t sbk, size_t sbn, T* C) {        \
    size_t i, j, k;                                                                              \
    /* the tail restarts at K4 rather than where k stopped: that bounds it for GCC */            \
    const size_t K4 = K - K % 4;                                                                 \
    if (sbn == 1 && N > 1) {                                                                     \
      for (i = 0; i < M; ++i) {                                                                  \
        const T* a = A + i * sam;                                                                \
        T* c = C + i * N;                                                                        \
        for (k = 0; k < K4; k += 4) {                                                            \
          const T a0 = alpha * a[k * sak], a1 = alpha * a[(k + 1) * sak];                        \
          const T a2 = alpha * a[(k + 2) * sak], a3 = alpha * a[(k + 3) * sak];                  \
          const T *b0 = B + k * sbk, *b1 = b0 + sbk, *b2 = b1 + sbk, *b3 = b2 + sbk;             \
          for (j = 0; j < N; ++j) c[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];     \
        }                                                                                        \
        for (k = K4; k < K; ++k) {                                                               \
          const T a0 = alpha * a[k * sak];                                                       \
          const T* b0 = B + k * sbk;                                                             \
          for (j = 0; j < N; ++j) c[j] += a0 * b0[j];                                            \
        }                                                                                        \
      }                                                                                          \
    } else {                                                                                     \
      for (i = 0; i < M; ++i) {                                                                  \
        const T* a = A + i * sam;                                                                \
        for (j = 0; j < N; ++j) {                                                                \
          const T* b = B + j * sbn;                                                              \
          T s = 0;                                                                               \
          for (k = 0; k < K; ++k) s += a[k * sak] * b[k * sbk];                                  \
          C[i * N + j] += alpha * s;                                                             \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
  }
