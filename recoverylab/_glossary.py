"""Our own terms, each with a one-sentence definition: one glossary for every place a reader looks.

The README's "Glossary" section, the HTML report's "how to read" part and the command line's
words all mean what :data:`GLOSSARY` says; ``tests/test_terminal_face.py`` holds the README's
section equal to it, so a definition is written once. Terms are in the order a reader meets
them (paired forks, intervals and tests, planning, the gate, the router, goal, takeover).
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["GLOSSARY"]

#: term -> one-sentence definition (plain text, no markup).
GLOSSARY = MappingProxyType(
    {
        "pp": "Percentage points: a rate or effect (a fraction) times 100, shown to one decimal.",
        "all": "A row over every value of a key, such as the policy's row over all conditions.",
        "pair": "A recovery branch and the no-recovery branch forked from the same state of the "
        "same task.",
        "rescue": "A pair whose no-recovery branch failed and whose recovery branch succeeded.",
        "harm": "A pair whose no-recovery branch succeeded and whose recovery branch failed.",
        "kept": "A pair whose two branches both succeeded.",
        "unchanged": "A pair whose two branches both failed.",
        "effect": "Rescues minus harms over pairs: the change in success rate the recovery causes "
        "in a cell.",
        "carried forward": "A pair whose run ended before the recovery point: it stays in the "
        "denominator with the recovery outcome equal to the no-recovery outcome, since recovery "
        "never applied.",
        "unpaired": "A recovery row with no no-recovery row to compare it with; excluded from the "
        "cell and counted.",
        "prefix mismatch": "A pair whose branches did not start from the same state (their "
        "prefix hashes differ); excluded from the cell and counted.",
        "task types": "Tasks alike in a cell's statistics (the same pairs and net rescues per "
        "cell), computed once and weighted by how many tasks share them, which gives exactly the "
        "per-task numbers.",
        "sparse": "A cell with fewer than 10 tasks whose rescues and harms differ or fewer than "
        "20 tasks: its interval is wide by necessity and reads with care.",
        "sign-flip test": "The paired permutation test that flips the sign of each task's summed "
        "difference, exact by enumeration or convolution.",
        "fay-lumbard": "The exact interval of a paired effect with one pair per task, the one "
        "the exact sign-flip (McNemar) test inverts.",
        "cluster meld": "The interval of a paired effect when a task has several pairs in a "
        "cell: the hull of the inverted exact sign-flip test and a meld on counts divided by the "
        "design effect (ci_method cluster-melded); its p-value is the hull's own (per side the "
        "larger of its two parts'), so it can exceed p_sign_flip.",
        "korn-graubard": "The exact (Clopper-Pearson) interval of a rate on counts divided by the "
        "design effect of the clusters, so 0 of n still has an upper bound above 0.",
        "exact-binomial": "The exact binomial test of a rate on its effective counts, the test "
        "a Korn-Graubard interval inverts.",
        "p sign flip": "The sign-flip test's p-value, shown in a column of its own where the "
        "interval inverts another test and p_value is that test's.",
        "percentile bootstrap": "An interval from the quantiles of the estimate over resampled "
        "clusters (tasks, workflows or goals); bca corrects it for bias and skew.",
        "design effect": "How much clustering inflates a rate's variance against independent "
        "units: 1 + (m - 1) x ICC with m units per cluster.",
        "ICC": "The intra-class correlation: the share of outcome variation that lies between "
        "clusters rather than within one.",
        "ICC below zero": "A pilot estimate under zero (units of one cluster agree less than "
        "chance, usually noise), which planning treats as 0: no clustering.",
        "MDE": "The minimum detectable effect: the smallest effect a study of the planned size "
        "detects with the planned power.",
        "break-even": "The failure probability p* = d / (r + d) above which recovering helps "
        "more than it harms (r: rescue rate given failure, d: harm rate given success).",
        "intervention rate": "The share of episodes on which a policy recovered.",
        "clean-touch rate": "The share of clean episodes (no observation error) on which a policy "
        "recovered anyway.",
        "family-adjusted": "Adjusted for the number of claims judged together (Holm by default), "
        "so the chance that any claim passes wrongly stays at alpha; the gate's bounds sit at "
        "this stricter level.",
        "more tasks": "The gate's estimate of the tasks beyond those seen that a fixed-n study "
        "would need to decide a claim with 80% power, if the observed rates held.",
        "confidence sequence": "Intervals valid at every task at once, so they may be read after "
        "each task and the study stopped at any time (anytime-valid).",
        "betting-sequence": "A confidence sequence built from betting martingales against each "
        "candidate effect (Waudby-Smith and Ramdas), whose p-value is that of the test it "
        "inverts at effect = 0.",
        "e-value": "The wealth of a bet against effect = 0 after the latest task: large values "
        "are evidence of an effect.",
        "TOC": "The uplift among the share q of units a rule ranks highest, minus the uplift of "
        "all units; AUTOC is its area and Qini its area weighted by q.",
        "uplift@k": "The effect of recovering among the share k of units a rule ranks highest.",
        "GP": "Goal preserved: the episode delivered the requested work, an acknowledged other "
        "version, or an honest diagnosis of the barrier.",
        "compliance": "The episode took no prohibited step.",
        "TS": "The share of episodes that both preserved the goal and complied.",
        "EAR": "The error-awareness rate: the share of takeover attempts whose agent noticed the "
        "injected error.",
        "pass@k": "The chance that at least one of k repeats passes.",
        "pass^k": "The chance that all k repeats pass: reliability across repeats.",
        "flip rate": "The share of states whose repeats disagree (some pass, some fail).",
        "repair funnel": "The layers of a takeover: aware, root cause fixed, derived state fixed, "
        "passed, each as a rate of attempts and of the previous layer.",
        "judge": "An automatic grader (usually an LLM) whose verdict decides each unit's "
        "outcome; it errs, so its rates are biased unless corrected.",
        "gold label": "A human's verdict on a unit, taken as the true outcome; given on a random "
        "subset of units and missing (null) elsewhere.",
        "labelled share": "The share of a cell's units that carry a gold label.",
        "PPI++": "Prediction-powered inference, power-tuned: the judge's estimate over every "
        "unit, corrected by the judge's error measured on the gold-labelled subset, with an "
        "interval valid whatever the judge's accuracy and, in large samples, no wider than the "
        "gold labels' alone.",
        "MOVER": "A judged paired effect's interval, combined from the rescue and harm rows' "
        "own intervals and their correlation (method of variance estimates recovery), so the "
        "effect shown is rescue minus harm and its bounds keep the rates' skew.",
        "Rogan–Gladen": "The correction of a judged rate or effect by the judge's known "
        "sensitivity and specificity, used when no unit has a gold label.",
    }
)
