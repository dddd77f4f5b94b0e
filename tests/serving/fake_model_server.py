"""A stand-in for `tensorflow_model_server`, for the client tests only (never part of the product).

Why it exists: the TF Serving model server binary installs from neither PyPI nor Debian here, and docker does not
run on these machines, so the REST and gRPC clients are tested against this in-process server instead. It runs
the exported SavedModel's signatures and speaks the parts of TF Serving's APIs the client uses, with TF Serving's
status codes and error shapes:
- REST: GET /v1/models/NAME[/versions/V] (status), GET .../metadata (signature_def map as TF Serving's JSON),
  POST ...:predict (`inputs` columnar or `instances` row format) -> {"outputs": ...} / {"predictions": ...};
  errors {"error": message} with 400 (bad request) or 404 (unknown model).
- gRPC: PredictionService.Predict and GetModelMetadata; errors INVALID_ARGUMENT / NOT_FOUND.
- a batch larger than `max_batch_size` fails as TF Serving's batching does ("Task size ... is larger than maximum
  input batch size ...");
- with `batch_window`, TF Serving's batching of concurrent requests (fake_batching.py): tensors of different
  widths in one batch fail as with `pad_variable_length_inputs: false`.

Example:
    >>> with FakeModelServer({"tags": "/tmp/export/1"}) as server:           # doctest: +SKIP
    ...     RestClient(server.rest_url, "tags").signature("predict")
"""

from __future__ import annotations

import json
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import tensorflow as tf
from fake_batching import Batcher
from google.protobuf import json_format
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import get_model_metadata_pb2, prediction_service_pb2_grpc


class BadRequest(Exception):
    """A request TF Serving answers with 400 / INVALID_ARGUMENT (or 404 / NOT_FOUND when `not_found`)."""

    def __init__(self, message: str, not_found: bool = False):
        super().__init__(message)
        self.not_found = not_found


class _Model:
    def __init__(self, path: str):
        self.loaded = tf.saved_model.load(path)
        saved = saved_model_pb2.SavedModel.FromString((Path(path) / "saved_model.pb").read_bytes())
        self.signature_defs = saved.meta_graphs[0].signature_def

    def tensors(self, name: str, inputs: dict[str, Any], max_batch: int) -> dict[str, tf.Tensor]:
        """The request's input tensors; dtypes are checked here (like TF Serving), shapes by the model's graph."""
        if name not in self.signature_defs:
            raise BadRequest(f'Serving signature name: "{name}" not found in signature def')
        specs = self.loaded.signatures[name].structured_input_signature[1]
        if set(inputs) != set(specs):
            raise BadRequest(f"input keys {sorted(inputs)} do not match the signature's {sorted(specs)}")
        tensors = {}
        for key, value in inputs.items():
            try:
                tensors[key] = tf.constant(value, dtype=specs[key].dtype)
            except (TypeError, ValueError) as err:
                raise BadRequest(f"input {key!r}: cannot be read as {specs[key].dtype.name}: {err}") from None
            if tensors[key].shape.rank and tensors[key].shape[0] > max_batch:
                raise BadRequest(f"Task size {tensors[key].shape[0]} is larger than maximum input batch size "
                                 f"{max_batch}")
        return tensors

    def call(self, name: str, tensors: dict[str, Any]) -> dict[str, np.ndarray]:
        fn = self.loaded.signatures[name]
        specs = fn.structured_input_signature[1]
        try:
            return {k: v.numpy() for k, v in fn(**{k: tf.constant(v, dtype=specs[k].dtype)
                                                   for k, v in tensors.items()}).items()}
        except tf.errors.InvalidArgumentError as err:
            raise BadRequest(err.message) from None


class FakeModelServer:
    """REST and gRPC on 127.0.0.1 (free ports) over named SavedModels (version 1 each). With `batch_window`, requests
    go through TF Serving's batching as serving/ configures it (fake_batching.py): concurrent requests to one
    signature join a batch (up to `batch_tasks` of them, waiting at most `batch_window` seconds)."""

    def __init__(self, models: dict[str, str], max_batch_size: int = 64, batch_window: float | None = None,
                 batch_tasks: int = 2):
        self.models = {name: _Model(path) for name, path in models.items()}
        self.max_batch_size = max_batch_size
        self.requests = 0
        self.batch_window, self.batch_tasks = batch_window, batch_tasks
        self.batchers: dict[tuple[str, str], Batcher] = {}
        self.lock = threading.Lock()

    def model(self, name: str, version: int | None) -> _Model:
        if name not in self.models or version not in (None, 1):
            spec = f"Specific({name}, {version})" if version else f"Latest({name})"
            raise BadRequest(f"Servable not found for request: {spec}", not_found=True)
        return self.models[name]

    def predict(self, name: str, version: int | None, signature: str, inputs: dict[str, Any]) -> dict[str, Any]:
        self.requests += 1
        model = self.model(name, version)
        tensors = model.tensors(signature, inputs, self.max_batch_size)
        if self.batch_window is None:
            return model.call(signature, tensors)
        return self.batcher(name, signature).submit(tensors)

    def batcher(self, name: str, signature: str) -> Batcher:
        """The batching queue of one model's signature."""
        with self.lock:
            if (name, signature) not in self.batchers:
                self.batchers[name, signature] = Batcher(
                    lambda merged: self.models[name].call(signature, merged), self.batch_window, self.batch_tasks,
                    BadRequest)
            return self.batchers[name, signature]

    def __enter__(self) -> FakeModelServer:
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), _rest_handler(self))
        self.rest_url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(_GrpcService(self), self.grpc)
        self.grpc_target = f"127.0.0.1:{self.grpc.add_insecure_port('127.0.0.1:0')}"
        self.grpc.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.grpc.stop(grace=None)


def _jsonable(value: np.ndarray) -> Any:
    if value.dtype == object:
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(value).tolist() if value.size else \
            value.tolist()
    return value.tolist()


def _rest_handler(server: FakeModelServer) -> type:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _answer(self, status: int, payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _route(self) -> tuple[str, int | None, str]:
            path = self.path
            if not path.startswith("/v1/models/"):
                raise BadRequest(f"Malformed request: {self.command} {path}", not_found=True)
            rest, _, verb = path[len("/v1/models/"):].partition(":")
            parts = rest.split("/")
            version = int(parts[2]) if len(parts) >= 3 and parts[1] == "versions" else None
            return parts[0], version, verb or (parts[-1] if parts[-1] == "metadata" else "")

        def _handle(self, body: dict[str, Any] | None) -> dict[str, Any]:
            name, version, verb = self._route()
            model = server.model(name, version)
            if verb == "metadata":
                defs = get_model_metadata_pb2.SignatureDefMap(signature_def=model.signature_defs)
                return {"model_spec": {"name": name, "version": "1"},
                        "metadata": {"signature_def": json_format.MessageToDict(
                            defs, preserving_proto_field_name=True)}}
            if not verb:
                return {"model_version_status": [{"version": "1", "state": "AVAILABLE",
                                                  "status": {"error_code": "OK", "error_message": ""}}]}
            if verb != "predict" or body is None:
                raise BadRequest(f"Malformed request: {self.command} {self.path}", not_found=True)
            signature = body.get("signature_name", "serving_default")
            if "inputs" in body:
                outputs = server.predict(name, version, signature, body["inputs"])
                return {"outputs": {k: _jsonable(v) for k, v in outputs.items()}}
            rows = body.get("instances") or []
            columns = {k: [row[k] for row in rows] for k in (rows[0] if rows else {})}
            outputs = server.predict(name, version, signature, columns)
            return {"predictions": [{k: _jsonable(v[i]) for k, v in outputs.items()} for i in range(len(rows))]}

        def _serve(self, body: dict[str, Any] | None) -> None:
            try:
                self._answer(200, self._handle(body))
            except BadRequest as err:
                self._answer(404 if err.not_found else 400, {"error": str(err)})

        def do_GET(self) -> None:
            self._serve(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError as err:
                self._answer(400, {"error": f"JSON Parse error: {err}"})
                return
            self._serve(body)

    return Handler


class _GrpcService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, server: FakeModelServer):
        self.server = server

    def _abort(self, context: grpc.ServicerContext, err: BadRequest) -> None:
        context.abort(grpc.StatusCode.NOT_FOUND if err.not_found else grpc.StatusCode.INVALID_ARGUMENT, str(err))

    def GetModelMetadata(self, request, context):  # the gRPC method names
        try:
            model = self.server.model(request.model_spec.name, request.model_spec.version.value or None)
        except BadRequest as err:
            self._abort(context, err)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = request.model_spec.name
        response.metadata["signature_def"].Pack(get_model_metadata_pb2.SignatureDefMap(
            signature_def=model.signature_defs))
        return response

    def Predict(self, request, context):
        from tensorflow_serving.apis import predict_pb2

        spec = request.model_spec
        try:
            inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
            outputs = self.server.predict(spec.name, spec.version.value or None, spec.signature_name or
                                          "serving_default", inputs)
        except BadRequest as err:
            self._abort(context, err)
        missing = sorted(set(request.output_filter) - set(outputs))
        if missing:  # TF Serving: INVALID_ARGUMENT, output tensor alias not found in signature outputs
            self._abort(context, BadRequest(f"output tensor alias not found in signature outputs: {missing}"))
        response = predict_pb2.PredictResponse()
        for key, value in outputs.items():
            if request.output_filter and key not in request.output_filter:
                continue
            response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
        return response
