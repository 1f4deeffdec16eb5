"""kiln.tune in this process and on a Dask LocalCluster of worker processes: the same best
pipeline for a deterministic objective and a seed, a worker killed mid-search costs nothing but
its evaluation, and a malformed model is an exception, never a dead worker."""
import os
import signal
import threading

import pytest

import kiln
from conftest import KILN, MODELS, conv_bn_model

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=4, threads_per_worker=1, processes=True,
                                       dashboard_address=":0")
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_local_tune_is_deterministic_and_matches_the_cli(tmp_path, kiln_cli):
    a = kiln.tune(conv_bn_model(), objective="arena", budget=40, seed=1, jobs=2)
    b = kiln.tune(conv_bn_model(), objective="arena", budget=40, seed=1, jobs=1,
                  output=tmp_path / "py.json")
    assert a == b
    assert a["improved"] and a["best"] < a["baseline"]
    model = tmp_path / "conv_bn.onnx"
    model.write_bytes(conv_bn_model().SerializeToString())
    kiln_cli("tune", model, "--objective", "arena", "--budget", 40, "--seed", 1, "-q",
             "-o", tmp_path / "cli.json")
    assert (tmp_path / "cli.json").read_text() == (tmp_path / "py.json").read_text()


def test_dask_gives_the_single_process_result(client):
    model = conv_bn_model()
    local = kiln.tune(model, objective="codesize", budget=30, seed=2)
    spread = kiln.tune(model, objective="codesize", budget=30, seed=2, client=client)
    assert spread == local
    assert local["improved"]


def test_a_worker_killed_mid_search_loses_only_its_evaluation(client):
    model = conv_bn_model()
    local = kiln.tune(model, objective="codesize", budget=40, seed=5)
    pids = list(client.run(os.getpid).values())
    killed = []

    def kill():
        os.kill(pids[0], signal.SIGKILL)
        killed.append(pids[0])

    def progress(done, total, best):
        # After the default's evaluation, kill a worker while the random batch runs.
        if done == 1:
            threading.Timer(0.3, kill).start()

    spread = kiln.tune(model, objective="codesize", budget=40, seed=5, client=client,
                       progress=progress)
    assert killed
    assert spread == local
    client.wait_for_workers(4, timeout=60)  # the nanny restarted it


def test_a_malformed_model_is_an_exception_not_a_dead_worker(client):
    workers = len(client.scheduler_info()["workers"])
    with pytest.raises(kiln.KilnError):
        kiln.tune(b"not an onnx model", objective="arena", client=client)
    from kiln._tune import _score_on_worker

    with pytest.raises(kiln.KilnError):
        client.submit(_score_on_worker, b"garbage", "x", [0], "arena", 100, "cc").result()
    with pytest.raises(kiln.KilnError):
        kiln.tune(conv_bn_model(), objective="speed", client=client)
    assert len(client.scheduler_info()["workers"]) == workers


def test_cli_tune_on_a_dask_scheduler(client, tmp_path, kiln_cli):
    model = tmp_path / "conv_bn.onnx"
    model.write_bytes(conv_bn_model().SerializeToString())
    kiln_cli("tune", model, "--objective", "codesize", "--budget", 20, "--seed", 4, "-q",
             "-o", tmp_path / "local.json")
    r = kiln_cli("tune", model, "--objective", "codesize", "--budget", 20, "--seed", 4,
                 "--dask", client.scheduler.address, "-o", tmp_path / "dask.json")
    assert "CodeSizeBytes" in r.stdout
    assert (tmp_path / "dask.json").read_text() == (tmp_path / "local.json").read_text()
    bad = kiln_cli("tune", os.path.join(MODELS, "kws_cnn.onnx"), "--objective", "arena",
                   "--dask", "tcp://127.0.0.1:1", "--connect", "127.0.0.1:2", check=False)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
