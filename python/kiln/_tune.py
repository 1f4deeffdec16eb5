"""kiln.tune: `kiln tune`'s search over pass sequences and planner choices, in this process or
with its candidate evaluations fanned out to the workers of a Dask cluster.

What crosses the network with a Dask client: the model's bytes once per worker (scattered to all
of them, then cached per worker as a ready environment), and per evaluation its action sequence
out and one number back.
"""
import hashlib
import os

from . import _kiln
from ._models import model_bytes, model_name

OBJECTIVES = ("arena", "codesize", "latency")

# Per worker process: (model digest, planner steps, cc) -> _kiln.TuneWorker.
_WORKERS = {}


def _score_on_worker(model, digest, actions, objective, planner_steps, cc):
    """One candidate's score, on a Dask worker (runs kiln in the worker's process)."""
    key = (digest, planner_steps, cc)
    worker = _WORKERS.get(key)
    if worker is None:
        worker = _WORKERS[key] = _kiln.TuneWorker(model, planner_steps, cc)
    return worker.score(list(actions), objective)


class DaskScorer:
    """Scores batches of candidates on a dask.distributed Client's workers. A candidate whose
    worker dies (or whose model copy is lost) is submitted again, up to `retries` times; a
    candidate kiln refuses is scored as that error."""

    def __init__(self, client, data, objective, planner_steps, cc, retries=3):
        self.client = client
        self.data = data
        self.digest = hashlib.sha256(data).hexdigest()
        self.objective = objective
        self.planner_steps = planner_steps
        self.cc = cc
        self.retries = retries
        self._scatter()

    def _scatter(self):
        self.model = self.client.scatter(self.data, broadcast=True, hash=False)

    def _submit(self, seq, workers=None):
        return self.client.submit(_score_on_worker, self.model, self.digest, list(seq),
                                  self.objective, self.planner_steps, self.cc, pure=False,
                                  workers=workers, allow_other_workers=workers is not None)

    def __call__(self, seqs, serial, done=None):
        """Scores of seqs in order (a number, or kiln's message where a candidate fails);
        done(i, score) as each one finishes."""
        from distributed import as_completed

        workers = None
        if serial:  # the alternating timings of a measured objective: one worker
            names = sorted(self.client.scheduler_info()["workers"])
            workers = names[:1] or None
        results = [None] * len(seqs)
        failures = [0] * len(seqs)
        index = {}
        pending = as_completed()
        for i, seq in enumerate(seqs):
            f = self._submit(seq, workers)
            index[f.key] = i
            pending.add(f)
        for f in pending:
            i = index.pop(f.key)
            try:
                results[i] = float(f.result())
            except _kiln.KilnError as e:
                results[i] = str(e)
            except Exception:  # a worker died, a connection dropped, the model copy was lost
                failures[i] += 1
                if failures[i] > self.retries:
                    raise
                if self.model.status != "finished":  # every copy of the model was lost
                    self._scatter()
                g = self._submit(seqs[i], workers)
                index[g.key] = i
                pending.add(g)
                continue
            if done is not None:
                done(i, results[i])
        return results


def tune(model, objective="arena", budget=100, seed=0, max_length=0, planner_steps=2000, jobs=1,
         cc="cc", client=None, output=None, progress=None, retries=3):
    """Searches pass sequences and planner choices for `model` (a path, ONNX bytes or an
    onnx.ModelProto), as `kiln tune` does, minimizing `objective` (arena, codesize or latency).

    Candidates are scored on `jobs` threads of this process, or, with `client` (a
    dask.distributed.Client), on the cluster's workers. With a deterministic objective (arena,
    codesize) and the same seed the result is the same wherever the candidates ran.

    Returns a dict: observation, baseline, best, improved, best_actions, pipeline (the pipeline
    file's JSON), evaluations, margin, confirm_rounds. With `output`, also writes the pipeline
    file there. `progress(done, total, best)` is called as evaluations finish.
    """
    if objective not in OBJECTIVES:
        raise _kiln.KilnError("objective must be arena, codesize or latency, not '%s'" % objective)
    data = model_bytes(model)
    uri = "benchmark://tune/" + model_name(model)
    scorer = None
    if client is not None:
        # _kiln.tune validates the model before any candidate runs: a malformed one is the
        # caller's exception, never a worker's.
        scorer = DaskScorer(client, data, objective, planner_steps, cc, retries)
    result = _kiln.tune(data, uri, objective, budget, seed, max_length, planner_steps, jobs, cc,
                        scorer, progress)
    if output is not None:
        with open(os.fspath(output), "w") as f:
            f.write(result["pipeline"])
    return result
