"""Path templates: values a harness writes into a run's path, bound to columns (``--files``).

Harnesses such as OSWorld and SWE-bench write one directory per run, and the run's arms live in
the path rather than in the file: ``results/{action_space}/{observation}/{model}/{domain}/
{task_id}/result.txt``. A *template* is such a path, relative to each root given, whose segments
may hold ``{name}`` (binds the text there to the column ``name``, always text) and ``*`` (any
text inside one segment, not bound); everything else is literal. A name given twice must bind
the same text both times. Inside one segment, a ``{name}`` followed by more of the segment takes
the shortest text that lets the rest match (``{model}.{run_id}.json`` splits at the first dot).
A file the template names also matches compressed (``result.txt.gz``, ``.zst``, ``.bz2``), and
reads like the plain file.

Which files count (the listing is the source resolver's, :func:`recoverylab._resolve.tree_files`:
bookkeeping names skipped, links followed, loops refused):

=================  ==============================================================================
file               rows
=================  ==============================================================================
matches            read by its suffix (compressed ``.gz``/``.zst``/``.bz2`` alike): ``.json``
                   through the one JSON reader (:mod:`recoverylab._json`): an array of objects
                   is a row each, an object one row (nested fields as struct columns), a bare
                   number a row with ``value``; ``.jsonl``/``.ndjson`` a row per line; ``.csv``,
                   ``.tsv``, ``.parquet`` as in ``import table``; any other file is text holding
                   *one number*: a row with ``value`` (float)
keyed object       with ``unnest_keys=COL``, a JSON object keyed by ids is one row per key: the
                   key in ``COL``, the value's fields beside it (a value that is not an object is
                   ``value``); a key written twice is an error naming the file
bound values       added to every row of the file as text columns; a row that holds a field of
                   the same name must hold the same text, else an error names the file
context            with ``context="results_*.json:configs.{task}.metadata"``, each file's
                   context file (the one under its root whose path agrees with the file's bound
                   values; none or two is an error naming the file) is read and the value at the
                   key path (``{name}`` filled from the file's path) joins every row of the file
                   as the column ``context`` (``context.method`` in a map): lm-evaluation-
                   harness keeps a task's arms in ``results_{date}.json`` under
                   ``configs.{task}.metadata``, beside ``samples_{task}_{date}.jsonl``
does not match     listed (:attr:`Tree.unmatched`, the read report's ``unmatched``); never read,
                   never silently skipped
=================  ==============================================================================

Bad trees are one line naming the file: a bound segment holding an escaped ``/`` (``%2F``: a
value that is not one path segment as written), a number file holding anything but one number,
a keyed object that repeats an id, a keyed file that is not an object.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from recoverylab._diagnose import check_text_file
from recoverylab._errors import ParameterError, SourceError
from recoverylab._formats import COMPRESSIONS, read_decompressed, strip_compression
from recoverylab._json import decode, load, loads
from recoverylab._resolve import tree_files

__all__ = [
    "LOG",
    "Template",
    "Tree",
    "explode",
    "match_tree",
    "parse_context",
    "parse_template",
    "read_tree",
]

#: The column naming each row's file (dropped by the caller after use).
LOG = "__log"
_NAME = re.compile(r"\{([^{}]*)\}")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_TABLES = (".csv", ".tsv", ".parquet")
_LINES = (".jsonl", ".ndjson")
_ESCAPED_SLASH = re.compile(r"%2f", re.IGNORECASE)


@dataclass(frozen=True)
class Template:
    """A parsed path template: its text, the names it binds (in order) and its pattern."""

    text: str
    names: tuple[str, ...]
    pattern: re.Pattern[str]

    def match(self, relative: str) -> dict[str, str] | None:
        """Return the bound values of a ``/``-separated relative path, or None."""
        found = self.pattern.fullmatch(relative)
        if found is None:
            return None
        return {name: found.group(name) for name in self.names}


def parse_template(text: str) -> Template:
    """Parse a path template (see the module docstring).

    Raises
    ------
    ParameterError
        An empty or absolute template, an empty, ``.`` or ``..`` segment, a ``{name}`` that is
        not an identifier, an unbalanced brace, or two ``{name}`` with nothing between them.
    """
    if not isinstance(text, str) or not text.strip():
        raise ParameterError(
            "table: `files` is empty; give a path template such as `{model}/{task_id}/result.txt`."
        )
    if text.startswith("/"):
        raise ParameterError(
            f"table: `files` is `{text}`, an absolute path; a template is relative to each root."
        )
    names: list[str] = []
    parts: list[str] = []
    for segment in text.split("/"):
        if segment in ("", ".", ".."):
            raise ParameterError(
                f"table: `files` template `{text}` has an empty, `.` or `..` segment."
            )
        parts.append(_segment(segment, text, names))
    if not text.lower().endswith(tuple(COMPRESSIONS)):  # a compressed copy reads like the file
        parts[-1] += "(?:" + "|".join(re.escape(c) for c in COMPRESSIONS) + ")?"
    return Template(text, tuple(dict.fromkeys(names)), re.compile("/".join(parts)))


def _segment(segment: str, text: str, names: list[str]) -> str:
    """Return the pattern of one segment (``{name}`` groups, ``*`` wildcards, literals)."""
    pieces: list[str] = []
    last_was_name = False
    position = 0
    tokens = list(_NAME.finditer(segment))
    for index, token in enumerate(tokens):
        literal = segment[position : token.start()]
        if literal:
            pieces.append(_literal(literal, text))
        elif last_was_name:
            raise ParameterError(
                f"table: `files` template `{text}` has two names with nothing between them "
                f"in `{segment}`; they cannot be told apart."
            )
        name = token.group(1)
        if not _IDENTIFIER.match(name):
            raise ParameterError(
                f"table: `files` template `{text}` binds `{{{name}}}`; a name is a column "
                "name (letters, digits, _)."
            )
        ends = index == len(tokens) - 1 and token.end() == len(segment)
        if name in names:
            pieces.append(f"(?P={name})")
        else:
            pieces.append(f"(?P<{name}>[^/]+)" if ends else f"(?P<{name}>[^/]+?)")
        names.append(name)
        position = token.end()
        last_was_name = True
    rest = segment[position:]
    if rest:
        pieces.append(_literal(rest, text))
    return "".join(pieces)


def _literal(piece: str, text: str) -> str:
    if "{" in piece or "}" in piece:
        raise ParameterError(f"table: `files` template `{text}` has an unbalanced brace.")
    return ".*?".join(re.escape(p) for p in piece.split("*")).replace(".*?", "[^/]*?")


@dataclass(frozen=True)
class Match:
    """One file a template matched: its path, its root and the values bound from its path."""

    path: Path
    root: Path
    values: Mapping[str, str]


@dataclass(frozen=True)
class Tree:
    """The files under the roots: those each template matched, and those none matched."""

    matches: Mapping[str, tuple[Match, ...]]
    unmatched: tuple[Path, ...]


def match_tree(roots: Sequence[str | os.PathLike[str]], templates: Mapping[str, Template]) -> Tree:
    """Match every file under each root against the templates (the first that matches wins).

    Raises
    ------
    SourceError
        A root that is not a directory, a tree the resolver cannot list, or a bound segment
        holding an escaped ``/`` (one line naming the file).
    """
    found: dict[str, list[Match]] = {name: [] for name in templates}
    unmatched: list[Path] = []
    if not roots:
        raise SourceError("table: no logs given; give the directories the template is under.")
    for entry in roots:
        root = Path(entry)
        if not root.is_dir():
            what = "does not exist" if not root.exists() else "is a file"
            raise SourceError(
                f"`{root}` {what}; with a path template each root is a directory the "
                "template is relative to."
            )
        for path in tree_files(root):
            relative = path.relative_to(root).as_posix()
            for name, template in templates.items():
                values = template.match(relative)
                if values is not None:
                    _check_segments(path, values)
                    found[name].append(Match(path, root, values))
                    break
            else:
                unmatched.append(path)
    return Tree({k: tuple(v) for k, v in found.items()}, tuple(unmatched))


def _check_segments(path: Path, values: Mapping[str, str]) -> None:
    for name, value in values.items():
        if _ESCAPED_SLASH.search(value):
            raise SourceError(
                f"`{path}`: the segment `{value}` bound to `{{{name}}}` holds an escaped `/` "
                "(%2F); a bound value is one path segment as written. Hint: write the value "
                "without a slash (SWE-bench writes `/` in a model name as `__`)."
            )


def number_row(path: Path) -> dict[str, Any]:
    """Read a text file holding one number (``result.txt``) as a row ``{"value": float}``.

    Raises
    ------
    SourceError
        A file that holds anything but one number (named, with what it holds).
    """
    text = decode(read_decompressed(path), path).strip()
    if not _NUMBER.match(text):
        shown = text[:40] + ("..." if len(text) > 40 else "")
        held = f"`{shown}`" if text else "nothing"
        raise SourceError(
            f"`{path}` holds {held}, not one number; a number file holds one number (e.g. `1.0`)."
        )
    return {"value": float(text)}


def keyed_rows(path: Path, value: object, key: str) -> list[dict[str, Any]]:
    """Return a row per key of a JSON object keyed by ids (``unnest_keys``); repeats refused.

    Raises
    ------
    SourceError
        A document that is not an object, or an object that writes one key twice.
    """
    if not isinstance(value, dict):
        raise SourceError(
            f"`{path}` is not a JSON object keyed by `{key}`; with unnest_keys every matched "
            "JSON file is one object whose keys are ids."
        )
    _refuse_repeated_keys(path, key)
    rows = []
    for name, item in value.items():
        row = dict(item) if isinstance(item, dict) else {"value": item}
        if key in row and str(row[key]) != name:
            raise SourceError(
                f"`{path}`: key `{name}` holds `{key}` = `{row[key]}`; they must agree."
            )
        row[key] = name
        rows.append(row)
    return rows


def _refuse_repeated_keys(path: Path, key: str) -> None:
    """Refuse a top-level object that writes one key twice (JSON readers keep the last)."""
    pairs: list[list[tuple[str, Any]]] = []

    def hook(items: list[tuple[str, Any]]) -> dict[str, Any]:
        pairs.append(items)
        return dict(items)

    text = decode(read_decompressed(path), path)
    json.loads(text, object_pairs_hook=hook)  # already checked by the one reader: parses
    top = [name for name, _ in pairs[-1]] if pairs else []
    seen: set[str] = set()
    for name in top:
        if name in seen:
            raise SourceError(
                f"`{path}` writes the {key} `{name}` twice; a keyed object names each id once "
                "(a JSON reader would silently keep the last)."
            )
        seen.add(name)


def json_rows(path: Path, unnest_keys: str | None) -> list[dict[str, Any]]:
    """Return the rows of one matched JSON or JSON-lines file (see the module docstring)."""
    suffix = strip_compression(path).suffix.lower()
    if suffix in _LINES:
        text = decode(read_decompressed(path), path)
        values = [
            loads(line, path, number)
            for number, line in enumerate(text.splitlines(), 1)
            if line.strip()
        ]
    else:
        value = load(path)
        if unnest_keys is not None:
            return keyed_rows(path, value, unnest_keys)
        values = value if isinstance(value, list) else [value]
    rows = []
    for number, value in enumerate(values, 1):
        if isinstance(value, dict):
            rows.append(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            rows.append({"value": value})
        else:
            raise SourceError(f"`{path}` item {number} is not a JSON object (a row) or a number.")
    return rows


def rows_frame(path: Path, rows: list[dict[str, Any]], what: str = "rows") -> pl.LazyFrame:
    """Rows read from ``path`` as a frame, checked by the NDJSON rules of the resolver.

    One path for every JSON document an adapter turns into rows (a nested value where text
    belongs, NaN, integers beyond 64 bits: one line naming the file); ``what`` names the
    document in the error when polars still refuses the rows.
    """
    if not rows:
        return pl.DataFrame().lazy()
    data = "".join(json.dumps(row, allow_nan=True) + "\n" for row in rows).encode()
    check_text_file(path, "ndjson", data=data)
    try:
        return pl.read_ndjson(data, infer_schema_length=None).lazy()
    except pl.exceptions.PolarsError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SourceError(f"`{path}` cannot be read as {what} ({first}).") from None


def _is_number_file(path: Path) -> bool:
    """Whether a matched file is read as one number (any suffix but the table formats')."""
    return strip_compression(path).suffix.lower() not in (*_TABLES, ".json", *_LINES)


def read_match(
    match: Match,
    unnest_keys: str | None,
    scan_table: Callable[[Path], pl.LazyFrame],
) -> pl.LazyFrame:
    """Return one matched file's rows with its bound values and its path (``LOG``) as columns."""
    path = match.path
    suffix = strip_compression(path).suffix.lower()
    if _is_number_file(path):
        frame = pl.DataFrame([number_row(path)]).lazy()
    elif suffix in _TABLES:
        frame = scan_table(path)
    elif suffix in (".json", *_LINES):
        rows = json_rows(path, unnest_keys)
        for row in rows:
            for name, value in match.values.items():
                if name in row and row[name] is not None and str(row[name]) != value:
                    raise SourceError(
                        f"`{path}` holds `{name}` = `{row[name]}` where its path says "
                        f"`{value}`; they must agree."
                    )
                row.pop(name, None)
        frame = rows_frame(path, rows)
    schema = frame.collect_schema()
    for name in (n for n in match.values if n in schema.names()):
        # a table file's own column of a bound name must hold the path's value (as hive values)
        other = pl.col(name).cast(pl.String)
        wrong = frame.filter(other.is_not_null() & (other != match.values[name])).head(1)
        found = wrong.select(other).collect()
        if found.height:
            raise SourceError(
                f"`{path}` holds `{name}` = `{found.item()}` where its path says "
                f"`{match.values[name]}`; they must agree."
            )
        frame = frame.drop(name)
    bound = [pl.lit(v, pl.String).alias(n) for n, v in match.values.items()]
    return frame.with_columns(*bound, pl.lit(str(path)).alias(LOG))


def parse_context(text: str, files: Template) -> tuple[Template, list[str]]:
    """Parse ``FILE_TEMPLATE:KEY.PATH`` (``results_*.json:configs.{task}.metadata``).

    Raises
    ------
    ParameterError
        No ``:``, an empty key path, or a ``{name}`` the files template does not bind.
    """
    where, sep, keys = text.partition(":")
    if not sep or not keys.strip() or not where.strip():
        raise ParameterError(
            f"table: `context` is {text!r}; write FILE_TEMPLATE:KEY.PATH, e.g. "
            "`results_*.json:configs.{task}.metadata`."
        )
    template = parse_template(where)
    path = keys.split(".")
    names = [*template.names, *(n for part in path for n in _NAME.findall(part))]
    unbound = [n for n in names if n not in files.names]
    if unbound or any(not part for part in path):
        problem = f"names `{{{unbound[0]}}}`, which" if unbound else "has an empty key, which"
        raise ParameterError(
            f"table: `context` {text!r} {problem} the files template `{files.text}` does not "
            "bind; the context of a file is found by the values its path binds."
        )
    return template, path


def _context_rows(
    data: Sequence[Match], found: Sequence[Match], template: Template, path: list[str]
) -> list[dict[str, Any]]:
    """One row per data file: its path (``LOG``) and the value its context file holds."""
    loaded: dict[Path, Any] = {}
    rows = []
    for match in data:
        candidates = [
            c
            for c in found
            if c.root == match.root and all(c.values[n] == match.values[n] for n in c.values)
        ]
        if len(candidates) != 1:
            what = (
                f"both `{candidates[0].path}` and `{candidates[1].path}` match"
                if candidates
                else "no file under its root matches"
            )
            raise SourceError(
                f"`{match.path}`: {what} the context template `{template.text}`; each file "
                "needs exactly one context file."
            )
        context = candidates[0].path
        if context not in loaded:
            loaded[context] = load(context)
        value = loaded[context]
        for part in (p.format(**match.values) for p in path):
            if not isinstance(value, dict) or part not in value:
                keys = ".".join(p.format(**match.values) for p in path)
                raise SourceError(
                    f"`{context}` has no `{keys}` (no key `{part}`), the context of `{match.path}`."
                )
            value = value[part]
        rows.append({LOG: str(match.path), "context": value})
    return rows


def read_tree(
    roots: Sequence[str | os.PathLike[str]],
    files: str,
    *,
    unnest_keys: str | None = None,
    context: str | None = None,
    scan_table: Callable[[Path], pl.LazyFrame],
) -> tuple[pl.LazyFrame, tuple[Path, ...], tuple[Path, ...], tuple[Path, ...]]:
    """Read the files ``files`` matches under ``roots`` into one frame.

    Returns
    -------
    tuple
        The rows (every file's columns, the bound columns, ``LOG``, and ``context``), the files
        whose rows they are, the files under the roots no template matched, and the context
        files read.

    Raises
    ------
    SourceError
        No file matches the template, or a bad tree (see the module docstring).
    """
    template = parse_template(files)
    if unnest_keys is not None and not _IDENTIFIER.match(unnest_keys):
        raise ParameterError(f"table: `unnest_keys` is {unnest_keys!r}; give a column name.")
    templates = {"files": template}
    if context is not None:
        templates["context"], key_path = parse_context(context, template)
    tree = match_tree(roots, templates)
    matches = tree.matches["files"]
    if not matches:
        shown = ", ".join(f"`{p}`" for p in tree.unmatched[:3]) or "no file"
        raise SourceError(
            f"no file under {', '.join(f'`{r}`' for r in roots)} matches the template "
            f"`{files}` (the tree holds {shown}{' ...' if len(tree.unmatched) > 3 else ''})."
        )
    numbers = [m for m in matches if _is_number_file(m.path)]
    frames = [
        read_match(m, unnest_keys, scan_table) for m in matches if not _is_number_file(m.path)
    ]
    if numbers:  # one frame for every number file: thousands of result.txt read in one go
        rows = [{**number_row(m.path), **m.values, LOG: str(m.path)} for m in numbers]
        schema = {"value": pl.Float64, **dict.fromkeys(template.names, pl.String), LOG: pl.String}
        frames.append(pl.DataFrame(rows, schema=schema).lazy())
    try:
        frame = pl.concat(frames, how="diagonal_relaxed")
    except pl.exceptions.PolarsError as exc:
        first = str(exc).strip().splitlines()[0]
        raise SourceError(f"table: the matched files do not share a schema ({first}).") from None
    read = tuple(m.path for m in matches)
    contexts: tuple[Path, ...] = ()
    if context is not None:
        if "context" in frame.collect_schema().names():
            raise SourceError("table: the logs have a column `context`; the context cannot join.")
        rows = _context_rows(matches, tree.matches["context"], templates["context"], key_path)
        data = "".join(json.dumps(r, allow_nan=True) + "\n" for r in rows).encode()
        joined = pl.read_ndjson(data, infer_schema_length=None).lazy()
        frame = frame.join(joined, on=LOG, how="left")
        contexts = tuple(dict.fromkeys(m.path for m in tree.matches["context"]))
    return frame, read, tree.unmatched, contexts


def explode(frame: pl.LazyFrame, column: str, position: str | None) -> pl.LazyFrame:
    """Return a row per element of the list ``column``, its index (from 0) in ``position``.

    An empty list gives one row with nulls in both (never a silent drop: a sample without a
    response is visible; ``exclude={"no_response": "epoch IS NULL"}`` sends it to ``excluded``
    by reason). lm-evaluation-harness with ``repeats: 3``
    writes each sample's responses as one list (``resps``): ``explode(frame, "resps",
    "epoch")`` gives a row per response.

    Raises
    ------
    SchemaError
        ``column`` is not a column of the logs, or not a list; ``position`` names a column the
        logs already have.
    """
    from recoverylab._errors import SchemaError

    schema = frame.collect_schema()
    if column not in schema.names():
        raise SchemaError(f"table: `explode` names `{column}`, which is not a column of the logs.")
    if not isinstance(schema[column], pl.List):
        raise SchemaError(
            f"table: `explode` names `{column}`, which holds {schema[column]}, not a list."
        )
    if position is None:
        return frame.explode(column, empty_as_null=True)
    if position in schema.names():
        raise SchemaError(f"table: `position` names `{position}`, already a column of the logs.")
    index = pl.int_ranges(0, pl.col(column).list.len(), dtype=pl.Int64).alias(position)
    return frame.with_columns(index).explode(column, position, empty_as_null=True)
