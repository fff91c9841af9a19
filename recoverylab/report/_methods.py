"""The words a report uses for how its numbers were computed, read from the result itself.

A reading or a provenance block that names a method must say what the cells got (STYLE: words
that explain a number are data): a result's ``ci_method`` column names each cell's interval
method, a result whose cells got several methods is said to be mixed, and resamples are counted
only where an interval resampled (0 when none did). A method the report has no words for is
named as the column names it (never guessed, never refused). Results without a ``ci_method``
column (older goal, takeover and uplift results) have cluster-bootstrap intervals. A ``test``
column, where a result has one, names the test each interval inverts; a ``p_method`` column how
each p-value was computed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from recoverylab._errors import SchemaError
from recoverylab.report._html import Provenance

__all__ = [
    "BOOTSTRAP",
    "INTERVAL_METHODS",
    "TESTS",
    "IntervalMethod",
    "Methods",
    "interval_method",
    "level",
]


@dataclass(frozen=True)
class IntervalMethod:
    """How one interval method reads in a report.

    Attributes
    ----------
    label
        Its name in a provenance block; ``{cluster}`` is the resampled unit (tasks, goals...).
    source
        Where a reading says the interval comes from ("with a 95% interval from ...").
    resamples
        Whether it draws resamples (a bootstrap) or is computed without them.
    agrees
        Whether it excludes zero exactly when the sign-flip test rejects (the test-based
        intervals of :func:`recoverylab.stats.paired_effect_cells`; a bootstrap need not).
    """

    label: str
    source: str
    resamples: bool
    agrees: bool = False


#: The words of every interval method a result's cells can name (``ci_method``; every value of
#: :data:`recoverylab.stats.PAIRED_CI_METHODS` but ``auto``, which names what it chose), and of
#: :data:`BOOTSTRAP` for results whose intervals are the cluster bootstrap.
INTERVAL_METHODS: dict[str, IntervalMethod] = {
    "fay-lumbard": IntervalMethod(
        "exact Fay–Lumbard method (one pair per task), no resampling",
        "the exact Fay–Lumbard method (every task one pair)",
        resamples=False,
        agrees=True,
    ),
    "cluster-melded": IntervalMethod(
        "cluster meld (several pairs per task), no resampling",
        "the cluster meld for several pairs per task (the exact sign-flip inversion widened by "
        "a Fay–Lumbard meld of design-effect-adjusted counts)",
        resamples=False,
        agrees=True,
    ),
    "sign-flip": IntervalMethod(
        "exact inversion of the sign-flip test, no resampling",
        "the exact inversion of the sign-flip test (it can be too narrow in sparse cells)",
        resamples=False,
        agrees=True,
    ),
    "percentile": IntervalMethod(
        "percentile bootstrap over {cluster}",
        "a percentile bootstrap that resamples whole {cluster}",
        resamples=True,
    ),
    "bca": IntervalMethod(
        "BCa bootstrap over {cluster}",
        "a bias-corrected and accelerated (BCa) bootstrap that resamples whole {cluster}",
        resamples=True,
    ),
    "bootstrap": IntervalMethod(
        "cluster bootstrap over {cluster}",
        "a bootstrap that resamples whole {cluster}",
        resamples=True,
    ),
    "korn-graubard": IntervalMethod(
        "Korn–Graubard (Clopper–Pearson on the effective sample of {cluster}), no resampling",
        "the Korn–Graubard method (Clopper–Pearson on the effective sample after the design "
        "effect of {cluster})",
        resamples=False,
    ),
    "clopper-pearson": IntervalMethod(
        "exact Clopper–Pearson interval (one unit per cluster), no resampling",
        "the exact Clopper–Pearson method (every cluster one unit)",
        resamples=False,
    ),
    "betting-sequence": IntervalMethod(
        "betting confidence sequence over {cluster} in arrival order, no resampling",
        "a betting confidence sequence over {cluster} (valid at every look)",
        resamples=False,
    ),
    # judged outcomes (issue 40): the values of stats.JUDGED_CI_METHODS but auto, the gold-only
    # fallback of a cell with too few labels, and the Rogan–Gladen correction
    "ppi++": IntervalMethod(
        "PPI++ Wald interval (judge on every unit, gold on a subset; variance over {cluster}), "
        "no resampling",
        "prediction-powered inference (PPI++: the judge's estimate on every unit corrected by the "
        "labelled subset, a Wald interval clustered by {cluster})",
        resamples=False,
    ),
    "ppi++-logit": IntervalMethod(
        "PPI++ interval on the logit scale (judge on every unit, gold on a subset; variance over "
        "{cluster}), no resampling",
        "prediction-powered inference (PPI++: the judge's estimate on every unit corrected by the "
        "labelled subset, a Wald interval on the logit scale clustered by {cluster})",
        resamples=False,
    ),
    "ppi++-cp": IntervalMethod(
        "PPI++ with Clopper–Pearson bounds on its effective sample (judge on every unit, gold on "
        "a subset; variance over {cluster}), no resampling",
        "prediction-powered inference (PPI++: the judge's estimate on every unit corrected by the "
        "labelled subset; exact Clopper–Pearson bounds on the effective sample its variance "
        "clustered by {cluster} implies)",
        resamples=False,
    ),
    "mover": IntervalMethod(
        "MOVER: the rescue and harm rows' own intervals combined (their correlation over "
        "{cluster}), no resampling",
        "the rescue and harm intervals combined by MOVER (the method of variance estimates "
        "recovery, with their correlation over {cluster}), so the effect is rescue − harm",
        resamples=False,
    ),
    "korn-graubard-bonferroni": IntervalMethod(
        "gold-only Korn–Graubard intervals per stratum of {cluster}, Bonferroni-combined, "
        "no resampling",
        "the gold labels alone (too few for PPI++): Korn–Graubard intervals per gold stratum "
        "over {cluster}, combined by Bonferroni",
        resamples=False,
    ),
    "rogan-gladen": IntervalMethod(
        "Rogan–Gladen correction of the judge's interval by its known sensitivity and "
        "specificity, no resampling",
        "the judge's own interval corrected for its known sensitivity and specificity "
        "(Rogan–Gladen)",
        resamples=False,
    ),
}

#: The words of each test a result's ``test`` column can name (others are shown as named).
TESTS: dict[str, str] = {
    "fay-lumbard": "the Fay–Lumbard meld's own test at zero (the exact McNemar p-value)",
    "cluster-melded": "the cluster meld's own p-value (per side the larger of its two parts')",
    "sign-flip": "the exact sign-flip test of the per-cluster summed differences",
    "exact-binomial": "the exact binomial test on the effective sample",
    "korn-graubard": "the exact binomial test on the effective sample",
    "clopper-pearson": "the exact binomial test",
    "betting-sequence": "the betting martingale's test at zero (anytime-valid)",
    "wald-z": "the Wald z-test of the PPI++ estimate",
    "wald-logit": "the Wald test of the PPI++ estimate on the logit scale",
    "mover": "the test MOVER's interval inverts (the level at which its bound reaches 0)",
    "none": "no test (a bootstrap interval inverts none)",
}


def interval_method(name: str) -> IntervalMethod:
    """Return the words of an interval method; one the report does not know, as it is named."""
    known = INTERVAL_METHODS.get(name)
    if known is not None:
        return known
    return IntervalMethod(
        f"{name} (as the result's ci_method names it)",
        f"the {name} method (as the result's ci_method names it)",
        resamples=False,
    )


#: The method of results without a ``ci_method`` column: their intervals are the cluster
#: bootstrap (percentile or BCa, as the protocol was asked).
BOOTSTRAP = "bootstrap"


def level(provenance: Provenance) -> str:
    """Return the confidence level as a reading says it ("95%"), or "" when not given."""
    if provenance.confidence is None:
        return ""
    return f"{provenance.confidence * 100:.4g}%"


def _counted(frame: pl.DataFrame, column: str) -> tuple[tuple[str, int], ...]:
    """``(value, rows)`` of a text column, the most frequent first (ties by value)."""
    counts = frame.group_by(column).len().sort(["len", column], descending=[True, False])
    return tuple((str(value), int(rows)) for value, rows in counts.iter_rows())


@dataclass(frozen=True)
class Methods:
    """The interval (and p-value) methods of one result, as computed, with their words.

    Attributes
    ----------
    intervals
        ``(method, cells)``: each interval method of the result and how many cells got it,
        the most frequent first.
    cluster
        The resampled unit, plural ("tasks", "goals", "workflows").
    test
        The test behind the p-values (None when the result has none).
    p_methods
        ``(p_method, cells)`` when the result names how each p-value was computed.
    tests
        ``(test, cells)`` when the result names the test each interval inverts (``test``): its
        ``p_value`` is then that test's, and the sign-flip test, if shown, is ``p_sign_flip``.
    sign_flip
        Whether the result has ``p_sign_flip``, the sign-flip test in a column of its own.
    others
        ``(rate, ((method, cells), ...))`` for each other rate whose intervals name their own
        method (a ``<rate>_ci_method`` column, e.g. a policy's intervention rate); rows
        without such an interval are not counted.
    """

    intervals: tuple[tuple[str, int], ...]
    cluster: str
    test: str | None = None
    p_methods: tuple[tuple[str, int], ...] = ()
    tests: tuple[tuple[str, int], ...] = ()
    sign_flip: bool = False
    others: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()

    @classmethod
    def of(cls, frame: pl.DataFrame, cluster: str, test: str | None = None) -> Methods:
        """Read the methods of ``frame``: its ``ci_method`` column, else the cluster bootstrap.

        Raises
        ------
        SchemaError
            For a ``ci_method`` the report has no words for (or a null one): a report that
            cannot name a method must not guess it.
        """
        tests = _counted(frame, "test") if "test" in frame.columns else ()
        sign_flip = "p_sign_flip" in frame.columns
        others = tuple(
            (column.removesuffix("_ci_method"), _counted(frame.drop_nulls(column), column))
            for column in frame.columns
            if column.endswith("_ci_method") and frame[column].drop_nulls().len()
        )
        if "ci_method" not in frame.columns:
            bootstrap = ((BOOTSTRAP, frame.height),)
            return cls(bootstrap, cluster, test, (), tests, sign_flip, others)
        nulls = frame.filter(pl.col("ci_method").is_null()).height
        if nulls:
            raise SchemaError(
                f"report: column `ci_method` has {nulls} rows with a method the report cannot "
                "name (null); every interval must name its method."
            )
        p_methods = _counted(frame, "p_method") if "p_method" in frame.columns else ()
        methods = _counted(frame, "ci_method")
        return cls(methods, cluster, test, p_methods, tests, sign_flip, others)

    @property
    def resampled(self) -> bool:
        """Whether any interval of the result drew resamples."""
        every = [*self.intervals, *(pair for _, methods in self.others for pair in methods)]
        return any(interval_method(m).resamples for m, _ in every)

    def source(self) -> str:
        """Where the intervals come from, for a reading: "from ..." (mixed results by cell)."""
        methods = [(interval_method(m), n) for m, n in self.intervals]
        agree = [method.agrees for method, _ in methods]
        if len(methods) == 1:
            text = "from " + methods[0][0].source.format(cluster=self.cluster)
        else:
            text = "whose method differs by cell (the ci_method column): " + ", ".join(
                f"{_cells(n)} from {method.source.format(cluster=self.cluster)}"
                for method, n in methods
            )
        # a result naming each interval's test holds that test's p-value in p_value
        rejects = (
            "its p-value is below 1 − confidence" if self.tests else "the sign-flip test rejects"
        )
        if all(agree):
            every = "it excludes" if len(methods) == 1 else "each excludes"
            return f"{text}; {every} zero exactly when {rejects}"
        if any(agree):
            return f"{text}; those not from a bootstrap exclude zero exactly when {rejects}"
        return text

    def intervals_text(
        self, n_resamples: int | None, intervals: tuple[tuple[str, int], ...] | None = None
    ) -> str:
        """Return the provenance line of the intervals: each method, its resamples, its cells."""
        parts = []
        for name, cells in self.intervals if intervals is None else intervals:
            method = interval_method(name)
            drawn = ""
            if method.resamples:
                drawn = (
                    " (resamples not recorded)"
                    if n_resamples is None
                    else f", {n_resamples:,} resamples"
                )
            parts.append(f"{method.label.format(cluster=self.cluster)}{drawn}: {_cells(cells)}")
        return "; ".join(parts)

    def provenance(self, provenance: Provenance) -> Provenance:
        """Return ``provenance`` saying what was computed: methods, resamples drawn, test.

        ``n_resamples`` becomes the number of resamples drawn per resampled cell: the setting
        when an interval resampled, 0 when none did.
        """
        drawn = provenance.n_resamples if self.resampled else 0
        settings = [("intervals", self.intervals_text(drawn))]
        settings += [
            (f"intervals of {rate.replace('_', ' ')}", self.intervals_text(drawn, methods))
            for rate, methods in self.others
        ]
        if self.tests:
            inverted = "; ".join(f"{TESTS.get(name, name)}: {_cells(n)}" for name, n in self.tests)
            settings.append(("p-values", inverted))
            if self.test is not None and self.sign_flip:
                settings.append(("p (sign-flip)", self.test))
        elif self.test is not None:
            how = "; ".join(f"{name}: {_cells(n)}" for name, n in self.p_methods)
            settings.append(("p-values", f"{self.test} ({how})" if how else self.test))
        return replace(provenance, n_resamples=drawn, settings=(*settings, *provenance.settings))


def _cells(count: int) -> str:
    return f"{count:,} cell" if count == 1 else f"{count:,} cells"
