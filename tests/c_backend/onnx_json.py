"""Builders for small ONNX JSON models (DESIGN 2.2, protobuf JSON field names), shared by the
gen_*_models.py scripts: element types by short name, initializers as raw little-endian bytes,
value infos, attributes of every kind the scripts use, nodes and the model file itself."""
import base64
import json
import os
import struct

T = dict(f32=1, u8=2, i8=3, u16=4, i16=5, i32=6, i64=7, b=9, f16=10, f64=11, u32=12, u64=13, bf16=16)
PACK = {1: 'f', 2: 'B', 3: 'b', 4: 'H', 5: 'h', 6: 'i', 7: 'q', 9: 'B', 11: 'd', 12: 'I', 13: 'Q'}


def f16bits(v):
    return struct.unpack('<H', struct.pack('<e', v))[0]


def tensor(name, t, dims, vals):
    et = T[t]
    if et == 10: raw = struct.pack('<%dH' % len(vals), *[f16bits(v) for v in vals])
    else: raw = struct.pack('<%d%s' % (len(vals), PACK[et]), *vals)
    return {"name": name, "data_type": et, "dims": [str(d) for d in dims], "raw_data": base64.b64encode(raw).decode()}


init = tensor


def vi(name, t, dims=None):
    tt = {"elem_type": T[t]}
    if dims is not None: tt["shape"] = {"dim": [{"dim_value": str(d)} for d in dims]}
    return {"name": name, "type": {"tensor_type": tt}}


class Tn:  # a tensor attribute
    def __init__(self, t, vals): self.t, self.vals = t, vals


def attr(name, v):
    if isinstance(v, Tn): return {"name": name, "t": tensor("", v.t, [len(v.vals)], v.vals), "type": "TENSOR"}
    if isinstance(v, float): return {"name": name, "f": v, "type": "FLOAT"}
    if isinstance(v, int): return {"name": name, "i": str(v), "type": "INT"}
    if isinstance(v, str): return {"name": name, "s": base64.b64encode(v.encode()).decode(), "type": "STRING"}
    if isinstance(v, list) and v and isinstance(v[0], float): return {"name": name, "floats": v, "type": "FLOATS"}
    if isinstance(v, list) and v and isinstance(v[0], str):
        return {"name": name, "strings": [base64.b64encode(s.encode()).decode() for s in v], "type": "STRINGS"}
    return {"name": name, "ints": [str(x) for x in v], "type": "INTS"}


def node(op, ins, outs, domain="", **attrs):
    n = {"op_type": op, "input": ins, "output": outs, "attribute": [attr(k, v) for k, v in attrs.items()]}
    if domain: n["domain"] = domain
    return n


def write_model(out_dir, name, nodes, inputs, outputs, inits=(), opset=19, ml_opset=None):
    ops = [{"domain": "", "version": str(opset)}]
    if ml_opset: ops.append({"domain": "ai.onnx.ml", "version": str(ml_opset)})
    m = {"ir_version": "9", "graph": {"name": name, "node": nodes, "initializer": list(inits),
         "input": inputs, "output": outputs}, "opset_import": ops}
    json.dump(m, open(os.path.join(out_dir, name + ".json"), "w"), indent=1)
