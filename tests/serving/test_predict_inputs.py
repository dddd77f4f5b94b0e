"""Issue 16, serving side: `cdgt predict` / `cdgt query` refuse NaN and infinite features, out-of-range sparse ids,
empty inputs and non-UTF-8 files in one line, say which blank lines they skipped, never write NaN into --json, and
say what came back when a server answers with something other than JSON."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from cdgt.pipeline.cli import main
from cdgt.serving.client import RestClient, ServingError, query
from cdgt.serving.requests import RequestError, answers, encode_inputs, format_json


def _last_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "Traceback" not in "\n".join(err)
    return err[-1]


def test_nan_and_infinite_features_are_refused():
    with pytest.raises(RequestError, match=r"input 1: feature 2 is nan; features must be finite"):
        encode_inputs("dense", [[0.0, 1.0, 2.0], [0.0, 1.0, float("nan")]], 3)
    with pytest.raises(RequestError, match=r"input 0: feature 7 is inf"):
        encode_inputs("sparse", [{"feature_ids": [1, 7], "feature_values": [0.5, float("inf")]}])
    with pytest.raises(RequestError, match=r"input 0: feature 3 is -inf"):
        encode_inputs("sparse", [{"3": float("-inf")}])


def test_predict_command_refuses_nan_and_infinity(dense_export, capsys):
    row = [0.5] * 11
    assert main(["predict", dense_export.path, json.dumps([*row, 1.0]).replace("1.0]", "NaN]")]) == 1
    assert _last_error(capsys) == ("cdgt predict: error: input 0: feature 11 is nan; features must be finite "
                                   "numbers (the builder rejects NaN and infinity too)")
    assert main(["predict", dense_export.path, "[" + ", ".join(["Infinity"] + ["0"] * 11) + "]", "--json"]) == 1
    assert "input 0: feature 0 is inf" in _last_error(capsys)


def test_non_finite_scores_are_an_error_and_json_is_strict():
    outputs = {"labels": [[b"a"]], "top_k_labels": [[b"a"]], "top_k_scores": [[np.nan]]}
    with pytest.raises(RequestError, match="non-finite scores for input 0"):
        answers(outputs)
    with pytest.raises(RequestError, match="cannot write the answer as JSON"):
        format_json(["x"], [{"labels": [], "top_k": [{"label": "a", "score": float("inf")}]}])


def test_an_out_of_range_sparse_id_names_the_id_and_the_width(sparse_export, capsys):
    good = json.dumps({"feature_ids": [0, 11], "feature_values": [1.0, 0.5]})
    assert main(["predict", sparse_export.path, good, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
    bad = json.dumps({"feature_ids": [3, 12], "feature_values": [1.0, 0.5]})
    assert main(["predict", sparse_export.path, bad]) == 1
    assert _last_error(capsys) == ("cdgt predict: error: input 0: feature id 12 is out of range: this model takes "
                                   "ids in [0, 12)")


def test_empty_inputs_are_refused_and_blank_lines_are_reported(text_export, tmp_path: Path, capsys):
    assert main(["predict", text_export.path, "a text editor", "  "]) == 1
    assert _last_error(capsys) == ("cdgt predict: error: INPUT 2 is empty: give text, or a JSON feature vector, "
                                   "per INPUT")
    (tmp_path / "in.txt").write_text("a text editor\n\nvim\n   \n")
    assert main(["predict", text_export.path, "--input", str(tmp_path / "in.txt"), "--json"]) == 0
    captured = capsys.readouterr()
    assert [r["input"] for r in json.loads(captured.out)] == ["a text editor", "vim"]
    assert f"skipped 2 blank lines of {tmp_path / 'in.txt'} (line 2, 4)" in captured.err
    (tmp_path / "blank.txt").write_text("\n\n")
    assert main(["predict", text_export.path, "--input", str(tmp_path / "blank.txt")]) == 1
    assert "holds only blank lines" in _last_error(capsys)


def test_non_utf8_input_names_the_file_and_line(text_export, tmp_path: Path, capsys):
    (tmp_path / "in.txt").write_bytes(b"\xef\xbb\xbfa text editor\nvim \xe9diteur\n")
    assert main(["predict", text_export.path, "--input", str(tmp_path / "in.txt")]) == 1
    assert _last_error(capsys) == (f"cdgt predict: error: {tmp_path / 'in.txt'}:2: not UTF-8 text (byte b'\\xe9' "
                                   "cannot be decoded); convert the file to UTF-8")


class _HtmlHandler(http.server.BaseHTTPRequestHandler):
    """A proxy's error page where a model server was expected."""

    status = 200

    def do_GET(self) -> None:
        body = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
        self.send_response(self.status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args) -> None:
        pass


@pytest.mark.parametrize("status", [200, 502])
def test_a_server_answering_non_json_is_named(status: int, capsys):
    handler = type("Handler", (_HtmlHandler,), {"status": status})
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(ServingError, match=rf"HTTP {status}.*not (a )?JSON.*'<html><body><h1>502 Bad Gateway"):
            query(RestClient(url, "tags", timeout=5), ["x"])
        assert main(["query", "--rest", url, "--model", "tags", "x"]) == 1
        assert "502 Bad Gateway" in _last_error(capsys)
        server.shutdown()
