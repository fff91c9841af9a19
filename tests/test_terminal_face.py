"""The terminal face (issue 38, point 4): every printed table shows what was computed.

Every command of the README's "Command line" block (and gate, monitor, plan) runs on the shipped
samples at ``COLUMNS=80`` and ``120`` (and ``--wide``); the printed tables are parsed back and
held against the command's own JSON output: each table shows its declared estimates with their
intervals, no line is longer than the width, a line names the interval method(s) and level, a
column's numbers are in one unit (pp: the fraction x 100), ``paired`` shows rescue and harm. A
generator test holds the fitter itself: the main columns survive every width, secondary columns
go first. The README's glossary is :data:`recoverylab._glossary.GLOSSARY`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recoverylab._display import FACES, Face, interval_of, is_rate, label, shown_columns
from recoverylab._glossary import GLOSSARY
from recoverylab.cli._table import render
from tests.conftest import REPO, SAMPLES

S = SAMPLES
GOAL = S / "goal" / "diagnostic"
ROUTER = S / "router"
MAIN = S / "paired" / "main_forks.parquet"
POLICY = S / "paired" / "gate_policy.toml"
FEW = ("--resamples", 200)

#: Printing commands: the README's "Command line" block, gate, monitor and plan (small resamples).
COMMANDS: dict[str, list[object]] = {
    "validate": ["validate", "forks", MAIN],
    "paired": ["paired", MAIN],
    "paired break-even": ["paired", MAIN, "--break-even"],
    "contrast": ["contrast", MAIN, "--a", "stale2", "--b", "clean", *FEW],
    "policy": [
        "policy", "--decisions", S / "paired" / "policy_decisions.parquet",
        "--forks", S / "paired" / "policy_forks.parquet",
    ],
    "router fit": [
        "router", "fit", "--decision-points", ROUTER / "train" / "decision_points.parquet",
        "--forks", ROUTER / "train" / "forks.parquet",
        "--features", "repetition,noops,obs_novelty,consistency", "--out", "RULE",
    ],
    "router evaluate": [
        "router", "evaluate", "--rule", "RULE",
        "--decision-points", ROUTER / "test" / "decision_points.parquet",
        "--forks", ROUTER / "test" / "forks.parquet", *FEW,
    ],
    "goal": [
        "goal", "--cases", GOAL / "cases.csv", "--resources", GOAL / "resources.csv",
        "--episodes", GOAL / "episodes.csv", "--steps", GOAL / "steps.csv",
        "--citations", GOAL / "citations.csv", *FEW,
    ],
    "takeover": [
        "takeover", "--states", S / "takeover" / "states.parquet",
        "--attempts", S / "takeover" / "attempts.parquet",
        "--failures", S / "takeover" / "failures.parquet",
        "--mutations", S / "takeover" / "mutations.parquet", "--compare", "agent_a,agent_b",
        *FEW,
    ],
    "gate": ["gate", POLICY, MAIN],
    "monitor": ["monitor", MAIN],
    "plan": ["plan", "--p10", "0.15", "--p01", "0.05", "--tasks", "120"],
    "plan pilot": ["plan", MAIN, "--by", "condition,method", "--tasks", "100", *FEW],
    "paired judged": [
        "paired", S / "paired" / "judged_forks.parquet", "--judge", "judge", "--gold", "gold",
    ],
}  # fmt: skip

#: The face each printed table of a command has, by table name (one name: a single table).
TABLE_FACES: dict[str, dict[str, str]] = {
    "paired": {"": "paired.summary"},
    "paired break-even": {"": "paired.summary"},
    "contrast": {"": "paired.contrast"},
    "policy": {"": "paired.policy"},
    "router evaluate": {n: f"router.{n}" for n in ("evaluation", "uplift", "toc")},
    "goal": {"": "goal.summary"},
    "takeover": {
        n: f"takeover.{n}"
        for n in (
            "eligibility", "summary", "funnel", "reliability", "awareness", "comparison",
            "latency", "verifier_gate", "leakage",
        )
    },
    "monitor": {"": "paired.monitor"},
    "plan": {"": "paired.plan"},
    "plan pilot": {"": "paired.plan"},
    "paired judged": {"": "paired.judged"},
}  # fmt: skip

RULE_LINE = re.compile(r"-+(  -+)*")
LEVEL_LINE = re.compile(r"\d+(\.\d+)?% (one-sided \(\w+\) )?intervals: ")


@dataclass
class Table:
    """One printed block: its column headers (words joined) and its rows of cell texts."""

    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)


def parse_tables(text: str) -> list[Table]:
    """Parse every table block of a printed text (header lines above a dashed rule, rows below).

    A header or row line lies within the rule's column spans; a count line (``8 rows; ...``) or
    a blank line ends the rows.
    """
    lines = text.splitlines()
    tables = []
    for i, line in enumerate(lines):
        if not RULE_LINE.fullmatch(line):
            continue
        spans = [(m.start(), m.end()) for m in re.finditer(r"-+", line)]

        def cells(row: str, spans: list[tuple[int, int]] = spans) -> list[str] | None:
            if any(not any(a <= p < b for a, b in spans) for p, ch in enumerate(row) if ch != " "):
                return None
            return [row[a:b].strip() for a, b in spans]

        heads: list[list[str]] = [[] for _ in spans]
        j = i - 1
        while j >= 0 and lines[j].strip() and (found := cells(lines[j])) is not None:
            for k, words in enumerate(found):
                if words:
                    heads[k].insert(0, words)
            j -= 1
        table = Table([" ".join(h) for h in heads])
        for row in lines[i + 1 :]:
            if not row.strip() or re.match(r"\d[\d,]* rows?\b", row):
                break
            found = cells(row)
            if found is None:
                break
            table.rows.append(found)
        tables.append(table)
    return tables


def sections(text: str) -> dict[str, str]:
    """Split ``render_many`` output into its ``== name`` sections (one unnamed otherwise)."""
    parts = re.split(r"^== (\w+)\n", text, flags=re.M)
    if len(parts) == 1:
        return {"": text}
    return dict(zip(parts[1::2], parts[2::2], strict=True))


NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")


def numbers(cell: str) -> list[float | None]:
    """The numbers of a cell: ``+11.3 [2.2, 20.5]`` -> three; ``—`` -> [None]; ``< 0.001``."""
    if cell in ("—", ""):
        return [None]
    if cell == "< 0.001":
        return [0.0]
    return [float(x) for x in NUMBER.findall(cell)]


def column_of(header: str, frame: pl.DataFrame, face: Face) -> tuple[str, bool] | None:
    """The frame column a printed header shows, and whether it is in pp (None: not a number)."""
    base = re.sub(r" \[(CI|bounds)\]$", "", header)
    pp = base.endswith(" pp")
    base = base.removesuffix(" pp")
    for name in frame.columns:
        if base in (name.replace("_", " "), label(name)):
            return name, pp
    return None


def close(shown: float | None, value: object, scale: float) -> bool:
    """Whether a printed number is ``value`` (x ``scale``) rounded as the face rounds it."""
    if shown is None:
        return value is None or (isinstance(value, float) and math.isnan(value))
    if value is None:
        return False
    return abs(shown - float(value) * scale) <= 0.0051 * max(1.0, abs(float(value) * scale)) + 0.051


def check_units(table: Table, frame: pl.DataFrame, face: Face) -> int:
    """Every number column of ``table`` equals the frame's column in the header's unit."""
    checked = 0
    rows = frame.head(len(table.rows)).to_dicts()
    for k, header in enumerate(table.headers):
        found = column_of(header, frame, face)
        if found is None or header in ("p", "p adj."):
            continue
        name, pp = found
        if not frame.schema[name].is_numeric():
            continue
        bounds = interval_of(frame.columns, name)
        scale = 100.0 if pp else 1.0
        in_pp = is_rate(name) or name in face.rates or (bool(bounds) and is_rate(bounds[0]))
        assert pp == in_pp, header
        for row, cells in zip(rows, table.rows, strict=True):
            shown = numbers(cells[k])
            expected = [row[name], *((row[b] for b in bounds) if bounds and len(shown) > 1 else ())]
            assert len(shown) == len(expected), (header, cells[k])
            for number, value in zip(shown, expected, strict=True):
                assert close(number, value, scale), (header, cells[k], value)
                # a number not in pp keeps its magnitude: a fraction printed raw to one
                # decimal (a standard error of 0.016 as "0.0") hides what was computed
                assert pp or value is None or abs(value) < 0.005 or number != 0, (header, value)
            checked += 1
    return checked


def estimate_headers(frame: pl.DataFrame, face: Face) -> set[str]:
    """The headers a table of ``frame`` must print: each declared estimate, with its interval."""
    shown = {c.header for c in shown_columns(frame, wide=False, face=face) if not c.key}
    wanted = set()
    for name in face.estimates:
        if name not in frame.columns:
            continue
        matches = {h for h in shown if re.sub(r" (pp )?\[\w+\]$| pp$", "", h) == label(name)}
        matches |= {h for h in shown if h.startswith(name.replace("_", " "))}
        assert len(matches) == 1, (name, shown)
        header = matches.pop()
        assert (interval_of(frame.columns, name) is not None) == header.endswith("]")
        wanted.add(header)
    return wanted


@pytest.fixture(scope="module")
def rule(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from recoverylab.cli import main

    path = tmp_path_factory.mktemp("face") / "rule.json"
    args = [str(path) if a == "RULE" else str(a) for a in COMMANDS["router fit"]]
    assert main(["--quiet", *args]) == 0
    return path


def arguments(name: str, rule: Path, tmp: Path) -> list[object]:
    args = COMMANDS[name]
    if name == "router fit":
        return [tmp / "rule.json" if a == "RULE" else a for a in args]
    return [rule if a == "RULE" else a for a in args]


_JSON: dict[str, dict[str, pl.DataFrame]] = {}


def frames_of(name: str, cli: Callable, args: list[object]) -> dict[str, pl.DataFrame]:
    """The command's result frames, from its own ``--format json`` output (cached)."""
    if name not in _JSON:
        data = json.loads(cli("--quiet", *args, "--format", "json").out)
        if name == "gate":
            data = {"": data["claims"]}
        elif isinstance(data, list):
            data = {"": data}
        _JSON[name] = {k: pl.DataFrame(v, infer_schema_length=None) for k, v in data.items()}
        if "summary" in _JSON[name] and name == "takeover":
            _JSON[name]["funnel"] = _JSON[name]["summary"]
    return _JSON[name]


@pytest.mark.parametrize(("width", "wide"), [(80, False), (120, False), (80, True)])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_table_shows_its_estimate_and_fits(
    cli: Callable,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    rule: Path,
    name: str,
    width: int,
    wide: bool,
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    args = arguments(name, rule, tmp_path)
    if wide and name == "validate":
        pytest.skip("validate prints a row count, no result table (no --wide)")
    result = cli("--quiet", *args, *(["--wide"] if wide else []))
    assert result.code in (0, 3), result.err
    lines = result.out.splitlines()
    assert lines, name
    assert max(len(line) for line in lines) <= width, name
    if name in ("validate", "router fit"):
        return
    if name == "gate":
        check_gate(result.out, frames_of(name, cli, args)[""])
        return
    frames = frames_of(name, cli, args)
    checked = 0
    for section, text in sections(result.out).items():
        face = FACES[TABLE_FACES[name][section]]
        frame = frames[section]
        if frame.height == 0:
            assert "(no rows)" in text
            continue
        tables = parse_tables(text)
        assert tables, (name, section)
        printed = {h for t in tables for h in t.headers}
        assert estimate_headers(frame, face) <= printed, (name, section, printed)
        if any(c == "ci_low" or c.endswith("_ci_low") for c in frame.columns):
            (level,) = [line for line in text.splitlines() if LEVEL_LINE.match(line)]
            methods = frame["ci_method"].drop_nulls().unique() if "ci_method" in frame else []
            assert all(m in text for m in methods), (level, methods)
            assert level.startswith("95% ")
        if "test" in frame.columns and "p_value" in frame.columns:  # p's procedure, by name
            tests = set(frame["test"].drop_nulls().to_list()) - {"none"}
            assert all(f"{t}" in " ".join(text.split()) for t in tests), tests
        for table in tables:  # keys and estimate in one table: every block repeats the keys
            checked += check_units(table, frame, face)
    assert checked, name


def check_gate(text: str, claims: pl.DataFrame) -> None:
    """Gate: a line says the level of its bounds and what "more tasks" assumes; each claim's
    table shows its estimate with its bounds, in pp."""
    words = " ".join(text.split())
    assert "Holm-adjusted one-sided level" in words
    assert "not the two-sided 95% intervals `recoverylab paired` prints for the same" in words
    assert "more tasks: tasks beyond those seen that a fixed-n study" in words
    face = FACES["gate.claims"]
    tables = parse_tables(text)
    names = claims["claim"].unique(maintain_order=True).to_list()
    assert len(tables) >= len(names)
    for claim in names:
        rows = claims.filter(pl.col("claim") == claim)
        start = text.index(claim)
        own = parse_tables(text[start:])[0]
        assert "estimate pp [bounds]" in own.headers
        assert check_units(own, rows, face) >= 2


def test_gate_power_words_match_the_gate() -> None:
    from recoverylab.cli._gate import GATE_POWER
    from recoverylab.paired import _gate_stats

    assert GATE_POWER == _gate_stats.POWER  # the "80% power" the gate's lines state


def test_paired_shows_rescue_and_harm(cli: Callable, monkeypatch: pytest.MonkeyPatch) -> None:
    for width in (80, 120):
        monkeypatch.setenv("COLUMNS", str(width))
        out = cli("--quiet", *COMMANDS["paired"]).out
        frame = pl.DataFrame(
            json.loads(cli("--quiet", *COMMANDS["paired"], "--format", "json").out)
        )
        (table,) = parse_tables(out)
        for column in ("rescue", "harm"):
            k = table.headers.index(column)
            assert [int(r[k]) for r in table.rows] == frame[column].to_list()


def test_router_uplift_and_toc_show_estimates_in_one_unit(
    cli: Callable, monkeypatch: pytest.MonkeyPatch, rule: Path, tmp_path: Path
) -> None:
    """The issue's case: uplift printed no estimate; --wide printed 0.1 beside bounds in pp."""
    monkeypatch.setenv("COLUMNS", "80")
    args = arguments("router evaluate", rule, tmp_path)
    for extra in ([], ["--wide"]):
        parts = sections(cli("--quiet", *args, *extra).out)
        uplift = {h for t in parse_tables(parts["uplift"]) for h in t.headers}
        toc = {h for t in parse_tables(parts["toc"]) for h in t.headers}
        assert "estimate pp [CI]" in uplift
        assert {"q pp", "toc pp [CI]", "qini pp [CI]"} <= toc


# --- the fitter itself -----------------------------------------------------------------------

_NAMES = st.sampled_from(["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "zeta"])


@st.composite
def faced_frames(draw: st.DrawFn) -> tuple[pl.DataFrame, Face]:
    """A result frame with keys, counts, estimates (some with intervals), p and extras."""
    rows = draw(st.integers(1, 4))
    keys = draw(st.lists(_NAMES, min_size=0, max_size=3, unique=True))
    key_text = st.text("abcdefghij_", min_size=1, max_size=draw(st.integers(1, 30)))
    data: dict[str, list[object]] = {
        f"{k}_key": [draw(key_text) for _ in range(rows)] for k in keys
    }
    data["n"] = [draw(st.integers(0, 10**6)) for _ in range(rows)]
    estimates = draw(st.lists(_NAMES, min_size=1, max_size=3, unique=True))
    fraction = st.floats(-1, 1, allow_nan=False)
    for name in estimates:
        column = f"{name}_rate"
        data[column] = [draw(fraction) for _ in range(rows)]
        if draw(st.booleans()):
            data[f"{column}_ci_low"] = [v - 0.1 for v in data[column]]  # type: ignore[operator]
            data[f"{column}_ci_high"] = [v + 0.1 for v in data[column]]  # type: ignore[operator]
    if draw(st.booleans()):
        data["p_value"] = [draw(st.floats(0, 1)) for _ in range(rows)]
    secondary = draw(st.lists(_NAMES, max_size=6, unique=True))
    for name in secondary:
        data[f"{name}_extra_count"] = [draw(st.integers(0, 10**9)) for _ in range(rows)]
    face = Face(estimates=tuple(f"{e}_rate" for e in estimates), counts=("n",))
    return pl.DataFrame(data), face


@settings(max_examples=150, deadline=None)
@given(faced_frames(), st.integers(16, 200), st.booleans())
def test_fitter_keeps_main_columns_and_drops_secondary_first(
    made: tuple[pl.DataFrame, Face], width: int, wide: bool
) -> None:
    frame, face = made
    text = render(frame, width=width, face=face, wide=wide, line="")
    assert max(len(line) for line in text.splitlines()) <= width
    shown = shown_columns(frame, wide=True, face=face)
    main = [c.header for c in shown if c.main and not c.key]
    keys = [c.header for c in shown if c.key]
    secondary = [c.header for c in shown if not c.main]
    tables = parse_tables(text)
    if tables:  # as tables: every block starts with the keys; the estimates print whole
        printed = [h for t in tables for h in t.headers]
        for table in tables:
            assert table.headers[: len(keys)] == keys
        assert set(main) <= set(printed)
        first = [h for h in main if h.split(" ")[0] in {e.split("_")[0] for e in face.estimates}]
        assert first[0] in tables[0].headers  # the first estimate sits with the keys
        if wide:
            assert set(secondary) <= set(printed)
        dropped = set(secondary) - set(printed)
        if dropped:
            assert "secondary column" in " ".join(text.split())
    else:  # as fields: every key and main column of every row, by name
        for header in keys + main:
            assert " ".join(text.split()).count(f"{header}:") >= frame.height


def test_fitter_prints_fields_when_keys_and_estimate_cannot_share_a_line() -> None:
    frame = pl.DataFrame(
        {
            "claim": ["refresh rescues stale runs by at least two points"],
            "cell": ["stale2 · delay 1 · refresh"],
            "n": [106],
            "effect": [0.113],
            "ci_low": [0.008],
            "ci_high": [0.191],
        }
    )
    text = render(frame, width=40, face=Face(estimates=("effect",)), line="")
    assert max(map(len, text.splitlines())) <= 40
    assert "effect pp [CI]: +11.3 [0.8, 19.1]" in text
    assert "claim: refresh rescues stale runs by at" in text


def test_method_line_names_each_method_and_the_level() -> None:
    from recoverylab.cli._table import method_line

    frame = pl.DataFrame(
        {
            "effect": [0.1, 0.2, 0.3],
            "ci_low": [0.0, 0.1, 0.2],
            "ci_high": [0.2, 0.3, 0.4],
            "p_value": [0.5, 0.01, 0.2],
            "ci_method": ["fay-lumbard", "fay-lumbard", "cluster-melded"],
            "test": ["sign-flip"] * 3,
        }
    )
    assert method_line(frame, 0.9) == (
        "90% intervals: fay-lumbard (2 rows), cluster-melded (1 row); p: sign-flip"
    )
    assert method_line(frame.drop("ci_method", "test"), 0.95, "greater") == (
        "95% one-sided (greater) intervals: method not recorded in the result; "
        "p: test not recorded in the result"
    )
    apart = frame.with_columns(ci_inverts_test=pl.Series([True, False, False]))
    assert method_line(apart, 0.9).endswith("; the interval does not invert p's test in 2 rows")
    rates = pl.DataFrame(
        {"ts": [0.5], "ci_low": [0.1], "ci_high": [0.9], "ci_method": ["korn-graubard"]}
    ).with_columns(test=pl.lit("exact-binomial"))
    assert method_line(rates, 0.95) == (
        "95% intervals: korn-graubard; test inverted: exact-binomial"
    )


def test_readme_glossary_is_the_glossary() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Glossary\n", 1)[1].split("\n## ", 1)[0]
    entries = dict(re.findall(r"^- \*\*(.+?)\*\*: (.+)$", section, re.M))
    assert entries == dict(GLOSSARY)
    for term, meaning in GLOSSARY.items():
        assert meaning.endswith("."), term
        assert meaning.count(". ") == 0, term  # one sentence
