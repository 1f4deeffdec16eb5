/* needs: fft */
/* fft_f64: the double transform (kernels/fft.c). */
KILN_FFT_DEFINE(f64, double)
