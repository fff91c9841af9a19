"""Ship or hold: a release gate over a family of claims on paired forks (ARCHITECTURE §9).

:func:`gate` judges every claim of a policy (see :mod:`._gate_policy`) on every cell it
matches. Each (claim, cell) is a pair of one-sided tests against the claim's threshold (see
:mod:`._gate_stats`): PASS when the pass test rejects, FAIL when the fail test rejects,
INCONCLUSIVE otherwise. The pass p-values of all rows are adjusted as one family (Holm by
default, or Benjamini–Hochberg, or none), and so are the fail p-values; a row decides at its
claim's α = 1 - confidence.

The bounds shown agree with the adjusted p-values: each is computed at the row's *adjusted*
level ``α·p / p_adjusted`` (α/K for the smallest Holm p-value of K, α for an unadjusted
family), at which the raw test rejects exactly when the adjusted p-value is below α. A PASS row
therefore has its bound beyond the threshold, an INCONCLUSIVE row has its interval straddle
it, and a FAIL row has it wholly on the wrong side.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from recoverylab import stats
from recoverylab._display import p_str
from recoverylab.paired import _gate_stats
from recoverylab.paired._gate_data import ClaimCells, claim_cells
from recoverylab.paired._gate_policy import Policy, read_policy
from recoverylab.paired._gate_stats import CellData

__all__ = ["VERDICTS", "GateResult", "gate"]

#: Verdicts, with the exit status of a gate whose worst verdict it is.
VERDICTS = {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 3}

#: Columns of :attr:`GateResult.claims`.
CLAIM_COLUMNS = (
    "claim",
    "kind",
    "cell",
    "condition",
    "delay",
    "method",
    "n",
    "n_tasks",
    "estimate",
    "threshold",
    "ci_low",
    "ci_high",
    "confidence",
    "p_value",
    "p_adjusted",
    "verdict",
    "decided_at",
    "tasks_needed",
    "more_tasks",
    "ci_method",
    "test",
)


@dataclass(frozen=True)
class GateResult:
    """The verdicts of a gate.

    Attributes
    ----------
    claims
        One row per (claim, cell): see :func:`gate`.
    verdict
        ``"PASS"`` (every row passes), ``"FAIL"`` (a row fails) or ``"INCONCLUSIVE"``.
    adjust
        The family adjustment used.
    sequential
        Whether the verdicts come from confidence sequences.
    """

    claims: pl.DataFrame
    verdict: str
    adjust: str
    sequential: bool

    @property
    def exit_status(self) -> int:
        """0 all pass, 1 a claim fails, 3 inconclusive (2 is bad input, never returned)."""
        return VERDICTS[self.verdict]

    def to_markdown(self) -> str:
        """Return the verdicts as a GitHub-flavoured markdown section (a CI job summary)."""
        mode = "confidence sequences (anytime-valid)" if self.sequential else "fixed-n tests"
        lines = [
            f"### Release gate: **{self.verdict}**",
            "",
            f"Claims adjusted as one family ({self.adjust}); decided by one-sided {mode}. "
            "Effects and rates in percentage points.",
            "",
            "| claim | cell | n tasks | estimate | bound | threshold | p adj. | verdict |"
            " more tasks |",
            "|---|---|---:|---:|---|---:|---:|---|---:|",
        ]
        lines.extend(
            f"| {row['claim']} | {row['cell']} | {row['n_tasks']} | "
            f"{_pp(row['estimate'])} | {_bound_text(row)} | {_pp(row['threshold'])} | "
            f"{p_str(row['p_adjusted'])} | {_mark(row['verdict'])} | {_more(row)} |"
            for row in self.claims.to_dicts()
        )
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        """Return the verdict and the rows as JSON (rates as fractions)."""
        body: dict[str, Any] = {
            "verdict": self.verdict,
            "exit_status": self.exit_status,
            "adjust": self.adjust,
            "sequential": self.sequential,
            "claims": self.claims.to_dicts(),
        }
        return json.dumps(body, indent=2, default=str)


def _pp(value: float | None) -> str:
    return "" if value is None else f"{100 * value:+.1f}"


def _bound_text(row: dict[str, Any]) -> str:
    low, high = row["ci_low"], row["ci_high"]
    return f"[{100 * low:.1f}, {100 * high:.1f}]"


def _mark(verdict: str) -> str:
    return {"PASS": "✅ PASS", "FAIL": "❌ FAIL"}.get(verdict, "⏳ INCONCLUSIVE")


def _more(row: dict[str, Any]) -> str:
    if row["verdict"] != "INCONCLUSIVE":
        return ""
    return "?" if row["more_tasks"] is None else str(row["more_tasks"])


def _cell_text(keys: Sequence[str], values: Sequence[object]) -> str:
    parts = []
    for key, value in zip(keys, values, strict=True):
        if key == "delay":
            parts.append(f"delay {value}")
        elif key in ("condition", "method"):
            parts.append(str(value))
        else:
            parts.append(f"{key}={value}")
    return " · ".join(parts)


@dataclass(frozen=True)
class _Row:
    """One (claim, cell) before the family adjustment."""

    claims: ClaimCells
    key: tuple[object, ...]
    cell: CellData
    p_pass: float
    p_fail: float


def _rows(found: list[ClaimCells], *, sequential: bool, max_pairs: float | None) -> list[_Row]:
    rows = []
    for claims in found:
        claim = claims.claim
        groups = claims.tasks.group_by(list(claims.keys), maintain_order=True)
        for key, frame in groups:
            cell = CellData.of(frame, rate=claim.upper)
            p_pass, p_fail = _gate_stats.p_values(
                cell,
                claim.threshold,
                upper=claim.upper,
                sequential=sequential,
                max_pairs=_bound_pairs(cell, max_pairs),
            )
            rows.append(_Row(claims, tuple(key), cell, p_pass, p_fail))
    return rows


def _bound_pairs(cell: CellData, max_pairs: float | None) -> float:
    return float(cell.m.max()) if max_pairs is None else float(max_pairs)


def adjusted(p: np.ndarray, adjust: str) -> np.ndarray:
    """Adjust a family of p-values (``"none"`` returns them unchanged)."""
    return p.copy() if adjust == "none" else stats.adjust_p_values(p, adjust)


def _levels(alpha: np.ndarray, p: np.ndarray, p_adj: np.ndarray) -> np.ndarray:
    """Per-row level at which the raw test agrees with the adjusted p-value at ``alpha``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        level = np.where(p_adj > 0, alpha * p / p_adj, alpha / max(1, p.size))
    return np.clip(level, _gate_stats.P_FLOOR, 1 - 1e-12)


def _decided_at(
    rows: list[_Row], adjust: str, alpha: np.ndarray, max_pairs: float | None
) -> list[int | None]:
    """First task (global arrival rank) at which each row's sequential verdict is reached.

    The anytime p-values of every row after each arriving task, adjusted as the gate adjusts
    them: the task from which on the row decides (anytime p-values only fall, so it stays
    decided).
    """
    horizon = max(int(r.cell.arrival.max()) for r in rows)
    steps = np.arange(1, horizon + 1)
    paths = []
    for row in rows:
        claim = row.claims.claim
        found = _gate_stats.p_paths(
            row.cell,
            claim.threshold,
            upper=claim.upper,
            max_pairs=_bound_pairs(row.cell, max_pairs),
        )
        seen = np.searchsorted(row.cell.arrival, steps, side="right")  # tasks by step
        paths.append([np.where(seen > 0, p[np.maximum(seen - 1, 0)], 1.0) for p in found])
    first = np.full(len(rows), horizon)
    for which in (0, 1):
        family = np.stack([path[which] for path in paths])  # rows x arriving tasks
        first = np.minimum(first, _first_decided(family, adjust, alpha))
    return [int(steps[t]) if t < horizon else None for t in first]


#: Arriving tasks whose adjusted p-values are computed at once (bounds the memory to about
#: 8 bytes x rows x this per array).
_TASKS_PER_BLOCK = 1 << 16


def _first_decided(family: np.ndarray, adjust: str, alpha: np.ndarray) -> np.ndarray:
    """Per row, the first column (arrival step) at which its adjusted p-value is below alpha.

    Each column is one family, adjusted as the gate adjusts it; a row never below alpha gets
    the number of columns.
    """
    rows, horizon = family.shape
    first = np.full(rows, horizon)
    for start in range(0, horizon, _TASKS_PER_BLOCK):
        block = family[:, start : start + _TASKS_PER_BLOCK]
        below = adjusted(block, adjust) < alpha[:, None]
        hit = below.any(axis=1) & (first == horizon)
        first[hit] = start + below[hit].argmax(axis=1)
    return first


def gate(
    forks: object,
    policy: object,
    *,
    decisions: object = None,
    sequential: bool = False,
    order: str | None = None,
    max_pairs: float | None = None,
) -> GateResult:
    """Decide a release: judge each claim of ``policy`` on the forks (ship or hold).

    Every claim (superiority: effect >= margin; non_inferiority: effect >= -margin;
    max_harm_rate: harm / pairs <= margin; max_clean_touch: a policy's interventions on clean
    episodes / clean episodes <= margin) is judged on each cell it matches by two one-sided
    tests against its threshold, adjusted over the whole family (see the module docstring):
    PASS, FAIL or INCONCLUSIVE, with the tasks a fixed-n study would need to decide at the
    observed rates.

    Parameters
    ----------
    forks
        The ``forks`` table (any source :func:`recoverylab.io.scan` reads).
    policy
        A TOML file path, a mapping of its keys, or a :class:`~._gate_policy.Policy`.
    decisions
        The decision table of ``max_clean_touch`` claims (task_id, condition, delay or null;
        an intervention is a row with a delay, the denominator the rows whose condition is the
        policy's ``clean_label``); default: the policy's ``decisions`` entry.
    sequential
        Decide with anytime-valid confidence sequences (:mod:`recoverylab.stats.sequences`) instead
        of fixed-n tests, so the gate may be re-run after every batch of tasks without
        inflating its error rates; adds ``decided_at`` (the arrival rank of the task from which
        on the row was decided).
    order
        The column that orders tasks by arrival (sequential only; see :func:`monitor`).
    max_pairs
        A known bound on a task's pairs in a cell (sequential only; default: the most seen).

    Returns
    -------
    GateResult
        ``claims``: one row per (claim, cell): ``claim``, ``kind``, ``cell`` (text), condition,
        delay, method (null where the cell has no such key), ``n`` (pairs or episodes),
        ``n_tasks``, ``estimate``, ``threshold`` (margin, or -margin for non-inferiority),
        ``ci_low``, ``ci_high`` (the one-sided bounds at the rows' adjusted levels; the other
        end is the range's), ``confidence``, ``p_value`` (of the pass test), ``p_adjusted``,
        ``verdict`` (read off the shown bounds: PASS when the pass side's bound excludes the
        threshold, FAIL when the fail side's does), ``decided_at``, ``tasks_needed`` (fixed-n
        tasks to decide at the observed rates, power 0.8), ``more_tasks`` (beyond those seen),
        ``ci_method`` and ``test`` (the bounds' procedure and the test they invert, one
        name: ``fay-lumbard``, ``cluster-melded``, ``clopper-pearson``, ``korn-graubard`` or
        ``betting-sequence``); ``verdict`` and ``exit_status`` of the whole gate.

    Raises
    ------
    ParameterError
        For a bad policy (see :func:`~._gate_policy.read_policy`), a claim whose filters match
        no cell with data, a missing ``by``, ``order`` or decision table.
    SchemaError, InputError
        As :func:`recoverylab.paired.pairs`.

    Examples
    --------
    >>> import polars as pl
    >>> forks = pl.DataFrame({"task_id": [f"t{i}" for i in range(40) for _ in (0, 1)],
    ...                       "condition": ["stale2"] * 80, "method": ["none", "refresh"] * 40,
    ...                       "delay": [None, 1] * 40, "success": [False, True] * 40})
    >>> result = gate(forks, {"claim": [{"kind": "superiority", "margin": 0.5}]})
    >>> result.verdict, result.exit_status
    ('PASS', 0)
    """
    checked = read_policy(policy)
    found = claim_cells(forks, checked, order=order, decisions=decisions)
    rows = _rows(found, sequential=sequential, max_pairs=max_pairs)
    alpha = np.array([1.0 - r.claims.claim.confidence for r in rows])
    p_pass = np.array([r.p_pass for r in rows])
    p_fail = np.array([r.p_fail for r in rows])
    adj_pass, adj_fail = adjusted(p_pass, checked.adjust), adjusted(p_fail, checked.adjust)
    level_pass = _levels(alpha, p_pass, adj_pass)
    level_fail = _levels(alpha, p_fail, adj_fail)
    shown = [
        _record(row, checked, sequential, max_pairs, level_pass[i], level_fail[i])
        for i, row in enumerate(rows)
    ]
    # the verdict is read off the shown, family-adjusted bounds: one computation
    verdicts = np.array([_verdict(row, record) for row, record in zip(rows, shown, strict=True)])
    decided = (
        _decided_at(rows, checked.adjust, alpha, max_pairs) if sequential else [None] * len(rows)
    )
    records = [
        shown[i]
        | {
            "p_value": float(p_pass[i]),
            "p_adjusted": float(adj_pass[i]),
            "verdict": str(verdicts[i]),
            "decided_at": decided[i] if verdicts[i] != "INCONCLUSIVE" else None,
        }
        for i in range(len(rows))
    ]
    frame = pl.DataFrame(records, schema=_SCHEMA).select(CLAIM_COLUMNS)
    worst = (
        "FAIL" if "FAIL" in verdicts else "INCONCLUSIVE" if "INCONCLUSIVE" in verdicts else "PASS"
    )
    return GateResult(claims=frame, verdict=worst, adjust=checked.adjust, sequential=sequential)


_SCHEMA = {
    "claim": pl.String,
    "kind": pl.String,
    "cell": pl.String,
    "condition": pl.String,
    "delay": pl.Int64,
    "method": pl.String,
    "n": pl.Int64,
    "n_tasks": pl.Int64,
    "estimate": pl.Float64,
    "threshold": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "confidence": pl.Float64,
    "p_value": pl.Float64,
    "p_adjusted": pl.Float64,
    "verdict": pl.String,
    "decided_at": pl.Int64,
    "tasks_needed": pl.Int64,
    "more_tasks": pl.Int64,
    "ci_method": pl.String,
    "test": pl.String,
}


def _verdict(row: _Row, record: dict[str, Any]) -> str:
    """PASS when the pass side's bound excludes the threshold, FAIL when the fail side's does."""
    claim = row.claims.claim
    pass_side, fail_side = ("less", "greater") if claim.upper else ("greater", "less")
    column = {"greater": "ci_low", "less": "ci_high"}
    if _gate_stats.beyond(record[column[pass_side]], claim.threshold, pass_side):
        return "PASS"
    if _gate_stats.beyond(record[column[fail_side]], claim.threshold, fail_side):
        return "FAIL"
    return "INCONCLUSIVE"


def _record(
    row: _Row,
    policy: Policy,
    sequential: bool,
    max_pairs: float | None,
    level_pass: float,
    level_fail: float,
) -> dict[str, Any]:
    """Return the row's cell, estimate and bounds (each side's at its adjusted level)."""
    claim = row.claims.claim
    keys = dict(zip(row.claims.keys, row.key, strict=True))
    pairs = _bound_pairs(row.cell, max_pairs)
    pass_side, fail_side = ("less", "greater") if claim.upper else ("greater", "less")
    bounds = {
        pass_side: _gate_stats.bound(
            row.cell, level_pass, pass_side, sequential=sequential, max_pairs=pairs
        ),
        fail_side: _gate_stats.bound(
            row.cell, level_fail, fail_side, sequential=sequential, max_pairs=pairs
        ),
    }
    level = min(level_pass, level_fail)
    needed = _gate_stats.tasks_needed(row.cell, claim.threshold, level)
    n_tasks = int(row.cell.x.size)
    return {
        "claim": claim.name,
        "kind": claim.kind,
        "cell": _cell_text(row.claims.keys, row.key),
        "condition": keys.get("condition"),
        "delay": keys.get("delay"),
        "method": keys.get("method"),
        "n": int(row.cell.m.sum()),
        "n_tasks": n_tasks,
        "estimate": row.cell.estimate,
        "threshold": claim.threshold,
        "ci_low": bounds["greater"],
        "ci_high": bounds["less"],
        "confidence": claim.confidence,
        "tasks_needed": needed,
        "more_tasks": None if needed is None else max(0, needed - n_tasks),
        # the bounds' method; the p-value is the test they invert (the same procedure)
        "ci_method": _gate_stats.method(row.cell, sequential=sequential),
        "test": _gate_stats.method(row.cell, sequential=sequential),
    }
