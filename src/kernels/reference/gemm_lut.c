/* gemm_lut: the float GEMM C[M,N] += alpha * op(A) * op(B) with B's weights stored as codes of a
 * narrow float (FP8 or FP4 in flash, a quarter or an eighth of float32): element (k, j) of op(B)
 * is lut[code], the code at element k * sbk + j * sbn of B, one byte per code (bits 8) or two per
 * byte, the lower element in the low nibble (bits 4). The table holds each code's value times the
 * tensor's scale, so a weight costs one load more than a float one. i-k-j order, dense C. */
static float kiln_gemm_lut_weight(const uint8_t* B, size_t e, int bits, const float* lut) {
  return lut[bits == 8 ? B[e] : (B[e >> 1] >> ((e & 1) * 4)) & 15];
}

static void kiln_gemm_lut_run(size_t M, size_t N, size_t K, float alpha, const float* A, size_t sam,
                              size_t sak, const uint8_t* B, size_t sbk, size_t sbn, int bits,
                              const float* lut, float* C) {
  size_t i, j, k;
  for (i = 0; i < M; ++i) {
    float* c = C + i * N;
    for (k = 0; k < K; ++k) {
      const float a = alpha * A[i * sam + k * sak];
      for (j = 0; j < N; ++j) c[j] += a * kiln_gemm_lut_weight(B, k * sbk + j * sbn, bits, lut);
    }
  }
}
