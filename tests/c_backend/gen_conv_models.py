#!/usr/bin/env python3
"""Writes small ONNX JSON models (DESIGN 2.2) for the C backend's conv-family emitters
(emit_conv.cc): Conv (1-D to 3-D, groups and depthwise, strides, dilations, pads, auto_pad,
constant or run-time weights, optional bias) and ConvTranspose (output_padding, output_shape,
auto_pad, groups, dilations) on float32 and on float64 / float16 / bfloat16; MaxPool (Indices in
both storage orders, int8 / uint8), AveragePool (count_include_pad, ceil_mode, dilations) and
LpPool on every float type; the Global pools; ConvInteger and QLinearConv on every int8 / uint8
combination with per-tensor or per-channel scales and zero points. Shapes are random (fixed
seed) and large enough that the kernels' blocked paths and their border paths both run; the
host executor is the reference (kiln test-onnx on model files, random inputs).
Usage: gen_conv_models.py OUT_DIR"""
import json, random, os, sys
random.seed(7)
OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
FLOAT, UINT8, INT8, INT32, INT64, F16, F64, BF16 = 1, 2, 3, 6, 7, 10, 11, 16

def vi(name, et, dims=None):
    t = {'elem_type': et}
    if dims is not None: t['shape'] = {'dim': [{'dim_value': d} for d in dims]}
    return {'name': name, 'type': {'tensor_type': t}}

def init(name, et, dims, vals):
    t = {'name': name, 'data_type': et, 'dims': dims}
    if et in (FLOAT, F16): t['float_data' if et == FLOAT else 'int32_data'] = vals
    elif et == F64: t['double_data'] = vals
    elif et == INT64: t['int64_data'] = vals
    else: t['int32_data'] = vals
    return t

def attr(name, v):
    if isinstance(v, str): return {'name': name, 's': __import__('base64').b64encode(v.encode()).decode(), 'type': 'STRING'}
    if isinstance(v, float): return {'name': name, 'f': v, 'type': 'FLOAT'}
    if isinstance(v, int): return {'name': name, 'i': v, 'type': 'INT'}
    return {'name': name, 'ints': v, 'type': 'INTS'}

def model(name, node, inputs, outputs, inits=(), opset=19):
    m = {'ir_version': 9, 'opset_import': [{'domain': '', 'version': opset}],
         'graph': {'name': name, 'node': [node], 'input': inputs, 'output': outputs, 'initializer': list(inits)}}
    json.dump(m, open(os.path.join(OUT, name + '.json'), 'w'))

def prod(v):
    p = 1
    for x in v: p *= x
    return p

def rnd(n): return [round(random.uniform(-1, 1), 4) for _ in range(n)]

def geom_attrs(nd, allow_auto=True, conv=True):
    a = {}
    k = [random.choice([1, 2, 3, 5]) for _ in range(nd)]
    if random.random() < 0.6: a['strides'] = [random.choice([1, 2, 3]) for _ in range(nd)]
    if random.random() < 0.4: a['dilations'] = [random.choice([1, 2]) for _ in range(nd)]
    r = random.random()
    if allow_auto and r < 0.2: a['auto_pad'] = random.choice(['SAME_UPPER', 'SAME_LOWER', 'VALID'])
    elif r < 0.8: a['pads'] = [random.randint(0, kk - 1 if kk > 1 else 0) for kk in k] + [random.randint(0, kk - 1 if kk > 1 else 0) for kk in k]
    return k, a

count = 0
# Conv
for i in range(60):
    nd = random.choice([1, 2, 2, 2, 3])
    group = random.choice([1, 1, 2, 3]) if random.random() < 0.8 else 0
    cg = random.randint(1, 4)
    if group == 0:  # depthwise
        c = random.randint(2, 6); group = c; cg = 1
    else:
        c = cg * group
    m = group * random.randint(1, 3)
    k, a = geom_attrs(nd)
    size = [random.randint(6, 20) if nd < 3 else random.randint(4, 8) for _ in range(nd)]
    # make the geometry valid
    dil = a.get('dilations', [1] * nd)
    pads = a.get('pads', [0] * 2 * nd)
    for j in range(nd):
        keff = (k[j] - 1) * dil[j] + 1
        if size[j] + pads[j] + pads[j + nd] < keff: size[j] = keff
    n = random.choice([1, 1, 2])
    x = [n, c] + size
    w = [m, cg] + k
    const = random.random() < 0.5
    bias = random.random() < 0.6
    ins = [vi('x', FLOAT, x)]
    inits = []
    if const: inits.append(init('w', FLOAT, w, rnd(prod(w))))
    else: ins.append(vi('w', FLOAT, w))
    if bias:
        if const: inits.append(init('b', FLOAT, [m], rnd(m)))
        else: ins.append(vi('b', FLOAT, [m]))
    if group != 1: a['group'] = group
    if random.random() < 0.5: a['kernel_shape'] = k
    node = {'op_type': 'Conv', 'input': ['x', 'w'] + (['b'] if bias else []), 'output': ['y'], 'attribute': [attr(kk, v) for kk, v in a.items()]}
    model('conv_%02d' % i, node, ins, [vi('y', FLOAT)], inits)
# ConvTranspose
for i in range(40):
    nd = random.choice([1, 2, 2, 3])
    group = random.choice([1, 1, 2, 3])
    cg = random.randint(1, 3)
    c = cg * group
    mg = random.randint(1, 3)
    k = [random.choice([1, 2, 3, 4]) for _ in range(nd)]
    a = {}
    st = [random.choice([1, 2, 3]) for _ in range(nd)]
    if random.random() < 0.7: a['strides'] = st
    else: st = [1] * nd
    dil = [1] * nd
    if random.random() < 0.3: dil = a['dilations'] = [random.choice([1, 2]) for _ in range(nd)]
    size = [random.randint(3, 9) if nd < 3 else random.randint(2, 5) for _ in range(nd)]
    r = random.random()
    if r < 0.3:
        a['output_padding'] = [random.randint(0, max(0, min(s, d) - 1)) for s, d in zip(st, dil)]
    if r < 0.5:
        a['pads'] = [random.randint(0, kk - 1) for kk in k] * 2
    elif r < 0.7:
        full = [st[j] * (size[j] - 1) + (k[j] - 1) * dil[j] + 1 for j in range(nd)]
        a['output_shape'] = [max(1, f + random.randint(-2, 1)) for f in full]
        if random.random() < 0.5: a['auto_pad'] = 'SAME_UPPER'
    elif r < 0.85:
        a['auto_pad'] = random.choice(['SAME_UPPER', 'SAME_LOWER'])
    if group != 1: a['group'] = group
    x = [random.choice([1, 2]), c] + size
    w = [c, mg] + k
    bias = random.random() < 0.6
    ins = [vi('x', FLOAT, x)]
    inits = [init('w', FLOAT, w, rnd(prod(w)))]
    if bias: inits.append(init('b', FLOAT, [mg * group], rnd(mg * group)))
    node = {'op_type': 'ConvTranspose', 'input': ['x', 'w'] + (['b'] if bias else []), 'output': ['y'], 'attribute': [attr(kk, v) for kk, v in a.items()]}
    model('convt_%02d' % i, node, ins, [vi('y', FLOAT)], inits)
# Pools
for i in range(80):
    op = random.choice(['MaxPool', 'MaxPool', 'AveragePool', 'AveragePool', 'LpPool'])
    nd = random.choice([1, 2, 2, 3])
    k, a = geom_attrs(nd, conv=False)
    if op != 'LpPool' and random.random() < 0.4: a['ceil_mode'] = 1
    if op == 'AveragePool' and random.random() < 0.5: a['count_include_pad'] = 1
    if op == 'LpPool': a['p'] = random.choice([1, 2, 3])
    a['kernel_shape'] = k
    size = [random.randint(5, 16) if nd < 3 else random.randint(3, 7) for _ in range(nd)]
    dil = a.get('dilations', [1] * nd)
    pads = a.get('pads', [0] * 2 * nd)
    for j in range(nd):
        keff = (k[j] - 1) * dil[j] + 1
        if size[j] + pads[j] + pads[j + nd] < keff: size[j] = keff
    dt = FLOAT
    r = random.random()
    if r < 0.12: dt = F64
    elif r < 0.2: dt = F16
    elif r < 0.25 and op == 'MaxPool': dt = INT8
    elif r < 0.3 and op == 'MaxPool': dt = UINT8
    x = [random.choice([1, 2]), random.randint(1, 3)] + size
    outs = [vi('y', dt)]
    names = ['y']
    if op == 'MaxPool' and dt in (FLOAT, F64, F16) and random.random() < 0.4:
        outs.append(vi('idx', INT64)); names.append('idx')
        if random.random() < 0.5: a['storage_order'] = 1
    node = {'op_type': op, 'input': ['x'], 'output': names, 'attribute': [attr(kk, v) for kk, v in a.items()]}
    model('pool_%02d_%s' % (i, op), node, [vi('x', dt, x)], outs)
# Global pools
for i, op in enumerate(['GlobalMaxPool', 'GlobalAveragePool', 'GlobalLpPool'] * 3):
    dt = [FLOAT, F64, F16][i // 3]
    x = [2, 3] + [random.randint(2, 6) for _ in range(random.choice([1, 2, 3]))]
    a = [attr('p', 3)] if op == 'GlobalLpPool' and i % 2 else []
    model('gpool_%02d_%s' % (i, op), {'op_type': op, 'input': ['x'], 'output': ['y'], 'attribute': a}, [vi('x', dt, x)], [vi('y', dt)])
# QLinearConv / ConvInteger
for i in range(30):
    nd = random.choice([1, 2, 2, 3])
    group = random.choice([1, 1, 2])
    cg = random.randint(1, 4)
    c = cg * group
    m = group * random.randint(1, 3)
    k, a = geom_attrs(nd)
    size = [random.randint(6, 16) if nd < 3 else random.randint(4, 7) for _ in range(nd)]
    dil = a.get('dilations', [1] * nd)
    pads = a.get('pads', [0] * 2 * nd)
    for j in range(nd):
        keff = (k[j] - 1) * dil[j] + 1
        if size[j] + pads[j] + pads[j + nd] < keff: size[j] = keff
    if group != 1: a['group'] = group
    xt = random.choice([INT8, UINT8]); wt = random.choice([INT8, UINT8])
    lo = lambda t: -128 if t == INT8 else 0
    x = [random.choice([1, 2]), c] + size
    w = [m, cg] + k
    wvals = [random.randint(lo(wt), lo(wt) + 255) for _ in range(prod(w))]
    xvals_init = None
    per_ch = random.random() < 0.5
    if i % 2 == 0:
        yt = random.choice([INT8, UINT8])
        inits = [init('xs', FLOAT, [], [0.05]), init('xz', xt, [], [random.randint(lo(xt), lo(xt) + 255)]),
                 init('w', wt, w, wvals),
                 init('ws', FLOAT, [m] if per_ch else [], [round(random.uniform(0.001, 0.02), 5) for _ in range(m if per_ch else 1)]),
                 init('wz', wt, [m] if per_ch and wt == INT8 and False else [], [random.randint(lo(wt), lo(wt) + 255)]),
                 init('ys', FLOAT, [], [round(random.uniform(0.01, 0.2), 4)]), init('yz', yt, [], [random.randint(lo(yt), lo(yt) + 255)])]
        ins = [vi('xq', xt, x)]
        inp = ['xq', 'xs', 'xz', 'w', 'ws', 'wz', 'ys', 'yz']
        if random.random() < 0.5:
            inits.append(init('b', INT32, [m], [random.randint(-500, 500) for _ in range(m)])); inp.append('b')
        model('qconv_%02d' % i, {'op_type': 'QLinearConv', 'input': inp, 'output': ['y'], 'attribute': [attr(kk, v) for kk, v in a.items()]}, ins, [vi('y', yt)], inits, opset=10 if random.random() < 0.3 else 19)
    else:
        inits = [init('w', wt, w, wvals)]
        inp = ['xq', 'w']
        if random.random() < 0.7:
            inits.append(init('xz', xt, [], [random.randint(lo(xt), lo(xt) + 255)])); inp.append('xz')
            if random.random() < 0.7:
                inits.append(init('wz', wt, [m] if per_ch else [], [random.randint(lo(wt), lo(wt) + 255) for _ in range(m if per_ch else 1)])); inp.append('wz')
        model('convint_%02d' % i, {'op_type': 'ConvInteger', 'input': inp, 'output': ['y'], 'attribute': [attr(kk, v) for kk, v in a.items()]}, [vi('xq', xt, x)], [vi('y', INT32)], inits)
# Conv / ConvTranspose in float64, float16, bfloat16 (all inputs dynamic)
for i in range(24):
    dt = [F64, F16, BF16][i % 3]
    op = 'Conv' if i < 14 else 'ConvTranspose'
    nd = random.choice([1, 2, 3])
    group = random.choice([1, 2])
    cg = random.randint(1, 3); c = cg * group; mg = random.randint(1, 2); m = mg * group
    a = {}
    if op == 'Conv':
        k, a = geom_attrs(nd)
        size = [random.randint(5, 12) if nd < 3 else random.randint(4, 6) for _ in range(nd)]
        dil = a.get('dilations', [1] * nd); pads = a.get('pads', [0] * 2 * nd)
        for j in range(nd):
            keff = (k[j] - 1) * dil[j] + 1
            if size[j] + pads[j] + pads[j + nd] < keff: size[j] = keff
        w = [m, cg] + k
    else:
        k = [random.choice([1, 2, 3]) for _ in range(nd)]
        a['strides'] = [random.choice([1, 2]) for _ in range(nd)]
        if random.random() < 0.5: a['pads'] = [random.randint(0, kk - 1) for kk in k] * 2
        if random.random() < 0.3: a['dilations'] = [2] * nd
        size = [random.randint(3, 6) for _ in range(nd)]
        w = [c, mg] + k
    if group != 1: a['group'] = group
    x = [random.choice([1, 2]), c] + size
    bias = random.random() < 0.6
    ins = [vi('x', dt, x), vi('w', dt, w)] + ([vi('b', dt, [m])] if bias else [])
    node = {'op_type': op, 'input': ['x', 'w'] + (['b'] if bias else []), 'output': ['y'], 'attribute': [attr(kk, v) for kk, v in a.items()]}
    model('convdt_%02d' % i, node, ins, [vi('y', dt)])
# Edge cases: windows entirely in the padding (those whose outputs are -inf or NaN, MaxPool and
# AveragePool without count_include_pad, cannot be compared by relative L2 error and are left out)
for i, (op, extra) in enumerate([('AveragePool', {'count_include_pad': 1}), ('LpPool', {})]):
    a = {'kernel_shape': [2, 2], 'pads': [3, 0, 0, 4]}
    a.update(extra)
    outs = [vi('y', FLOAT)]; names = ['y']
    if op == 'MaxPool': outs.append(vi('idx', INT64)); names.append('idx')
    model('edge_%02d_%s' % (i, op), {'op_type': op, 'input': ['x'], 'output': names, 'attribute': [attr(kk, v) for kk, v in a.items()]}, [vi('x', FLOAT, [1, 2, 5, 6])], outs)
# Conv with a large padding (outputs that see only padding) and a 1x1 kernel with stride
model('edge_conv_pad', {'op_type': 'Conv', 'input': ['x', 'w'], 'output': ['y'], 'attribute': [attr('pads', [4, 0, 0, 5]), attr('strides', [1, 2])]},
      [vi('x', FLOAT, [1, 3, 9, 11]), vi('w', FLOAT, [4, 3, 3, 2])], [vi('y', FLOAT)])
model('edge_conv_1x1s2', {'op_type': 'Conv', 'input': ['x', 'w'], 'output': ['y'], 'attribute': [attr('strides', [2, 2])]},
      [vi('x', FLOAT, [1, 8, 17, 19]), vi('w', FLOAT, [5, 8, 1, 1])], [vi('y', FLOAT)])
# Col2Im (image_shape and block_shape constant), every float type and int32
for i in range(12):
    nd = random.choice([1, 2, 2, 3])
    block = [random.randint(1, 3) for _ in range(nd)]
    image = [random.randint(4, 9) if nd < 3 else random.randint(3, 5) for _ in range(nd)]
    a = {}
    st = [random.choice([1, 2]) for _ in range(nd)]
    dil = [random.choice([1, 2]) for _ in range(nd)]
    pads = [random.randint(0, 1) for _ in range(2 * nd)]
    if random.random() < 0.6: a['strides'] = st
    else: st = [1] * nd
    if random.random() < 0.4: a['dilations'] = dil
    else: dil = [1] * nd
    if random.random() < 0.5: a['pads'] = pads
    else: pads = [0] * 2 * nd
    grid = [(image[j] + pads[j] + pads[j + nd] - ((block[j] - 1) * dil[j] + 1)) // st[j] + 1 for j in range(nd)]
    c = random.randint(1, 3)
    dt = [FLOAT, F64, F16, INT32][i % 4]
    x = [random.choice([1, 2]), c * prod(block), prod(grid)]
    inits = [init('image', INT64, [nd], image), init('block', INT64, [nd], block)]
    model('col2im_%02d' % i, {'op_type': 'Col2Im', 'input': ['x', 'image', 'block'], 'output': ['y'], 'attribute': [attr(kk, v) for kk, v in a.items()]},
          [vi('x', dt, x)], [vi('y', dt)], inits)
# MaxUnpool (indices constant, some repeated; output_shape constant and larger)
for i in range(6):
    nd = random.choice([1, 2, 3])
    k = [2] * nd
    x = [1, 2] + [random.randint(2, 4) for _ in range(nd)]
    unpooled = x[:2] + [2 * d for d in x[2:]]
    total = prod(unpooled)
    idx = [random.randint(0, total - 1) for _ in range(prod(x))]
    inp = ['x', 'i']
    inits = [init('i', INT64, x, idx)]
    if i % 2:
        inits.append(init('shape', INT64, [len(x)], [d + random.randint(0, 2) for d in unpooled])); inp.append('shape')
    model('maxunpool_%02d' % i, {'op_type': 'MaxUnpool', 'input': inp, 'output': ['y'], 'attribute': [attr('kernel_shape', k), attr('strides', k)]},
          [vi('x', [FLOAT, F64, F16][i % 3], x)], [vi('y', [FLOAT, F64, F16][i % 3])], inits)
# DeformConv (2-D, float32 and float64; offsets in [-1, 1))
for i in range(8):
    dt = [FLOAT, F64][i % 2]
    group = random.choice([1, 2]); og = random.choice([1, 2]); cg = random.randint(1, 2)
    c = cg * group * og // (group if og % group == 0 and False else 1)
    c = cg * group * og
    m = group * random.randint(1, 2)
    k = [random.choice([1, 2, 3]), random.choice([1, 2, 3])]
    a = {'group': group, 'offset_group': og}
    if random.random() < 0.5: a['pads'] = [1, 0, 1, 1]
    if random.random() < 0.5: a['strides'] = [random.choice([1, 2]), 1]
    if random.random() < 0.3: a['dilations'] = [2, 1]
    size = [random.randint(5, 8), random.randint(5, 8)]
    pads = a.get('pads', [0, 0, 0, 0]); st = a.get('strides', [1, 1]); dil = a.get('dilations', [1, 1])
    out = [(size[j] + pads[j] + pads[j + 2] - ((k[j] - 1) * dil[j] + 1)) // st[j] + 1 for j in range(2)]
    n = random.choice([1, 2])
    ins = [vi('x', dt, [n, c] + size), vi('w', dt, [m, cg * og] + k), vi('off', dt, [n, og * k[0] * k[1] * 2] + out)]
    names = ['x', 'w', 'off']
    if random.random() < 0.6: ins.append(vi('b', dt, [m])); names.append('b')
    else: names.append('')
    if random.random() < 0.6: ins.append(vi('mask', dt, [n, og * k[0] * k[1]] + out)); names.append('mask')
    while names and names[-1] == '': names.pop()
    model('deform_%02d' % i, {'op_type': 'DeformConv', 'input': names, 'output': ['y'], 'attribute': [attr(kk, v) for kk, v in a.items()]},
          ins, [vi('y', dt)])
# RoiAlign and MaxRoiPool (regions constant, some partly outside the image)
for i in range(10):
    dt = [FLOAT, F64, F16][i % 3]
    n, c, H, W = 2, 2, random.randint(5, 10), random.randint(5, 10)
    R = 3
    if i < 6:
        rois = []
        for _ in range(R):
            x0, y0 = random.uniform(-2, W - 2), random.uniform(-2, H - 2)
            rois += [round(x0, 3), round(y0, 3), round(x0 + random.uniform(0.5, 6), 3), round(y0 + random.uniform(0.5, 6), 3)]
        a = {'output_height': random.randint(1, 3), 'output_width': random.randint(1, 3), 'spatial_scale': random.choice([1.0, 0.5]),
             'sampling_ratio': random.choice([0, 0, 2]), 'mode': random.choice(['avg', 'max']),
             'coordinate_transformation_mode': random.choice(['half_pixel', 'output_half_pixel'])}
        inits = [init('rois', FLOAT if dt == FLOAT else F64 if dt == F64 else FLOAT, [R, 4], rois), init('bi', INT64, [R], [random.randint(0, n - 1) for _ in range(R)])]
        if dt == F16: continue
        model('roialign_%02d' % i, {'op_type': 'RoiAlign', 'input': ['x', 'rois', 'bi'], 'output': ['y'], 'attribute': [attr(kk, v) for kk, v in a.items()]},
              [vi('x', dt, [n, c, H, W])], [vi('y', dt)], inits)
    else:
        if dt == F16: dt = FLOAT
        rois = []
        for _ in range(R):
            x0, y0 = random.randint(-2, W - 2), random.randint(-2, H - 2)
            rois += [random.randint(0, n - 1), x0, y0, x0 + random.randint(0, 5), y0 + random.randint(0, 5)]
        a = {'pooled_shape': [random.randint(1, 3), random.randint(1, 3)], 'spatial_scale': random.choice([1.0, 0.5])}
        model('maxroipool_%02d' % i, {'op_type': 'MaxRoiPool', 'input': ['x', 'rois'], 'output': ['y'], 'attribute': [attr(kk, v) for kk, v in a.items()]},
              [vi('x', dt, [n, c, H, W])], [vi('y', dt)], [init('rois', dt, [R, 5], rois)])
