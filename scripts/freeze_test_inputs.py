#!/usr/bin/env python3
"""Copies an ONNX backend test folder with the named graph inputs made initializers that hold the
values of test_data_set_0 (the other data sets are dropped). The generated C needs every size at
compile time, and the onnx-node suite feeds Resize's scales, OneHot's depth and the like at run
time; frozen, the same tests check the C backend against the reference outputs.
Usage: scripts/freeze_test_inputs.py SRC_DIR DST_DIR NAME...   (the single NAME '*': every
graph input but the first). Plain protobuf wire format, no onnx package needed."""
import os, shutil, sys

def varint(b, i):
    r = s = 0
    while True:
        c = b[i]; i += 1
        r |= (c & 0x7f) << s; s += 7
        if c < 0x80: return r, i

def enc_varint(v):
    out = bytearray()
    while True:
        c = v & 0x7f; v >>= 7
        if v: out.append(c | 0x80)
        else: out.append(c); return bytes(out)

def fields(b):
    i = 0; out = []
    while i < len(b):
        key, i = varint(b, i); f, wt = key >> 3, key & 7
        st = i
        if wt == 0: _, i = varint(b, i); out.append((f, wt, b[st:i], None))
        elif wt == 1: i += 8; out.append((f, wt, b[st:i], None))
        elif wt == 5: i += 4; out.append((f, wt, b[st:i], None))
        elif wt == 2:
            n, i = varint(b, i); out.append((f, wt, b[i:i+n], None)); i += n
        else: raise ValueError(wt)
    return out

def enc(fs):
    out = bytearray()
    for f, wt, data, _ in fs:
        out += enc_varint(f << 3 | wt)
        if wt == 2: out += enc_varint(len(data))
        out += data
    return bytes(out)

def name_of(msg, field):
    for f, wt, d, _ in fields(msg):
        if f == field and wt == 2: return d.decode()
    return None

def main():
    src, dst, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    if os.path.exists(dst): shutil.rmtree(dst)
    shutil.copytree(src, dst)
    model = fields(open(os.path.join(src, 'model.onnx'), 'rb').read())
    gi = [k for k, x in enumerate(model) if x[0] == 7][0]
    graph = fields(model[gi][2])
    inits = {name_of(d, 8) for f, wt, d, _ in graph if f == 5}
    inputs = [name_of(d, 1) for f, wt, d, _ in graph if f == 11]
    feeds = [n for n in inputs if n not in inits]
    if names == ['*']: names = feeds[1:]
    sets = sorted(s for s in os.listdir(src) if s.startswith('test_data_set_'))
    newg = []
    for x in graph:
        if x[0] == 11 and name_of(x[2], 1) in names: continue
        newg.append(x)
    for n in names:
        k = feeds.index(n)
        t = fields(open(os.path.join(src, sets[0], 'input_%d.pb' % k), 'rb').read())
        t = [x for x in t if x[0] != 8] + [(8, 2, n.encode(), None)]
        newg.append((5, 2, enc(t), None))
    model[gi] = (7, 2, enc(newg), None)
    open(os.path.join(dst, 'model.onnx'), 'wb').write(enc(model))
    keep = [k for k, n in enumerate(feeds) if n not in names]
    for s in sets:
        if s != sets[0]: shutil.rmtree(os.path.join(dst, s)); continue
        d = os.path.join(dst, s)
        tmp = {}
        for j, k in enumerate(keep): tmp[j] = open(os.path.join(d, 'input_%d.pb' % k), 'rb').read()
        for k in range(len(feeds)): os.remove(os.path.join(d, 'input_%d.pb' % k))
        for j, b in tmp.items(): open(os.path.join(d, 'input_%d.pb' % j), 'wb').write(b)

main()
