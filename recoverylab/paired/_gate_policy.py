"""Release-gate policies: what a gate claims, read from TOML or a mapping (ARCHITECTURE §9).

A policy is a family of *claims*. Each claim names a kind, a margin and the cells it is about::

    confidence = 0.95        # default of every claim
    adjust = "holm"          # "none" | "holm" | "bh": the claims are one family
    pair_by = []             # as paired.summarize
    cohort = "full"
    clean_label = "clean"    # the condition of clean (unperturbed) episodes
    decisions = "policy_decisions.parquet"   # only for max_clean_touch; relative to the file

    [[claim]]
    name = "refresh rescues stale runs"
    kind = "superiority"     # effect >= margin
    margin = 0.02
    condition = "stale2"     # filters: a label or a list; absent = every value
    method = "refresh"
    delay = [1, 2]
    by = ["model"]           # extra cell keys: the claim holds in each cell

Kinds: ``superiority`` (effect >= margin), ``non_inferiority`` (effect >= -margin),
``max_harm_rate`` (harm / pairs <= margin), ``max_clean_touch`` (a policy's interventions on
clean episodes / clean episodes <= margin; reads the ``decisions`` table). Margins are fractions
in [0, 1]. A claim holds on *every* cell its filters match; each (claim, cell) is one hypothesis
of the family.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recoverylab._errors import ParameterError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = ["ADJUST", "KINDS", "Claim", "Policy", "read_policy"]

#: Claim kinds and what each claims of its quantity (see the module docstring).
KINDS = ("superiority", "non_inferiority", "max_harm_rate", "max_clean_touch")
#: Family adjustments.
ADJUST = ("none", "holm", "bh")
#: Keys a policy's top level may hold.
_POLICY_KEYS = ("confidence", "adjust", "pair_by", "cohort", "clean_label", "decisions", "claim")
#: Keys a claim may hold.
_CLAIM_KEYS = ("name", "kind", "margin", "condition", "method", "delay", "by", "confidence")


@dataclass(frozen=True)
class Claim:
    """One claim of a policy.

    Attributes
    ----------
    name
        How the claim is shown (default: ``<kind> <margin>``).
    kind
        One of :data:`KINDS`.
    margin
        The margin, a fraction in [0, 1].
    condition, method, delay
        Filters: the values a cell must have (None: any).
    by
        Extra cell keys: the claim is judged in each of their groups.
    confidence
        The claim's confidence level (1 - its error rate).
    """

    name: str
    kind: str
    margin: float
    condition: tuple[str, ...] | None = None
    method: tuple[str, ...] | None = None
    delay: tuple[int, ...] | None = None
    by: tuple[str, ...] = ()
    confidence: float = 0.95

    @property
    def threshold(self) -> float:
        """The value the claim's quantity is compared with (-margin for non-inferiority)."""
        return -self.margin if self.kind == "non_inferiority" else self.margin

    @property
    def upper(self) -> bool:
        """True when the claim bounds its quantity from above (a maximum rate)."""
        return self.kind in ("max_harm_rate", "max_clean_touch")


@dataclass(frozen=True)
class Policy:
    """A gate policy: the claims and how the family is adjusted.

    Attributes
    ----------
    claims
        The claims, in the file's order.
    adjust
        ``"none"``, ``"holm"`` (default) or ``"bh"``.
    pair_by, cohort, clean_label
        As :func:`recoverylab.paired.summarize` and :func:`~recoverylab.paired.evaluate_policy`.
    decisions
        The decision table ``max_clean_touch`` claims read (a path, resolved against the
        policy file's directory, or a table); None when no claim needs it.
    """

    claims: tuple[Claim, ...]
    adjust: str = "holm"
    pair_by: tuple[str, ...] = ()
    cohort: str = "full"
    clean_label: str = "clean"
    decisions: object | None = None


def _where(source: str, claim: int | None) -> str:
    return f"{source}: claim {claim + 1}" if claim is not None else source


def _labels(value: object, key: str, where: str, kind: type) -> tuple[Any, ...] | None:
    if value is None:
        return None
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    good = all(isinstance(v, kind) and not isinstance(v, bool) for v in values)
    if not values or not good:
        noun = "a label or a list of labels" if kind is str else "an integer or a list of them"
        raise ParameterError(f"{where}: `{key}` is {value!r}; it must be {noun}.")
    return tuple(values)


def _fraction(value: object, key: str, where: str, *, open_ends: bool) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    number = float(value) if ok else math.nan  # type: ignore[arg-type]
    inside = 0.0 < number < 1.0 if open_ends else 0.0 <= number <= 1.0
    if not inside:
        allowed = "(0, 1)" if open_ends else "[0, 1] (a fraction: 0.02 is 2 points)"
        raise ParameterError(f"{where}: `{key}` is {value!r}; it must lie in {allowed}.")
    return number


def _unknown(table: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    unknown = [k for k in table if k not in allowed]
    if unknown:
        raise ParameterError(f"{where}: unknown key `{unknown[0]}`; allowed: {', '.join(allowed)}.")


def _claim(table: object, index: int, source: str, confidence: float) -> Claim:
    where = _where(source, index)
    if not isinstance(table, Mapping):
        raise ParameterError(f"{where} is {table!r}; it must be a table of keys.")
    _unknown(table, _CLAIM_KEYS, where)
    kind = table.get("kind")
    if kind not in KINDS:
        raise ParameterError(f"{where}: `kind` is {kind!r}; it must be one of {', '.join(KINDS)}.")
    if "margin" not in table:
        raise ParameterError(f"{where}: `margin` is missing.")
    margin = _fraction(table["margin"], "margin", where, open_ends=False)
    name = table.get("name", f"{kind} {margin:g}")
    if not isinstance(name, str) or not name:
        raise ParameterError(f"{where}: `name` is {name!r}; it must be a non-empty string.")
    by = _labels(table.get("by"), "by", where, str) or ()
    if kind == "max_clean_touch" and any(table.get(k) is not None for k in ("method", "delay")):
        raise ParameterError(
            f"{where}: a max_clean_touch claim is about the policy's decisions; it takes no "
            "`method` or `delay` filter."
        )
    return Claim(
        name=name,
        kind=str(kind),
        margin=margin,
        condition=_labels(table.get("condition"), "condition", where, str),
        method=_labels(table.get("method"), "method", where, str),
        delay=_labels(table.get("delay"), "delay", where, int),
        by=by,
        confidence=_fraction(
            table.get("confidence", confidence), "confidence", where, open_ends=True
        ),
    )


def policy_from_mapping(
    table: Mapping[str, Any], source: str = "policy", base: Path | None = None
) -> Policy:
    """Check a parsed policy (a mapping as TOML gives it) and return the :class:`Policy`."""
    _unknown(table, _POLICY_KEYS, source)
    confidence = _fraction(table.get("confidence", 0.95), "confidence", source, open_ends=True)
    adjust = table.get("adjust", "holm")
    if adjust not in ADJUST:
        raise ParameterError(
            f"{source}: `adjust` is {adjust!r}; it must be one of {', '.join(ADJUST)}."
        )
    claims = table.get("claim")
    if not isinstance(claims, list) or not claims:
        raise ParameterError(
            f"{source} has no claims. Hint: add a [[claim]] table with `kind` and `margin`."
        )
    parsed = tuple(_claim(c, i, source, confidence) for i, c in enumerate(claims))
    names = [c.name for c in parsed]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ParameterError(f"{source}: two claims are named {twice[0]!r}; names must differ.")
    cohort = table.get("cohort", "full")
    if cohort not in ("full", "factual_success"):
        raise ParameterError(
            f"{source}: `cohort` is {cohort!r}; it must be 'full' or 'factual_success'."
        )
    clean = table.get("clean_label", "clean")
    if not isinstance(clean, str):
        raise ParameterError(f"{source}: `clean_label` is {clean!r}; it must be a label.")
    decisions = table.get("decisions")
    if isinstance(decisions, str) and base is not None:
        decisions = str(base / decisions)
    return Policy(
        claims=parsed,
        adjust=str(adjust),
        pair_by=_labels(table.get("pair_by"), "pair_by", source, str) or (),
        cohort=str(cohort),
        clean_label=clean,
        decisions=decisions,
    )


def read_policy(policy: object) -> Policy:
    """Return a :class:`Policy` from a TOML file path, a mapping, or a Policy.

    Parameters
    ----------
    policy
        A path to a TOML file, a mapping of the same keys, or a :class:`Policy`.

    Returns
    -------
    Policy
        The checked policy.

    Raises
    ------
    ParameterError
        For a file that is not TOML (naming its line), an unknown key, a bad kind, a margin
        outside [0, 1], a confidence outside (0, 1), a policy without claims.

    Examples
    --------
    >>> read_policy({"claim": [{"kind": "superiority", "margin": 0.02}]}).claims[0].name
    'superiority 0.02'
    """
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, Mapping):
        return policy_from_mapping(policy)
    if not isinstance(policy, (str, Path)):
        raise ParameterError(
            f"parameter `policy` is a {type(policy).__name__}; give a TOML file path, a "
            "mapping or a Policy."
        )
    path = Path(policy)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParameterError(f"policy `{path}` does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(f"policy `{path}` cannot be read ({exc}).") from None
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ParameterError(f"policy `{path}` is not valid TOML: {exc}.") from None
    return policy_from_mapping(table, f"policy `{path}`", path.parent)
