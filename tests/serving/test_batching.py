"""Concurrent requests through TF Serving's batching as serving/batching_parameters.txt configures it
(pad_variable_length_inputs: false), emulated by the fake model server (fake_batching.py): requests whose rows
have different numbers of sparse features still batch, because the client pads every sparse request to one fixed
width (serving.requests.SPARSE_REQUEST_WIDTH, `cdgt query --sparse-width`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
import tensorflow as tf
from fake_model_server import FakeModelServer

from cdgt.serving.client import GrpcClient, RestClient, ServingError, query
from cdgt.serving.requests import RequestError, answers, encode_inputs

NARROW = [{"feature_ids": [3], "feature_values": [1.0]}, {"feature_ids": [0], "feature_values": [0.5]}]
WIDE = [{"feature_ids": [1, 4, 7, 11], "feature_values": [0.2, 0.4, 0.6, 0.8]}]


@pytest.fixture(scope="module")
def server(sparse_export, text_export):
    with FakeModelServer({"sp": sparse_export.path, "tags": text_export.path}, batch_window=10.0,
                         batch_tasks=2) as srv:
        yield srv


@pytest.fixture(params=["rest", "grpc"])
def client_for(request, server):
    def make(model: str):
        return RestClient(server.rest_url, model) if request.param == "rest" else \
            GrpcClient(server.grpc_target, model)
    return make


def concurrently(*calls: Callable[[], Any]) -> list[Any]:
    """Each call's result (or the exception it raised), the calls run at the same time."""
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except Exception as err:
            results[i] = err

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def in_process(path: str, kind: str, items: list[Any]) -> list[dict]:
    signature = tf.saved_model.load(path).signatures["predict"]
    arrays = encode_inputs(kind, items)
    return answers({k: v.numpy() for k, v in signature(**{k: tf.constant(v) for k, v in arrays.items()}).items()})


def test_two_sparse_requests_of_different_widths_batch_together(server, client_for, sparse_export):
    batcher = server.batcher("sp", "predict")
    before = batcher.batches
    narrow, wide = concurrently(lambda: query(client_for("sp"), NARROW), lambda: query(client_for("sp"), WIDE))
    assert not isinstance(narrow, Exception), narrow
    assert not isinstance(wide, Exception), wide
    assert batcher.batches == before + 1  # one batch ran both requests
    assert narrow == in_process(sparse_export.path, "sparse", NARROW)
    assert wide == in_process(sparse_export.path, "sparse", WIDE)


def test_requests_padded_to_their_own_longest_row_fail_in_one_batch(server, client_for):
    # what the client sent before the fixed width: the batching path refuses the pair, as TF Serving does
    calls = [lambda items=items: client_for("sp").predict("predict", encode_inputs("sparse", items))
             for items in (NARROW, WIDE)]
    for result in concurrently(*calls):
        assert isinstance(result, ServingError) and "padding is turned off" in str(result)


def test_text_requests_of_different_lengths_batch_together(server, client_for, text_export):
    short, long = ["vim"], ["a text editor for the console with python and network support", "game"]
    got = concurrently(lambda: query(client_for("tags"), short), lambda: query(client_for("tags"), long))
    assert got == [in_process(text_export.path, "text", short), in_process(text_export.path, "text", long)]


def test_a_row_wider_than_the_request_width_is_refused_before_sending(server, client_for):
    with pytest.raises(RequestError, match=r"input 0 has 4 features, more than the fixed request width 3.*"
                                           r"--sparse-width"):
        query(client_for("sp"), WIDE, sparse_width=3)


def test_query_command_names_the_signature_and_pads_sparse_rows(server, capsys):
    from cdgt.pipeline.cli import main

    lines = [json.dumps(item) for item in NARROW]
    assert main(["query", "--rest", server.rest_url, "--model", "sp", "--jsonl", *lines]) == 0
    out, err = capsys.readouterr()
    assert "signature 'predict' (sparse inputs)" in err and "model 'sp'" in err
    assert [json.loads(line)["input"] for line in out.splitlines()] == NARROW
    assert main(["query", "--rest", server.rest_url, "--model", "sp", "--sparse-width", "0", lines[0]]) == 1
    assert "sparse request width must be >= 1" in capsys.readouterr().err
