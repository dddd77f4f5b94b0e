"""`cdgt export`, `cdgt predict` (in-process) and `cdgt query` (a TF Serving model server over REST or gRPC).

Example:
    cdgt export runs/debtags --output runs/serving --name debtags
    cdgt predict runs/serving/debtags "a text editor for the console"
    cdgt query --rest http://localhost:8501 --model debtags "a text editor" --json
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from cdgt.serving.requests import SPARSE_REQUEST_WIDTH

EXPORT_HELP = """\
Write a TF Serving model, <OUTPUT>/<NAME>/<VERSION>/ (VERSION: --version, else one above the highest present),
with signatures serving_default and classify (serialized tf.Examples), predict (raw input: text, a dense feature
vector, or sparse id/value lists) and blessing_scores / blessing_labels (for TFMA). SOURCE is a `cdgt train` run
directory (model.keras + thresholds.json + data.json [+ tfidf.json]), a `cdgt run` directory (its newest pushed or
trained model), or a SavedModel directory (copied).

examples:
  cdgt export runs/debtags --output runs/serving --name debtags
  cdgt export runs/pipeline-yeast --output runs/serving --name yeast --version 3
"""

PREDICT_BATCH = 256  # inputs per call of the predict signature in `cdgt predict`
INPUT_HELP = ("inputs: text (text models), or JSON per input: [0.1, ...] (dense), "
              '{"feature_ids": [...], "feature_values": [...]} (sparse)')


def register(subparsers: argparse._SubParsersAction) -> None:
    export = subparsers.add_parser("export", help="write a TF Serving model (<base>/<name>/<version>/)",
                                   description=EXPORT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    export.add_argument("source", type=Path, help="a `cdgt train` run, a `cdgt run` directory or a SavedModel")
    export.add_argument("--output", type=Path, default=Path("runs/serving"), metavar="BASE",
                        help="the model base directory TF Serving watches (default runs/serving)")
    export.add_argument("--name", help="model name (default: the source directory's name)")
    export.add_argument("--version", type=int, help="integer version (default: one above the highest present)")
    export.add_argument("--top-k", type=int, default=5, help="labels in top_k_labels (default 5)")
    export.set_defaults(func=run_export)

    predict = subparsers.add_parser(
        "predict", help="labels for inputs from an exported model, in-process",
        description="Load MODEL_DIR (<base>/<name> or a version directory) once and call its predict signature on "
                    "every input: INPUT arguments and/or --input FILE (- for stdin), one input per line, in "
                    f"batches of {PREDICT_BATCH}. --jsonl prints one JSON object per input as each batch is done.",
        epilog="example: cut -f2 descriptions.tsv | cdgt predict runs/serving/debtags --input - --jsonl > tags.jsonl")
    predict.add_argument("model_dir", type=Path, help="<base>/<name> (highest version) or a version directory")
    _add_inputs(predict)
    predict.set_defaults(func=run_predict)

    query = subparsers.add_parser("query", help="labels from a TF Serving model server (REST or gRPC)",
                                  description="Send inputs to TF Serving's predict API and print the labels.")
    server = query.add_mutually_exclusive_group(required=True)
    server.add_argument("--rest", metavar="URL", help="REST endpoint, e.g. http://localhost:8501")
    server.add_argument("--grpc", metavar="HOST:PORT", help="gRPC endpoint, e.g. localhost:8500")
    query.add_argument("--model", required=True, help="the model name the server serves")
    query.add_argument("--version", type=int, help="a model version (default: the server's latest)")
    query.add_argument("--signature", default="predict",
                       help="signature name (default predict: raw text, dense or sparse features; serving_default "
                            "and classify take serialized tf.Examples, which is what a REST client that omits "
                            "signature_name gets)")
    query.add_argument("--sparse-width", type=int, default=SPARSE_REQUEST_WIDTH, metavar="N",
                       help="features per sparse request row: every request is padded to this one width so TF "
                            f"Serving's batching can merge concurrent requests (default {SPARSE_REQUEST_WIDTH}; "
                            "use the same value in every client of a server)")
    query.add_argument("--batch-size", type=int, default=64, help="inputs per request (default 64)")
    query.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")
    _add_inputs(query)
    query.set_defaults(func=run_query)


def _add_inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="*", metavar="INPUT", help=INPUT_HELP)
    parser.add_argument("--input", type=Path, metavar="FILE", help="one input per line (- for stdin)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    output.add_argument("--jsonl", action="store_true",
                        help='print JSON lines: one {"input", "labels", "top_k"} object per input')


def _raw_inputs(args: argparse.Namespace) -> list[str]:
    """INPUT arguments (an empty one is refused) and --input lines (blank ones skipped, and said so)."""
    empty = [i for i, text in enumerate(args.inputs, 1) if not text.strip()]
    if empty:
        raise ValueError(f"INPUT {empty[0]} is empty: give text, or a JSON feature vector, per INPUT")
    lines = list(args.inputs)
    if args.input:
        numbered = _file_lines(args.input)
        blank = [number for number, line in numbered if not line.strip()]
        if blank:
            shown = ", ".join(map(str, blank[:10])) + (", ..." if len(blank) > 10 else "")
            print(f"skipped {len(blank)} blank line{'s' if len(blank) > 1 else ''} of {args.input} (line "
                  f"{shown})", file=sys.stderr)
        lines += [line for _, line in numbered if line.strip()]
    if not lines:
        raise ValueError("no inputs: give INPUT arguments or --input FILE" + (f" ({args.input} holds only blank "
                                                                               "lines)" if args.input else ""))
    return lines


def _file_lines(path: Path) -> list[tuple[int, str]]:
    """(1-based number, line) of a UTF-8 file or stdin (-); a line that is not UTF-8 is an error naming it."""
    raw = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    out = []
    for number, line in enumerate(raw.splitlines(), 1):
        try:
            out.append((number, line.decode("utf-8-sig" if number == 1 else "utf-8")))
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}:{number}: not UTF-8 text (byte {line[err.start:err.start + 1]!r} cannot be "
                             "decoded); convert the file to UTF-8") from None
    return out


def _print(inputs: list[Any], results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    from cdgt.serving.requests import format_json, format_jsonl, format_table

    if args.jsonl:
        print(format_jsonl(inputs, results), flush=True)
    else:
        print(format_json(inputs, results) if args.json else format_table(inputs, results))


def run_export(args: argparse.Namespace) -> int:
    from cdgt.serving.layout import SAVED_MODEL, find_pipeline_model, new_version_dir

    source = args.source
    if not source.is_dir():
        raise FileNotFoundError(f"{source} is not a directory")
    target = new_version_dir(args.output, args.name or source.resolve().name, args.version)
    if (source / "model.keras").is_file():
        from cdgt.serving.from_run import export_run

        export_run(source, target, top_k=args.top_k)
    else:
        saved = source if (source / SAVED_MODEL).is_file() else find_pipeline_model(source)
        shutil.copytree(saved, target)
        print(f"copied {saved}")
    print(f"wrote {target}  (TF Serving: --model_base_path={target.parent.resolve()})")
    return 0


def run_predict(args: argparse.Namespace) -> int:
    from cdgt.serving.layout import resolve_saved_model

    path = resolve_saved_model(args.model_dir)
    import tensorflow as tf

    from cdgt.serving.requests import answers, encode_inputs, input_kind, parse_line
    from cdgt_keras.features import DENSE

    signature = tf.saved_model.load(str(path)).signatures.get("predict")
    if signature is None:
        raise ValueError(f"{path} has no `predict` signature: export it with `cdgt export`")
    specs = signature.structured_input_signature[1]
    kind = input_kind(specs)
    width = specs[DENSE].shape[1] if kind == "dense" else _input_width(path) if kind == "sparse" else None
    items = [parse_line(line, kind) for line in _raw_inputs(args)]
    results = []
    for start in range(0, len(items), PREDICT_BATCH):
        batch = items[start:start + PREDICT_BATCH]
        outputs = signature(**{k: tf.constant(v) for k, v in encode_inputs(kind, batch, width).items()})
        answered = answers({k: v.numpy() for k, v in outputs.items()})
        if args.jsonl:  # streamed: a long input file shows its answers batch by batch
            _print(batch, answered, args)
        results += answered
    if not args.jsonl:
        _print(items, results, args)
    return 0


def _input_width(path: Path) -> int | None:
    """The number of features an export takes, from its assets.extra/cdgt.json (None when not recorded)."""
    import json

    meta = path / "assets.extra" / "cdgt.json"
    if not meta.is_file():
        return None
    width = json.loads(meta.read_text(encoding="utf-8")).get("input_width")
    return int(width) if width else None


def run_query(args: argparse.Namespace) -> int:
    from cdgt.pipeline.cli.console import progress
    from cdgt.serving.client import GrpcClient, RestClient, ServingError, query
    from cdgt.serving.requests import RequestError, input_kind, parse_line

    client = RestClient(args.rest, args.model, args.version, args.timeout) if args.rest else \
        GrpcClient(args.grpc, args.model, args.version, args.timeout)
    try:
        kind = input_kind(client.signature(args.signature), args.signature)
        items = [parse_line(line, kind) for line in _raw_inputs(args)]
        version = f"version {args.version}" if args.version else "its latest version"
        progress("query", f"model {args.model!r} ({version}) at {args.rest or args.grpc}, signature "
                          f"{args.signature!r} ({kind} inputs), {len(items)} input(s)")
        results = query(client, items, args.signature, args.batch_size, args.sparse_width)
    except (ServingError, RequestError) as err:
        print(f"cdgt query: error: {err}", file=sys.stderr)
        return 1
    _print(items, results, args)
    return 0
