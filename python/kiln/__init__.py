"""kiln: an ahead-of-time compiler and runtime for ONNX models, driven from Python.

    import kiln, numpy as np
    sess = kiln.InferenceSession("models/kws_cnn.onnx")
    outputs = sess.run(None, {sess.get_inputs()[0].name: np.zeros((1, 1, 49, 10), np.float32)})

The API follows ONNX Runtime where the job is the same. Every kiln error is a kiln.KilnError
carrying kiln's one-line message.
"""
from ._kiln import KilnError, NodeArg, __version__
from ._session import InferenceSession
from ._verbs import bundle, compile, plan, quantize, verify
from ._tune import tune
from . import gym

__all__ = ["KilnError", "NodeArg", "InferenceSession", "compile", "plan", "bundle", "verify",
           "quantize", "tune", "gym", "__version__"]
