#!/usr/bin/python3
"""Op-level sweep: kiln's host executor against ONNX Runtime 1.30 (CPU), one small model per case.

Usage: /usr/bin/python3 bench/op_sweep.py [--kiln build/kiln] [--work build/op_sweep]
           [--families conv,matmul,..] [--cases SUBSTR,..] [--quick] [--threads 1,2] [--rounds 3]
           [--iterations N] [--regen] [--no-pin] [--default-malloc] [--timeout 300] [--list]

What it is for: a model list says how fast kiln is on those models; this sweep says where a kernel
is missing or slow. For every op family that ONNX Runtime has a fast kernel for, it builds cases
at the shapes real models use (small and large maps, few and many channels, strides, dilations,
groups, 1-D convs, sequence lengths 1-512, batch 1 and 8, forward and bidirectional recurrences
with and without initial states, broadcasts on the last and on inner axes), plus the exported
forms ORT fuses into one kernel (GroupNorm as torch writes it at opset 17, decomposed LayerNorm and
RMSNorm, Add + LayerNorm, GELU's erf and tanh expansions, SiLU, Conv + Add + Relu, attention as
MatMul-Softmax-MatMul and as a whole block with its projections) and int8 (QDQ Conv / MatMul,
QLinearConv, QLinearMatMul, DynamicQuantizeLinear + MatMulInteger). Graph inputs and outputs are
channels-first (ONNX's NCHW); the "chain_" cases put the op between convolutions so that the
layout kiln's executor picks there (channels-last) is what gets timed.

1. Builds each case with onnx.helper (opset 17, Gelu's 20; float32 inputs and outputs; weights as
   initializers, deterministic random values seeded by the case's name) into
   WORK/models/FAMILY/CASE.onnx, only when it is missing or with --regen. Index inputs (Gather's
   token ids) are float32 graph inputs holding integers, cast to int64 in the graph, fed to both
   runtimes from WORK/models/FAMILY/CASE.NAME.npy (ort_bench.js fills integer inputs with zeros
   and dumps float32 only); integer outputs (TopK's indices, ArgMax) are cast to float32.
2. Installs the baseline into WORK/node_modules if missing (`npm install --ignore-scripts
   onnxruntime-node@1.30.0`, bench/host_speed.py's ensure_ort).
3. Per case, once: `bench/ort_bench.js MODEL --dump D` (ORT's inputs and outputs as .npy), then
   `kiln run MODEL --input NAME=D/input_k.npy ...`. rel-L2 is the worst relative L2 distance of
   kiln's outputs from ORT's, FAIL over 1e-4; the case is timed all the same. Quantized outputs
   are judged on their grid instead: elements one step apart (a rounding tie) on up to 1% of them
   pass. The iteration count is set from the slower runtime's time in these runs (ORT's, and a
   3-run `kiln bench`) unless --iterations sets it: about 0.25 s of runs per process, 10-300.
4. For every thread count T: `kiln bench MODEL --threads T --iterations N` and `node
   bench/ort_bench.js MODEL --threads T --iterations N` (intraOpNumThreads T, interOpNumThreads 1)
   alternating, --rounds times, both pinned to the same last T CPUs (--no-pin: not pinned) as in
   host_speed.py; each side's figure is the median of its per-round medians.
   Both run with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (THP for malloc'd memory), mmap threshold
   32 MB and no heap trimming (--default-malloc: without). On these VMs a 4 KB page fault costs
   10-25 us, and both runtimes take a large output from fresh memory on every run (kiln's bench
   past glibc's mmap threshold; ORT's node binding copies each output into a new ArrayBuffer whose
   heap V8 frees only at its next GC): a Relu over 4M floats measured 3 ms in ORT's kernel and 50
   ms around it, and kiln's 44 MB Resize 290 ms against 60. With the setting the runs measure the
   kernels, the same way for both runtimes.
5. Prints one markdown table per family (kiln ms, ORT ms, kiln/ORT at each T, rel-L2), a summary
   (per family: cases, failures, the worst ratio and its case at each T, the geometric mean) and
   the 15 worst case/thread pairs. Raw numbers with every round's median go to WORK/results.json;
   progress goes to stderr. A case where either runtime fails shows "error: <first line of its
   message>" and the sweep goes on (every subprocess has --timeout); Ctrl-C prints the cases done.
   Exits 1 if any case failed or disagreed with ORT.

The defaults (239 cases, 3 rounds, T = 1, 2) take 18-25 minutes on a 2-core machine; --quick (47
cases, 3-5 a family) 4. Families (--families; --list prints the cases): conv, convtranspose,
matmul, pool, norm, resize, rnn, eltwise, reduce, data, attention, quant.
Needs: python3-onnx, python3-numpy (Debian), node + npm.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host_speed import ensure_ort  # noqa: E402  (stdlib-only at import time)

FAIL_REL_L2 = 1e-4


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Model building
# ------------------------------------------------------------------------------------------------

class G:
    """A graph under construction: float32 inputs, float32 outputs, weights as initializers."""

    def __init__(self, seed, opset=17):
        import numpy as np  # noqa: E402  (Debian's)
        self.np = np
        self.rng = np.random.default_rng(seed)
        self.opset = opset
        self.nodes, self.inputs, self.outputs, self.inits = [], [], [], []
        self.feeds = {}  # input name -> array fed to both runtimes
        self.count = 0
        self.domains = set()

    def _name(self, stem):
        self.count += 1
        return f"{stem}{self.count}"

    def input(self, shape, name=None, data=None):
        from onnx import TensorProto, helper
        name = name or f"x{len(self.inputs)}"
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        if data is not None:
            self.feeds[name] = self.np.ascontiguousarray(data, dtype=self.np.float32)
        return name

    def const(self, array, stem="c"):
        from onnx import numpy_helper
        name = self._name(stem)
        self.inits.append(numpy_helper.from_array(self.np.asarray(array), name))
        return name

    def i64(self, values):
        return self.const(self.np.array(values, dtype=self.np.int64), "i")

    def f32(self, values):
        return self.const(self.np.array(values, dtype=self.np.float32), "f")

    def weight(self, shape, fan_in=None, scale=None, positive=False):
        """Uniform random in [-s, s) with s = 1/sqrt(fan_in) (default: the product of all dims but
        the first), or in [0.5, 1.5) with positive."""
        np = self.np
        if positive:
            w = self.rng.uniform(0.5, 1.5, size=shape)
        else:
            if scale is None:
                fan = fan_in or (int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0]))
                scale = 1.0 / math.sqrt(max(fan, 1))
            w = self.rng.uniform(-scale, scale, size=shape)
        return self.const(w.astype(np.float32), "w")

    def op(self, op_type, inputs, n_out=1, domain=None, **attrs):
        from onnx import helper
        outs = [self._name(op_type.lower()) for _ in range(n_out)]
        kw = {"domain": domain} if domain else {}
        if domain:
            self.domains.add(domain)
        self.nodes.append(helper.make_node(op_type, list(inputs), outs,
                                           name=self._name("n_" + op_type), **kw, **attrs))
        return outs[0] if n_out == 1 else outs

    def output(self, *names):
        from onnx import TensorProto, helper
        for n in names:
            self.outputs.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, None))

    def model(self, name):
        from onnx import helper
        graph = helper.make_graph(self.nodes, name, self.inputs, self.outputs, self.inits)
        opsets = [helper.make_opsetid("", self.opset)]
        opsets += [helper.make_opsetid(d, 1) for d in sorted(self.domains)]
        m = helper.make_model(graph, opset_imports=opsets, producer_name="kiln-op-sweep")
        m.ir_version = 8 if self.opset <= 18 else (9 if self.opset <= 20 else 10)
        return m


class Case:
    """lsb: the outputs are dequantized values on this grid; the check then allows elements one
    step apart (rounding at a tie, or the requantization's float order) on up to 1% of them."""

    def __init__(self, family, name, desc, build, quick=False, opset=17, lsb=None):
        self.family, self.name, self.desc, self.build = family, name, desc, build
        self.quick, self.opset, self.lsb = quick, opset, lsb


def seed_of(family, name):
    return zlib.crc32(f"{family}/{name}".encode())


def pads_for(k, d=1):
    return (d * (k - 1)) // 2


def conv(g, x, cin, cout, k, s=1, d=1, group=1, pad=None, dims=2, bias=True):
    ks = [k] * dims if isinstance(k, int) else list(k)
    p = [pads_for(kk, d) for kk in ks] if pad is None else ([pad] * dims)
    w = g.weight([cout, cin // group, *ks])
    ins = [x, w] + ([g.weight([cout], fan_in=cin // group * int(math.prod(ks)))] if bias else [])
    return g.op("Conv", ins, kernel_shape=ks, strides=[s] * dims, pads=p + p,
                dilations=[d] * dims, group=group)


# ---------------------------------- Conv ---------------------------------------------------------

def conv_cases():
    F = "conv"
    out = []

    def plain(name, desc, n, cin, h, cout, k, s=1, d=1, group=1, quick=False, w=None, pad=None):
        def b(g):
            x = g.input([n, cin, h, w or h])
            g.output(conv(g, x, cin, cout, k, s, d, group, pad=pad))
        out.append(Case(F, name, desc, b, quick))

    plain("1x1_64_56", "1x1 64->64, 56x56", 1, 64, 56, 64, 1, quick=True)
    plain("1x1_256to512_14", "1x1 256->512, 14x14", 1, 256, 14, 512, 1)
    plain("1x1_512_7", "1x1 512->512, 7x7", 1, 512, 7, 512, 1)
    plain("1x1_32to192_112", "1x1 32->192 (expand), 112x112", 1, 32, 112, 192, 1)
    plain("1x1_64_56_b8", "1x1 64->256, 56x56, batch 8", 8, 64, 56, 256, 1)
    plain("1x1s2_256to512_56", "1x1 s2 256->512 (ResNet downsample), 56x56", 1, 256, 56, 512, 1,
          s=2)
    plain("3x3s2_3to32_224", "3x3 s2 3->32 (stem), 224x224", 1, 3, 224, 32, 3, s=2, quick=True)
    plain("3x3_8to16_112", "3x3 8->16, 112x112", 1, 8, 112, 16, 3)
    plain("3x3_16_224", "3x3 16->16, 224x224 (large map, few channels)", 1, 16, 224, 16, 3)
    plain("3x3_64_56", "3x3 64->64, 56x56", 1, 64, 56, 64, 3, quick=True)
    plain("3x3_64_56_b8", "3x3 64->64, 56x56, batch 8", 8, 64, 56, 64, 3)
    plain("3x3s2_128to256_28", "3x3 s2 128->256, 28x28", 1, 128, 28, 256, 3, s=2)
    plain("3x3_256_14", "3x3 256->256, 14x14", 1, 256, 14, 256, 3)
    plain("3x3_512_7", "3x3 512->512, 7x7", 1, 512, 7, 512, 3)
    plain("3x3_512_14_b8", "3x3 512->512, 14x14, batch 8", 8, 512, 14, 512, 3)
    plain("5x5_32_56", "5x5 32->32, 56x56", 1, 32, 56, 32, 5)
    plain("7x7s2_3to64_224", "7x7 s2 3->64 (ResNet stem), 224x224", 1, 3, 224, 64, 7, s=2)
    plain("7x7s2_3to64_224_b8", "7x7 s2 3->64, 224x224, batch 8", 8, 3, 224, 64, 7, s=2)
    plain("dw3x3_32_112", "depthwise 3x3, 32ch, 112x112", 1, 32, 112, 32, 3, group=32, quick=True)
    plain("dw3x3_144_56", "depthwise 3x3, 144ch, 56x56", 1, 144, 56, 144, 3, group=144)
    plain("dw3x3s2_96_112", "depthwise 3x3 s2, 96ch, 112x112", 1, 96, 112, 96, 3, s=2, group=96)
    plain("dw3x3_512_14", "depthwise 3x3, 512ch, 14x14", 1, 512, 14, 512, 3, group=512)
    plain("dw5x5_240_28", "depthwise 5x5, 240ch, 28x28", 1, 240, 28, 240, 5, group=240)
    plain("dw3x3_32_112_b8", "depthwise 3x3, 32ch, 112x112, batch 8", 8, 32, 112, 32, 3, group=32)
    plain("g4_3x3_128_28", "grouped g=4 3x3 128->128, 28x28", 1, 128, 28, 128, 3, group=4)
    plain("g32_3x3_256_28", "grouped g=32 3x3 256->256 (ResNeXt), 28x28", 1, 256, 28, 256, 3,
          group=32)
    plain("g32_3x3_256_28_b8", "grouped g=32 3x3 256->256, 28x28, batch 8", 8, 256, 28, 256, 3,
          group=32)
    plain("d2_3x3_128_28", "dilated d=2 3x3 128->128, 28x28", 1, 128, 28, 128, 3, d=2)
    plain("d4_3x3_256_28", "dilated d=4 3x3 256->256 (DeepLab ASPP), 28x28", 1, 256, 28, 256, 3,
          d=4)
    plain("3x3_64_nonsq", "3x3 64->64, 48x320 (OCR-style)", 1, 64, 48, 64, 3, w=320)

    def conv1d(g, n, cin, length, cout, k, s):
        x = g.input([n, cin, length])
        g.output(conv(g, x, cin, cout, k, s, dims=1, pad=0 if s > 1 else None))
    out.append(Case(F, "1d_k3_256_512", "Conv1d k3 256->256, length 512",
                    lambda g: conv1d(g, 1, 256, 512, 256, 3, 1)))
    out.append(Case(F, "1d_k10s5_1to512_16000", "Conv1d k10 s5 1->512 (wav2vec), length 16000",
                    lambda g: conv1d(g, 1, 1, 16000, 512, 10, 5)))

    def chain(g):
        x = g.input([1, 64, 56, 56])
        y = g.op("Relu", [conv(g, x, 64, 64, 3)])
        y = g.op("Relu", [conv(g, y, 64, 64, 3)])
        g.output(conv(g, y, 64, 64, 3))
    out.append(Case(F, "chain_3x3x3_64_56", "chain: 3 x (3x3 64->64 + Relu), 56x56", chain,
                    quick=True))

    def mbconv(g):  # MobileNetV2 inverted residual: expand, depthwise, project, residual add
        x = g.input([1, 32, 56, 56])
        y = g.op("Clip", [conv(g, x, 32, 192, 1), g.f32(0.0), g.f32(6.0)])
        y = g.op("Clip", [conv(g, y, 192, 192, 3, group=192), g.f32(0.0), g.f32(6.0)])
        g.output(g.op("Add", [conv(g, y, 192, 32, 1), x]))
    out.append(Case(F, "chain_mbconv_32_56", "chain: MobileNetV2 block 32->192->32, 56x56", mbconv))

    def residual(g):  # ORT fuses Conv + Add + Relu into FusedConv with a sum input
        x = g.input([1, 128, 28, 28])
        y = g.op("Relu", [conv(g, x, 128, 128, 3)])
        g.output(g.op("Relu", [g.op("Add", [conv(g, y, 128, 128, 3), x])]))
    out.append(Case(F, "chain_residual_128_28", "chain: ResNet basic block 128ch, 28x28",
                    residual))
    return out


# ---------------------------------- ConvTranspose ------------------------------------------------

def convtranspose_cases():
    F = "convtranspose"
    out = []

    def ct(name, desc, n, cin, h, cout, k, s, p=0, op=0, group=1, quick=False, dims=2):
        def b(g):
            x = g.input([n, cin] + [h] * dims)
            w = g.weight([cin, cout // group] + [k] * dims, fan_in=cin // group * k ** dims)
            bias = g.weight([cout], fan_in=cin)
            attrs = dict(kernel_shape=[k] * dims, strides=[s] * dims, pads=[p] * (2 * dims),
                         group=group)
            if op:
                attrs["output_padding"] = [op] * dims
            g.output(g.op("ConvTranspose", [x, w, bias], **attrs))
        out.append(Case(F, name, desc, b, quick))

    ct("2x2s2_64to32_56", "2x2 s2 64->32 (U-Net up), 56x56", 1, 64, 56, 32, 2, 2, quick=True)
    ct("2x2s2_64to32_56_b8", "2x2 s2 64->32, 56x56, batch 8", 8, 64, 56, 32, 2, 2)
    ct("2x2s2_256to128_28", "2x2 s2 256->128, 28x28", 1, 256, 28, 128, 2, 2)
    ct("3x3s2p1op1_64to32_28", "3x3 s2 pad 1 out-pad 1 64->32, 28x28", 1, 64, 28, 32, 3, 2, 1,
       1, quick=True)
    ct("4x4s2p1_128to64_28", "4x4 s2 pad 1 128->64 (DCGAN), 28x28", 1, 128, 28, 64, 4, 2, 1,
       quick=True)
    ct("4x4s2p1_128to64_28_b8", "4x4 s2 pad 1 128->64, 28x28, batch 8", 8, 128, 28, 64, 4, 2, 1)
    ct("g4_4x4s2p1_128_28", "grouped g=4 4x4 s2 pad 1 128->128, 28x28", 1, 128, 28, 128, 4, 2,
       1, group=4)
    ct("dw4x4s2p1_64_56", "depthwise (g=64) 4x4 s2 pad 1 (bilinear-style up), 56x56", 1, 64, 56,
       64, 4, 2, 1, group=64)
    ct("1d_k16s8_256to128_100", "ConvTranspose1d k16 s8 pad 4 256->128 (vocoder), length 100",
       1, 256, 100, 128, 16, 8, 4, dims=1)
    ct("3d_2x2x2s2_64to32_16", "ConvTranspose3d 2x2x2 s2 64->32 (3-D U-Net up), 16^3", 1, 64,
       16, 32, 2, 2, dims=3)
    return out


# ---------------------------------- MatMul / Gemm ------------------------------------------------

def matmul_cases():
    F = "matmul"
    out = []

    def mm(name, desc, a_shape, k, n, bias=False, quick=False):
        def b(g):
            x = g.input(a_shape + [k])
            y = g.op("MatMul", [x, g.weight([k, n], fan_in=k)])
            if bias:
                y = g.op("Add", [y, g.weight([n], fan_in=k)])
            g.output(y)
        out.append(Case(F, name, desc, b, quick))

    mm("1x768x768", "MatMul [1,768] x [768,768]", [1], 768, 768, quick=True)
    mm("1x768x3072", "MatMul [1,768] x [768,3072]", [1], 768, 3072)
    mm("1x4096x4096", "MatMul [1,4096] x [4096,4096] (decode GEMV)", [1], 4096, 4096)
    mm("8x768x768", "MatMul [8,768] x [768,768]", [8], 768, 768)
    mm("16x1024x1024", "MatMul [1,16,1024] x [1024,1024]", [1, 16], 1024, 1024)
    mm("128x768x768", "MatMul [1,128,768] x [768,768]", [1, 128], 768, 768)
    mm("128x768x3072_bias", "MatMul + Add bias [1,128,768] x [768,3072]", [1, 128], 768, 3072,
       bias=True, quick=True)
    mm("128x3072x768", "MatMul [1,128,3072] x [3072,768]", [1, 128], 3072, 768)
    mm("512x512x512", "MatMul [512,512] x [512,512]", [512], 512, 512, quick=True)
    mm("b8x128x768x768", "MatMul [8,128,768] x [768,768]", [8, 128], 768, 768)
    mm("4096x64x64", "MatMul [4096,64] x [64,64] (tall, thin)", [4096], 64, 64)
    mm("196x384x1152", "MatMul [1,196,384] x [384,1152] (ViT-S qkv)", [1, 196], 384, 1152)

    def batched(g):
        a, c = g.input([8, 128, 64]), g.input([8, 64, 128])
        g.output(g.op("MatMul", [a, c]))
    out.append(Case(F, "batched_8x128x64x128", "MatMul [8,128,64] x [8,64,128] (both inputs)",
                    batched, quick=True))

    def batched_bcast(g):
        a, c = g.input([8, 12, 128, 64]), g.input([1, 1, 64, 128])
        g.output(g.op("MatMul", [a, c]))
    out.append(Case(F, "bcast_8x12x128x64x128", "MatMul [8,12,128,64] x [1,1,64,128] (broadcast)",
                    batched_bcast))

    def gemm(name, desc, m, k, n, trans_b=True, quick=False):
        def b(g):
            x = g.input([m, k])
            w = g.weight([n, k] if trans_b else [k, n], fan_in=k)
            g.output(g.op("Gemm", [x, w, g.weight([n], fan_in=k)], transB=1 if trans_b else 0))
        out.append(Case(F, name, desc, b, quick))

    gemm("gemm_1x2048x1000_tB", "Gemm transB + bias [1,2048] -> 1000 (classifier)", 1, 2048, 1000)
    gemm("gemm_8x1280x1000_tB", "Gemm transB + bias [8,1280] -> 1000", 8, 1280, 1000)
    gemm("gemm_128x768x768_tB", "Gemm transB + bias [128,768] -> 768", 128, 768, 768, quick=True)
    gemm("gemm_512x512x512", "Gemm + bias [512,512] x [512,512]", 512, 512, 512, trans_b=False)
    gemm("gemm_1x1024x4096_tB", "Gemm transB + bias [1,1024] -> 4096", 1, 1024, 4096)

    def matvec(g):  # MatMul with a 1-D weight (a scoring head)
        g.output(g.op("MatMul", [g.input([8, 128, 768]), g.weight([768], fan_in=768)]))
    out.append(Case(F, "matvec_8x128x768", "MatMul [8,128,768] x [768] (1-D B)", matvec))
    return out


# ---------------------------------- Pooling ------------------------------------------------------

def pool_cases():
    F = "pool"
    out = []

    def pool(name, desc, op, n, c, h, k=None, s=None, p=0, quick=False, **extra):
        def b(g):
            x = g.input([n, c, h, h])
            attrs = dict(extra)
            if k:
                attrs.update(kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)
            g.output(g.op(op, [x], **attrs))
        out.append(Case(F, name, desc, b, quick))

    pool("max2x2s2_64_112", "MaxPool 2x2 s2, 64ch, 112x112", "MaxPool", 1, 64, 112, 2, 2,
         quick=True)
    pool("max3x3s2p1_64_112", "MaxPool 3x3 s2 pad 1 (ResNet), 64ch, 112x112", "MaxPool", 1, 64,
         112, 3, 2, 1, quick=True)
    pool("max3x3s2p1_64_112_b8", "MaxPool 3x3 s2 pad 1, 64ch, 112x112, batch 8", "MaxPool", 8,
         64, 112, 3, 2, 1)
    pool("max2x2s2_512_14", "MaxPool 2x2 s2, 512ch, 14x14", "MaxPool", 1, 512, 14, 2, 2)
    pool("max3x3s1p1_192_28", "MaxPool 3x3 s1 pad 1 (Inception), 192ch, 28x28", "MaxPool", 1,
         192, 28, 3, 1, 1)
    pool("max5x5s1p2_256_20", "MaxPool 5x5 s1 pad 2 (YOLO SPPF), 256ch, 20x20", "MaxPool", 1,
         256, 20, 5, 1, 2)
    pool("avg2x2s2_256_56", "AveragePool 2x2 s2, 256ch, 56x56", "AveragePool", 1, 256, 56, 2, 2)
    pool("avg3x3s2p1_64_112", "AveragePool 3x3 s2 pad 1 (exclude pad), 64ch, 112x112",
         "AveragePool", 1, 64, 112, 3, 2, 1, quick=True)
    pool("avg3x3s1p1_192_28_incl", "AveragePool 3x3 s1 pad 1 count_include_pad, 192ch, 28x28",
         "AveragePool", 1, 192, 28, 3, 1, 1, count_include_pad=1)
    pool("avg3x3s2p1_64_112_b8", "AveragePool 3x3 s2 pad 1, 64ch, 112x112, batch 8",
         "AveragePool", 8, 64, 112, 3, 2, 1)
    pool("gap_2048_7", "GlobalAveragePool 2048ch, 7x7", "GlobalAveragePool", 1, 2048, 7)
    pool("gap_1280_7_b8", "GlobalAveragePool 1280ch, 7x7, batch 8", "GlobalAveragePool", 8, 1280,
         7)
    pool("gap_64_112", "GlobalAveragePool 64ch, 112x112 (large map)", "GlobalAveragePool", 1, 64,
         112, quick=True)
    pool("gap_32_224_b8", "GlobalAveragePool 32ch, 224x224, batch 8", "GlobalAveragePool", 8, 32,
         224)
    pool("gmp_512_14", "GlobalMaxPool 512ch, 14x14", "GlobalMaxPool", 1, 512, 14)
    def pool3d(name, desc, op, k, s_, p, shape=(1, 64, 16, 56, 56)):
        k, s_, p = ([v] * 3 if isinstance(v, int) else v for v in (k, s_, p))
        def b(g):
            g.output(g.op(op, [g.input(list(shape))], kernel_shape=k, strides=s_, pads=p * 2))
        out.append(Case(F, name, desc, b))

    pool3d("max3d_3s2p1_64_16x56", "MaxPool3d 3x3x3 s2 pad 1, 64ch, 16x56x56", "MaxPool", 3, 2, 1)
    pool3d("avg3d_2s2_64_16x56", "AveragePool3d 2x2x2 s2, 64ch, 16x56x56", "AveragePool", 2, 2, 0)
    pool3d("max3d_1x3x3s122_64_16x56", "MaxPool3d 1x3x3 s(1,2,2) pad (0,1,1), 64ch, 16x56x56 "
           "(I3D's first pool)", "MaxPool", [1, 3, 3], [1, 2, 2], [0, 1, 1])
    pool3d("max3d_3s2p1_256_8x14", "MaxPool3d 3x3x3 s2 pad 1, 256ch, 8x14x14 (small maps)",
           "MaxPool", 3, 2, 1, shape=(1, 256, 8, 14, 14))
    pool3d("avg3d_2s2_512_4x7_b2", "AveragePool3d 2x2x2 s2, 512ch, 4x7x7, batch 2",
           "AveragePool", 2, 2, 0, shape=(2, 512, 4, 7, 7))
    pool("max3x3d2_64_56", "MaxPool 3x3 dilation 2 pad 2, 64ch, 56x56", "MaxPool", 1, 64, 56, 3,
         1, 2, dilations=[2, 2])

    def lp_pool(g):
        g.output(g.op("LpPool", [g.input([1, 64, 56, 56])], kernel_shape=[3, 3], strides=[2, 2],
                      pads=[1, 1, 1, 1], p=2))
    out.append(Case(F, "lp2_3x3s2_64_56", "LpPool p=2 3x3 s2 pad 1, 64ch, 56x56", lp_pool))

    def chain(g):
        x = g.input([1, 64, 112, 112])
        y = g.op("Relu", [conv(g, x, 64, 64, 1)])
        y = g.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        g.output(conv(g, y, 64, 64, 1))
    out.append(Case(F, "chain_max3x3s2_64_112", "chain: 1x1 conv, MaxPool 3x3 s2, 1x1 conv, "
                    "64ch, 112x112", chain))
    return out


# ---------------------------------- Normalization ------------------------------------------------

def norm_cases():
    F = "norm"
    out = []

    def bn(name, desc, n, c, h, quick=False):
        def b(g):
            x = g.input([n, c, h, h])
            g.output(g.op("BatchNormalization",
                          [x, g.weight([c], positive=True), g.weight([c]), g.weight([c]),
                           g.weight([c], positive=True)], epsilon=1e-5))
        out.append(Case(F, name, desc, b, quick))

    bn("bn_64_112", "BatchNormalization 64ch, 112x112", 1, 64, 112, quick=True)
    bn("bn_256_28_b8", "BatchNormalization 256ch, 28x28, batch 8", 8, 256, 28)

    def in3d(g):  # InstanceNorm3d (3-D U-Nets in medical imaging)
        c = 32
        g.output(g.op("InstanceNormalization", [g.input([1, c, 32, 64, 64]),
                                                 g.weight([c], positive=True), g.weight([c])],
                      epsilon=1e-5))
    out.append(Case(F, "in3d_32_32x64x64", "InstanceNormalization over [1,32,32,64,64]", in3d))

    def bn1d(g):  # BatchNorm1d over [N, C, L] (1-D CNNs, audio)
        c = 256
        g.output(g.op("BatchNormalization",
                      [g.input([8, c, 1000]), g.weight([c], positive=True), g.weight([c]),
                       g.weight([c]), g.weight([c], positive=True)], epsilon=1e-5))
    out.append(Case(F, "bn1d_8x256x1000", "BatchNormalization over [8,256,1000] (1-D)", bn1d))

    def inorm(name, desc, n, c, h, quick=False):
        def b(g):
            x = g.input([n, c, h, h])
            g.output(g.op("InstanceNormalization",
                          [x, g.weight([c], positive=True), g.weight([c])], epsilon=1e-5))
        out.append(Case(F, name, desc, b, quick))

    inorm("in_64_128", "InstanceNormalization 64ch, 128x128 (style transfer)", 1, 64, 128)
    inorm("in_256_32_b8", "InstanceNormalization 256ch, 32x32, batch 8", 8, 256, 32)

    def ln(name, desc, shape, quick=False):
        def b(g):
            x = g.input(shape)
            d = shape[-1]
            g.output(g.op("LayerNormalization", [x, g.weight([d], positive=True), g.weight([d])],
                          axis=-1, epsilon=1e-5))
        out.append(Case(F, name, desc, b, quick))

    ln("ln_1x1x768", "LayerNormalization last axis 768, 1 token", [1, 1, 768])
    ln("ln_8x512x64", "LayerNormalization last axis 64, [8,512,64]", [8, 512, 64])
    ln("ln_1x128x256", "LayerNormalization last axis 256, [1,128,256]", [1, 128, 256])
    ln("ln_8x128x768", "LayerNormalization last axis 768, [8,128,768]", [8, 128, 768], quick=True)
    ln("ln_1x512x1024", "LayerNormalization last axis 1024, [1,512,1024]", [1, 512, 1024])

    def groupnorm(name, desc, n, c, h, groups, quick=False):
        def b(g):  # torch.onnx.export of nn.GroupNorm at opset 17
            x = g.input([n, c, h, h])
            y = g.op("Reshape", [x, g.i64([n, groups, -1])])
            y = g.op("InstanceNormalization", [y, g.f32([1.0] * groups), g.f32([0.0] * groups)],
                     epsilon=1e-5)
            y = g.op("Reshape", [y, g.i64([n, c, h, h])])
            y = g.op("Mul", [y, g.weight([c, 1, 1], positive=True)])
            g.output(g.op("Add", [y, g.weight([c, 1, 1])]))
        out.append(Case(F, name, desc, b, quick))

    groupnorm("gn32_256_64", "GroupNorm (exported form) 32 groups, 256ch, 64x64", 1, 256, 64, 32,
              quick=True)
    groupnorm("gn32_512_32", "GroupNorm (exported form) 32 groups, 512ch, 32x32", 1, 512, 32, 32)
    groupnorm("gn8_128_32_b8", "GroupNorm (exported form) 8 groups, 128ch, 32x32, batch 8", 8, 128,
              32, 8)

    def lpnorm(name, desc, shape, p):
        def b(g):
            g.output(g.op("LpNormalization", [g.input(shape)], axis=-1, p=p))
        out.append(Case(F, name, desc, b))

    lpnorm("lp2_1024x512", "LpNormalization p=2 last axis, [1024,512]", [1024, 512], 2)
    lpnorm("lp1_1024x512", "LpNormalization p=1 last axis, [1024,512]", [1024, 512], 1)

    def ln_decomposed(g):  # LayerNorm as torch < 17 / TF exports it; ORT fuses it
        x = g.input([8, 128, 768])
        mean = g.op("ReduceMean", [x], axes=[-1])
        dx = g.op("Sub", [x, mean])
        var = g.op("ReduceMean", [g.op("Pow", [dx, g.f32(2.0)])], axes=[-1])
        y = g.op("Div", [dx, g.op("Sqrt", [g.op("Add", [var, g.f32(1e-5)])])])
        y = g.op("Mul", [y, g.weight([768], positive=True)])
        g.output(g.op("Add", [y, g.weight([768])]))
    out.append(Case(F, "ln_decomposed_8x128x768", "LayerNorm decomposed (ReduceMean..Sqrt, Div), "
                    "[8,128,768]", ln_decomposed, quick=True))

    def rms_decomposed(g):  # LLaMA-style RMSNorm; ORT fuses into SimplifiedLayerNormalization
        x = g.input([1, 512, 1024])
        ms = g.op("ReduceMean", [g.op("Pow", [x, g.f32(2.0)])], axes=[-1])
        y = g.op("Div", [x, g.op("Sqrt", [g.op("Add", [ms, g.f32(1e-6)])])])
        g.output(g.op("Mul", [y, g.weight([1024], positive=True)]))
    out.append(Case(F, "rms_decomposed_1x512x1024", "RMSNorm decomposed (Pow, ReduceMean, Sqrt, "
                    "Div, Mul), [1,512,1024]", rms_decomposed))

    def skip_ln(g):  # residual Add + LayerNormalization: ORT's SkipLayerNormalization
        x, r = g.input([8, 128, 768]), g.input([8, 128, 768])
        g.output(g.op("LayerNormalization", [g.op("Add", [x, r]), g.weight([768], positive=True),
                                             g.weight([768])], axis=-1, epsilon=1e-5))
    out.append(Case(F, "skip_ln_8x128x768", "Add + LayerNormalization (skip), [8,128,768]",
                    skip_ln))

    def lrn(g):
        g.output(g.op("LRN", [g.input([1, 96, 55, 55])], size=5, alpha=1e-4, beta=0.75, bias=1.0))
    out.append(Case(F, "lrn5_96_55", "LRN size 5 (AlexNet), 96ch, 55x55", lrn))

    def mvn(g):
        g.output(g.op("MeanVarianceNormalization", [g.input([8, 64, 56, 56])], axes=[0, 2, 3]))
    out.append(Case(F, "mvn_8x64x56x56", "MeanVarianceNormalization axes 0,2,3, [8,64,56,56]",
                    mvn))

    def chain_bn(g):  # BatchNormalization after a ReLU, between convs (not foldable into a conv)
        x = g.input([1, 64, 56, 56])
        y = g.op("Relu", [conv(g, x, 64, 64, 1)])
        y = g.op("BatchNormalization", [y, g.weight([64], positive=True), g.weight([64]),
                                        g.weight([64]), g.weight([64], positive=True)])
        g.output(conv(g, y, 64, 64, 1))
    out.append(Case(F, "chain_bn_64_56", "chain: 1x1 conv, Relu, BatchNorm, 1x1 conv, 64ch, "
                    "56x56", chain_bn))
    return out


# ---------------------------------- Resize -------------------------------------------------------

def resize_cases():
    F = "resize"
    out = []

    def rs(name, desc, n, c, h, scale, mode, ctm, quick=False, w=None, sizes=None, **extra):
        def b(g):
            x = g.input([n, c, h, w or h])
            attrs = dict(mode=mode, coordinate_transformation_mode=ctm, **extra)
            if mode == "nearest":
                attrs.setdefault("nearest_mode", "floor")
            if mode == "cubic":
                attrs.setdefault("cubic_coeff_a", -0.75)
            if sizes:
                ins = [x, "", "", g.i64([n, c, *sizes])]
            else:
                ins = [x, "", g.f32([1.0, 1.0, scale, scale])]
            g.output(g.op("Resize", ins, **attrs))
        out.append(Case(F, name, desc, b, quick))

    rs("nearest_x2_256_32", "nearest x2, 256ch, 32->64", 1, 256, 32, 2.0, "nearest", "asymmetric",
       quick=True)

    def trilinear(g):  # 3-D upsampling (video, volumes)
        g.output(g.op("Resize", [g.input([1, 32, 16, 32, 32]), "",
                                 g.f32([1.0, 1.0, 2.0, 2.0, 2.0])],
                      mode="linear", coordinate_transformation_mode="half_pixel"))
    out.append(Case(F, "trilinear_x2_32_16x32x32", "trilinear x2 (half_pixel), 32ch, 16x32x32",
                    trilinear))
    rs("nearest_x2_128_40_b8", "nearest x2, 128ch, 40->80 (YOLO), batch 8", 8, 128, 40, 2.0,
       "nearest", "asymmetric")
    rs("nearest_down2_64_112", "nearest x0.5, 64ch, 112->56", 1, 64, 112, 0.5, "nearest",
       "asymmetric")
    rs("bilinear_hp_x2_64_56", "bilinear half_pixel x2, 64ch, 56->112", 1, 64, 56, 2.0, "linear",
       "half_pixel", quick=True)
    rs("bilinear_ac_x4_21_64", "bilinear align_corners x4, 21ch, 64->256 (seg head)", 1, 21, 64,
       4.0, "linear", "align_corners", quick=True)
    rs("bilinear_ac_x4_21_64_b8", "bilinear align_corners x4, 21ch, 64->256, batch 8", 8, 21, 64,
       4.0, "linear", "align_corners")
    rs("bilinear_hp_x4_21_64", "bilinear half_pixel x4, 21ch, 64->256", 1, 21, 64, 4.0, "linear",
       "half_pixel")
    rs("bilinear_ac_33to65_256", "bilinear align_corners sizes 33->65 (DeepLab), 256ch", 1, 256,
       33, None, "linear", "align_corners", sizes=[65, 65])
    rs("bilinear_pthp_down2_3_448", "bilinear pytorch_half_pixel x0.5, 3ch, 448->224", 1, 3, 448,
       0.5, "linear", "pytorch_half_pixel")
    rs("bilinear_hp_x2_3_256_b8", "bilinear half_pixel x2, 3ch, 256->512, batch 8", 8, 3, 256, 2.0,
       "linear", "half_pixel")
    rs("cubic_x2_3_128", "cubic x2 (a=-0.75), 3ch, 128->256", 1, 3, 128, 2.0, "cubic",
       "half_pixel")
    rs("cubic_x4_3_64", "cubic x4 (a=-0.75), 3ch, 64->256", 1, 3, 64, 4.0, "cubic", "half_pixel")
    rs("cubic_ac_down2_16_128", "cubic align_corners sizes 128->64, 16ch", 1, 16, 128, None,
       "cubic", "align_corners", sizes=[64, 64])

    def chain(g):
        x = g.input([1, 128, 40, 40])
        y = g.op("Relu", [conv(g, x, 128, 128, 1)])
        y = g.op("Resize", [y, "", g.f32([1.0, 1.0, 2.0, 2.0])], mode="nearest",
                 coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        g.output(conv(g, y, 128, 128, 1))
    out.append(Case(F, "chain_nearest_x2_128_40", "chain: 1x1 conv, nearest x2, 1x1 conv, 128ch, "
                    "40->80", chain))
    return out


# ---------------------------------- Recurrent ----------------------------------------------------

def rnn_cases():
    F = "rnn"
    out = []
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}

    def rec(op, hidden, seq, batch, bidi=False, init=False, inp=None, quick=False, lbr=1):
        inp = inp or hidden
        dirs = 2 if bidi else 1
        name = (f"{op.lower()}_h{hidden}_s{seq}_b{batch}" + ("_bidi" if bidi else "")
                + ("_init" if init else "") + (f"_in{inp}" if inp != hidden else "")
                + ("_lbr0" if op == "GRU" and not lbr else ""))
        desc = (f"{op} hidden {hidden}, seq {seq}, batch {batch}, input {inp}"
                + (", bidirectional" if bidi else "") + (", initial states" if init else "")
                + (", linear_before_reset=0" if op == "GRU" and not lbr else ""))

        def b(g):
            x = g.input([seq, batch, inp])
            ng = gates[op]
            W = g.weight([dirs, ng * hidden, inp], fan_in=hidden)
            R = g.weight([dirs, ng * hidden, hidden], fan_in=hidden)
            B = g.weight([dirs, 2 * ng * hidden], fan_in=hidden)
            ins = [x, W, R, B]
            if init:
                ins.append("")  # sequence_lens
                ins.append(g.input([dirs, batch, hidden], name="h0"))
                if op == "LSTM":
                    ins.append(g.input([dirs, batch, hidden], name="c0"))
            attrs = dict(hidden_size=hidden, direction="bidirectional" if bidi else "forward")
            if op == "GRU":
                attrs["linear_before_reset"] = lbr
            n_out = 3 if op == "LSTM" else 2
            outs = g.op(op, ins, n_out=n_out, **attrs)
            g.output(*outs)
        out.append(Case(F, name, desc, b, quick))

    rec("LSTM", 32, 16, 1)
    rec("LSTM", 64, 50, 1, inp=40)
    rec("LSTM", 128, 1, 1, init=True, quick=True)
    rec("LSTM", 128, 128, 1, quick=True)
    rec("LSTM", 128, 128, 8)
    rec("LSTM", 128, 512, 1)
    rec("LSTM", 256, 128, 1)
    rec("LSTM", 256, 50, 8, bidi=True)
    rec("LSTM", 128, 128, 1, bidi=True, init=True)
    rec("LSTM", 64, 512, 8)
    rec("GRU", 64, 50, 1, inp=40)
    rec("GRU", 128, 1, 1, init=True)
    rec("GRU", 128, 128, 1, quick=True)
    rec("GRU", 128, 128, 1, lbr=0)
    rec("GRU", 256, 128, 8)
    rec("GRU", 128, 128, 1, bidi=True, init=True)
    rec("GRU", 256, 512, 1)
    rec("RNN", 32, 16, 1)
    rec("RNN", 128, 128, 1, quick=True)
    rec("RNN", 256, 512, 8)
    rec("RNN", 64, 50, 8, bidi=True, init=True)
    return out


# ---------------------------------- Element-wise -------------------------------------------------

BIG = [1, 64, 256, 256]      # 4M elements
MID = [1, 64, 128, 128]      # 1M elements
SMALL = [1, 64, 32, 32]      # 64K elements


def eltwise_cases():
    F = "eltwise"
    out = []

    def binary(name, desc, op, a_shape, b_shape, b_const=True, quick=False):
        def b(g):
            x = g.input(a_shape)
            y = g.weight(b_shape, scale=1.0, positive=op == "Div") if b_const else g.input(b_shape)
            g.output(g.op(op, [x, y]))
        out.append(Case(F, name, desc, b, quick))

    binary("add_same_4M", "Add same shape, [1,64,256,256] + [1,64,256,256]", "Add", BIG, BIG,
           b_const=False, quick=True)
    binary("add_same_64K", "Add same shape, [1,64,32,32] x 2", "Add", SMALL, SMALL, b_const=False)
    binary("add_last_8x128x768", "Add broadcast on last axis, [8,128,768] + [768]", "Add",
           [8, 128, 768], [768])
    binary("add_chan_8x64x56x56", "Add broadcast on axis 1, [8,64,56,56] + [1,64,1,1]", "Add",
           [8, 64, 56, 56], [1, 64, 1, 1], quick=True)
    binary("add_scalar_4M", "Add scalar, [1,64,256,256] + []", "Add", BIG, [])
    binary("add_rows_8x64x56x56", "Add broadcast [8,1,56,56] + [8,64,56,56]", "Add",
           [8, 64, 56, 56], [8, 1, 56, 56], b_const=False)
    binary("mul_same_4M", "Mul same shape, [1,64,256,256] x 2", "Mul", BIG, BIG, b_const=False)
    binary("mul_last_8x128x768", "Mul broadcast on last axis, [8,128,768] * [768]", "Mul",
           [8, 128, 768], [768])
    binary("mul_chan_8x64x56x56", "Mul broadcast on axis 1 (SE scale), [8,64,56,56] * "
           "[8,64,1,1]", "Mul", [8, 64, 56, 56], [8, 64, 1, 1], b_const=False)
    binary("mul_scalar_64K", "Mul scalar, [1,64,32,32] * []", "Mul", SMALL, [])
    binary("sub_chan_1x3x224x224", "Sub broadcast on axis 1 (normalize), [1,3,224,224] - "
           "[1,3,1,1]", "Sub", [1, 3, 224, 224], [1, 3, 1, 1])
    binary("mul_outer_8x64x56x56", "Mul of [8,1,56,56] and [1,64,1,1] (both broadcast)", "Mul",
           [8, 1, 56, 56], [1, 64, 1, 1], b_const=False)
    binary("div_last_8x128x768", "Div broadcast on last axis, [8,128,768] / [768]", "Div",
           [8, 128, 768], [768])

    def unary(name, desc, op, shape, quick=False, opset=17, **attrs):
        def b(g):
            g.output(g.op(op, [g.input(shape)], **attrs))
        out.append(Case(F, name, desc, b, quick, opset))

    unary("relu_4M", "Relu, 4M elements", "Relu", BIG, quick=True)
    unary("relu_64K", "Relu, 64K elements", "Relu", SMALL)
    unary("sigmoid_4M", "Sigmoid, 4M elements", "Sigmoid", BIG)
    unary("sigmoid_64K", "Sigmoid, 64K elements", "Sigmoid", SMALL)
    unary("tanh_4M", "Tanh, 4M elements", "Tanh", BIG)
    unary("exp_4M", "Exp, 4M elements", "Exp", BIG)
    unary("erf_4M", "Erf, 4M elements", "Erf", BIG)
    unary("gelu_op20_4M", "Gelu (opset 20 op), 4M elements", "Gelu", BIG, opset=20)
    unary("gelu_tanh_op20_4M", "Gelu approximate=tanh (opset 20 op), 4M elements", "Gelu", BIG,
          opset=20, approximate="tanh")
    unary("hardswish_4M", "HardSwish, 4M elements", "HardSwish", BIG)
    unary("hardsigmoid_4M", "HardSigmoid, 4M elements", "HardSigmoid", BIG)
    unary("leakyrelu_4M", "LeakyRelu 0.1, 4M elements", "LeakyRelu", BIG, alpha=0.1)
    unary("softplus_1M", "Softplus, 1M elements", "Softplus", MID)
    unary("abs_4M", "Abs, 4M elements", "Abs", BIG)

    # The rest of the unary formula ops (src/ops/unary_ops.h), so every one is timed: 1M elements
    # drawn from the op's domain.
    def unary_in(name, op, lo, hi, opset=17, **attrs):
        def b(g):
            data = g.rng.uniform(lo, hi, size=MID)
            g.output(g.op(op, [g.input(MID, data=data)], **attrs))
        out.append(Case(F, name, f"{op}, 1M elements in [{lo}, {hi})", b, False, opset))

    unary_in("elu_1M", "Elu", -4, 4)
    unary_in("selu_1M", "Selu", -4, 4)
    unary_in("celu_1M", "Celu", -4, 4)
    unary_in("softsign_1M", "Softsign", -4, 4)
    unary_in("thresholdedrelu_1M", "ThresholdedRelu", -4, 4)
    unary_in("mish_op18_1M", "Mish", -4, 4, opset=18)
    unary_in("reciprocal_1M", "Reciprocal", 0.5, 4)
    unary_in("sqrt_1M", "Sqrt", 0, 16)
    unary_in("log_1M", "Log", 0.01, 16)
    unary_in("floor_1M", "Floor", -100, 100)
    unary_in("ceil_1M", "Ceil", -100, 100)
    unary_in("round_1M", "Round", -100, 100)
    unary_in("sin_1M", "Sin", -8, 8)
    unary_in("cos_1M", "Cos", -8, 8)
    unary_in("tan_1M", "Tan", -1.5, 1.5)
    unary_in("asin_1M", "Asin", -1, 1)
    unary_in("acos_1M", "Acos", -1, 1)
    unary_in("atan_1M", "Atan", -8, 8)
    unary_in("sinh_1M", "Sinh", -8, 8)
    unary_in("cosh_1M", "Cosh", -8, 8)
    unary_in("asinh_1M", "Asinh", -8, 8)
    unary_in("acosh_1M", "Acosh", 1, 16)
    unary_in("atanh_1M", "Atanh", -0.99, 0.99)

    def clip(g, shape):
        g.output(g.op("Clip", [g.input(shape), g.f32(0.0), g.f32(6.0)]))
    out.append(Case(F, "clip06_4M", "Clip(0, 6), 4M elements", lambda g: clip(g, BIG)))
    out.append(Case(F, "clip06_64K", "Clip(0, 6), 64K elements", lambda g: clip(g, SMALL)))

    def gelu_erf(g, shape):  # torch's export of nn.GELU() before opset 20; ORT fuses it to Gelu
        x = g.input(shape)
        y = g.op("Erf", [g.op("Div", [x, g.f32(1.4142135381698608)])])
        y = g.op("Mul", [x, g.op("Add", [y, g.f32(1.0)])])
        g.output(g.op("Mul", [y, g.f32(0.5)]))
    out.append(Case(F, "gelu_erf_4M", "Gelu erf expansion (torch export), 4M elements",
                    lambda g: gelu_erf(g, BIG), quick=True))
    out.append(Case(F, "gelu_erf_8x128x3072", "Gelu erf expansion, [8,128,3072]",
                    lambda g: gelu_erf(g, [8, 128, 3072])))

    def gelu_tanh(g, shape):  # GPT-2's gelu_new; ORT fuses it to FastGelu
        x = g.input(shape)
        x3 = g.op("Mul", [g.op("Pow", [x, g.f32(3.0)]), g.f32(0.044715)])
        t = g.op("Tanh", [g.op("Mul", [g.op("Add", [x, x3]), g.f32(0.7978845834732056)])])
        y = g.op("Mul", [g.op("Mul", [x, g.f32(0.5)]), g.op("Add", [t, g.f32(1.0)])])
        g.output(y)
    out.append(Case(F, "gelu_tanh_expanded_4M", "Gelu tanh expansion (GPT-2), 4M elements",
                    lambda g: gelu_tanh(g, BIG)))

    def silu(g, shape):  # torch exports nn.SiLU as x * Sigmoid(x)
        x = g.input(shape)
        g.output(g.op("Mul", [x, g.op("Sigmoid", [x])]))
    out.append(Case(F, "silu_4M", "SiLU / Swish x*Sigmoid(x), 4M elements",
                    lambda g: silu(g, BIG)))

    def mish(g, shape):  # YOLOv4's Mish as exported: x * tanh(softplus(x))
        x = g.input(shape)
        g.output(g.op("Mul", [x, g.op("Tanh", [g.op("Softplus", [x])])]))
    out.append(Case(F, "mish_1M", "Mish x*tanh(softplus(x)), 1M elements",
                    lambda g: mish(g, MID)))

    def prelu(g):
        x = g.input([8, 64, 56, 56])
        g.output(g.op("PRelu", [x, g.weight([64, 1, 1], scale=0.5)]))
    out.append(Case(F, "prelu_chan_8x64x56x56", "PRelu per channel, [8,64,56,56]", prelu))

    def sum3(g):
        a, b_, c = g.input(BIG), g.input(BIG), g.input(BIG)
        g.output(g.op("Sum", [a, b_, c]))
    out.append(Case(F, "sum3_4M", "Sum of 3 inputs, 4M elements", sum3))

    # Element-wise maps that are neither unary formulas nor the four arithmetic ops.
    def pow_const(name, exponent):
        def b(g):
            data = g.rng.uniform(0.1, 4.0, size=MID)
            g.output(g.op("Pow", [g.input(MID, data=data), g.f32(exponent)]))
        out.append(Case(F, name, f"Pow x^{exponent}, 1M elements in [0.1, 4)", b))

    pow_const("pow2_1M", 2.0)
    pow_const("pow3_1M", 3.0)
    pow_const("pow_half_1M", 0.5)

    def mod_where(g):  # a mask from a comparison picks between two tensors
        x, y = g.input([8, 12, 128, 128]), g.input([8, 12, 128, 128])
        g.output(g.op("Where", [g.op("Greater", [x, y]), x, g.op("Neg", [y])]))
    out.append(Case(F, "greater_where_8x12x128x128", "Where(Greater(x, y), x, -y), "
                    "[8,12,128,128]", mod_where))

    def fmod(g):
        data = g.rng.uniform(-8.0, 8.0, size=MID)
        g.output(g.op("Mod", [g.input(MID, data=data), g.f32(3.0)], fmod=1))
    out.append(Case(F, "fmod_1M", "Mod fmod=1 by 3, 1M elements", fmod))
    return out


# ---------------------------------- Reductions / Softmax -----------------------------------------

def reduce_cases():
    F = "reduce"
    out = []

    def red(name, desc, op, shape, axes, keepdims=1, quick=False):
        def b(g):
            x = g.input(shape)
            if op in ("ReduceSum",):  # axes is an input from opset 13
                y = g.op(op, [x, g.i64(axes)], keepdims=keepdims)
            else:
                y = g.op(op, [x], axes=axes, keepdims=keepdims)
            g.output(y)
        out.append(Case(F, name, desc, b, quick))

    red("mean_last_8x128x768", "ReduceMean last axis, [8,128,768]", "ReduceMean", [8, 128, 768],
        [-1], quick=True)
    red("mean_hw_8x64x56x56", "ReduceMean axes 2,3 (SE squeeze), [8,64,56,56]", "ReduceMean",
        [8, 64, 56, 56], [2, 3])
    red("mean_c_8x64x56x56", "ReduceMean axis 1 (channels), [8,64,56,56]", "ReduceMean",
        [8, 64, 56, 56], [1], quick=True)
    red("sum_last_1024x1024", "ReduceSum last axis, [1024,1024]", "ReduceSum", [1024, 1024], [-1])
    red("sum_first_1024x1024", "ReduceSum axis 0, [1024,1024]", "ReduceSum", [1024, 1024], [0])
    red("sum_mid_8x1024x64", "ReduceSum axis 1, [8,1024,64]", "ReduceSum", [8, 1024, 64], [1])
    red("max_last_8x128x768", "ReduceMax last axis, [8,128,768]", "ReduceMax", [8, 128, 768], [-1])
    red("max_c_1x21x256x256", "ReduceMax axis 1, [1,21,256,256]", "ReduceMax", [1, 21, 256, 256],
        [1])
    red("l2_last_1024x512", "ReduceL2 last axis, [1024,512]", "ReduceL2", [1024, 512], [-1])
    red("lse_last_128x1000", "ReduceLogSumExp last axis, [128,1000]", "ReduceLogSumExp",
        [128, 1000], [-1])
    red("min_mid_8x256x256", "ReduceMin axis 1, [8,256,256]", "ReduceMin", [8, 256, 256], [1])
    red("l1_last_1024x512", "ReduceL1 last axis, [1024,512]", "ReduceL1", [1024, 512], [-1])
    red("sumsq_hw_8x64x56x56", "ReduceSumSquare axes 2,3, [8,64,56,56]", "ReduceSumSquare",
        [8, 64, 56, 56], [2, 3])
    red("prod_last_4096x16", "ReduceProd last axis, [4096,16]", "ReduceProd", [4096, 16], [-1])

    def sm(name, desc, op, shape, axis, quick=False):
        def b(g):
            g.output(g.op(op, [g.input(shape)], axis=axis))
        out.append(Case(F, name, desc, b, quick))

    sm("softmax_last_8x12x128x128", "Softmax last axis (attention), [8,12,128,128]", "Softmax",
       [8, 12, 128, 128], -1, quick=True)
    sm("softmax_last_1x12x1x512", "Softmax last axis, [1,12,1,512] (decode step)", "Softmax",
       [1, 12, 1, 512], -1)
    sm("softmax_last_8x1000", "Softmax last axis, [8,1000]", "Softmax", [8, 1000], -1)
    sm("softmax_c_1x21x256x256", "Softmax axis 1 (segmentation), [1,21,256,256]", "Softmax",
       [1, 21, 256, 256], 1, quick=True)
    sm("softmax_mid_8x128x512", "Softmax axis 1, [8,128,512]", "Softmax", [8, 128, 512], 1)
    sm("logsoftmax_last_128x30000", "LogSoftmax last axis (vocab), [128,30000]", "LogSoftmax",
       [128, 30000], -1)
    sm("logsoftmax_c_8x40x1000", "LogSoftmax axis 1, [8,40,1000]", "LogSoftmax", [8, 40, 1000], 1)

    def argmax(g):
        x = g.input([1, 21, 256, 256])
        g.output(g.op("Cast", [g.op("ArgMax", [x], axis=1, keepdims=0)], to=1))
    out.append(Case(F, "argmax_c_1x21x256x256", "ArgMax axis 1 (+ Cast), [1,21,256,256]", argmax))

    def argmin_last(g):
        x = g.input([64, 32000])
        g.output(g.op("Cast", [g.op("ArgMin", [x], axis=-1, keepdims=1)], to=1))
    out.append(Case(F, "argmin_last_64x32000", "ArgMin last axis (+ Cast), [64,32000]",
                    argmin_last))

    def cumsum(g):
        x = g.input([8, 4096])
        g.output(g.op("CumSum", [x, g.i64(1)]))
    out.append(Case(F, "cumsum_last_8x4096", "CumSum last axis, [8,4096]", cumsum))
    return out


# ---------------------------------- Data movement ------------------------------------------------

def data_cases():
    F = "data"
    out = []

    def tr(name, desc, shape, perm, quick=False):
        def b(g):
            g.output(g.op("Transpose", [g.input(shape)], perm=perm))
        out.append(Case(F, name, desc, b, quick))

    tr("transpose_nchw2nhwc_8x64x56x56", "Transpose NCHW->NHWC, [8,64,56,56]", [8, 64, 56, 56],
       [0, 2, 3, 1], quick=True)
    tr("transpose_nhwc2nchw_8x56x56x64", "Transpose NHWC->NCHW, [8,56,56,64]", [8, 56, 56, 64],
       [0, 3, 1, 2])
    tr("transpose_nhwc2nchw_1x224x224x3", "Transpose NHWC->NCHW, [1,224,224,3] (image)",
       [1, 224, 224, 3], [0, 3, 1, 2])
    tr("transpose_2d_1024x1024", "Transpose 2-D, [1024,1024]", [1024, 1024], [1, 0])
    tr("transpose_heads_8x128x12x64", "Transpose (0,2,1,3) heads, [8,128,12,64]",
       [8, 128, 12, 64], [0, 2, 1, 3])

    def concat(g):
        xs = [g.input([1, c, 56, 56]) for c in (64, 128, 32, 32)]
        g.output(g.op("Concat", xs, axis=1))
    out.append(Case(F, "concat_c_4in_56", "Concat axis 1 of 64+128+32+32 ch (Inception), 56x56",
                    concat, quick=True))

    def gather_nd(g):
        np = g.np
        idx = g.rng.integers(0, 512, size=(8, 256, 1)).astype(np.int64)
        g.output(g.op("GatherND", [g.input([8, 512, 768]), g.const(idx, "idx")], batch_dims=1))
    out.append(Case(F, "gathernd_b1_8x512x768_256", "GatherND batch_dims 1, 256 of 512 rows, "
                    "[8,512,768]", gather_nd))

    def roi_align(g):  # torchvision's detection heads
        np = g.np
        boxes = np.sort(g.rng.uniform(0, 60, size=(256, 4)), axis=1)[:, [0, 2, 1, 3]]
        g.output(g.op("RoiAlign", [g.input([2, 256, 64, 64]),
                                   g.const(boxes.astype(np.float32), "boxes"),
                                   g.const(g.rng.integers(0, 2, size=256).astype(np.int64),
                                           "batch")],
                      output_height=7, output_width=7, sampling_ratio=2, spatial_scale=1.0))
    out.append(Case(F, "roialign_256x256ch_7x7", "RoiAlign 256 boxes, 256ch 64x64 -> 7x7",
                    roi_align))

    def trilu(g):  # a causal mask made in the graph
        g.output(g.op("Trilu", [g.input([8, 12, 128, 128])], upper=0))
    out.append(Case(F, "trilu_lower_8x12x128x128", "Trilu lower, [8,12,128,128]", trilu))

    def cast_half(g):  # float32 -> float16 -> float32, as mixed-precision exports round trip
        g.output(g.op("Cast", [g.op("Cast", [g.input([8, 128, 768])], to=10)], to=1))
    out.append(Case(F, "cast_f16_roundtrip_8x128x768", "Cast to float16 and back, [8,128,768]",
                    cast_half))

    def not_less_where(g):
        x, y = g.input([1, 64, 256, 256]), g.input([1, 64, 256, 256])
        g.output(g.op("Where", [g.op("Not", [g.op("Less", [x, y])]), x, y]))
    out.append(Case(F, "not_less_where_4M", "Where(Not(Less(x, y)), x, y), 4M elements",
                    not_less_where))

    def concat_last(g):
        g.output(g.op("Concat", [g.input([8, 128, 384]), g.input([8, 128, 384])], axis=-1))
    out.append(Case(F, "concat_last_8x128x384", "Concat last axis, 2 x [8,128,384]", concat_last))

    def split(g):
        x = g.input([8, 256, 28, 28])
        g.output(*g.op("Split", [x, g.i64([64] * 4)], n_out=4, axis=1))
    out.append(Case(F, "split_c4_8x256x28x28", "Split axis 1 in 4, [8,256,28,28]", split))

    def split_qkv(g):
        x = g.input([8, 128, 2304])
        g.output(*g.op("Split", [x, g.i64([768] * 3)], n_out=3, axis=-1))
    out.append(Case(F, "split_qkv_8x128x2304", "Split last axis in 3 (qkv), [8,128,2304]",
                    split_qkv))

    def slc(name, desc, shape, starts, ends, axes, steps, quick=False):
        def b(g):
            g.output(g.op("Slice", [g.input(shape), g.i64(starts), g.i64(ends), g.i64(axes),
                                    g.i64(steps)]))
        out.append(Case(F, name, desc, b, quick))

    slc("slice_c_1x256x56x56", "Slice channels 64:192, [1,256,56,56]", [1, 256, 56, 56], [64],
        [192], [1], [1])
    slc("slice_s2_1x64x112x112", "Slice ::2 on H and W (YOLO Focus), [1,64,112,112]",
        [1, 64, 112, 112], [0, 1], [112, 112], [2, 3], [2, 2])
    slc("slice_last_8x128x768", "Slice last axis :384, [8,128,768]", [8, 128, 768], [0], [384],
        [-1], [1])
    slc("slice_flip_w_1x64x128x128", "Slice step -1 on W (torch.flip), [1,64,128,128]",
        [1, 64, 128, 128], [-1], [-(2 ** 62)], [3], [-1])

    def embedding(g):  # token ids as floats holding integers, cast to int64 in the graph
        ids = g.rng.integers(0, 30000, size=(8, 128)).astype("float32")
        x = g.input([8, 128], name="ids", data=ids)
        idx = g.op("Cast", [x], to=7)
        g.output(g.op("Gather", [g.weight([30000, 512], scale=1.0), idx], axis=0))
    out.append(Case(F, "gather_embed_30000x512_8x128", "Gather embedding [30000,512], indices "
                    "[8,128]", embedding, quick=True))

    def gather_ax1(g):
        x = g.input([8, 1000, 64])
        idx = g.i64(g.rng.integers(0, 1000, size=(256,)))
        g.output(g.op("Gather", [x, idx], axis=1))
    out.append(Case(F, "gather_ax1_8x1000x64_256", "Gather axis 1, [8,1000,64], 256 indices",
                    gather_ax1))

    def gather_ax1_scalar(g):  # the CLS token: x[:, 0]
        g.output(g.op("Gather", [g.input([8, 197, 768]), g.i64(0)], axis=1))
    out.append(Case(F, "gather_ax1_scalar_8x197x768", "Gather axis 1 scalar index (CLS token), "
                    "[8,197,768]", gather_ax1_scalar))

    def gather_el(g):
        x = g.input([64, 4096])
        idx = g.i64(g.rng.integers(0, 4096, size=(64, 4096)))
        g.output(g.op("GatherElements", [x, idx], axis=1))
    out.append(Case(F, "gatherelements_64x4096", "GatherElements axis 1, [64,4096]", gather_el))

    def scatternd_rows(g):  # KV-cache style: write 64 rows of a [2048,768] buffer
        x, upd = g.input([2048, 768]), g.input([64, 768])
        idx = g.i64(g.rng.permutation(2048)[:64].reshape(64, 1))
        g.output(g.op("ScatterND", [x, idx, upd]))
    out.append(Case(F, "scatternd_rows_2048x768_64", "ScatterND 64 rows into [2048,768]",
                    scatternd_rows))

    def scatternd_elems(g):
        x, upd = g.input([1024, 1024]), g.input([65536])
        flat = g.rng.permutation(1024 * 1024)[:65536]
        idx = g.i64(g.np.stack([flat // 1024, flat % 1024], axis=1))
        g.output(g.op("ScatterND", [x, idx, upd]))
    out.append(Case(F, "scatternd_elems_1024x1024_64K", "ScatterND 65536 single elements into "
                    "[1024,1024]", scatternd_elems))

    def pad(name, desc, shape, p, mode, quick=False):
        def b(g):
            pads = [0, 0, p, p, 0, 0, p, p]
            ins = [g.input(shape), g.i64(pads)] + ([g.f32(0.0)] if mode == "constant" else [])
            g.output(g.op("Pad", ins, mode=mode))
        out.append(Case(F, name, desc, b, quick))

    pad("pad_const1_1x64x56x56", "Pad constant 1, [1,64,56,56]", [1, 64, 56, 56], 1, "constant")
    pad("pad_const1_8x64x56x56", "Pad constant 1, [8,64,56,56]", [8, 64, 56, 56], 1, "constant")
    pad("pad_reflect3_1x64x128x128", "Pad reflect 3 (style transfer), [1,64,128,128]",
        [1, 64, 128, 128], 3, "reflect", quick=True)
    pad("pad_edge2_1x32x128x128", "Pad edge 2, [1,32,128,128]", [1, 32, 128, 128], 2, "edge")

    def topk(name, desc, shape, k, quick=False):
        def b(g):
            v, i = g.op("TopK", [g.input(shape), g.i64([k])], n_out=2, axis=-1)
            g.output(v, g.op("Cast", [i], to=1))
        out.append(Case(F, name, desc, b, quick))

    topk("topk1_64x1000", "TopK k=1 last axis (+ Cast indices), [64,1000]", [64, 1000], 1)
    topk("topk5_8x1000", "TopK k=5, [8,1000]", [8, 1000], 5)
    topk("topk100_1x10000", "TopK k=100, [1,10000] (detection)", [1, 10000], 100, quick=True)
    topk("topk100_8x10000", "TopK k=100, [8,10000]", [8, 10000], 100)
    topk("topk50_1x32000", "TopK k=50, [1,32000] (sampling over a vocabulary)", [1, 32000], 50)

    def where(g):  # causal attention mask
        x = g.input([8, 12, 128, 128])
        mask = g.const(g.np.tril(g.np.ones((1, 1, 128, 128), dtype=bool)), "mask")
        g.output(g.op("Where", [mask, x, g.f32(-10000.0)]))
    out.append(Case(F, "where_mask_8x12x128x128", "Where with a broadcast [1,1,128,128] mask, "
                    "[8,12,128,128]", where))

    def expand(name, desc, shape, to, quick=False):
        def b(g):
            g.output(g.op("Expand", [g.input(shape), g.i64(to)]))
        out.append(Case(F, name, desc, b, quick))

    expand("expand_chan_to_8x64x56x56", "Expand [1,64,1,1] -> [8,64,56,56]", [1, 64, 1, 1],
           [8, 64, 56, 56])
    expand("expand_rows_to_8x128x768", "Expand [1,1,768] -> [8,128,768]", [1, 1, 768],
           [8, 128, 768])

    def tile(name, desc, shape, reps):
        def b(g):
            g.output(g.op("Tile", [g.input(shape), g.i64(reps)]))
        out.append(Case(F, name, desc, b))

    tile("tile_b8_1x64x56x56", "Tile [8,1,1,1], [1,64,56,56]", [1, 64, 56, 56], [8, 1, 1, 1])
    tile("tile_4x4_256x256", "Tile [4,4], [256,256]", [256, 256], [4, 4])

    def d2s(name, desc, shape, block, mode, op="DepthToSpace"):
        def b(g):
            attrs = dict(blocksize=block)
            if op == "DepthToSpace":
                attrs["mode"] = mode
            g.output(g.op(op, [g.input(shape)], **attrs))
        out.append(Case(F, name, desc, b))

    d2s("d2s_crd_1x64x128x128", "DepthToSpace CRD block 2 (PixelShuffle), [1,64,128,128]",
        [1, 64, 128, 128], 2, "CRD")
    d2s("d2s_dcr_1x256x56x56", "DepthToSpace DCR block 2, [1,256,56,56]", [1, 256, 56, 56], 2,
        "DCR")
    d2s("s2d_1x3x448x448", "SpaceToDepth block 2, [1,3,448,448]", [1, 3, 448, 448], 2, None,
        op="SpaceToDepth")

    def shuffle(g):  # ShuffleNet's channel shuffle: Reshape, Transpose, Reshape
        x = g.input([1, 232, 28, 28])
        y = g.op("Reshape", [x, g.i64([1, 2, 116, 28, 28])])
        y = g.op("Transpose", [y], perm=[0, 2, 1, 3, 4])
        g.output(g.op("Reshape", [y, g.i64([1, 232, 28, 28])]))
    out.append(Case(F, "channel_shuffle_232_28", "channel shuffle (Reshape, Transpose, Reshape), "
                    "232ch, 28x28", shuffle))

    def grid_sample(name, desc, n, c, hw, out_hw, mode, padding):
        def b(g):
            np = g.np
            grid = g.rng.uniform(-1.1, 1.1, size=(n, out_hw, out_hw, 2)).astype(np.float32)
            g.output(g.op("GridSample", [g.input([n, c, hw, hw]), g.const(grid, "grid")],
                          mode=mode, padding_mode=padding, align_corners=0))
        out.append(Case(F, name, desc, b))

    grid_sample("gridsample_bilinear_8x64x32", "GridSample bilinear zeros (spatial transformer), "
                "[8,64,32,32] -> 32x32", 8, 64, 32, 32, "bilinear", "zeros")
    grid_sample("gridsample_nearest_1x32x128", "GridSample nearest border, [1,32,128,128] -> "
                "128x128", 1, 32, 128, 128, "nearest", "border")

    def scatter_el(g):
        np = g.np
        idx = g.rng.integers(0, 4096, size=(64, 512)).astype(np.int64)
        g.output(g.op("ScatterElements", [g.input([64, 4096]), g.const(idx, "idx"),
                                          g.input([64, 512])], axis=1))
    out.append(Case(F, "scatterelements_64x4096_512", "ScatterElements axis 1, 512 of 4096 per "
                    "row, [64,4096]", scatter_el))
    return out


# ---------------------------------- Einsum / attention -------------------------------------------

def attention_cases():
    F = "attention"
    out = []

    def einsum(name, desc, eq, a, b_shape, quick=False):
        def b(g):
            g.output(g.op("Einsum", [g.input(a), g.input(b_shape)], equation=eq))
        out.append(Case(F, name, desc, b, quick))

    einsum("einsum_bmk_bkn_8x128x64x128", "Einsum bmk,bkn->bmn, [8,128,64] x [8,64,128]",
           "bmk,bkn->bmn", [8, 128, 64], [8, 64, 128], quick=True)
    einsum("einsum_bhqd_bhkd_8x12x128x64", "Einsum bhqd,bhkd->bhqk, [8,12,128,64] x2",
           "bhqd,bhkd->bhqk", [8, 12, 128, 64], [8, 12, 128, 64], quick=True)
    einsum("einsum_bhqk_bhkd_1x12x512x64", "Einsum bhqk,bhkd->bhqd, [1,12,512,512] x "
           "[1,12,512,64]", "bhqk,bhkd->bhqd", [1, 12, 512, 512], [1, 12, 512, 64])

    def einsum_w(g):
        x = g.input([8, 128, 768])
        g.output(g.op("Einsum", [x, g.weight([768, 768], fan_in=768)], equation="bij,jk->bik"))
    out.append(Case(F, "einsum_bij_jk_8x128x768x768", "Einsum bij,jk->bik with a weight, "
                    "[8,128,768] x [768,768]", einsum_w))

    def sdpa(name, desc, b_, h, sq, skv, d, quick=False, mask=False):
        def b(g):
            q = g.input([b_, h, sq, d])
            k = g.input([b_, h, skv, d])
            v = g.input([b_, h, skv, d])
            s = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
            s = g.op("Mul", [s, g.f32(1.0 / math.sqrt(d))])
            if mask:
                s = g.op("Add", [s, g.const(g.np.where(
                    g.np.tril(g.np.ones((1, 1, sq, skv), bool)), 0.0, -10000.0).astype("float32"))])
            g.output(g.op("MatMul", [g.op("Softmax", [s], axis=-1), v]))
        out.append(Case(F, name, desc, b, quick))

    sdpa("sdpa_1x12x128x64", "MatMul-Softmax-MatMul attention, [1,12,128,64]", 1, 12, 128, 128,
         64, quick=True)
    sdpa("sdpa_8x12x128x64", "MatMul-Softmax-MatMul attention, [8,12,128,64]", 8, 12, 128, 128,
         64)
    sdpa("sdpa_1x12x512x64_causal", "attention with causal mask Add, [1,12,512,64]", 1, 12, 512,
         512, 64, mask=True)
    sdpa("sdpa_decode_1x32x1x1024x128", "attention decode step, q [1,32,1,128], kv 1024", 1, 32,
         1, 1024, 128)
    sdpa("sdpa_vit_1x3x197x64", "MatMul-Softmax-MatMul attention, [1,3,197,64] (ViT-Ti)", 1, 3,
         197, 197, 64)

    def onnx_attention(name, desc, b_, h, sq, d, causal=False, mask=None):
        def b(g):  # the ONNX Attention op (opset 23), as exporters targeting opset 23 write SDPA
            ins = [g.input([b_, h, sq, d]) for _ in range(3)]
            if mask == "float":
                ins.append(g.const(g.np.where(g.np.tril(g.np.ones((1, 1, sq, sq), bool)), 0.0,
                                              -10000.0).astype("float32"), "mask"))
            elif mask == "bool":
                ins.append(g.const(g.np.tril(g.np.ones((1, 1, sq, sq), bool)), "mask"))
            g.output(g.op("Attention", ins, is_causal=int(causal)))
        out.append(Case(F, name, desc, b, False, opset=23))

    onnx_attention("attention_op23_1x12x512x64_causal", "Attention op (opset 23), is_causal, "
                   "[1,12,512,64]", 1, 12, 512, 64, causal=True)
    onnx_attention("attention_op23_1x12x512x64_floatmask", "Attention op (opset 23), float mask, "
                   "[1,12,512,64]", 1, 12, 512, 64, mask="float")
    onnx_attention("attention_op23_4x8x128x64_boolmask", "Attention op (opset 23), bool mask, "
                   "[4,8,128,64]", 4, 8, 128, 64, mask="bool")

    def rope(g):  # RotaryEmbedding (opset 23) with position ids, as Llama-style models apply it
        np = g.np
        s_, d = 512, 128
        ang = np.arange(s_)[:, None] * np.linspace(0, 1, d // 2)[None, :]
        g.output(g.op("RotaryEmbedding", [g.input([1, 32, s_, d]),
                                          g.const(np.cos(ang).astype(np.float32), "cos"),
                                          g.const(np.sin(ang).astype(np.float32), "sin"),
                                          g.i64(np.arange(s_)[None, :])]))
    out.append(Case(F, "rope_op23_1x32x512x128", "RotaryEmbedding op (opset 23), position ids, "
                    "[1,32,512,128]", rope, False, 23))

    def mha(name, desc, b_, s, d, h, quick=False):
        def b(g):  # torch-style multi-head self-attention block from the hidden states
            x = g.input([b_, s, d])
            hd = d // h

            def proj(t):
                return g.op("Add", [g.op("MatMul", [t, g.weight([d, d], fan_in=d)]),
                                    g.weight([d], fan_in=d)])

            def heads(t):
                t = g.op("Reshape", [t, g.i64([b_, s, h, hd])])
                return g.op("Transpose", [t], perm=[0, 2, 1, 3])
            q, k, v = heads(proj(x)), heads(proj(x)), heads(proj(x))
            sc = g.op("Div", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                              g.f32(math.sqrt(hd))])
            o = g.op("MatMul", [g.op("Softmax", [sc], axis=-1), v])
            o = g.op("Reshape", [g.op("Transpose", [o], perm=[0, 2, 1, 3]), g.i64([b_, s, d])])
            g.output(proj(o))
        out.append(Case(F, name, desc, b, quick))

    mha("mha_1x128x768", "self-attention block (q/k/v/out projections), [1,128,768], 12 heads",
        1, 128, 768, 12, quick=True)
    mha("mha_4x128x768", "self-attention block, [4,128,768], 12 heads", 4, 128, 768, 12)
    mha("mha_1x512x512", "self-attention block, [1,512,512], 8 heads", 1, 512, 512, 8)
    return out


# ---------------------------------- Quantized (int8) ---------------------------------------------

def quant_cases():
    F = "quant"
    out = []

    def qdq(g, t, scale, zp=0):
        s, z = g.f32(scale), g.const(g.np.array(zp, dtype=g.np.uint8), "zp")
        return g.op("DequantizeLinear", [g.op("QuantizeLinear", [t, s, z]), s, z])

    def qweight(g, shape, axis=0):
        np = g.np
        w = g.const(g.rng.integers(-127, 128, size=shape).astype(np.int8), "qw")
        n = shape[axis]
        s = g.const((g.rng.uniform(0.5, 1.5, size=(n,)) / 127.0 /
                     math.sqrt(int(np.prod(shape)) / n)).astype(np.float32), "qs")
        z = g.const(np.zeros((n,), np.int8), "qz")
        return g.op("DequantizeLinear", [w, s, z], axis=axis)

    def qdq_conv(g):  # QDQ format (ORT's quantizer, kiln quantize): ORT fuses into QLinearConv
        x = g.input([1, 64, 56, 56])
        w = qweight(g, [64, 64, 3, 3])
        y = g.op("Conv", [qdq(g, x, 1.0 / 128, 128), w, g.weight([64], fan_in=576)],
                 kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        g.output(qdq(g, g.op("Relu", [y]), 1.0 / 64, 0))
    out.append(Case(F, "qdq_conv3x3_64_56", "QDQ Conv 3x3 64->64 + Relu, per-channel int8 "
                    "weights, 56x56", qdq_conv, quick=True, lsb=1.0 / 64))

    def qdq_dwconv(g):  # a quantized MobileNet's depthwise layer
        x = g.input([1, 128, 56, 56])
        w = qweight(g, [128, 1, 3, 3])
        y = g.op("Conv", [qdq(g, x, 1.0 / 128, 128), w, g.weight([128], fan_in=9)],
                 kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=128)
        g.output(qdq(g, g.op("Relu", [y]), 1.0 / 64, 0))
    out.append(Case(F, "qdq_dwconv3x3_128_56", "QDQ depthwise Conv 3x3 128 channels + Relu, "
                    "per-channel int8 weights, 56x56", qdq_dwconv, lsb=1.0 / 64))

    def qdq_conv_s2(g):
        x = g.input([8, 32, 28, 28])
        w = qweight(g, [64, 32, 3, 3])
        y = g.op("Conv", [qdq(g, x, 1.0 / 128, 128), w, g.weight([64], fan_in=288)],
                 kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
        g.output(qdq(g, y, 1.0 / 32, 128))
    out.append(Case(F, "qdq_conv3x3s2_32to64_28_b8", "QDQ Conv 3x3 stride 2 32->64, batch 8, "
                    "28x28", qdq_conv_s2, lsb=1.0 / 32))

    def qdq_matmul(g):
        x = g.input([1, 128, 768])
        w = qweight(g, [768, 768], axis=1)
        y = g.op("MatMul", [qdq(g, x, 1.0 / 128, 128), w])
        g.output(qdq(g, y, 1.0 / 32, 128))
    out.append(Case(F, "qdq_matmul_128x768x768", "QDQ MatMul [1,128,768] x [768,768], "
                    "per-channel int8 weights", qdq_matmul, quick=True, lsb=1.0 / 32))

    def dyn_matmul(g):  # onnxruntime.quantization.quantize_dynamic's MatMul form
        np = g.np
        x = g.input([1, 128, 768])
        q, s, z = g.op("DynamicQuantizeLinear", [x], n_out=3)
        w = g.const(g.rng.integers(-127, 128, size=(768, 768)).astype(np.int8), "qw")
        acc = g.op("MatMulInteger", [q, w, z, g.const(np.array(0, np.int8), "wz")])
        ws = g.f32(1.0 / 127.0 / math.sqrt(768))
        y = g.op("Mul", [g.op("Cast", [acc], to=1), g.op("Mul", [s, ws])])
        g.output(g.op("Add", [y, g.weight([768], fan_in=768)]))
    out.append(Case(F, "dyn_matmulinteger_128x768x768", "DynamicQuantizeLinear + MatMulInteger "
                    "(dynamic quantization), [1,128,768] x [768,768]", dyn_matmul))

    def qlinear_conv(g):
        np = g.np
        x = g.input([1, 64, 56, 56])
        xs, xz = g.f32(1.0 / 128), g.const(np.array(128, np.uint8), "zp")
        qx = g.op("QuantizeLinear", [x, xs, xz])
        w = g.const(g.rng.integers(-127, 128, size=(128, 64, 3, 3)).astype(np.int8), "qw")
        ws = g.f32(1.0 / 127.0 / 24.0)
        wz = g.const(np.array(0, np.int8), "wz")
        ys, yz = g.f32(1.0 / 64), g.const(np.array(128, np.uint8), "zp")
        y = g.op("QLinearConv", [qx, xs, xz, w, ws, wz, ys, yz], kernel_shape=[3, 3],
                 pads=[1, 1, 1, 1])
        g.output(g.op("DequantizeLinear", [y, ys, yz]))
    out.append(Case(F, "qlinearconv_3x3_64to128_56", "QLinearConv 3x3 64->128 (uint8 x int8), "
                    "56x56", qlinear_conv, lsb=1.0 / 64))

    def qlinear_matmul(g):
        np = g.np
        x = g.input([128, 768])
        xs, xz = g.f32(1.0 / 128), g.const(np.array(128, np.uint8), "zp")
        qx = g.op("QuantizeLinear", [x, xs, xz])
        w = g.const(g.rng.integers(-127, 128, size=(768, 768)).astype(np.int8), "qw")
        ws, wz = g.f32(1.0 / 127.0 / 28.0), g.const(np.array(0, np.int8), "wz")
        ys, yz = g.f32(1.0 / 32), g.const(np.array(128, np.uint8), "zp")
        y = g.op("QLinearMatMul", [qx, xs, xz, w, ws, wz, ys, yz])
        g.output(g.op("DequantizeLinear", [y, ys, yz]))
    out.append(Case(F, "qlinearmatmul_128x768x768", "QLinearMatMul [128,768] x [768,768] "
                    "(uint8 x int8)", qlinear_matmul, lsb=1.0 / 32))
    return out


FAMILIES = {
    "conv": ("Conv", conv_cases),
    "convtranspose": ("ConvTranspose", convtranspose_cases),
    "matmul": ("MatMul / Gemm", matmul_cases),
    "pool": ("Pooling", pool_cases),
    "norm": ("Normalization", norm_cases),
    "resize": ("Resize", resize_cases),
    "rnn": ("Recurrent (LSTM, GRU, RNN)", rnn_cases),
    "eltwise": ("Element-wise", eltwise_cases),
    "reduce": ("Reductions, Softmax, ArgMax, CumSum", reduce_cases),
    "data": ("Data movement", data_cases),
    "attention": ("Einsum and attention", attention_cases),
    "quant": ("Quantized int8 (QDQ, QLinear, dynamic)", quant_cases),
}


def build_case(case, work, regen):
    """Writes the case's model (and its fed inputs) unless there; returns (path, {name: file})."""
    d = os.path.join(work, "models", case.family)
    path = os.path.join(d, case.name + ".onnx")
    meta_path = os.path.join(d, case.name + ".json")
    if not regen and os.path.exists(path) and os.path.exists(meta_path):
        with open(meta_path) as f:
            feeds = json.load(f)["feeds"]
        if all(os.path.exists(p) for p in feeds.values()):
            return path, feeds
    import numpy as np  # noqa: E402
    import onnx  # noqa: E402  (Debian's)
    os.makedirs(d, exist_ok=True)
    g = G(seed_of(case.family, case.name), case.opset)
    case.build(g)
    m = g.model(f"{case.family}_{case.name}")
    feeds = {}
    for name, arr in g.feeds.items():
        p = os.path.join(d, f"{case.name}.{name}.npy")
        np.save(p, arr)
        feeds[name] = p
    tmp = path + ".tmp"
    onnx.save(m, tmp)
    os.replace(tmp, path)
    with open(meta_path, "w") as f:
        json.dump({"desc": case.desc, "feeds": feeds}, f)
    return path, feeds


# ------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------

class CaseError(Exception):
    pass


PIN = {"on": True}
TIMEOUT = {"s": 300}
# glibc malloc settings for both runtimes' processes (--default-malloc: none). On these VMs a
# page fault costs 10-25 us, and both runtimes allocate a large output afresh on every run (kiln's
# bench for outputs past glibc's mmap threshold; ORT's node binding copies each output into a new
# ArrayBuffer, from heap that V8 frees only at its next GC), so an op with a 16 MB output timed
# 3 ms in ORT's kernel and 50 ms around it, and kiln's 44 MB Resize 290 ms against 60. Transparent
# huge pages for malloc'd memory (one fault per 2 MB) and no trimming of the heap make the runs
# measure the kernels instead; the setting is the same for both runtimes.
MALLOC_TUNABLES = ("glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:"
                   "glibc.malloc.trim_threshold=4294967296")
ENV = {"env": None}


def pinned(threads):
    cpus = sorted(os.sched_getaffinity(0))
    if not PIN["on"] or threads > len(cpus):
        return None
    return set(cpus[-threads:])


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def run_cmd(args, cpus=None):
    """Runs args; returns stdout, or raises CaseError with the first line of its message."""
    pre = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    try:
        r = subprocess.run(args, capture_output=True, text=True, preexec_fn=pre,
                           timeout=TIMEOUT["s"], env=ENV["env"])
    except subprocess.TimeoutExpired:
        raise CaseError(f"timed out after {TIMEOUT['s']} s")
    except OSError as e:
        raise CaseError(str(e))
    if r.returncode != 0:
        msg = first_line(r.stderr) or first_line(r.stdout)
        if r.returncode < 0:
            msg = f"killed by signal {-r.returncode}" + (f": {msg}" if msg else "")
        raise CaseError(msg or f"exit {r.returncode}")
    return r.stdout


def run_json(args, cpus=None):
    out = run_cmd(args, cpus)
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CaseError("no JSON line in the output: " + first_line(out))


def input_flags(feeds):
    return [a for n, p in feeds.items() for a in ("--input", f"{n}={p}")]


def check(kiln, node, mods, path, feeds, work, key, lsb=None):
    """Runs ORT (dumping its inputs and outputs) and kiln on ORT's inputs. Returns (rel_l2 or
    None, the slower runtime's time in ms or None, ORT error, kiln error, verdict): verdict is
    None, or for outputs on a quantization grid (lsb) how many elements are off by how many steps,
    prefixed "FAIL" beyond one step or 1% of the elements."""
    import numpy as np  # noqa: E402
    d = os.path.join(work, "check", key)
    shutil.rmtree(d, ignore_errors=True)
    try:
        ort = run_json([node, os.path.join(HERE, "ort_bench.js"), path, "--iterations", "3",
                        "--warmup", "1", "--node-modules", mods, "--dump",
                        os.path.join(d, "ort"), *input_flags(feeds)])
    except CaseError as e:
        return None, None, str(e), None, None
    est = ort.get("min_ms") or ort.get("median_ms")  # the first runs fault pages in
    try:
        with open(os.path.join(d, "ort", "inputs.json")) as f:
            names = json.load(f)
        flags = [a for k, n in enumerate(names)
                 for a in ("--input", f"{n}={os.path.join(d, 'ort', f'input_{k}.npy')}")]
        run_cmd([kiln, "run", path, "--output-dir", os.path.join(d, "kiln"), *flags])
        try:  # kiln's time too, so that a case where kiln is far slower does not run for long
            kb = run_json([kiln, "bench", path, "--iterations", "3", *input_flags(feeds)])
            est = max(est or 0.0, kb.get("min_ms") or 0.0) or None
        except (CaseError, AttributeError):
            pass
        worst, k, off, total, steps = 0.0, 0, 0, 0, 0.0
        while os.path.exists(os.path.join(d, "ort", f"output_{k}.npy")):
            want = np.load(os.path.join(d, "ort", f"output_{k}.npy")).astype(np.float64)
            got_p = os.path.join(d, "kiln", f"output_{k}.npy")
            if not os.path.exists(got_p):
                raise CaseError(f"kiln wrote no output_{k}.npy")
            got = np.load(got_p).astype(np.float64)
            if got.shape != want.shape:
                raise CaseError(f"output {k}: kiln shape {got.shape}, ORT {want.shape}")
            den = np.linalg.norm(want)
            err = float(np.linalg.norm(got - want) / den) if den > 0 else \
                float(np.linalg.norm(got - want))
            if not math.isfinite(err):
                err = float("inf")
            worst = max(worst, err)
            if lsb:
                diff = np.abs(got - want) / lsb
                off += int(np.count_nonzero(diff > 1e-3))
                total += diff.size
                steps = max(steps, float(diff.max()) if diff.size else 0.0)
            k += 1
        verdict = None
        if lsb:
            bad = steps > 1.001 or off > 0.01 * max(total, 1)
            verdict = ("FAIL " if bad else "") + (f"{off} of {total} off by <= {steps:.3g} step"
                                                  if off else "exact")
        if (verdict or "").startswith("FAIL") or (not lsb and worst > FAIL_REL_L2):
            pass  # keep the files of failures
        else:
            shutil.rmtree(d, ignore_errors=True)
        return worst, est, None, None, verdict
    except (CaseError, OSError, ValueError) as e:
        return None, est, None, str(e), None


def auto_iterations(est_ms):
    if not est_ms or est_ms <= 0:
        return 20
    return int(min(300, max(10, round(250.0 / est_ms))))


def time_case(kiln, node, mods, path, feeds, threads, rounds, iterations):
    """Returns {t: {...}} with per-round medians and errors for kiln and ORT."""
    res = {}
    flags = input_flags(feeds)
    for t in threads:
        k_ms, o_ms, k_err, o_err = [], [], None, None
        for r in range(rounds):
            order = ("kiln", "ort") if r % 2 == 0 else ("ort", "kiln")
            for side in order:
                try:
                    if side == "kiln" and not k_err:
                        k_ms.append(run_json([kiln, "bench", path, "--threads", str(t),
                                              "--iterations", str(iterations), *flags],
                                             pinned(t))["median_ms"])
                    elif side == "ort" and not o_err:
                        o_ms.append(run_json([node, os.path.join(HERE, "ort_bench.js"), path,
                                              "--threads", str(t), "--iterations",
                                              str(iterations), "--node-modules", mods, *flags],
                                             pinned(t))["median_ms"])
                except (CaseError, KeyError, TypeError) as e:
                    if side == "kiln":
                        k_err = str(e) or "failed"
                    else:
                        o_err = str(e) or "failed"
        k = statistics.median(k_ms) if k_ms and not k_err else None
        o = statistics.median(o_ms) if o_ms and not o_err else None
        res[t] = {"kiln_ms": k, "ort_ms": o, "ratio": k / o if k and o else None,
                  "kiln_rounds_ms": k_ms, "ort_rounds_ms": o_ms, "kiln_error": k_err,
                  "ort_error": o_err}
    return res


# ------------------------------------------------------------------------------------------------
# Reporting
# ------------------------------------------------------------------------------------------------

def fmt_ms(x):
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 100 else f"{x:.1f}"


def cell_err(e):
    e = e.replace("|", "/")
    return "error: " + (e if len(e) <= 70 else e[:67] + "...")


def print_family(key, title, results, threads):
    print(f"\n### {title} (`{key}`, {len(results)} cases)\n")
    head = "| case | shape |"
    rule = "|---|---|"
    for t in threads:
        head += f" kiln ms @{t} | ORT ms @{t} | kiln/ORT @{t} |"
        rule += "---:|---:|---:|"
    head += " rel-L2 |"
    rule += "---:|"
    print(head)
    print(rule)
    for r in results:
        row = f"| {r['case']} | {r['desc']} |"
        for t in threads:
            x = r["threads"].get(str(t)) or r["threads"].get(t)
            if x is None:
                row += " - | - | - |"
                continue
            k = cell_err(x["kiln_error"]) if x["kiln_error"] else fmt_ms(x["kiln_ms"])
            o = cell_err(x["ort_error"]) if x["ort_error"] else fmt_ms(x["ort_ms"])
            ratio = f"{x['ratio']:.2f}" if x["ratio"] else "-"
            if x["ratio"] and x["ratio"] > 1.0:
                ratio = f"**{ratio}**"
            row += f" {k} | {o} | {ratio} |"
        if r["kiln_check_error"]:
            rel = cell_err("kiln run: " + r["kiln_check_error"])
        elif r["ort_check_error"]:
            rel = cell_err("ORT: " + r["ort_check_error"])
        elif r["rel_l2"] is None:
            rel = "-"
        elif r.get("quant_check"):
            rel = f"{r['rel_l2']:.1e} ({r['quant_check']})"
        else:
            rel = f"{r['rel_l2']:.1e}" + (" FAIL" if r["rel_l2"] > FAIL_REL_L2 else "")
        print(row + f" {rel} |")


def summarize(fam_results, threads):
    """Per family: cases, failures, {t: (worst ratio, case, geomean, timed)}."""
    out = {}
    for key, results in fam_results.items():
        per_t = {}
        for t in threads:
            pairs = [(r["threads"][t]["ratio"], r["case"]) for r in results
                     if r["threads"].get(t) and r["threads"][t]["ratio"]]
            if pairs:
                worst = max(pairs)
                geo = statistics.geometric_mean([p[0] for p in pairs])
                per_t[t] = (worst[0], worst[1], geo, len(pairs))
            else:
                per_t[t] = (None, None, None, 0)
        fails = sum(1 for r in results if case_failed(r))
        out[key] = (len(results), fails, per_t)
    return out


def case_failed(r):
    if r["kiln_check_error"] or r["ort_check_error"]:
        return True
    if r.get("quant_check"):
        if r["quant_check"].startswith("FAIL"):
            return True
    elif r["rel_l2"] is not None and r["rel_l2"] > FAIL_REL_L2:
        return True
    return any(x["kiln_error"] or x["ort_error"] for x in r["threads"].values())


def error_threads(threads, msg):
    return {t: {"kiln_ms": None, "ort_ms": None, "ratio": None, "kiln_rounds_ms": [],
                "ort_rounds_ms": [], "kiln_error": msg, "ort_error": msg} for t in threads}


def run_case(case, f, kiln, args, mods, work, threads):
    """Builds, checks and times one case; never raises but for KeyboardInterrupt."""
    key = f"{f}/{case.name}"
    rec = {"case": case.name, "family": f, "desc": case.desc, "rel_l2": None,
           "quant_check": None, "kiln_check_error": None, "ort_check_error": None,
           "iterations": None, "load_before": os.getloadavg()[0], "threads": {}}
    try:
        path, feeds = build_case(case, work, args.regen)
    except Exception as e:  # a broken case definition must not end the sweep
        msg = f"building the model: {type(e).__name__}: {first_line(str(e))}"
        rec.update(ort_check_error=msg, threads=error_threads(threads, msg), _log=msg)
        return rec
    try:
        rel, est, o_err, k_err, verdict = check(kiln, args.node, mods, path, feeds, work, key,
                                                case.lsb)
        rec.update(rel_l2=rel, ort_check_error=o_err, kiln_check_error=k_err,
                   quant_check=verdict)
        iters = args.iterations or auto_iterations(est)
        rec["iterations"] = iters
        rec["threads"] = time_case(kiln, args.node, mods, path, feeds, threads, args.rounds,
                                   iters)
    except Exception as e:  # a bug here must not end the sweep either
        msg = f"{type(e).__name__}: {first_line(str(e))}"
        rec.update(ort_check_error=rec["ort_check_error"] or msg,
                   threads=rec["threads"] or error_threads(threads, msg))
    parts = []
    for t in threads:
        x = rec["threads"][t]
        parts.append(f"T={t} kiln {fmt_ms(x['kiln_ms'])} ORT {fmt_ms(x['ort_ms'])}"
                     + (f" ({x['ratio']:.2f})" if x["ratio"] else "")
                     + (f" kiln error: {x['kiln_error']}" if x["kiln_error"] else "")
                     + (f" ORT error: {x['ort_error']}" if x["ort_error"] else ""))
    rel = rec["rel_l2"]
    relmsg = (f"rel-L2 {rel:.1e}" if rel is not None
              else f"check error: {rec['kiln_check_error'] or rec['ort_check_error']}")
    rec["_log"] = f"({rec['iterations']} it) {'; '.join(parts)}; {relmsg}"
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--work", default="build/op_sweep")
    ap.add_argument("--families", default=",".join(FAMILIES),
                    help="comma-separated, from: " + ", ".join(FAMILIES))
    ap.add_argument("--cases", default="",
                    help="only cases whose name contains one of these comma-separated strings")
    ap.add_argument("--quick", action="store_true", help="only a few cases per family")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating kiln/ORT rounds per case and thread count")
    ap.add_argument("--iterations", type=int, default=0,
                    help="timed runs per process (default: about 0.25 s of runs, 10-300)")
    ap.add_argument("--regen", action="store_true", help="rebuild every case's model")
    ap.add_argument("--no-pin", action="store_true",
                    help="do not pin T-thread runs to the last T CPUs (both runtimes alike)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per subprocess")
    ap.add_argument("--default-malloc", action="store_true",
                    help="run both runtimes without the GLIBC_TUNABLES this script sets (THP for "
                         "malloc, no heap trimming)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--node", default="node")
    ap.add_argument("--npm", default="npm")
    args = ap.parse_args()
    PIN["on"] = not args.no_pin
    TIMEOUT["s"] = args.timeout
    if not args.default_malloc:
        env = dict(os.environ)
        env["GLIBC_TUNABLES"] = ":".join(t for t in (env.get("GLIBC_TUNABLES"), MALLOC_TUNABLES)
                                         if t)
        ENV["env"] = env
    fams = [f for f in args.families.split(",") if f]
    for f in fams:
        if f not in FAMILIES:
            raise SystemExit(f"op_sweep.py: unknown family {f} (have: {', '.join(FAMILIES)})")
    threads = [int(t) for t in args.threads.split(",") if t]
    filters = [c for c in args.cases.split(",") if c]
    cases = {}
    for f in fams:
        cs = FAMILIES[f][1]()
        names = [c.name for c in cs]
        assert len(names) == len(set(names)), f"duplicate case names in {f}"
        if args.quick:
            cs = [c for c in cs if c.quick]
        if filters:
            cs = [c for c in cs if any(s in c.name for s in filters)]
        if cs:
            cases[f] = cs
    if args.list:
        for f, cs in cases.items():
            print(f"{f} ({len(cs)}):")
            for c in cs:
                print(f"  {c.name:40} {c.desc}" + ("  [quick]" if c.quick else ""))
        print(f"{sum(len(c) for c in cases.values())} cases")
        return 0

    work = os.path.abspath(args.work)
    kiln = os.path.abspath(args.kiln) if os.sep in args.kiln else shutil.which(args.kiln)
    if not kiln or not os.path.exists(kiln):
        raise SystemExit(f"op_sweep.py: no kiln at {args.kiln} (build it, or pass --kiln)")
    os.makedirs(work, exist_ok=True)
    mods, ort_desc = ensure_ort(work, args.node, args.npm)

    t_start = time.time()
    load0 = os.getloadavg()
    total = sum(len(c) for c in cases.values())
    fam_results, done, interrupted = {}, 0, False
    try:
        for f, cs in cases.items():
            fam_results[f] = []
            for case in cs:
                done += 1
                rec = run_case(case, f, kiln, args, mods, work, threads)
                fam_results[f].append(rec)
                log(f"[{done}/{total}] {f}/{case.name}: {rec.pop('_log')} "
                    f"[{time.time() - t_start:.0f} s]")
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: reporting the cases done")
    fam_results = {f: rs for f, rs in fam_results.items() if rs}
    load1 = os.getloadavg()
    elapsed = time.time() - t_start

    print(f"# Op sweep: kiln {kiln} vs ONNX Runtime (onnxruntime-node {ort_desc}, CPU EP)\n")
    print(f"Median of {args.rounds} alternating rounds, each the median of "
          + (f"{args.iterations} runs" if args.iterations else "10-300 runs (about 0.25 s)")
          + ("; T-thread runs pinned to the last T CPUs" if PIN["on"] else "")
          + ("" if args.default_malloc else f"; both under GLIBC_TUNABLES={MALLOC_TUNABLES}")
          + f". kiln/ORT < 1: kiln is faster (over 1 in bold). rel-L2: kiln's outputs against "
          f"ORT's on the same inputs, FAIL over {FAIL_REL_L2:g}. {os.cpu_count()} CPUs, load "
          f"{load0[0]:.2f} before, {load1[0]:.2f} after; {elapsed / 60:.1f} minutes.")
    for f, results in fam_results.items():
        print_family(f, FAMILIES[f][0], results, threads)

    summary = summarize(fam_results, threads)
    print("\n### Summary\n")
    head, rule = "| family | cases | fails |", "|---|---:|---:|"
    for t in threads:
        head += f" worst kiln/ORT @{t} (case) | geomean @{t} |"
        rule += "---|---:|"
    print(head)
    print(rule)
    all_ratios = {t: [] for t in threads}
    for f, (n, fails, per_t) in summary.items():
        row = f"| {f} | {n} | {fails} |"
        for t in threads:
            worst, wcase, geo, cnt = per_t[t]
            row += (f" {worst:.2f} ({wcase}) | {geo:.2f} |" if worst else " - | - |")
            all_ratios[t] += [r["threads"][t]["ratio"] for r in fam_results[f]
                              if r["threads"].get(t) and r["threads"][t]["ratio"]]
        print(row)
    row = f"| all | {sum(s[0] for s in summary.values())} | " \
          f"{sum(s[1] for s in summary.values())} |"
    for t in threads:
        row += (f" {max(all_ratios[t]):.2f} | {statistics.geometric_mean(all_ratios[t]):.2f} |"
                if all_ratios[t] else " - | - |")
    print(row)

    ranked = sorted(((x["ratio"], t, r["family"], r["case"], x["kiln_ms"], x["ort_ms"])
                     for rs in fam_results.values() for r in rs
                     for t, x in r["threads"].items() if x["ratio"]), reverse=True)
    print("\n### Worst 15 case/thread pairs by kiln/ORT\n")
    print("| kiln/ORT | threads | case | kiln ms | ORT ms |")
    print("|---:|---:|---|---:|---:|")
    for ratio, t, f, c, k, o in ranked[:15]:
        print(f"| {ratio:.2f} | {t} | {f}/{c} | {fmt_ms(k)} | {fmt_ms(o)} |")
    failed = [r for rs in fam_results.values() for r in rs if case_failed(r)]
    if interrupted:
        print("\nInterrupted: only the cases above were run.")
    if failed:
        print(f"\n{len(failed)} case(s) failed on a runtime or disagreed with ORT: "
              + ", ".join(f"{r['family']}/{r['case']}" for r in failed))

    with open(os.path.join(work, "results.json"), "w") as fh:
        json.dump({"kiln": kiln, "ort": ort_desc, "threads": threads, "rounds": args.rounds,
                   "iterations": args.iterations or "auto", "pinned": PIN["on"],
                   "glibc_tunables": None if args.default_malloc else MALLOC_TUNABLES,
                   "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "elapsed_s": elapsed,
                   "load_before": load0[0], "load_after": load1[0],
                   "families": {f: {"title": FAMILIES[f][0], "cases": rs}
                                for f, rs in fam_results.items()}}, fh, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
