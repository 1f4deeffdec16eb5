/* needs: gemm */
/* gemm_f32: the float GEMM (kernels/gemm.c). */
KILN_GEMM_DEFINE(f32, float)
