"""``rudder model upload|ls|show|rm`` and ``rudder export``: bring your own MXNet network,
take the trained one away in the same format (issue 12).

    rudder model upload net-symbol.json --params net-0000.params --input-shape 1,3,32,32
    rudder model ls ;  rudder model show 6f1c0d ;  rudder model rm 6f1c0d
    rudder export 3f0c1a --out ./trained       # model-symbol.json + model-0000.params
    rudder export 3f0c1a --step 400            # a kept checkpoint's, of any job
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table

from rudder.client import Client
from rudder.commands import UsageError, client_of, console, job_id, print_json, resolve

AddCommand = Callable[..., argparse.ArgumentParser]


def model_id(client: Client, ref: str) -> str:
    return resolve(ref, lambda: (m["id"] for m in client.models().get("data", [])), "model")


def _existing(path_text: str) -> Path:
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    return path


def cmd_model_upload(args: argparse.Namespace) -> int:
    symbol = _existing(args.symbol)
    params = _existing(args.params) if args.params else None
    with client_of(args) as client:
        model = client.upload_model(symbol, args.input_shape, params=params, name=args.name,
                                    input_name=args.input_name)
    if args.quiet:
        print(model["id"])
        return 0
    outputs = ", ".join("x".join(map(str, s)) for s in model.get("output_shapes", []))
    weights = "with its params" if model.get("params_sha256") else "no params (initializer)"
    print(f"uploaded {model['id']}: {model['parameter_count']:,} parameters, "
          f"{sum(model['ops'].values())} ops, output {outputs}, {weights}; "
          f"train it with model: {{model: {model['id']}}}")
    return 0


def cmd_model_ls(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        rows = client.models().get("data", [])
    if args.json:
        print_json(rows)
        return 0
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("ID", "NAME", "INPUT", "OUTPUT", "PARAMETERS", "PARAMS FILE"):
        table.add_column(name, no_wrap=name == "ID", overflow="ellipsis",
                         justify="right" if name == "PARAMETERS" else "left")
    for row in rows:
        table.add_row(row["id"], row.get("name", ""), "x".join(map(str, row["input_shape"])),
                      ", ".join("x".join(map(str, s)) for s in row["output_shapes"]),
                      f"{row['parameter_count']:,}", "yes" if row.get("params_sha256") else "no")
    console().print(table)
    return 0


def cmd_model_show(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        print_json(client.get_model(model_id(client, args.model)))
    return 0


def cmd_model_rm(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        full = model_id(client, args.model)
        client.delete_model(full)
    print(f"deleted model {full}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    out = Path(args.out)
    with client_of(args) as client:
        full = job_id(client, args.job)
        export = client.export(full, args.step)
        files: list[dict[str, Any]] = export.get("files", [])
        if export.get("step") is not None:
            print(f"the network at step {export['step']}:")
        for item in files:
            dest = client.download_url(item["url"], out / item["name"])
            print(f"{dest} ({item['size']} bytes)")
    print(f"load it with mx.gluon.SymbolBlock.imports('{out / 'model-symbol.json'}', "
          f"['data'], '{out / 'model-0000.params'}')")
    return 0


def add_model_commands(sub: argparse._SubParsersAction, command: AddCommand) -> None:
    """Register ``model ...`` and ``export`` (``command`` is the cli's parser factory)."""
    p = sub.add_parser("model", help="upload and manage your MXNet models",
                       description="upload and manage your MXNet models (symbol + params)")
    msub = p.add_subparsers(dest="model_command", required=True, metavar="COMMAND")
    p = command(msub, "upload", "upload an MXNet symbol (+ params); it is checked before "
                "anything is stored", "rudder model upload net-symbol.json --params "
                "net-0000.params --input-shape 1,3,32,32", cmd_model_upload)
    p.add_argument("symbol", metavar="SYMBOL_JSON", help="the -symbol.json file")
    p.add_argument("--params", metavar="PARAMS", help="the .params file: initial weights")
    p.add_argument("--input-shape", required=True, metavar="N,C,H,W",
                   help="the input's shape, batch first, e.g. 1,3,32,32")
    p.add_argument("--input-name", help="the symbol's input variable (default data)")
    p.add_argument("--name", help="a name to show (default: the file name)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the model id")
    p = command(msub, "ls", "list your models", "rudder model ls", cmd_model_ls)
    p.add_argument("--json", action="store_true", help="print the API's JSON answer")
    for name, what, func in (("show", "show one model as JSON (ops, shapes, parameters)",
                              cmd_model_show),
                             ("rm", "delete a model no queued, running or paused job uses",
                              cmd_model_rm)):
        p = command(msub, name, what, f"rudder model {name} 6f1c0d", func)
        p.add_argument("model", metavar="MODEL",
                       help="model id, or a unique prefix of it (6 or more characters)")
    p = command(sub, "export", "download a job's network at a kept checkpoint as MXNet "
                "files (model-symbol.json + model-0000.params), of a job in any state",
                "rudder export 3f0c1a --step 400 --out ./trained", cmd_export)
    p.add_argument("job", metavar="JOB",
                   help="job id, or a unique prefix of it (6 or more characters)")
    p.add_argument("--step", type=int, metavar="STEP",
                   help="a kept checkpoint's step (`rudder checkpoints JOB` lists them; "
                        "default: the succeeded job's final network, else the latest)")
    p.add_argument("--out", default=".", metavar="DIR", help="where the files go (default .)")
