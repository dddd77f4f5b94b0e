"""REST and gRPC clients of a TF Serving model server that serves a cdgt export.

Both read the model's signature from the server's metadata first (so a model without a `predict` signature of the
expected inputs is a clear error before any prediction), then send batches of at most `batch_size` inputs.
Errors are `ServingError`s that say what failed: the connection, the server's answer (HTTP status or gRPC code
and its message), or the model.

Example:
    >>> client = RestClient("http://localhost:8501", "debtags")                       # doctest: +SKIP
    >>> query(client, ["a text editor for the console"])                             # doctest: +SKIP
    [{'labels': ['role::program', 'use::editing'], 'top_k': [...]}]
    >>> query(GrpcClient("localhost:8500", "debtags"), ["a text editor"])            # doctest: +SKIP
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import numpy as np

from cdgt.serving.requests import OUTPUTS, SPARSE_REQUEST_WIDTH, RequestError, answers, encode_inputs, input_kind
from cdgt_keras.features import DENSE


class ServingError(RuntimeError):
    """The server could not be reached, refused the request, or serves a model without the expected signature."""


def _width(shape: list[int]) -> int | None:
    return int(shape[1]) if len(shape) == 2 and int(shape[1]) > 0 else None


def _shown(body: bytes, limit: int = 80) -> str:
    """The start of an answer's body, for an error message."""
    text = body.decode("utf-8", errors="replace").strip().replace("\n", " ")
    return repr(text[:limit] + ("..." if len(text) > limit else "")) if text else "an empty body"


def _json_answer(url: str, status: int, content_type: str | None, body: bytes) -> dict[str, Any]:
    """The JSON object of a server's answer; ServingError saying what came back when it is not one."""
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise ServingError(f"{url}: HTTP {status} answer is not a JSON object (Content-Type {content_type}): "
                           f"{_shown(body)}; is this a TF Serving REST endpoint?")
    return answer


class RestClient:
    """TF Serving's REST API: GET /v1/models/NAME[/versions/V]/metadata, POST ...:predict (columnar `inputs`)."""

    def __init__(self, url: str, model: str, version: int | None = None, timeout: float = 30.0):
        base = url.rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise ValueError(f"--rest {url!r}: give a URL such as http://localhost:8501")
        self.model_url = f"{base}/v1/models/{model}" + (f"/versions/{version}" if version else "")
        self.timeout = timeout

    def _call(self, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return _json_answer(url, response.status, response.headers.get("Content-Type"), response.read())
        except urllib.error.HTTPError as err:
            body = err.read() or b""
            try:
                message = json.loads(body).get("error", "")
            except (ValueError, AttributeError):
                message = f"{err.reason}; the answer is not JSON: {_shown(body)}"
            raise ServingError(f"{url}: HTTP {err.code}: {message}") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise ServingError(f"cannot reach the model server at {url}: {reason}") from None

    def signature(self, name: str) -> dict[str, list[int]]:
        """{input name: shape} of signature `name` (-1 for any size); ServingError when the model lacks it."""
        meta = self._call(f"{self.model_url}/metadata")
        defs = meta.get("metadata", {}).get("signature_def", {}).get("signature_def", {})
        if name not in defs:
            raise ServingError(f"the model has no signature {name!r} (it has {sorted(defs)}): is it a cdgt export?")
        inputs = defs[name].get("inputs", {})
        return {k: [int(d.get("size", -1)) for d in v.get("tensor_shape", {}).get("dim", [])]
                for k, v in inputs.items()}

    def predict(self, signature: str, inputs: dict[str, np.ndarray]) -> dict[str, Any]:
        """The signature's outputs for one batch (lists, as the server's JSON gives them)."""
        body = {"signature_name": signature, "inputs": {k: v.tolist() for k, v in inputs.items()}}
        outputs = self._call(f"{self.model_url}:predict", body).get("outputs")
        if not isinstance(outputs, dict):
            raise ServingError(f"the server's answer has no named outputs (got {str(outputs)[:80]}): "
                               f"signature {signature!r} is not a cdgt `predict` signature")
        return outputs


class GrpcClient:
    """TF Serving's gRPC PredictionService (tensorflow-serving-api protos): GetModelMetadata, Predict."""

    def __init__(self, target: str, model: str, version: int | None = None, timeout: float = 30.0):
        import grpc
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        if ":" not in target or "://" in target:
            raise ValueError(f"--grpc {target!r}: give HOST:PORT, such as localhost:8500")
        self.target, self.model, self.version, self.timeout = target, model, version, timeout
        self.channel = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", 64 << 20)])
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)

    def _spec(self, message: Any, signature: str | None = None) -> Any:
        message.model_spec.name = self.model
        if self.version:
            message.model_spec.version.value = self.version
        if signature:
            message.model_spec.signature_name = signature
        return message

    def _call(self, method: Any, request: Any) -> Any:
        import grpc

        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as err:
            code = err.code() if hasattr(err, "code") else None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise ServingError(f"cannot reach the model server at {self.target}: {code.name}: "
                                   f"{err.details()}") from None
            raise ServingError(f"{self.target} model {self.model!r}: gRPC {getattr(code, 'name', code)}: "
                               f"{err.details() if hasattr(err, 'details') else err}") from None

    def signature(self, name: str) -> dict[str, list[int]]:
        """{input name: shape} of signature `name` (-1 for any size); ServingError when the model lacks it."""
        from tensorflow_serving.apis import get_model_metadata_pb2

        request = self._spec(get_model_metadata_pb2.GetModelMetadataRequest())
        request.metadata_field.append("signature_def")
        response = self._call(self.stub.GetModelMetadata, request)
        defs = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(defs)
        if name not in defs.signature_def:
            raise ServingError(f"the model has no signature {name!r} (it has {sorted(defs.signature_def)}): "
                               "is it a cdgt export?")
        return {k: [d.size for d in v.tensor_shape.dim] for k, v in defs.signature_def[name].inputs.items()}

    def predict(self, signature: str, inputs: dict[str, np.ndarray],
                outputs: Sequence[str] = ()) -> dict[str, Any]:
        """The signature's outputs for one batch (numpy arrays): only `outputs` when given (the request's
        output_filter, so a model with many labels does not send its [batch, L] scores and decisions back)."""
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2

        request = self._spec(predict_pb2.PredictRequest(), signature)
        request.output_filter.extend(outputs)
        for key, value in inputs.items():
            request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
        response = self._call(self.stub.Predict, request)
        return {key: tf.make_ndarray(proto) for key, proto in response.outputs.items()}

    def close(self) -> None:
        self.channel.close()


def query(client: RestClient | GrpcClient, items: Sequence[Any], signature: str = "predict",
          batch_size: int = 64, sparse_width: int = SPARSE_REQUEST_WIDTH) -> list[dict[str, Any]]:
    """Answers ({"labels", "top_k"}) for `items`, sent in batches of `batch_size` (sparse rows padded to
    `sparse_width`, one width for every request, which TF Serving's batching needs); raises ServingError or
    RequestError (a bad input, said before sending)."""
    if batch_size < 1:
        raise RequestError(f"batch size must be >= 1, got {batch_size}")
    if sparse_width < 1:
        raise RequestError(f"sparse request width must be >= 1, got {sparse_width}")
    shapes = client.signature(signature)
    try:
        kind = input_kind(shapes, signature)
    except RequestError as err:
        raise ServingError(str(err)) from None
    width = _width(shapes.get(DENSE, []))
    if not items:
        raise RequestError("empty batch: give at least one input")
    results: list[dict[str, Any]] = []
    for start in range(0, len(items), batch_size):
        batch = encode_inputs(kind, items[start:start + batch_size], width, sparse_width=sparse_width)
        outputs = client.predict(signature, batch, OUTPUTS) if isinstance(client, GrpcClient) else \
            client.predict(signature, batch)  # TF Serving's REST API has no output filter
        try:
            results.extend(answers(outputs))
        except RequestError as err:
            raise ServingError(str(err)) from None
    return results
