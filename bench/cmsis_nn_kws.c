/* The baseline for kiln's int8 C on the Cortex-M4: models/kws_cnn.onnx's layers called one by one
 * through Arm's CMSIS-NN (../shared/third_party/cmsis-nn), as TFLite Micro with CMSIS-NN would
 * run them: NHWC int8 activations, per-channel int8 weights, int32 biases, the same fixed-point
 * requantization. Built and counted by bench/mcu_int8.py --cmsis-nn; `PROGRAM R` runs R
 * inferences.
 *
 * The network (scripts/make_models.py's kws_cnn): mfcc [1, 49, 10, 1] -> Conv 10x4 stride 2, pads
 * top 4 / left 1, 64 channels, ReLU -> 4 x (depthwise 3x3 pad 1, ReLU; pointwise 1x1 64 -> 64,
 * ReLU) -> average pool 25x5 -> fully connected 64 -> 12 -> softmax. The input is quantized from
 * float and the output dequantized, as kiln's QDQ model does. Weights and quantization parameters
 * are fixed pseudo-random values: the kernels' instruction counts do not depend on them. */
#include <stdio.h>
#include <stdlib.h>

#include "arm_nnfunctions.h"

#define CH 64
#define OUT_H 25
#define OUT_W 5

static int8_t conv1_w[CH * 10 * 4], dw_w[4][CH * 9], pw_w[4][CH * CH], fc_w[12 * CH];
static int32_t conv1_b[CH], dw_b[4][CH], pw_b[4][CH], fc_b[12];
static int32_t mult[CH], shift[CH];
static int8_t act_a[OUT_H * OUT_W * CH], act_b[OUT_H * OUT_W * CH], input_q[49 * 10];
static int8_t pooled[CH], logits[12], probs_q[12];
static float mfcc[49 * 10], probs[12];
static int8_t scratch[16384];
static int32_t scratch_used; /* the most any kernel asked for: the harness's RAM counts that */

static uint32_t seed = 12345u;
static int8_t next_byte(void) {
  seed = seed * 1664525u + 1013904223u;
  return (int8_t)(seed >> 24);
}

static void fill(int8_t* p, int n) {
  int i;
  for (i = 0; i < n; ++i) p[i] = next_byte();
}

static void setup(void) {
  int i, b;
  fill(conv1_w, sizeof conv1_w);
  for (b = 0; b < 4; ++b) {
    fill(dw_w[b], sizeof dw_w[b]);
    fill(pw_w[b], sizeof pw_w[b]);
    for (i = 0; i < CH; ++i) dw_b[b][i] = pw_b[b][i] = next_byte() * 64;
  }
  fill(fc_w, sizeof fc_w);
  for (i = 0; i < CH; ++i) {
    conv1_b[i] = next_byte() * 64;
    mult[i] = 1200000000 + next_byte() * 1000000;
    shift[i] = -9;
  }
  for (i = 0; i < 12; ++i) fc_b[i] = next_byte() * 64;
  for (i = 0; i < 49 * 10; ++i) mfcc[i] = (float)next_byte() / 128.0f;
}

static void conv(const int8_t* in, int h, int w, int c, const int8_t* weights, const int32_t* bias,
                 int kh, int kw, int stride, int pad_h, int pad_w, int8_t* out, int oh, int ow) {
  cmsis_nn_context ctx;
  cmsis_nn_conv_params p;
  cmsis_nn_per_channel_quant_params q;
  cmsis_nn_dims in_d, f_d, b_d, out_d;
  p.input_offset = 128;
  p.output_offset = -128;
  p.stride.h = p.stride.w = stride;
  p.padding.h = pad_h;
  p.padding.w = pad_w;
  p.dilation.h = p.dilation.w = 1;
  p.activation.min = -128; /* ReLU: the output zero point is the lowest value */
  p.activation.max = 127;
  q.multiplier = mult;
  q.shift = shift;
  in_d.n = 1, in_d.h = h, in_d.w = w, in_d.c = c;
  f_d.n = CH, f_d.h = kh, f_d.w = kw, f_d.c = c;
  b_d.n = b_d.h = b_d.w = 1, b_d.c = CH;
  out_d.n = 1, out_d.h = oh, out_d.w = ow, out_d.c = CH;
  ctx.buf = scratch;
  ctx.size = arm_convolve_wrapper_s8_get_buffer_size(&p, &in_d, &f_d, &out_d);
  if (ctx.size > scratch_used) scratch_used = ctx.size;
  if (ctx.size > (int32_t)sizeof scratch ||
      arm_convolve_wrapper_s8(&ctx, &p, &q, &in_d, in, &f_d, weights, &b_d, bias, &out_d, out) !=
          ARM_CMSIS_NN_SUCCESS)
    exit(2);
}

static void depthwise(const int8_t* in, const int8_t* weights, const int32_t* bias, int8_t* out) {
  cmsis_nn_context ctx;
  cmsis_nn_dw_conv_params p;
  cmsis_nn_per_channel_quant_params q;
  cmsis_nn_dims in_d, f_d, b_d, out_d;
  p.input_offset = 128;
  p.output_offset = -128;
  p.ch_mult = 1;
  p.stride.h = p.stride.w = 1;
  p.padding.h = p.padding.w = 1;
  p.dilation.h = p.dilation.w = 1;
  p.activation.min = -128;
  p.activation.max = 127;
  q.multiplier = mult;
  q.shift = shift;
  in_d.n = 1, in_d.h = OUT_H, in_d.w = OUT_W, in_d.c = CH;
  f_d.n = 1, f_d.h = 3, f_d.w = 3, f_d.c = CH;
  b_d.n = b_d.h = b_d.w = 1, b_d.c = CH;
  out_d.n = 1, out_d.h = OUT_H, out_d.w = OUT_W, out_d.c = CH;
  ctx.buf = scratch;
  ctx.size = arm_depthwise_conv_wrapper_s8_get_buffer_size(&p, &in_d, &f_d, &out_d);
  if (ctx.size > scratch_used) scratch_used = ctx.size;
  if (ctx.size > (int32_t)sizeof scratch ||
      arm_depthwise_conv_wrapper_s8(&ctx, &p, &q, &in_d, in, &f_d, weights, &b_d, bias, &out_d,
                                    out) != ARM_CMSIS_NN_SUCCESS)
    exit(2);
}

static void head(const int8_t* in) {
  cmsis_nn_context ctx;
  cmsis_nn_pool_params pool;
  cmsis_nn_fc_params fc;
  cmsis_nn_per_tensor_quant_params q;
  cmsis_nn_dims in_d, f_d, b_d, out_d;
  pool.stride.h = pool.stride.w = 1;
  pool.padding.h = pool.padding.w = 0;
  pool.activation.min = -128;
  pool.activation.max = 127;
  in_d.n = 1, in_d.h = OUT_H, in_d.w = OUT_W, in_d.c = CH;
  f_d.n = 1, f_d.h = OUT_H, f_d.w = OUT_W, f_d.c = CH;
  out_d.n = 1, out_d.h = 1, out_d.w = 1, out_d.c = CH;
  ctx.buf = scratch;
  ctx.size = arm_avgpool_s8_get_buffer_size(1, CH);
  if (ctx.size > scratch_used) scratch_used = ctx.size;
  if (arm_avgpool_s8(&ctx, &pool, &in_d, in, &f_d, &out_d, pooled) != ARM_CMSIS_NN_SUCCESS) exit(2);
  fc.input_offset = 128;
  fc.filter_offset = 0;
  fc.output_offset = 0;
  fc.activation.min = -128;
  fc.activation.max = 127;
  q.multiplier = mult[0];
  q.shift = shift[0];
  in_d.n = 1, in_d.h = in_d.w = 1, in_d.c = CH;
  f_d.n = CH, f_d.h = f_d.w = 1, f_d.c = 12;
  b_d.n = b_d.h = b_d.w = 1, b_d.c = 12;
  out_d.n = 1, out_d.h = out_d.w = 1, out_d.c = 12;
  ctx.size = arm_fully_connected_s8_get_buffer_size(&f_d);
  if (ctx.size > scratch_used) scratch_used = ctx.size;
  if (arm_fully_connected_s8(&ctx, &fc, &q, &in_d, pooled, &f_d, fc_w, &b_d, fc_b, &out_d,
                             logits) != ARM_CMSIS_NN_SUCCESS)
    exit(2);
  arm_softmax_s8(logits, 1, 12, 1 << 30, 2, -248, probs_q);
}

static void inference(void) {
  int i, b;
  for (i = 0; i < 49 * 10; ++i) { /* QuantizeLinear of the float input (scale 1/64) */
    float v = mfcc[i] * 64.0f;
    int32_t r = (int32_t)(v >= 0 ? v + 0.5f : v - 0.5f);
    input_q[i] = (int8_t)(r < -128 ? -128 : r > 127 ? 127 : r);
  }
  conv(input_q, 49, 10, 1, conv1_w, conv1_b, 10, 4, 2, 4, 1, act_a, OUT_H, OUT_W);
  for (b = 0; b < 4; ++b) {
    depthwise(act_a, dw_w[b], dw_b[b], act_b);
    conv(act_b, OUT_H, OUT_W, CH, pw_w[b], pw_b[b], 1, 1, 1, 0, 0, act_a, OUT_H, OUT_W);
  }
  head(act_a);
  for (i = 0; i < 12; ++i) probs[i] = (float)(probs_q[i] + 128) / 256.0f; /* DequantizeLinear */
}

int main(int argc, char** argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 1, r, i;
  float sum = 0;
  setup();
  for (r = 0; r < runs; ++r) inference();
  for (i = 0; i < 12; ++i) sum += probs[i];
  printf("checksum %.6f\n", (double)sum);
  printf("scratch %ld\n", (long)scratch_used);
  return 0;
}
