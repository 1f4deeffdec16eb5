#!/usr/bin/env python3
"""Writes small ONNX JSON models (DESIGN 2.2) for the C backend's sequence-model emitters
(emit_sequence_models.cc): RNN / GRU / LSTM per direction, layout, activation list, clip,
peepholes, input_forget, linear_before_reset, sequence_lens at run time or constant, and dtype;
Attention with past key / value, causal, grouped heads, bool / float / narrow masks, softcap,
nonpad_kv_seqlen and every qk_matmul_output_mode; RotaryEmbedding, RMSNormalization and the
losses per reduction, weight, ignore_index and dtype -- the variants the onnx-node tests leave
out. Inputs are random (kiln test-onnx: ints in [0, 16), floats in [-1, 1)), so run-time
integers (sequence lengths, labels, position ids) index extents of at least 16; the host
executor is the reference.
Usage: gen_seq_models.py OUT_DIR"""
import base64, json, os, struct, sys

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_json import T, PACK, Tn, f16bits, tensor, init, vi, attr, node, write_model  # noqa: E402,F401

def model(name, nodes, inputs, outputs, inits=(), opset=23):
    write_model(OUT, name, nodes, inputs, outputs, inits, opset)


def one_node(name, op, ins, outs, attrs, opset=23, inits=()):
    """ins: (name, dtype, dims) or None for an omitted input; outs: (name, dtype) or None."""
    const = {i["name"] for i in inits}
    while ins and ins[-1] is None: ins = ins[:-1]
    while outs and outs[-1] is None: outs = outs[:-1]
    model(name, [node(op, [i[0] if i else "" for i in ins], [o[0] if o else "" for o in outs], **attrs)],
          [vi(*i) for i in ins if i and i[0] not in const], [vi(*o) for o in outs if o], inits, opset)


# ---- RNN, GRU, LSTM
def rnn(name, cell, S, B, I, H, nd=1, t='f32', layout=0, lens=None, h0=True, c0=True, P=False, bias=True,
        outs=(True, True, True), opset=14, **attrs):
    """lens: None (no input), 'run' (a run-time input: random ints in [0, 16), so S must be >= 15)
    or a list of constants."""
    G = {"RNN": 1, "GRU": 3, "LSTM": 4}[cell]
    st = [nd, B, H] if layout == 0 else [B, nd, H]
    inits = []
    if isinstance(lens, list): inits.append(init("lens", "i32", [B], lens))
    ins = [("x", t, [S, B, I] if layout == 0 else [B, S, I]), ("w", t, [nd, G * H, I]), ("r", t, [nd, G * H, H]),
           ("b", t, [nd, 2 * G * H]) if bias else None, ("lens", "i32", [B]) if lens is not None else None,
           ("h0", t, st) if h0 else None]
    names = ["y", "yh"]
    if cell == "LSTM":
        ins += [("c0", t, st) if c0 else None, ("p", t, [nd, 3 * H]) if P else None]
        names.append("yc")
    if layout: attrs["layout"] = layout
    one_node(name, cell, ins, [(n, t) if want else None for n, want in zip(names, outs)],
             dict(hidden_size=H, **attrs), opset, inits)


rnn("rnn_bidir_relu_leaky_clip_runlens", "RNN", 16, 3, 4, 5, 2, lens="run", direction="bidirectional",
    activations=["Relu", "LeakyRelu"], activation_alpha=[0.1], clip=2.0)
rnn("rnn_reverse_affine", "RNN", 4, 2, 3, 4, h0=False, direction="reverse", activations=["Affine"],
    activation_alpha=[0.7], activation_beta=[0.2])
rnn("rnn_bidir_layout1_thresholded_softplus", "RNN", 3, 2, 3, 4, 2, layout=1, lens=[1, 3], direction="bidirectional",
    activations=["ThresholdedRelu", "Softplus"], activation_alpha=[0.2])
rnn("rnn_f64_bidir_one_act_list", "RNN", 3, 2, 3, 4, 2, t='f64', direction="bidirectional", activations=["Tanh"])
rnn("gru_reverse_lbr_layout1_constlens", "GRU", 4, 3, 3, 5, layout=1, lens=[4, 2, 0], direction="reverse",
    linear_before_reset=1)
rnn("gru_bidir_acts_clip_runlens_layout1", "GRU", 16, 2, 4, 3, 2, layout=1, lens="run", direction="bidirectional",
    activations=["HardSigmoid", "Elu", "Sigmoid", "ScaledTanh"], activation_alpha=[0.3, 0.9, 1.1],
    activation_beta=[0.6, 0.8], clip=3.0)
rnn("gru_lbr_nobias_bidir_opset7", "GRU", 2, 2, 3, 4, 2, bias=False, h0=False, opset=7, direction="bidirectional",
    linear_before_reset=1)
rnn("gru_f16_only_yh", "GRU", 3, 2, 4, 3, t='f16', outs=(False, True))
rnn("lstm_bidir_layout1_peep_input_forget_clip", "LSTM", 4, 2, 3, 5, 2, layout=1, lens=[4, 1], P=True,
    direction="bidirectional", input_forget=1, clip=1.5)
rnn("lstm_f64", "LSTM", 3, 2, 4, 3, t='f64')
rnn("lstm_f16_reverse_acts_peep_yc", "LSTM", 3, 2, 4, 3, t='f16', P=True, outs=(True, False, True),
    direction="reverse", activations=["Sigmoid", "Softsign", "Tanh"])
rnn("lstm_only_y_runlens", "LSTM", 16, 2, 8, 6, lens="run", h0=False, c0=False, outs=(True, False, False), opset=7)


# ---- Attention
def attn(name, B, Hq, Hkv, Sq, Skv, D, Dv, P=0, t='f32', is3d=False, mask=None, nonpad=None,
         outs=(True, False, False, False), inits=(), **attrs):
    """mask: (dtype, dims) of a run-time attn_mask, or an initializer; nonpad: constants."""
    if is3d:
        q, k, v = [B, Sq, Hq * D], [B, Skv, Hkv * D], [B, Skv, Hkv * Dv]
        attrs.update(q_num_heads=Hq, kv_num_heads=Hkv)
    else:
        q, k, v = [B, Hq, Sq, D], [B, Hkv, Skv, D], [B, Hkv, Skv, Dv]
    inits = list(inits)
    m = None
    if isinstance(mask, dict):
        inits.append(mask)
        m = (mask["name"], {v: k for k, v in T.items()}[mask["data_type"]], [int(d) for d in mask["dims"]])
    elif mask:
        m = ("mask", mask[0], mask[1])
    if nonpad is not None: inits.append(init("nonpad", "i64", [B], nonpad))
    ins = [("q", t, q), ("k", t, k), ("v", t, v), m, ("pk", t, [B, Hkv, P, D]) if P else None,
           ("pv", t, [B, Hkv, P, Dv]) if P else None, ("nonpad", "i64", [B]) if nonpad is not None else None]
    one_node(name, "Attention", ins, [(n, t) if want else None for n, want in zip(["y", "pk_out", "pv_out", "qk"], outs)],
             attrs, 23, inits)


attn("attn_f64_past_causal_mask2d_qk3", 2, 2, 1, 3, 2, 4, 5, P=2, t='f64', mask=('f64', [3, 4]),
     outs=(True, True, True, True), is_causal=1, qk_matmul_output_mode=3)
attn("attn_3d_gqa_nonpad_causal_qk0", 2, 4, 2, 3, 5, 4, 3, is3d=True, nonpad=[5, 4], outs=(True, False, False, True),
     is_causal=1, qk_matmul_output_mode=0)
attn("attn_bool_mask_narrow_past_qk3", 2, 2, 2, 3, 3, 4, 4, P=2,
     mask=init("mask", "b", [2, 1, 3, 4], [1] * 5 + [0] + [1] * 12 + [0] + [1] * 5),
     outs=(True, True, True, True), qk_matmul_output_mode=3, scale=0.3)
attn("attn_f16_softcap_mask4d_qk2", 1, 2, 2, 4, 4, 8, 8, t='f16', mask=('f16', [1, 2, 4, 4]),
     outs=(True, False, False, True), softcap=2.5, qk_matmul_output_mode=2)
attn("attn_3d_past_nonpad_causal", 1, 2, 2, 2, 3, 4, 4, P=2, is3d=True, nonpad=[4], outs=(True, True, True), is_causal=1)
attn("attn_mask3d_narrow_float_qk3", 1, 2, 1, 2, 6, 4, 4, mask=('f32', [2, 2, 3]), outs=(True, False, False, True),
     qk_matmul_output_mode=3)
attn("attn_qk1_mask_no_y_needed", 1, 2, 2, 3, 3, 4, 2, mask=('f32', [3, 3]), outs=(True, False, False, True),
     qk_matmul_output_mode=1)
attn("attn_present_only", 1, 2, 1, 2, 2, 3, 3, P=1, outs=(False, True, True))


# ---- RotaryEmbedding
def rope(name, x, cache, t='f32', pos=None, **attrs):
    ins = [("x", t, x), ("cos", t, cache), ("sin", t, cache), ("pos", pos[0], pos[1]) if pos else None]
    one_node(name, "RotaryEmbedding", ins, [("y", t)], attrs, 23)


rope("rope_f64_pos_i32_interleaved_rot4", [2, 2, 3, 8], [16, 2], 'f64', ("i32", [2, 3]), interleaved=1,
     rotary_embedding_dim=4)
rope("rope_f16_3d_nopos", [2, 3, 12], [2, 3, 2], 'f16', num_heads=3)
rope("rope_f32_pos_i64", [1, 2, 4, 6], [16, 3], 'f32', ("i64", [1, 4]))
rope("rope_f32_3d_pos_rot2", [2, 4, 16], [16, 1], 'f32', ("i64", [2, 4]), num_heads=2, rotary_embedding_dim=2)

# ---- RMSNormalization
for nm, x, s, t, a in (("rms_scale_whole_x", [2, 3, 4], [2, 1, 4], 'f32', dict(axis=1)),
                       ("rms_f64_axis0_scalar_eps", [2, 3, 4], [1], 'f64', dict(axis=0, epsilon=1e-3)),
                       ("rms_f16", [3, 2, 8], [8], 'f16', {}),
                       ("rms_scale_bcast_mid", [2, 3, 4, 5], [3, 1, 5], 'f32', dict(axis=1)),
                       ("rms_axis_neg2", [2, 3, 4, 5], [4, 5], 'f32', dict(axis=-2))):
    one_node(nm, "RMSNormalization", [("x", t, x), ("s", t, s)], [("y", t)], a, 23)

# ---- SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss (C = 16 so random labels are in range)
def loss(name, op, x, lt, t='f32', weight=False, log_prob=False, opset=13, **attrs):
    ins = [("x", t, x), ("lab", lt, [x[0]] + x[2:]), ("w", t, [x[1]]) if weight else None]
    one_node(name, op, ins, [("loss", t), ("logp", t) if log_prob else None], attrs, opset)


SCE, NLL = "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"
loss("sce_f64_sum_weight_ii_logprob", SCE, [2, 16, 3], "i64", 'f64', True, True, reduction="sum", ignore_index=3)
loss("sce_i32_none_logprob", SCE, [2, 16, 2, 2], "i32", log_prob=True, reduction="none")
loss("sce_mean_plain", SCE, [4, 16], "i64")
loss("sce_f16_mean_weight_ii", SCE, [3, 16, 2], "i64", 'f16', True, ignore_index=5)
loss("nll_f16_mean_weight", NLL, [3, 16], "i64", 'f16', True)
loss("nll_sum_ii_noweight", NLL, [2, 16, 4], "i64", reduction="sum", ignore_index=1)
loss("nll_none_weight_i32", NLL, [2, 16, 3], "i32", weight=True, reduction="none")
loss("nll_mean_ii_d2", NLL, [2, 16, 2, 3], "i64", reduction="mean", ignore_index=0)
