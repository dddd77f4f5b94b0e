"""Requests and answers of the `predict` signature, without TensorFlow: shared by `cdgt predict` (in-process) and
the REST/gRPC client.

The input kind follows from the signature's input names: `text` (strings), `features` (dense float rows of a
fixed width) or `feature_ids` + `feature_values` (sparse rows, padded with id -1: to the batch's longest row in
process, to the fixed SPARSE_REQUEST_WIDTH over the wire, so that TF Serving's batching, which concatenates
concurrent requests and refuses tensors of different widths, can batch any two requests). A file holds one input
per line: plain text, or JSON (`[0.1, 0.2, ...]` for dense; `{"feature_ids": [...], "feature_values": [...]}` or
`{"12": 0.5, "40": 1.0}` for sparse).

Example:
    >>> encode_inputs("text", ["a text editor"])["text"].tolist()
    ['a text editor']
    >>> answers({"labels": [[b"editors", b""]], "top_k_labels": [[b"editors"]], "top_k_scores": [[0.9]]})
    [{'labels': ['editors'], 'top_k': [{'label': 'editors', 'score': 0.9}]}]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from cdgt_keras.features import DENSE, KIND_KEYS, SPARSE_IDS, SPARSE_VALUES, TEXT

SPARSE_REQUEST_WIDTH = 512  # features per sparse row in a request to a model server (cdgt query --sparse-width)
KIND_INPUTS = KIND_KEYS  # each input kind's input names: the tf.Example keys of the feature contract
OUTPUTS = ("labels", "top_k_labels", "top_k_scores")


class RequestError(ValueError):
    """An input that the model's signature cannot take (said before anything is sent)."""


def input_kind(input_names: Iterable[str], signature: str = "predict") -> str:
    """The input kind of a signature from its input names; a clear error for any other signature."""
    names = set(input_names)
    for kind, wanted in KIND_INPUTS.items():
        if names == set(wanted):
            return kind
    raise RequestError(f"signature {signature!r} takes inputs {sorted(names)}; expected one of "
                       + ", ".join(str(list(v)) for v in KIND_INPUTS.values()) + " (a cdgt export)")


def parse_line(line: str, kind: str) -> Any:
    """One input from one line of a file (see the module docstring); NaN / Infinity are refused later."""
    if kind == "text":
        return line.rstrip("\n")
    try:
        return json.loads(line)
    except json.JSONDecodeError as err:
        raise RequestError(f"a {kind} input must be a JSON line, got {line[:60]!r}: {err}") from None


def _sparse_row(item: Any, index: int, width: int | None = None) -> tuple[list[int], list[float]]:
    if isinstance(item, dict) and set(item) == {SPARSE_IDS, SPARSE_VALUES}:
        ids, values = list(item[SPARSE_IDS]), list(item[SPARSE_VALUES])
    elif isinstance(item, dict):
        try:
            ids, values = [int(k) for k in item], [float(v) for v in item.values()]
        except (TypeError, ValueError):
            raise RequestError(f"input {index}: a sparse input maps integer ids to numbers, got {item}") from None
    else:
        raise RequestError(f"input {index}: a sparse input is {{\"feature_ids\": [...], \"feature_values\": [...]}} "
                           f"or {{\"id\": value, ...}}, got {type(item).__name__}")
    if len(ids) != len(values) or not all(isinstance(i, int) and i >= 0 for i in ids):
        raise RequestError(f"input {index}: feature_ids must be non-negative integers, one per feature value")
    outside = [i for i in ids if width is not None and i >= width]
    if outside:
        raise RequestError(f"input {index}: feature id {outside[0]} is out of range: this model takes ids in "
                           f"[0, {width})")
    _check_finite(values, index, ids)
    return ids, values


def _check_finite(values: Sequence[Any], index: int, ids: Sequence[int] | None = None) -> None:
    """RequestError naming the input and the feature when a value is NaN or infinite (JSON's NaN, Infinity)."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise RequestError(f"input {index}: feature values must be numbers") from None
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        feature = ids[bad[0]] if ids is not None else int(bad[0])
        raise RequestError(f"input {index}: feature {feature} is {array[bad[0]]}; features must be finite numbers "
                           "(the builder rejects NaN and infinity too)")


def encode_inputs(kind: str, items: Sequence[Any], width: int | None = None, max_batch: int | None = None,
                  sparse_width: int | None = None) -> dict[str, np.ndarray]:
    """The signature's input arrays for a batch of inputs; errors name the input and what was expected. Sparse rows
    are padded to `sparse_width` when given (a fixed request width), else to the batch's longest row."""
    if not items:
        raise RequestError("empty batch: give at least one input")
    if max_batch is not None and len(items) > max_batch:
        raise RequestError(f"batch of {len(items)} inputs exceeds the maximum batch size {max_batch}")
    if kind == "text":
        bad = [i for i, t in enumerate(items) if not isinstance(t, str)]
        if bad:
            raise RequestError(f"input {bad[0]}: this model takes text (a string), got {type(items[bad[0]]).__name__}")
        return {TEXT: np.asarray(items, dtype=object)}
    if kind == "dense":
        return {DENSE: _dense_rows(items, width)}
    return _sparse_arrays([_sparse_row(item, i, width) for i, item in enumerate(items)], sparse_width)


def _dense_rows(items: Sequence[Any], width: int | None) -> np.ndarray:
    try:
        rows = np.asarray(items, dtype=np.float32)
    except (TypeError, ValueError):
        raise RequestError("this model takes dense feature vectors: lists of numbers of one length") from None
    if rows.ndim != 2 or (width is not None and rows.shape[1] != width):
        got = rows.shape[1] if rows.ndim == 2 else "text" if rows.ndim == 1 else rows.shape
        raise RequestError(f"this model takes feature vectors of {width or 'one'} numbers, got {got}")
    for i, row in enumerate(rows):
        _check_finite(row, i)
    return rows


def _sparse_arrays(rows: list[tuple[list[int], list[float]]], sparse_width: int | None) -> dict[str, np.ndarray]:
    longest = max(len(ids) for ids, _ in rows)
    if sparse_width is not None and longest > sparse_width:
        index = next(i for i, (ids, _) in enumerate(rows) if len(ids) == longest)
        raise RequestError(f"input {index} has {longest} features, more than the fixed request width {sparse_width} "
                           "(every request to a batching model server has one width); raise --sparse-width for "
                           "every client of this server")
    size = sparse_width or max(1, longest)
    ids = np.full((len(rows), size), -1, np.int64)
    values = np.zeros((len(rows), size), np.float32)
    for i, (row_ids, row_values) in enumerate(rows):
        ids[i, :len(row_ids)], values[i, :len(row_values)] = row_ids, row_values
    return {SPARSE_IDS: ids, SPARSE_VALUES: values}


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def answers(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-input answers from the `predict` outputs: decided labels and the top k (label, score)."""
    missing = [name for name in OUTPUTS if name not in outputs]
    if missing:
        raise RequestError(f"the model's answer lacks {missing}: is it a cdgt export with a `predict` signature?")
    out = []
    for i, (labels, top, scores) in enumerate(zip(outputs["labels"], outputs["top_k_labels"],
                                                  outputs["top_k_scores"])):
        if not np.all(np.isfinite(np.asarray(scores, dtype=np.float64))):
            raise RequestError(f"the model returned non-finite scores for input {i} ({list(scores)[:3]}): it is "
                               "broken (trained to a non-finite loss?); retrain it")
        out.append({"labels": [_text(v) for v in labels if _text(v)],
                    "top_k": [{"label": _text(n), "score": round(float(s), 6)} for n, s in zip(top, scores)]})
    return out


def format_table(inputs: Sequence[Any], results: Sequence[dict[str, Any]], width: int = 40,
                 max_labels: int = 6) -> str:
    """A plain-text table: input, decided labels (the best `max_labels`; --json gives all), top k with scores."""
    lines = [f"{'input':{width}s}  {'labels':40s}  top k"]
    for item, result in zip(inputs, results):
        shown = item if isinstance(item, str) else json.dumps(item)
        shown = shown if len(shown) <= width else shown[:width - 1] + "…"
        shown_labels = result["labels"][:max_labels]
        more = len(result["labels"]) - len(shown_labels)
        labels = (", ".join(shown_labels) or "-") + (f" (+{more} more)" if more else "")
        top = "  ".join(f"{t['label']} {t['score']:.3f}" for t in result["top_k"])
        lines.append(f"{shown:{width}s}  {labels:40s}  {top}")
    return "\n".join(lines)


def format_json(inputs: Sequence[Any], results: Sequence[dict[str, Any]]) -> str:
    """One JSON document: [{"input": ..., "labels": [...], "top_k": [{"label", "score"}]}]; strict JSON (a NaN or
    infinity anywhere is an error, never written)."""
    try:
        return json.dumps([{"input": item, **result} for item, result in zip(inputs, results)], indent=1,
                          allow_nan=False)
    except ValueError as err:
        raise RequestError(f"cannot write the answer as JSON: {err} (a NaN or infinity)") from None


def format_jsonl(inputs: Sequence[Any], results: Sequence[dict[str, Any]]) -> str:
    """JSON lines: one {"input", "labels", "top_k"} object per input, strict JSON as format_json."""
    try:
        return "\n".join(json.dumps({"input": item, **result}, allow_nan=False)
                         for item, result in zip(inputs, results))
    except ValueError as err:
        raise RequestError(f"cannot write the answer as JSON: {err} (a NaN or infinity)") from None
