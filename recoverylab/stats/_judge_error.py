"""The judge's error: sensitivity, specificity and agreement from gold labels; Rogan–Gladen.

From the labelled units of a judged outcome (the partials of ``stats.judged_partials``),
per cell:

* sensitivity = P(judge says 1 | gold 1) = Σ f·y / Σ y,
* specificity = P(judge says 0 | gold 0) = Σ (1 − f)(1 − y) / Σ (1 − y),
* agreement = P(judge = gold) = Σ [f·y + (1 − f)(1 − y)] / n_labelled,

sums over the labelled units (a judge probability ``f`` gives the expected rates). Each is a rate
over clusters and gets the Korn–Graubard interval of ``stats.rate_cells`` (Clopper–Pearson on
the design-effect adjusted sample; exactly Clopper–Pearson with one unit per cluster).

When no gold label exists but the judge's sensitivity ``se`` and specificity ``sp`` are known
(a validation study), the judge's positive rate q is corrected (Rogan & Gladen 1978):

    θ = (q + sp − 1) / (se + sp − 1),

which is unbiased for θ when se and sp are the judge's true error rates in this population. The
map is increasing in q (se + sp > 1 is required: a judge no better than chance carries no
information), so the Korn–Graubard interval [q_lo, q_hi] of q maps to an interval of θ with the
same coverage, se and sp taken as known (``ci_method = "rogan-gladen"``, inverting the same
exact binomial test). A corrected estimate or bound may fall outside [0, 1] (q below the false
positive rate 1 − sp, or above se): it is reported as computed, flagged in
``outside_unit_interval`` and warned, never clipped -- it says the given error rates do not fit
these data.

References: Rogan & Gladen (1978), Estimating prevalence from the results of a screening test,
Am. J. Epidemiol. 107(1), 71–76; Korn & Graubard (1998).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import polars as pl

from recoverylab._errors import ParameterError, RecoveryLabWarning, format_keys
from recoverylab.stats._cells import _column_names
from recoverylab.stats._checks import _check_confidence
from recoverylab.stats._rates import rate_cells

#: The judge's error measures of :func:`judge_error_cells`, in their row order.
JUDGE_MEASURES = ("sensitivity", "specificity", "agreement")


def judge_error_cells(
    partials: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    cluster: str,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Sensitivity, specificity and agreement of the judge with the gold labels, per cell.

    Parameters
    ----------
    partials
        Judged partials (``stats.judged_partials``): one row per cell × cluster (× stratum).
    cells
        Key columns of a cell (empty: overall).
    cluster
        The cluster column.
    confidence
        Confidence level in (0, 1).

    Returns
    -------
    polars.DataFrame
        One row per cell × measure that has a positive denominator: the cells, ``measure``
        (sensitivity, specificity, agreement), ``estimate``, ``ci_low``, ``ci_high``, ``n`` (gold
        positives, gold negatives, labelled units), ``n_clusters``, ``ci_method``, ``test``.
    """
    cells_l = _column_names("cells", cells)
    confidence = _check_confidence(confidence)
    frame = partials.lazy() if isinstance(partials, pl.DataFrame) else partials
    y, n_l = pl.col("gold"), pl.col("n_labelled")
    fy, f = pl.col("judge_gold"), pl.col("judge_labelled")
    # Σ(1 − f)(1 − y) over labelled units; a tiny negative from float sums is zero
    negative_agree = (n_l - y - f + fy).clip(0.0)
    per_cluster = (
        frame.group_by([*cells_l, cluster])
        .agg(
            pl.col(c).cast(pl.Float64).sum()
            for c in ("gold", "n_labelled", "judge_gold", "judge_labelled")
        )
        .select(
            *cells_l,
            cluster,
            fy.clip(0.0, y).alias("sens_y"),
            y.alias("sens_m"),
            negative_agree.clip(0.0, n_l - y).alias("spec_y"),
            (n_l - y).alias("spec_m"),
            (fy + negative_agree).clip(0.0, n_l).alias("agree_y"),
            n_l.alias("agree_m"),
        )
    )
    rates = rate_cells(
        per_cluster,
        cells=cells_l,
        numerator=["sens_y", "spec_y", "agree_y"],
        denominator=["sens_m", "spec_m", "agree_m"],
        names=list(JUDGE_MEASURES),
        ci_method="korn-graubard",
        confidence=confidence,
    )
    totals = (
        per_cluster.group_by(cells_l if cells_l else pl.lit(0).alias("__all"))
        .agg(pl.col("sens_m").sum(), pl.col("spec_m").sum(), pl.col("agree_m").sum())
        .collect()
    )
    long = totals.unpivot(
        ["sens_m", "spec_m", "agree_m"],
        index=cells_l or ["__all"],
        variable_name="measure",
        value_name="n",
    ).with_columns(
        pl.col("measure").replace_strict(
            dict(zip(("sens_m", "spec_m", "agree_m"), JUDGE_MEASURES, strict=True))
        ),
        pl.col("n").round(0).cast(pl.Int64),
    )
    if not cells_l:
        long = long.drop("__all")
    out = rates.rename({"rate": "measure"}).join(long, on=[*cells_l, "measure"], how="left")
    return out.select(
        *cells_l, "measure", "estimate", "ci_low", "ci_high", "n", "n_clusters", "ci_method", "test"
    )


def rogan_gladen_cells(
    partials: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    cluster: str,
    sensitivity: float,
    specificity: float,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Correct the judge's rate by its known sensitivity and specificity (Rogan–Gladen), per cell.

    Parameters
    ----------
    partials
        Judged partials (``stats.judged_partials``; gold may be absent everywhere).
    cells, cluster
        As in :func:`judge_error_cells`.
    sensitivity, specificity
        The judge's error rates, known from elsewhere, in (0, 1] with a sum above 1.
    confidence
        Confidence level in (0, 1).

    Returns
    -------
    polars.DataFrame
        One row per cell: the cells, ``estimate`` (corrected), ``ci_low``, ``ci_high`` (the
        judge rate's Korn–Graubard bounds mapped, not clipped), ``judge_estimate``,
        ``judge_ci_low``, ``judge_ci_high``, ``sensitivity``, ``specificity``,
        ``outside_unit_interval`` (the corrected estimate or a bound outside [0, 1]), ``n``,
        ``n_clusters``, ``ci_method`` (``"rogan-gladen"``), ``test``, ``assumption``.

    Raises
    ------
    ParameterError
        Sensitivity or specificity outside (0, 1], or a sum of at most 1.
    """
    cells_l = _column_names("cells", cells)
    confidence = _check_confidence(confidence)
    se, sp = check_judge_error_rates(sensitivity, specificity)
    frame = partials.lazy() if isinstance(partials, pl.DataFrame) else partials
    per_cluster = frame.group_by([*cells_l, cluster]).agg(
        (pl.col("judge_labelled") + pl.col("judge_unlabelled")).cast(pl.Float64).sum().alias("q_y"),
        (pl.col("n_labelled") + pl.col("n_unlabelled")).cast(pl.Float64).sum().alias("q_m"),
    )
    rates = rate_cells(
        per_cluster,
        cells=cells_l,
        numerator="q_y",
        denominator="q_m",
        ci_method="korn-graubard",
        confidence=confidence,
    )
    totals = (
        per_cluster.group_by(cells_l if cells_l else pl.lit(0).alias("__all"))
        .agg(pl.col("q_m").sum().round(0).cast(pl.Int64).alias("n"))
        .collect()
    )
    scale = se + sp - 1.0

    def corrected(column: str) -> pl.Expr:
        return (pl.col(column) + sp - 1.0) / scale

    out = rates.with_columns(
        corrected("estimate").alias("corrected"),
        corrected("ci_low").alias("low"),
        corrected("ci_high").alias("high"),
    )
    out = out.join(totals, on=cells_l, how="left") if cells_l else out.with_columns(n=totals["n"])
    outside = (
        (pl.col("low") < 0.0) | (pl.col("high") > 1.0) | ~pl.col("corrected").is_between(0.0, 1.0)
    )
    out = out.select(
        *cells_l,
        pl.col("corrected").alias("estimate"),
        pl.col("low").alias("ci_low"),
        pl.col("high").alias("ci_high"),
        pl.col("estimate").alias("judge_estimate"),
        pl.col("ci_low").alias("judge_ci_low"),
        pl.col("ci_high").alias("judge_ci_high"),
        pl.lit(se).alias("sensitivity"),
        pl.lit(sp).alias("specificity"),
        outside.alias("outside_unit_interval"),
        "n",
        "n_clusters",
        pl.lit("rogan-gladen").alias("ci_method"),
        pl.lit("exact-binomial").alias("test"),
        pl.lit("judge sensitivity and specificity known, the same in every cell").alias(
            "assumption"
        ),
    )
    flagged = out.filter(pl.col("outside_unit_interval"))
    if flagged.height:
        shown = format_keys(
            flagged.select(cells_l).rows() if cells_l else ["all"], total=flagged.height
        )
        warnings.warn(
            f"Rogan–Gladen: in {flagged.height} cells (cell {shown}) the corrected rate or a bound "
            f"lies outside [0, 1]: the judge's positive rate is below 1 − specificity "
            f"({1 - sp:g}) or above sensitivity ({se:g}) there; the numbers are shown as "
            "computed (flag `outside_unit_interval`). Hint: check the error rates given.",
            RecoveryLabWarning,
            stacklevel=2,
        )
    return out


def check_judge_error_rates(sensitivity: object, specificity: object) -> tuple[float, float]:
    """Return a judge's sensitivity and specificity as floats, or raise one clear error.

    Both must lie in (0, 1] and sum above 1 (a judge better than chance), as every
    Rogan–Gladen correction needs.

    Raises
    ------
    ParameterError
        A value outside (0, 1], or a sum of at most 1.
    """
    for name, value in (("sensitivity", sensitivity), ("specificity", specificity)):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not 0.0 < float(value) <= 1.0 or math.isnan(float(value)):  # type: ignore[arg-type]
            raise ParameterError(f"parameter `{name}` is {value!r}; it must be a number in (0, 1].")
    se, sp = float(sensitivity), float(specificity)  # type: ignore[arg-type]
    if se + sp <= 1.0:
        raise ParameterError(
            f"parameters `sensitivity` ({se:g}) and `specificity` ({sp:g}) sum to {se + sp:g}; "
            "a judge must be better than chance (sum above 1) for its rate to be corrected."
        )
    return se, sp
