"""kiln.InferenceSession: a model on kiln's host executor, with ONNX Runtime's calls."""
import json
import os

from . import _kiln
from ._models import model_arg


class InferenceSession:
    """Runs a model on the host CPU.

    path_or_bytes: an .onnx / .kiln / .bpte path (or .json with weights=), ONNX bytes, or an
        onnx.ModelProto.
    threads: worker threads (default 1, as `kiln run`).
    shapes: {input name: dims} fixing symbolic input dims (as `--shape`); without it they take
        the dims of the arrays each run is given.
    pipeline: a pipeline file's path (as `kiln tune` writes) or the pipeline as a dict.
    kernels: "fast" or "reference" (the portable kernels the fast ones are tested against).
    """

    def __init__(self, path_or_bytes, threads=None, shapes=None, pipeline=None, kernels="fast",
                 weights=None):
        pipeline_file = pipeline_json = None
        if isinstance(pipeline, dict):
            pipeline_json = json.dumps(pipeline)
        elif pipeline is not None:
            pipeline_file = os.fspath(pipeline)
        if shapes is not None:
            shapes = {name: [int(d) for d in dims] for name, dims in shapes.items()}
        self._sess = _kiln.Session(model_arg(path_or_bytes), threads, shapes, pipeline_file,
                                   pipeline_json, kernels, os.fspath(weights) if weights else "")

    def get_inputs(self):
        """The inputs a run is given: NodeArg(name, shape, type)."""
        return self._sess.get_inputs()

    def get_outputs(self):
        """The model's outputs: NodeArg(name, shape, type)."""
        return self._sess.get_outputs()

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model on {input name: ndarray}; returns the named outputs (None: all), as
        ndarrays (a sequence output as a list of them), in the order asked for."""
        if run_options is not None:
            raise TypeError("kiln takes no run_options")
        if output_names is not None:
            output_names = list(output_names)
        return self._sess.run(output_names, dict(input_feed))
