#!/usr/bin/python3
"""Writes the CMSIS-NN baseline for a float ONNX model: a C program that runs the model's layers one
by one through Arm's CMSIS-NN (../shared/third_party/cmsis-nn), as TFLite Micro with CMSIS-NN would:
NHWC int8 activations, int8 weights, int32 biases, per-channel fixed-point requantization (for
fully connected layers too: arm_fully_connected_per_channel_s8, as `kiln quantize` quantizes every
weight per output channel by default). The
float input is quantized and the output dequantized, as kiln's QDQ model does. Weights and
quantization parameters are fixed pseudo-random values (the kernels' instruction counts do not
depend on them); `PROGRAM R` runs R inferences and prints the most scratch a kernel asked for.

Usage: /usr/bin/python3 bench/cmsis_nn_harness.py MODEL.onnx OUT.c
Prints one JSON line: the activation RAM the harness needs (the largest set of tensors live at
once, from the layer order) and the parameter bytes (its flash besides code).

Layers: Conv (group 1: arm_convolve_wrapper_s8; one group per channel:
arm_depthwise_conv_wrapper_s8), Add of two tensors (arm_elementwise_add_s8), MatMul / Gemm with a
constant weight and an optional constant bias Add (arm_fully_connected_per_channel_s8),
GlobalAveragePool (arm_avgpool_s8), Softmax (arm_softmax_s8); Relu folds into the producer's output
range (the output zero point at the range's low end), Flatten is a view. Others are refused.
"""
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model = shape_inference.infer_shapes(onnx.load(sys.argv[1]))
    g = model.graph
    consts = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    dims = {}
    for v in list(g.value_info) + list(g.input) + list(g.output):
        dims[v.name] = [d.dim_value for d in v.type.tensor_type.shape.dim]
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)

    alias, size, order = {}, {}, []  # tensor -> buffer; buffer -> bytes; (step, reads, writes)
    decls, setup, calls = [], [], []
    params = 0

    def buf(t):
        while t in alias:
            t = alias[t]
        return t

    def cname(t):
        return "t_" + "".join(ch if ch.isalnum() else "_" for ch in buf(t))

    def new_tensor(t, nbytes):
        size[t] = nbytes
        decls.append(f"static int8_t {cname(t)}[{nbytes}];")

    def weights(name, count, kind="int8_t"):
        nonlocal params
        cn = "p_" + "".join(ch if ch.isalnum() else "_" for ch in name)
        decls.append(f"static {kind} {cn}[{count}];")
        setup.append(f"  fill_{'bytes' if kind == 'int8_t' else 'words'}({cn}, {count});")
        params += count * (1 if kind == "int8_t" else 4)
        return cn

    x = g.input[0].name
    xn = int(np.prod(dims[x]))
    new_tensor(x, xn)
    decls.append(f"static float input_f[{xn}];")
    steps = 0
    for n in g.node:
        out = n.output[0]
        if n.op_type in ("Relu", "Flatten"):
            alias[out] = n.input[0]
            continue
        if n.op_type == "Add" and n.input[1] in consts:  # a MatMul's bias: folded below
            alias[out] = n.input[0]
            continue
        ins = [buf(i) for i in n.input if i and i not in consts]
        steps += 1
        if n.op_type == "Conv":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            w = consts[n.input[1]]
            _, c, h, wd = dims[n.input[0]]
            _, m, oh, ow = dims[out]
            group = attrs.get("group", 1)
            kh, kw = w.shape[2], w.shape[3]
            stride = attrs.get("strides", [1, 1])
            pads = attrs.get("pads", [0, 0, 0, 0])
            new_tensor(out, m * oh * ow)
            wn = weights(n.name + "_w", w.size)
            bn = weights(n.name + "_b", m, "int32_t")
            fn = "depthwise" if group == c and group > 1 else "conv"
            if fn == "conv" and group != 1:
                sys.exit(f"cmsis_nn_harness: {n.name}: grouped convolution")
            params += 8 * m  # a multiplier and a shift per output channel, as TFLM stores them
            calls.append(f"  {fn}({cname(n.input[0])}, {h}, {wd}, {c}, {wn}, {bn}, {m}, {kh}, {kw}, "
                         f"{stride[0]}, {stride[1]}, {pads[0]}, {pads[1]}, {cname(out)}, {oh}, {ow});")
        elif n.op_type in ("MatMul", "Gemm"):
            w = consts[n.input[1]]
            k, m = (w.shape[1], w.shape[0]) if n.op_type == "Gemm" else (w.shape[0], w.shape[1])
            rows = int(np.prod(dims[n.input[0]])) // k
            new_tensor(out, rows * m)
            wn = weights(n.name + "_w", w.size)
            bn = weights(n.name + "_b", m, "int32_t")
            params += 8 * m  # a multiplier and a shift per output, as kiln's are
            calls.append(f"  fc({cname(n.input[0])}, {rows}, {k}, {wn}, {bn}, {m}, {cname(out)});")
        elif n.op_type == "Add":
            count = int(np.prod(dims[out]))
            new_tensor(out, count)
            calls.append(f"  add({cname(n.input[0])}, {cname(n.input[1])}, {count}, {cname(out)});")
        elif n.op_type == "GlobalAveragePool":
            _, c, h, wd = dims[n.input[0]]
            new_tensor(out, c)
            calls.append(f"  avgpool({cname(n.input[0])}, {h}, {wd}, {c}, {cname(out)});")
        elif n.op_type == "Softmax":
            count = int(np.prod(dims[out]))
            new_tensor(out, count)
            calls.append(f"  arm_softmax_s8({cname(n.input[0])}, 1, {count}, 1 << 30, 2, -248, "
                         f"{cname(out)});")
        else:
            sys.exit(f"cmsis_nn_harness: {n.name}: {n.op_type} is not a layer this harness has")
        order.append((steps, ins, buf(out)))
    y = buf(g.output[0].name)
    yn = size[y]
    decls.append(f"static float output_f[{yn}];")

    # RAM: the activations live at once, at the worst step (a tensor lives from the step that
    # writes it to the last that reads it; the quantized input from the start).
    last = {x: 0}
    first = {x: 0}
    for step, ins, o in order:
        first.setdefault(o, step)
        for i in ins:
            last[i] = step
    last[y] = steps + 1
    ram = max(sum(size[t] for t in size if first.get(t, 0) <= s <= last.get(t, first.get(t, 0)))
              for s in range(steps + 2))

    with open(sys.argv[2], "w") as f:
        f.write(PROLOGUE.replace("MAXC", str(max(512, max(size.values())))))
        f.write("\n".join(decls) + "\n\nstatic void setup(void) {\n  int i;\n" + "\n".join(setup))
        f.write(f"\n  for (i = 0; i < {xn}; ++i) input_f[i] = (float)next_byte() / 128.0f;\n}}\n\n")
        f.write("static void inference(void) {\n  int i;\n")
        f.write(f"  for (i = 0; i < {xn}; ++i) {{ /* QuantizeLinear of the float input */\n"
                f"    float v = input_f[i] * 64.0f;\n"
                f"    int32_t r = (int32_t)(v >= 0 ? v + 0.5f : v - 0.5f);\n"
                f"    {cname(x)}[i] = (int8_t)(r < -128 ? -128 : r > 127 ? 127 : r);\n  }}\n")
        f.write("\n".join(calls) + "\n")
        f.write(f"  for (i = 0; i < {yn}; ++i) output_f[i] = (float)({cname(y)}[i] + 128) / 256.0f;\n}}\n")
        f.write(EPILOGUE.replace("YN", str(yn)))
    print(json.dumps({"ram": ram, "params": params}))


PROLOGUE = r"""/* Written by bench/cmsis_nn_harness.py: a model's layers one by one through CMSIS-NN. */
#include <stdio.h>
#include <stdlib.h>

#include "arm_nnfunctions.h"

static int8_t scratch[65536];
static int32_t scratch_used; /* the most any kernel asked for: the harness's RAM counts that */
static int32_t mult[MAXC], shift[MAXC];

static uint32_t seed = 12345u;
static int8_t next_byte(void) {
  seed = seed * 1664525u + 1013904223u;
  return (int8_t)(seed >> 24);
}
static void fill_bytes(int8_t* p, int n) {
  int i;
  for (i = 0; i < n; ++i) p[i] = next_byte();
}
static void fill_words(int32_t* p, int n) {
  int i;
  for (i = 0; i < n; ++i) p[i] = next_byte() * 64;
}
static void use_scratch(cmsis_nn_context* ctx, int32_t size) {
  if (size > (int32_t)sizeof scratch) exit(3);
  if (size > scratch_used) scratch_used = size;
  ctx->buf = scratch;
  ctx->size = size;
}

static void conv(const int8_t* in, int h, int w, int c, const int8_t* weights, const int32_t* bias,
                 int m, int kh, int kw, int stride_h, int stride_w, int pad_h, int pad_w,
                 int8_t* out, int oh, int ow) {
  cmsis_nn_context ctx;
  cmsis_nn_conv_params p;
  cmsis_nn_per_channel_quant_params q;
  cmsis_nn_dims in_d, f_d, b_d, out_d;
  p.input_offset = 128;
  p.output_offset = -128;
  p.stride.h = stride_h;
  p.stride.w = stride_w;
  p.padding.h = pad_h;
  p.padding.w = pad_w;
  p.dilation.h = p.dilation.w = 1;
  p.activation.min = -128; /* ReLU: the output zero point is the lowest value */
  p.activation.max = 127;
  q.multiplier = mult;
  q.shift = shift;
  in_d.n = 1, in_d.h = h, in_d.w = w, in_d.c = c;
  f_d.n = m, f_d.h = kh, f_d.w = kw, f_d.c = c;
  b_d.n = b_d.h = b_d.w = 1, b_d.c = m;
  out_d.n = 1, out_d.h = oh, out_d.w = ow, out_d.c = m;
  use_scratch(&ctx, arm_convolve_wrapper_s8_get_buffer_size(&p, &in_d, &f_d, &out_d));
  if (arm_convolve_wrapper_s8(&ctx, &p, &q, &in_d, in, &f_d, weights, &b_d, bias, &out_d, out) !=
      ARM_CMSIS_NN_SUCCESS)
    exit(2);
}

static void depthwise(const int8_t* in, int h, int w, int c, const int8_t* weights,
                      const int32_t* bias, int m, int kh, int kw, int stride_h, int stride_w,
                      int pad_h, int pad_w, int8_t* out, int oh, int ow) {
  cmsis_nn_context ctx;
  cmsis_nn_dw_conv_params p;
  cmsis_nn_per_channel_quant_params q;
  cmsis_nn_dims in_d, f_d, b_d, out_d;
  p.input_offset = 128;
  p.output_offset = -128;
  p.ch_mult = m / c;
  p.stride.h = stride_h;
  p.stride.w = stride_w;
  p.padding.h = pad_h;
  p.padding.w = pad_w;
  p.dilation.h = p.dilation.w = 1;
  p.activation.min = -128;
  p.activation.max = 127;
  q.multiplier = mult;
  q.shift = shift;
  in_d.n = 1, in_d.h = h, in_d.w = w, in_d.c = c;
  f_d.n = 1, f_d.h = kh, f_d.w = kw, f_d.c = m;
  b_d.n = b_d.h = b_d.w = 1, b_d.c = m;
  out_d.n = 1, out_d.h = oh, out_d.w = ow, out_d.c = m;
  use_scratch(&ctx, arm_depthwise_conv_wrapper_s8_get_buffer_size(&p, &in_d, &f_d, &out_d));
  if (arm_depthwise_conv_wrapper_s8(&ctx, &p, &q, &in_d, in, &f_d, weights, &b_d, bias, &out_d,
                                    out) != ARM_CMSIS_NN_SUCCESS)
    exit(2);
}

static void fc(const int8_t* in, int rows, int k, const int8_t* weights, const int32_t* bias, int m,
               int8_t* out) {
  cmsis_nn_context ctx;
  cmsis_nn_fc_params p;
  cmsis_nn_per_channel_quant_params q;
  cmsis_nn_dims in_d, f_d, b_d, out_d;
  p.input_offset = 128;
  p.filter_offset = 0;
  p.output_offset = -128;
  p.activation.min = -128;
  p.activation.max = 127;
  q.multiplier = mult;
  q.shift = shift;
  in_d.n = rows, in_d.h = in_d.w = 1, in_d.c = k;
  f_d.n = k, f_d.h = f_d.w = 1, f_d.c = m;
  b_d.n = b_d.h = b_d.w = 1, b_d.c = m;
  out_d.n = rows, out_d.h = out_d.w = 1, out_d.c = m;
  use_scratch(&ctx, arm_fully_connected_s8_get_buffer_size(&f_d));
  if (arm_fully_connected_per_channel_s8(&ctx, &p, &q, &in_d, in, &f_d, weights, &b_d, bias,
                                         &out_d, out) != ARM_CMSIS_NN_SUCCESS)
    exit(2);
}

static void add(const int8_t* a, const int8_t* b, int count, int8_t* out) {
  if (arm_elementwise_add_s8(a, b, 128, 1073741824, -1, 128, 1073741824, -1, 20, out, -128,
                             1073741824, -19, -128, 127, count) != ARM_CMSIS_NN_SUCCESS)
    exit(2);
}

static void avgpool(const int8_t* in, int h, int w, int c, int8_t* out) {
  cmsis_nn_context ctx;
  cmsis_nn_pool_params p;
  cmsis_nn_dims in_d, f_d, out_d;
  p.stride.h = p.stride.w = 1;
  p.padding.h = p.padding.w = 0;
  p.activation.min = -128;
  p.activation.max = 127;
  in_d.n = 1, in_d.h = h, in_d.w = w, in_d.c = c;
  f_d.n = 1, f_d.h = h, f_d.w = w, f_d.c = c;
  out_d.n = 1, out_d.h = 1, out_d.w = 1, out_d.c = c;
  use_scratch(&ctx, arm_avgpool_s8_get_buffer_size(1, c));
  if (arm_avgpool_s8(&ctx, &p, &in_d, in, &f_d, &out_d, out) != ARM_CMSIS_NN_SUCCESS) exit(2);
}

"""

EPILOGUE = r"""
int main(int argc, char** argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 1, r, i;
  float sum = 0;
  for (i = 0; i < (int)(sizeof mult / sizeof mult[0]); ++i) {
    mult[i] = 1200000000 + next_byte() * 1000000;
    shift[i] = -9;
  }
  setup();
  for (r = 0; r < runs; ++r) inference();
  for (i = 0; i < YN; ++i) sum += output_f[i];
  printf("checksum %.6f\n", (double)sum);
  printf("scratch %ld\n", (long)scratch_used);
  return 0;
}
"""

if __name__ == "__main__":
    main()
