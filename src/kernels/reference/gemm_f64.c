/* needs: gemm */
/* gemm_f64: the double GEMM (kernels/gemm.c). */
KILN_GEMM_DEFINE(f64, double)
