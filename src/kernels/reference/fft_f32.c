/* needs: fft */
/* fft_f32: the float transform (kernels/fft.c). */
KILN_FFT_DEFINE(f32, float)
