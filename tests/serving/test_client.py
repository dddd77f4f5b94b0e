"""The REST and gRPC clients (and `cdgt query`) against a stand-in model server.

Why a stand-in: the TF Serving model server binary installs from neither PyPI nor Debian on these machines and
docker does not run on these machines. tests/serving/fake_model_server.py runs the exported SavedModel behind TF
Serving's REST and gRPC predict/metadata APIs (same URLs, protos, status codes and error shapes), so what is
tested here is the client's side of the real protocol, not the model server itself.
"""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest
import tensorflow as tf
from fake_model_server import FakeModelServer

from cdgt.pipeline.cli import main
from cdgt.serving.client import GrpcClient, RestClient, ServingError, query
from cdgt.serving.requests import RequestError, answers, encode_inputs

MAX_BATCH = 4


@pytest.fixture(scope="module")
def server(text_export, dense_export):
    with FakeModelServer({"tags": text_export.path, "vec": dense_export.path}, max_batch_size=MAX_BATCH) as srv:
        yield srv


def in_process(export) -> list[dict]:
    signature = tf.saved_model.load(export.path).signatures["predict"]
    kind = "text" if export.kind == "text" else "dense"
    arrays = encode_inputs(kind, list(export.inputs) if kind == "text" else export.inputs.tolist())
    return answers({k: v.numpy() for k, v in signature(**{k: tf.constant(v) for k, v in arrays.items()}).items()})


@pytest.fixture(params=["rest", "grpc"])
def client_for(request, server):
    def make(model: str, **kwargs):
        if request.param == "rest":
            return RestClient(server.rest_url, model, **kwargs)
        return GrpcClient(server.grpc_target, model, **kwargs)
    return make


def test_answers_over_the_wire_equal_the_in_process_answers(client_for, text_export, dense_export):
    got = query(client_for("tags"), list(text_export.inputs), batch_size=MAX_BATCH)
    want = in_process(text_export)
    assert [r["labels"] for r in got] == [r["labels"] for r in want]
    for g, w in zip(got, want):
        assert [t["label"] for t in g["top_k"]] == [t["label"] for t in w["top_k"]]
        np.testing.assert_allclose([t["score"] for t in g["top_k"]], [t["score"] for t in w["top_k"]], atol=1e-5)
    assert any(r["labels"] for r in got)
    dense = query(client_for("vec"), dense_export.inputs.tolist(), batch_size=3)  # two requests
    assert [r["labels"] for r in dense] == [r["labels"] for r in in_process(dense_export)]


def test_grpc_asks_only_for_the_outputs_the_answers_read(server, dense_export):
    """At large L the `predict` signature's dense scores and decisions are [batch, L]: gRPC leaves them out."""
    from cdgt.serving.requests import OUTPUTS, encode_inputs

    client = GrpcClient(server.grpc_target, "vec")
    batch = encode_inputs("dense", dense_export.inputs.tolist()[:2])
    assert set(client.predict("predict", batch)) >= {"scores", "decisions", *OUTPUTS}
    assert set(client.predict("predict", batch, OUTPUTS)) == set(OUTPUTS)
    with pytest.raises(ServingError, match="output tensor alias not found"):
        client.predict("predict", batch, ("no_such_output",))


def test_unknown_model_and_signature_and_a_non_cdgt_signature_are_clear(client_for):
    with pytest.raises(ServingError, match=r"(HTTP 404|NOT_FOUND).*Servable not found.*nope"):
        query(client_for("nope"), ["x"])
    with pytest.raises(ServingError, match=r"has no signature 'missing'.*'predict'"):
        query(client_for("tags"), ["x"], signature="missing")
    with pytest.raises(ServingError, match=r"takes inputs \['examples'\]; expected"):
        query(client_for("tags"), ["x"], signature="serving_default")


def test_bad_requests_get_clear_errors(client_for):
    with pytest.raises(RequestError, match="empty batch"):
        query(client_for("tags"), [])
    with pytest.raises(RequestError, match="takes text"):
        query(client_for("tags"), [[0.5, 1.0]])
    with pytest.raises(RequestError, match="vectors of 12 numbers, got 3"):
        query(client_for("vec"), [[0.1, 0.2, 0.3]])
    with pytest.raises(ServingError, match=f"Task size 6 is larger than maximum input batch size {MAX_BATCH}"):
        query(client_for("tags"), ["a"] * 6, batch_size=6)
    client = client_for("vec")  # what the server says when a request skips the client's checks
    with pytest.raises(ServingError, match=r"(HTTP 400|INVALID_ARGUMENT).*features.*float"):
        client.predict("predict", {"features": np.array([["a"] * 12], dtype=object)})
    with pytest.raises(ServingError, match=r"(?s)(HTTP 400|INVALID_ARGUMENT).*\[batch, 12\]"):
        client.predict("predict", {"features": np.zeros((2, 5), np.float32)})


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connection_failures_say_where():
    port = _closed_port()
    with pytest.raises(ServingError, match=f"cannot reach the model server at http://127.0.0.1:{port}"):
        query(RestClient(f"http://127.0.0.1:{port}", "tags", timeout=5), ["x"])
    with pytest.raises(ServingError, match=f"cannot reach the model server at 127.0.0.1:{port}: UNAVAILABLE"):
        query(GrpcClient(f"127.0.0.1:{port}", "tags", timeout=5), ["x"])
    with pytest.raises(ValueError, match="HOST:PORT"):
        GrpcClient("http://localhost:8500", "tags")


def test_query_command_reads_a_file_and_prints_json_or_a_table(server, text_export, tmp_path, capsys):
    lines = list(text_export.inputs[:5])
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    before = server.requests
    assert main(["query", "--rest", server.rest_url, "--model", "tags", "--input", str(tmp_path / "in.txt"),
                 "--batch-size", "2", "--json"]) == 0
    assert server.requests - before == 3
    rows = json.loads(capsys.readouterr().out)
    assert [r["input"] for r in rows] == lines and all(len(r["top_k"]) == 3 for r in rows)
    assert main(["query", "--grpc", server.grpc_target, "--model", "tags", lines[0]]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("input") and table[1].startswith(lines[0][:20])
    assert main(["query", "--rest", server.rest_url, "--model", "vec", "[1, 2]"]) == 1
    assert "feature vectors of 12 numbers" in capsys.readouterr().err


def test_predict_command_runs_in_process(text_export, capsys):
    assert main(["predict", text_export.path, *text_export.inputs[:2], "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["labels"] for r in rows] == [r["labels"] for r in in_process(text_export)[:2]]
