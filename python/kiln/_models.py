"""How the package takes a model: a path, ONNX bytes, or an onnx.ModelProto."""
import os


def model_arg(model):
    """A path (str) or ONNX bytes, from what a caller may hand over."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    if hasattr(model, "SerializeToString"):  # onnx.ModelProto
        return model.SerializeToString()
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    raise TypeError("a model is a path, ONNX bytes or an onnx.ModelProto, not %s"
                    % type(model).__name__)


def model_bytes(model):
    """The ONNX bytes of a model given as a path, bytes or an onnx.ModelProto."""
    m = model_arg(model)
    if isinstance(m, bytes):
        return m
    with open(m, "rb") as f:
        return f.read()


def model_name(model, default="model"):
    """The file stem of a model given as a path, else `default`."""
    if isinstance(model, (str, os.PathLike)):
        return os.path.splitext(os.path.basename(os.fspath(model)))[0] or default
    return default
