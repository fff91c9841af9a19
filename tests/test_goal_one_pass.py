"""The checks of goal.score folded into its scoring pass against the exact checks (issue 28).

On the polars engine over whole tables, ``score`` collects its per-key parts and every check
count in one pass (:mod:`recoverylab.goal._one_pass`) and scores over them when all are clean;
otherwise the exact checks run. The reference here is that exact path, called directly: for
every table of a generated family (clean tables, and one corruption of every kind the checks
know) the default ``score`` must give the same scored rows or raise the same error, and the
one-pass path must never accept tables the exact checks refuse.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoverylab import goal, synth
from recoverylab._errors import RecoveryLabError
from recoverylab.goal import _one_pass, _step_checks
from recoverylab.goal import _rules as goal_rules
from recoverylab.goal import _score as goal_score
from recoverylab.schema import spec

TABLES = ("cases", "resources", "episodes", "steps", "citations")

Tables = dict[str, pl.DataFrame]


def exact(frames: Tables) -> pl.DataFrame:
    """Score through the exact checks (the path the sharded and Spark engines take)."""
    lazy = {t: f.lazy() for t, f in frames.items()}
    state = goal_score._check_partial(lazy, None)
    return goal_score._score_partial(lazy, state)["scored"].collect().sort("episode_id")


def outcome(run: object, frames: Tables) -> tuple[str, object]:
    """Return ("rows", the scored frame) or ("error", its type and message)."""
    try:
        return "rows", run(frames)  # type: ignore[operator]
    except RecoveryLabError as error:
        return "error", (type(error).__name__, str(error))


def default(frames: Tables) -> pl.DataFrame:
    return goal.score(*(frames[t] for t in TABLES)).collect().sort("episode_id")


def set_value(frame: pl.DataFrame, column: str, row: int, value: object) -> pl.DataFrame:
    """Return ``frame`` with ``column`` set to ``value`` in one row."""
    new = pl.lit(value).cast(frame.schema[column]) if value is not None else pl.lit(None)
    here = pl.int_range(pl.len()) == row
    return frame.with_columns(pl.when(here).then(new).otherwise(pl.col(column)).alias(column))


def contract_corruptions(frames: Tables, rng: random.Random) -> Iterator[tuple[str, Tables]]:
    """One broken contract at a time: nulls, labels, ranges, rules, duplicate keys, no rows."""
    for table in TABLES:
        frame = frames[table]
        row = rng.randrange(frame.height)
        for column in spec(table).columns:
            if column.name not in frame.columns:
                continue
            values: list[object] = [] if column.nullable else [None]
            values += ["no-such-label"] if column.labels else []
            values += [-1, 2**60] if column.kind == "int" else []
            for value in values:
                changed = set_value(frame, column.name, row, value)
                yield f"{table}.{column.name} = {value!r}", {**frames, table: changed}
        duplicate = pl.concat([frame, frame.slice(row, 1)])
        yield f"{table}: a repeated row", {**frames, table: duplicate}
        yield f"{table}: no rows", {**frames, table: frame.head(0)}


def reference_corruptions(frames: Tables, rng: random.Random) -> Iterator[tuple[str, Tables]]:
    """One broken reference or rule at a time, and look-alike ids that only differ slightly."""
    references = (
        ("steps", "episode_id"),
        ("citations", "episode_id"),
        ("citations", "resource_id"),
        ("episodes", "case_id"),
        ("resources", "case_id"),
    )
    # an episode that cites nothing: only the episodes' own check sees its case
    uncited = frames["episodes"].join(frames["citations"], on="episode_id", how="anti")
    for table, column in references:
        frame = frames[table]
        row = rng.randrange(frame.height)
        if table == "episodes" and uncited.height:
            row = frame["episode_id"].to_list().index(uncited["episode_id"][0])
        known = frame[column][row]
        for value in (f"{known}-ghost", f"{known} ", known.upper() + "X"):
            yield (
                f"{table}.{column} = {value!r}",
                {**frames, table: set_value(frame, column, row, value)},
            )
    cases = frames["cases"]
    for row in rng.sample(range(cases.height), min(4, cases.height)):
        for regime in ("barrier_free", "recoverable", "unrecoverable"):
            changed = set_value(cases, "regime", row, regime)
            yield f"cases.regime[{row}] = {regime}", {**frames, "cases": changed}
        changed = set_value(cases, "barrier", row, None)
        yield f"cases.barrier[{row}] = null", {**frames, "cases": changed}
    resources = frames["resources"]
    row = rng.randrange(resources.height)
    flipped = set_value(resources, "reachable", row, not resources["reachable"][row])
    yield f"resources.reachable[{row}] flipped", {**frames, "resources": flipped}
    clash = frames["episodes"].with_columns(pl.lit("x").alias("regime"))
    yield "episodes: a column of cases", {**frames, "episodes": clash}
    # dead ends need no resource, so only the contract refuses an empty `resources` here
    dead_ends = frames["cases"].filter(pl.col("regime") == "unrecoverable")
    episodes = frames["episodes"].join(dead_ends, on="case_id", how="semi")
    yield (
        "dead ends only, no resources",
        {
            "cases": dead_ends,
            "resources": frames["resources"].head(0),
            "episodes": episodes,
            "steps": frames["steps"].join(episodes, on="episode_id", how="semi"),
            "citations": frames["citations"].head(0),
        },
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_corruption_gives_the_exact_checks_outcome(seed: int) -> None:
    frames = synth.generate("goal", 6, seed=seed)
    rng = random.Random(seed)
    family = [
        *contract_corruptions(frames, rng),
        *reference_corruptions(frames, rng),
    ]
    errors = 0
    for name, changed in family:
        expected = outcome(exact, changed)
        found = outcome(default, changed)
        if expected[0] == "error":
            errors += 1
            assert found == expected, name
            lazy = {t: f.lazy() for t, f in changed.items()}
            assert _one_pass.checked_scoring(lazy) is None, name
        else:
            assert found[0] == "rows", name
            assert found[1].equals(expected[1]), name
    assert errors >= 40  # the family reaches every check (not a test that cannot fail)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(goals=st.integers(1, 25), seed=st.integers(0, 10_000), order=st.integers(0, 10_000))
def test_clean_tables_score_in_one_pass_as_the_exact_checks_do(goals, seed, order) -> None:
    frames = synth.generate("goal", goals, seed=seed, models=("m1", "m2"))
    frames = {
        t: f.sample(fraction=1.0, shuffle=True, seed=order + i)
        for i, (t, f) in enumerate(frames.items())
    }
    assert _one_pass.checked_scoring({t: f.lazy() for t, f in frames.items()}) is not None
    assert default(frames).equals(exact(frames))


def test_empty_steps_and_citations_are_clean() -> None:
    frames = synth.generate("goal", 4, seed=3)
    frames = {**frames, "steps": frames["steps"].head(0), "citations": frames["citations"].head(0)}
    assert _one_pass.checked_scoring({t: f.lazy() for t, f in frames.items()}) is not None
    assert default(frames).equals(exact(frames))


def test_the_nested_form_takes_the_exact_path() -> None:
    frames = {"cases": pl.LazyFrame(), "resources": pl.LazyFrame(), "episodes": pl.LazyFrame()}
    assert _one_pass.checked_scoring(frames) is None


def prefix_colliding(ids: pl.Expr, seed: int = 0) -> pl.Expr:
    """A stand-in for goal's id hash under which "x-<id>" has the key hash of "<id>"."""
    return ids.str.strip_prefix("x-").hash(seed)


def impostors(frames: Tables) -> Iterator[tuple[str, Tables]]:
    """Rows whose id is "x-<id>", which shares the key hash of an owner's id "<id>".

    Alone under the owner's key every other check passes on them, so only the owner's check
    hash tells them apart; beside genuine rows, their check hashes disagree.
    """
    steps, episodes = frames["steps"], frames["episodes"]
    episode = steps["episode_id"][0]
    impostor = steps.filter(pl.col("episode_id") == episode).with_columns(
        pl.lit(f"x-{episode}").alias("episode_id")
    )
    kept = steps.filter(pl.col("episode_id") != episode)
    yield "the steps of one episode", {**frames, "steps": pl.concat([kept, impostor])}
    citations = frames["citations"]
    episode = citations["episode_id"][0]
    renamed = pl.when(pl.col("episode_id") == episode).then(pl.lit(f"x-{episode}"))
    moved = citations.with_columns(renamed.otherwise(pl.col("episode_id")).alias("episode_id"))
    yield "the citations of one episode", {**frames, "citations": moved}
    case = episodes["case_id"][0]
    moved = set_value(episodes, "case_id", 0, f"x-{case}")
    yield "one episode's case", {**frames, "episodes": moved}
    # an unrecoverable case loses no rule with its resources; its episodes' citations go too
    case = frames["cases"].filter(pl.col("regime") == "unrecoverable")["case_id"][0]
    resources = frames["resources"]
    impostor = resources.filter(pl.col("case_id") == case).with_columns(
        pl.lit(f"x-{case}").alias("case_id")
    )
    kept = resources.filter(pl.col("case_id") != case)
    of_case = episodes.filter(pl.col("case_id") == case).select("episode_id")
    citations = frames["citations"].join(of_case, on="episode_id", how="anti")
    changed = {**frames, "resources": pl.concat([kept, impostor]), "citations": citations}
    yield "the resources of one case", changed
    beside = impostor.head(1).with_columns(pl.lit("x-never-cited").alias("resource_id"))
    yield "a resource beside its case's", {**frames, "resources": pl.concat([resources, beside])}


@pytest.mark.parametrize("seed", [4, 5])
def test_an_impostor_alone_under_its_owners_key_is_refused(monkeypatch, seed: int) -> None:
    monkeypatch.setattr(goal_rules, "_id_hash", prefix_colliding)
    for name, changed in impostors(synth.generate("goal", 6, seed=seed)):
        expected = outcome(exact, changed)
        assert expected[0] == "error", name
        assert "unknown" in expected[1][1], name
        assert _one_pass.checked_scoring({t: f.lazy() for t, f in changed.items()}) is None, name
        assert outcome(default, changed) == expected, name


def impostors_beside_owners(frames: Tables, n: int) -> Iterator[tuple[str, Tables]]:
    """``n`` rows of "x-<id>" beside the genuine rows of "<id>", under the same key hash.

    Every other check passes: a new step number, an unreachable decoy resource of a new id.
    Only the check hashes of the key's rows tell the impostors from the owner's rows.
    """
    steps, resources = frames["steps"], frames["resources"]
    episode = steps["episode_id"][0]
    extra = (
        steps.filter(pl.col("episode_id") == episode)
        .head(1)
        .select(
            pl.lit(f"x-{episode}").alias("episode_id"),
            (steps["step"].max() + 1 + pl.int_range(n)).alias("step"),
            pl.lit(None, dtype=pl.String).alias("resource_id"),
            pl.lit(False).alias("prohibited"),
        )
    )
    if n > 1:
        extra = extra.select(pl.all().repeat_by(n).explode()).with_columns(
            (steps["step"].max() + 1 + pl.int_range(pl.len())).alias("step")
        )
    yield f"{n} steps beside their owner's", {**frames, "steps": pl.concat([steps, extra])}
    case = resources["case_id"][0]
    decoys = pl.DataFrame(
        {
            "case_id": [f"x-{case}"] * n,
            "resource_id": [f"x-decoy-{i}" for i in range(n)],
            "relation": ["decoy"] * n,
            "reachable": [False] * n,
        },
        schema=resources.schema,
    )
    yield (
        f"{n} resources beside their case's",
        {**frames, "resources": pl.concat([resources, decoys])},
    )


@pytest.mark.parametrize("n", [1, 2, 4])
def test_an_impostor_beside_its_owners_rows_is_refused(monkeypatch, n: int) -> None:
    monkeypatch.setattr(goal_rules, "_id_hash", prefix_colliding)
    for name, changed in impostors_beside_owners(synth.generate("goal", 6, seed=3), n):
        expected = outcome(exact, changed)
        assert expected[0] == "error", name
        assert "unknown" in expected[1][1], name
        assert _one_pass.checked_scoring({t: f.lazy() for t, f in changed.items()}) is None, name
        assert outcome(default, changed) == expected, name


def look_alike_sources(frames: Tables) -> Iterator[tuple[str, Tables]]:
    """A source "x-<id>" where "<id>" is cited: visited instead of it, or cited instead of it.

    Each for several citations: which of the two sources' second hashes is the smaller one
    differs between them, and with it the check that tells them apart first.
    """
    citations, steps = frames["citations"], frames["steps"]
    for row in range(min(6, citations.height)):
        episode, source = citations.row(row)[:2]
        of_pair = (pl.col("episode_id") == episode) & (pl.col("resource_id") == source)
        look_alike = (
            steps.filter(pl.col("episode_id") == episode)
            .head(1)
            .with_columns(
                pl.lit(f"x-{source}").alias("resource_id"),
                (pl.col("step") + steps["step"].max() + 1).alias("step"),
            )
        )
        unvisited = steps.filter(~of_pair)
        visited = pl.concat([unvisited, look_alike])
        yield f"a look-alike of cited {source} visited", {**frames, "steps": visited}
        cited = set_value(citations, "resource_id", row, f"x-{source}")
        changed = {**frames, "citations": cited, "steps": unvisited}
        yield f"a look-alike of listed {source} cited", changed


def assert_exact(frames: Tables, name: str, *, refused: bool) -> None:
    """Assert that ``score`` gives the exact checks' outcome, in one pass unless ``refused``."""
    one_pass = _one_pass.checked_scoring({t: f.lazy() for t, f in frames.items()})
    assert (one_pass is None) == refused, name
    expected = outcome(exact, frames)
    found = outcome(default, frames)
    assert found[0] == expected[0], name
    assert found[1] == expected[1] if found[0] == "error" else found[1].equals(expected[1]), name
    if one_pass is not None:
        assert one_pass.collect().sort("episode_id").equals(expected[1]), name


@pytest.mark.parametrize("seed", [6, 7])
@pytest.mark.parametrize("shared", ["_text_hash", "_text_check"])
def test_a_look_alike_source_under_one_of_its_hashes_is_told_apart(monkeypatch, seed, shared):
    # the look-alike shares one of the source's two hashes: a visit of it is no visit of the
    # cited source (the other half of the visit key differs), and a citation of it is refused
    # when it meets the listed source's resource (its second hash differs) or has none
    monkeypatch.setattr(_one_pass, shared, prefix_colliding)
    for name, changed in look_alike_sources(synth.generate("goal", 6, seed=seed)):
        assert_exact(changed, name, refused=name.endswith("cited"))


def test_pairs_of_colliding_keys_are_scored_exactly(monkeypatch) -> None:
    # every (episode, source) pair and (case, source) key hashes as its source alone
    monkeypatch.setattr(_one_pass, "_pair_key", lambda key, source_hash: source_hash)
    frames = synth.generate("goal", 6, seed=8)
    assert _one_pass.checked_scoring({t: f.lazy() for t, f in frames.items()}) is None
    assert default(frames).equals(exact(frames))


def shared_source(frames: Tables, *, swap: bool, elsewhere: str) -> Tables:
    """Clean tables where "solo" is cited by one episode and ``elsewhere`` seen by another.

    ``elsewhere``: ``"visited"`` by the other episode, or ``"listed"`` by its case as a decoy.
    The citing episode's case lists "solo" as a reachable copy. ``swap`` swaps the episodes
    (whose key is the smaller decides which row keys their shared pair).
    """
    episodes, cases = frames["episodes"], frames["cases"]
    recoverable = cases.filter(pl.col("regime") != "unrecoverable")["case_id"].implode()
    citing = episodes.filter(pl.col("case_id").is_in(recoverable)).row(0, named=True)
    other = episodes.filter(
        pl.col("case_id").is_in(recoverable) & (pl.col("case_id") != citing["case_id"])
    ).row(0, named=True)
    citing, other = (other, citing) if swap else (citing, other)
    resources, steps = frames["resources"], frames["steps"]
    listed = [(citing["case_id"], "solo", "copy", True)]
    listed += [(other["case_id"], "solo", "decoy", False)] if elsewhere == "listed" else []
    visit = steps.head(1).with_columns(
        pl.lit(other["episode_id"]).alias("episode_id"),
        pl.lit(steps["step"].max() + 1).cast(steps.schema["step"]).alias("step"),
        pl.lit("solo").alias("resource_id"),
    )
    citation = pl.DataFrame({"episode_id": [citing["episode_id"]], "resource_id": ["solo"]})
    return {
        **frames,
        "resources": pl.concat(
            [resources, pl.DataFrame(listed, schema=resources.schema, orient="row")]
        ),
        "citations": pl.concat([frames["citations"], citation.cast(frames["citations"].schema)]),
        "steps": pl.concat([steps, visit]) if elsewhere == "visited" else steps,
    }


def solo_colliding(key: pl.Expr, source_hash: pl.Expr) -> pl.Expr:
    """A stand-in for ``_pair_key`` under which every pair of source "solo" has one key."""
    solo = pl.lit("solo").hash()
    return pl.when(source_hash == solo).then(source_hash).otherwise(key.hash() ^ source_hash)


@pytest.mark.parametrize("elsewhere", ["visited", "listed"])
@pytest.mark.parametrize("swap", [False, True])
def test_a_pair_key_shared_across_episodes_or_cases_is_told_apart(monkeypatch, swap, elsewhere):
    frames = shared_source(synth.generate("goal", 6, seed=9), swap=swap, elsewhere=elsewhere)
    assert_exact(frames, "real keys", refused=False)
    # "solo" alone keys its pairs by its own hash: the citation shares its pair key with the
    # other episode's visit (the visit key's other half tells them apart) or with the other
    # case's listing (the resource's case differs: refused)
    monkeypatch.setattr(_one_pass, "_pair_key", solo_colliding)
    assert_exact(frames, elsewhere, refused=elsewhere == "listed")


def test_a_visit_key_half_shared_across_episodes_is_told_apart(monkeypatch) -> None:
    frames = shared_source(synth.generate("goal", 6, seed=9), swap=False, elsewhere="visited")
    monkeypatch.setattr(_one_pass, "_pair_check", lambda key, source_check: source_check)
    assert_exact(frames, "the second half shared", refused=False)


def test_a_source_listed_by_another_case_only_under_a_shared_key_is_refused(monkeypatch):
    frames = shared_source(synth.generate("goal", 6, seed=9), swap=False, elsewhere="listed")
    own_listing = (pl.col("resource_id") == "solo") & (pl.col("relation") == "copy")
    frames = {**frames, "resources": frames["resources"].filter(~own_listing)}
    expected = outcome(exact, frames)
    assert expected[0] == "error", expected
    assert "list" in expected[1][1], expected
    # the citation's resource key is the other case's listing's: only their cases differ
    monkeypatch.setattr(_one_pass, "_pair_key", solo_colliding)
    assert_exact(frames, "listed by the other case only", refused=True)


def report_texts(frames: Tables) -> Iterator[tuple[str, bool | None, Tables]]:
    """A dead end's episodes, abstaining and citing nothing, with each diagnosis and barrier.

    Yields (name, whether the diagnosis names the barrier, or None: refused, the tables). The
    scoring compares the two texts by their hashes in one pass: a null diagnosis, equal texts
    and look-alikes ("x-<barrier>" shares a hash of "<barrier>" under the stand-in of the test)
    must each diagnose as the strings do. A dead end without a barrier breaks a rule.
    """
    cases, episodes = frames["cases"], frames["episodes"]
    case = cases.filter(pl.col("regime") == "unrecoverable")["case_id"][0]
    of_case = pl.col("case_id") == case
    barrier = "blocked by a login wall"
    pairings = {
        "a null diagnosis, a null barrier": (None, None, None),
        "a diagnosis, a null barrier": (barrier, None, None),
        "a null diagnosis": (None, barrier, False),
        "equal texts": (barrier, barrier, True),
        "a look-alike": (f"x-{barrier}", barrier, False),
        "the other case": (barrier.upper(), barrier, False),
        "a trailing space": (f"{barrier} ", barrier, False),
    }
    silent = episodes.filter(of_case).select("episode_id")
    citations = frames["citations"].join(silent, on="episode_id", how="anti")
    for name, (diagnosis, truth, diagnosed) in pairings.items():
        abstained = episodes.with_columns(
            pl.when(of_case).then(None).otherwise(pl.col("answer")).alias("answer"),
            pl.when(of_case).then(pl.lit(diagnosis, pl.String)).otherwise(pl.col("diagnosis"))
            .alias("diagnosis"),
        )  # fmt: skip
        barriers = cases.with_columns(
            pl.when(of_case).then(pl.lit(truth, pl.String)).otherwise(pl.col("barrier"))
            .alias("barrier")
        )  # fmt: skip
        changed = {**frames, "episodes": abstained, "cases": barriers, "citations": citations}
        yield name, diagnosed, changed


@pytest.mark.parametrize("shared", [None, "_text_hash", "_text_check"])
def test_a_diagnosis_meets_its_barrier_as_the_strings_do(monkeypatch, shared) -> None:
    if shared is not None:  # the look-alike shares this half of the barrier's hash
        monkeypatch.setattr(_one_pass, shared, prefix_colliding)
    frames = synth.generate("goal", 6, seed=8)
    for name, diagnosed, changed in report_texts(frames):
        assert_exact(changed, name, refused=diagnosed is None)
        if diagnosed is not None:  # the exact outcome is the intended one
            case = changed["cases"].filter(pl.col("regime") == "unrecoverable")["case_id"][0]
            reasons = set(default(changed).filter(pl.col("case_id") == case)["reason"])
            assert ("wrong_diagnosis" not in reasons) == diagnosed, name
            assert diagnosed or reasons == {"wrong_diagnosis"}, name


def test_compared_texts_keep_their_nulls_and_their_equalities() -> None:
    # a null barrier never reaches the comparison on clean tables (a rule refuses it), so the
    # hashed texts are checked here: equal, different, null against null, null against a text
    diagnoses = ["login wall", "login wall ", None, None, "login wall"]
    barriers = ["login wall", "login wall", None, "login wall", None]
    texts = pl.DataFrame({"diagnosis": diagnoses, "barrier": barriers})
    hashed = texts.select(_one_pass._hashed_text("diagnosis"), _one_pass._hashed_text("barrier"))
    compared = hashed.select(pl.col("diagnosis") == pl.col("barrier")).to_series()
    assert compared.to_list() == [True, False, None, None, None]  # as the strings compare


def numbered(kind: str, start: int, n: int, rng: random.Random) -> list[int]:
    """Step numbers of one episode: a run, a run with gaps, or a run with repeats.

    ``balanced`` keeps the count, the smallest and largest number and the sum of a run while
    repeating two numbers: only the hashes in the episode's tag tell it from the run.
    """
    run = list(range(start, start + n))
    if kind == "gaps":
        return sorted(rng.sample(range(start, start + 3 * n), n))
    if kind == "repeat" and n > 1:
        run[rng.randrange(1, n)] = run[rng.randrange(n)]
    if kind == "balanced" and n >= 4:
        run[1], run[-2] = start, start + n - 1
    rng.shuffle(run)
    return run


#: Ways one row of an episode breaks a check other than a repeat (see :func:`steps_part`).
BREAKS = ("impostor", "negative step", "null prohibited", "null id", "no owner")


def steps_part(
    numbers: list[list[int]], breaks: dict[int, str] | None = None, *, as_runs: bool = True
) -> tuple[pl.DataFrame, pl.LazyFrame, pl.LazyFrame]:
    """The steps part of episodes with these step numbers, its steps and their owners.

    ``breaks``: per episode, a break of :data:`BREAKS` in its first row: an "x-" id that shares
    the key hash under :func:`prefix_colliding`, a step of -1, a null ``prohibited``, a null
    id, or no episode owning the key.
    """
    breaks = breaks or {}
    rows = [(f"e{i}", s, False) for i, steps in enumerate(numbers) for s in steps]
    first_rows = {f"e{i}": rows.index(next(r for r in rows if r[0] == f"e{i}")) for i in breaks}
    for i, kind in breaks.items():
        at = first_rows[f"e{i}"]
        episode, step, prohibited = rows[at]
        if kind == "impostor":
            rows[at] = (f"x-{episode}", step, prohibited)
        elif kind == "negative step":
            rows[at] = (episode, -1, prohibited)
        elif kind == "null prohibited":
            rows[at] = (episode, step, None)
        elif kind == "null id":
            rows[at] = (None, step, prohibited)
    steps = pl.DataFrame(
        rows,
        schema={"episode_id": pl.String, "step": pl.Int64, "prohibited": pl.Boolean},
        orient="row",
    ).with_columns(pl.lit(None, dtype=pl.String).alias("resource_id"))
    keyed = steps.lazy().with_columns(goal_rules._key("episode_id", "_episode", hashed=True))
    checked = _one_pass._with_check_hashes(keyed, ("_episode",))
    owned = [f"e{i}" for i in range(len(numbers)) if breaks.get(i) != "no owner"]
    episodes = pl.LazyFrame({"episode_id": owned}, schema={"episode_id": pl.String})
    owners = _one_pass._with_check_hashes(
        episodes.with_columns(goal_rules._key("episode_id", "_episode", hashed=True)),
        ("_episode",),
    ).select("_episode", _owner="_episode_check")
    part = _step_checks.step_parts(checked, owners, as_runs=as_runs).collect()
    return part, checked, owners


@settings(
    max_examples=200,
    deadline=None,
    # the fixture only swaps the id hash and sets the table size, the same for every example
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    episodes=st.lists(
        st.tuples(
            st.sampled_from(["run", "gaps", "repeat", "balanced"]),
            st.sampled_from([0, 1, 7, 2**22 - 3, 2**40]),
            st.integers(1, 9),
            st.sampled_from([None, None, None, *BREAKS]),
        ),
        min_size=1,
        max_size=8,
    ),
    table=st.sampled_from([4, 64, 2**22]),
    seed=st.integers(0, 2**16),
    as_runs=st.booleans(),
)
def test_broken_steps_are_found_however_the_steps_are_numbered(
    monkeypatch,
    episodes: list[tuple[str, int, int, str | None]],
    table: int,
    seed: int,
    as_runs: bool,
) -> None:
    # runs from any start, gaps, repeats that keep the run's count, bounds and sum, runs beyond
    # the table of prefix sums (then checked exactly), each with or without a broken row, by
    # the tag or by the exact flags: against a plain check
    null_kept = lambda ids: pl.when(ids.is_not_null()).then(prefix_colliding(ids))  # noqa: E731
    monkeypatch.setattr(goal_rules, "_id_hash", null_kept)  # a null id has a null key
    monkeypatch.setattr(_step_checks, "_MAX_TABULATED_STEP", table)
    rng = random.Random(seed)
    numbers = [numbered(kind, start, n, rng) for kind, start, n, _ in episodes]
    breaks = {i: kind for i, (*_, kind) in enumerate(episodes) if kind is not None}
    clean = not breaks and all(len(set(steps)) == len(steps) for steps in numbers)
    assert _step_checks.steps_clean(*steps_part(numbers, breaks, as_runs=as_runs)) == clean


def forbid_second_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the exact second pass over the steps fail the test if it runs."""

    def no_second_pass(*args: object, **kwargs: object) -> None:
        raise AssertionError("checked exactly")

    monkeypatch.setattr(_step_checks, "_checked_exactly", no_second_pass)


def test_runs_are_told_apart_by_their_tag_alone(monkeypatch) -> None:
    # clean runs within the table never reach the exact count, whatever their order and start
    rng = random.Random(3)
    numbers = [numbered("run", start, n, rng) for start in (0, 1, 5) for n in (1, 2, 9)]
    part, steps, owners = steps_part(numbers)
    monkeypatch.setattr(_step_checks, "_MAX_TABULATED_STEP", 64)
    forbid_second_pass(monkeypatch)
    assert _step_checks.steps_clean(part, steps, owners)


@pytest.mark.parametrize("table", ["cases", "episodes"])
@pytest.mark.parametrize("name", ["_case_check", "_episode_check", "_violated"])
def test_an_extra_column_named_as_a_helper_is_refused_on_both_paths(table: str, name: str) -> None:
    # the one-pass parts add these columns beside the case columns they carry to the output
    frames = synth.generate("goal", 4, seed=2)
    changed = {**frames, table: frames[table].with_columns(pl.lit(1).alias(name))}
    expected = outcome(exact, changed)
    assert expected[0] == "error"
    assert "reserved" in expected[1][1]
    assert outcome(default, changed) == expected


@pytest.mark.parametrize(
    ("kind", "start", "expected"),
    [("run", 0, True), ("run", 1, True), ("run", 10**9, True), ("gaps", 0, False)],
)
def test_the_check_is_chosen_by_how_the_first_steps_are_numbered(
    monkeypatch, kind: str, start: int, expected: bool
) -> None:
    # runs (shuffled, any start) take the tag, numbers with gaps the exact flags; the last
    # sampled episode may be cut without changing the choice
    monkeypatch.setattr(_step_checks, "_SAMPLE_ROWS", 100)
    rng = random.Random(5)
    numbers = [numbered(kind, start, 7, rng) for _ in range(40)]
    _, steps, _ = steps_part(numbers)
    assert _step_checks.numbered_as_runs(steps) == expected


def test_numbers_with_gaps_are_checked_in_the_one_pass(monkeypatch) -> None:
    # every step number doubled: the one pass takes the exact flags and reads the steps once
    frames = synth.generate("goal", 6, seed=4)
    gaps = {**frames, "steps": frames["steps"].with_columns(pl.col("step") * 2)}
    forbid_second_pass(monkeypatch)
    assert_exact(gaps, "every step number doubled", refused=False)
