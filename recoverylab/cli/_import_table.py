"""``recoverylab import table LOGS... --map COL=EXPR ...``: any run log, columns as polars SQL."""

from __future__ import annotations

import argparse
import re

from recoverylab._errors import ParameterError
from recoverylab.adapters import Imported

HELP = "any JSON/JSONL/CSV/parquet run log, columns given as polars SQL expressions"
DESCRIPTION = (
    "Read run logs of a custom harness (JSON arrays or lines, CSV, parquet: files, directories "
    "or globs) into forks, takeover or trials tables. Say where each column comes from with "
    "--map COL=EXPR, a polars SQL expression over the log's columns (nested JSON fields as "
    'struct.field), e.g. --map success="reward >= 1" --map delay="CAST(meta.delay AS BIGINT)"; '
    "columns whose names already match need no map. No Python is evaluated. Rows matching "
    "--exclude REASON=EXPR go to excluded.parquet with that reason. Every map is checked against "
    "the target table before anything is written."
)
TARGETS = ("forks", "takeover", "trials")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--map``, ``--exclude`` and ``--key``."""
    add_map_arguments(parser)
    parser.add_argument(
        "--scope",
        metavar="EXPR",
        help="what scopes the task ids (a log column or polars SQL expression, e.g. dataset): "
        "task_id becomes <scope>/<id>, the raw id kept in raw_task_id; same as "
        "--map task_scope=EXPR",
    )
    parser.add_argument(
        "--files",
        metavar="TEMPLATE",
        help="a path template under each LOGS directory, e.g. "
        "'{model}/{domain}/{task_id}/result.txt': each {name} segment becomes a text column; a "
        "file holding one number is a row with `value`; files that do not match are listed in "
        "the read report",
    )
    parser.add_argument(
        "--unnest-keys",
        metavar="COL",
        help="with --files: each JSON file is an object keyed by ids, one row per key (in COL)",
    )
    parser.add_argument(
        "--context",
        metavar="TEMPLATE:KEY.PATH",
        help="with --files: each file's context file and the value there, joined to its rows as "
        "the column `context`, e.g. '{model}/results_*.json:configs.{task}.metadata' "
        "(lm-evaluation-harness's arms); then --map method=context.arm",
    )
    parser.add_argument(
        "--explode", metavar="COL", help="a list column: one row per element (e.g. resps)"
    )
    parser.add_argument(
        "--position", metavar="COL", help="with --explode: the element's index, from 0 (e.g. epoch)"
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="REASON=EXPR",
        help="send rows where the boolean EXPR is true to excluded.parquet as REASON "
        "(repeatable; the first match wins)",
    )


def add_map_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--map COL=EXPR`` (repeatable) and ``--key COLS`` (shared with ``import tau2``)."""
    parser.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="COL=EXPR",
        help="where column COL comes from: a polars SQL expression (repeatable)",
    )
    parser.add_argument(
        "--key",
        default="",
        metavar="COLS",
        help="extra key columns, comma-separated (e.g. model,seed): part of the duplicate check",
    )


def pairs(values: list[str], option: str, names_only: bool = True) -> dict[str, str]:
    """Parse repeated ``NAME=EXPR`` options into a dict (the first ``=`` splits)."""
    out: dict[str, str] = {}
    for value in values:
        name, sep, expr = value.partition("=")
        name = name.strip()
        if not sep or not name or (names_only and not _NAME.match(name)):
            raise ParameterError(
                f"`{option} {value}` is not NAME=EXPR (NAME a column name, EXPR a polars SQL "
                "expression)."
            )
        if name in out:
            raise ParameterError(f"`{option}` gives `{name}` twice.")
        out[name] = expr
    return out


def keys(text: str) -> tuple[str, ...]:
    """Return the ``--key`` columns."""
    return tuple(k.strip() for k in text.split(",") if k.strip())


def convert(args: argparse.Namespace) -> Imported:
    """Read the logs with :func:`recoverylab.adapters.table.read`."""
    from recoverylab.adapters import table

    mapping = pairs(args.map, "--map")
    if args.scope is not None:
        if "task_scope" in mapping:
            raise ParameterError("import table: give the scope once, with --scope or --map.")
        mapping["task_scope"] = args.scope
    logs = table.Logs(
        args.logs,
        files=args.files,
        unnest_keys=args.unnest_keys,
        explode=args.explode,
        position=args.position,
        context=args.context,
    )
    return table.read(
        logs,
        to=args.to,
        mapping=mapping,
        exclude=pairs(args.exclude, "--exclude", names_only=False),
        key=keys(args.key),
    )
