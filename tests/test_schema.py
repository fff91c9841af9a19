"""Table contracts: every validation path of every table, with its message."""

from __future__ import annotations

import re

import hypothesis.strategies as st
import polars as pl
import pytest
from hypothesis import given, settings

from recoverylab import SPECS, SchemaError, validate
from recoverylab.schema import Column, canonical_dtype, spec

#: One valid row per table (two where the key needs it), the base of every negative test.
VALID: dict[str, dict[str, list[object]]] = {
    "forks": {
        "task_id": ["t1", "t1"],
        "condition": ["stale2", "stale2"],
        "method": ["none", "refresh"],
        "delay": [None, 0],
        "success": [False, True],
    },
    "decisions": {"task_id": ["t1"], "condition": ["clean"], "delay": [None]},
    "decision_points": {
        "task_id": ["t1"],
        "condition": ["clean"],
        "delay": [1],
        "repetition": [0.5],
    },
    "cases": {
        "case_id": ["c1"],
        "regime": ["recoverable"],
        "barrier": ["login_wall"],
        "needs_user_help": [False],
    },
    "resources": {
        "case_id": ["c1"],
        "resource_id": ["r1"],
        "relation": ["copy"],
        "reachable": [True],
    },
    "episodes": {
        "episode_id": ["e1"],
        "case_id": ["c1"],
        "answer": ["42"],
        "version_claim": ["same"],
        "diagnosis": [None],
        "requested_user": [False],
    },
    "steps": {
        "episode_id": ["e1"],
        "step": [0],
        "resource_id": ["r1"],
        "prohibited": [False],
    },
    "citations": {"episode_id": ["e1"], "resource_id": ["r1"]},
    "states": {
        "state_id": ["s1"],
        "workflow_id": ["w1"],
        "root_cause_id": ["rc1"],
        "depth": [5],
        "replay_ok": [True],
        "expected_ok": [True],
    },
    "attempts": {
        "state_id": ["s1"],
        "agent": ["a"],
        "repeat": [1],
        "aware": [True],
        "root_cause_fixed": [True],
        "derived_fixed": [False],
        "passed": [False],
    },
    "failures": {
        "root_cause_id": ["rc1"],
        "root_cause_step": [3],
        "surfaced_step": [20],
        "final_step": [20],
    },
    "mutations": {
        "workflow_id": ["w1"],
        "mutation_id": ["m1"],
        "executed": [True],
        "caught": [True],
    },
}

#: A wrong-typed value per table: (column, replacement values, message tail).
WRONG_TYPE = {
    "forks": ("success", ["yes", "no"], "column `success` has type String; it must be Boolean"),
    "decision_points": ("delay", [1.5], "column `delay` has type Float64; it must be Int64"),
    "cases": (
        "needs_user_help",
        [1],
        "column `needs_user_help` has type Int64; it must be Boolean",
    ),
    "resources": ("reachable", ["true"], "column `reachable` has type String; it must be Boolean"),
    "episodes": ("requested_user", [0.0], "column `requested_user` has type Float64"),
    "steps": ("step", ["0"], "column `step` has type String; it must be Int64"),
    "citations": ("resource_id", [1.5], "column `resource_id` has type Float64; it must be String"),
    "states": ("depth", [5.0], "column `depth` has type Float64; it must be Int64"),
    "attempts": ("passed", ["no"], "column `passed` has type String; it must be Boolean"),
    "failures": ("final_step", ["20"], "column `final_step` has type String; it must be Int64"),
    "mutations": ("caught", [1], "column `caught` has type Int64; it must be Boolean"),
    "decisions": ("delay", ["1"], "column `delay` has type String; it must be Int64"),
}


def frame(table: str, **changes: list[object]) -> pl.DataFrame:
    data = {**VALID[table], **changes}
    return pl.DataFrame(data, strict=False)


def first_non_nullable(table: str) -> Column:
    return next(c for c in spec(table).columns if c.required and not c.nullable and c.name != "")


def test_every_table_has_a_valid_example() -> None:
    assert set(VALID) == set(SPECS) == set(WRONG_TYPE)


def test_the_light_list_of_table_names_is_the_contracts() -> None:
    # the command line offers these names without importing polars (recoverylab._table_names)
    from recoverylab._table_names import TABLE_NAMES

    assert tuple(SPECS) == TABLE_NAMES


@pytest.mark.parametrize("table", sorted(SPECS))
def test_valid_example_passes_eager_and_lazy(table: str) -> None:
    df = frame(table)
    for given_frame in (df, df.lazy()):
        out = validate(given_frame, table)
        assert isinstance(out, pl.LazyFrame)
        assert out.collect().height == df.height


@pytest.mark.parametrize("table", sorted(SPECS))
def test_missing_column(table: str) -> None:
    column = spec(table).required[-1]
    df = frame(table).drop(column)
    with pytest.raises(SchemaError, match=rf"^{table}: missing required column `{column}`; found"):
        validate(df, table)


@pytest.mark.parametrize("table", sorted(SPECS))
def test_wrong_dtype(table: str) -> None:
    column, values, message = WRONG_TYPE[table]
    n = len(VALID[table][column])
    df = frame(table, **{column: (values * n)[:n]})
    with pytest.raises(SchemaError, match=re.escape(f"{table}: {message}")):
        validate(df, table)


@pytest.mark.parametrize("table", sorted(SPECS))
def test_null_in_required_column(table: str) -> None:
    column = first_non_nullable(table)
    values = list(VALID[table][column.name])
    values[-1] = None
    df = frame(table, **{column.name: values})
    key = "/".join(spec(table).key)
    requirement = "it must be true or false" if column.kind == "bool" else "it may not be null"
    with pytest.raises(SchemaError) as info:
        validate(df, table)
    message = str(info.value)
    assert message.startswith(f"{table}: column `{column.name}` has 1 null ({key} ")
    assert message.endswith(f"; {requirement}.")


LABELLED = [(s.name, c.name) for s in SPECS.values() for c in s.columns if c.labels]


@pytest.mark.parametrize(("table", "column"), LABELLED)
def test_unknown_label(table: str, column: str) -> None:
    df = frame(table, **{column: ["bogus"] * len(VALID[table][column])})
    allowed = ", ".join(spec(table).column(column).labels or ())
    with pytest.raises(SchemaError) as info:
        validate(df, table)
    assert str(info.value) == (
        f"{table}: column `{column}` has 1 row with unknown labels 'bogus' "
        f"({'/'.join(spec(table).key)} {'/'.join(str(frame(table)[k][0]) for k in spec(table).key)}"
        f"); allowed: {allowed}."
    )


def test_labelled_tables_cover_the_contract() -> None:
    assert {t for t, _ in LABELLED} == {"cases", "resources", "episodes"}


@pytest.mark.parametrize("table", sorted(SPECS))
def test_duplicate_key(table: str) -> None:
    df = frame(table)
    doubled = pl.concat([df, df.head(1)])
    key = spec(table).key
    with pytest.raises(SchemaError) as info:
        validate(doubled, table)
    shown = "/".join("null" if df[k][0] is None else str(df[k][0]) for k in key)
    assert str(info.value) == (
        f"{table}: 1 key appears more than once ({'/'.join(key)} {shown}); "
        f"each ({', '.join(key)}) must be unique."
    )


@pytest.mark.parametrize("table", sorted(SPECS))
def test_empty_table(table: str) -> None:
    empty = frame(table).clear()
    if spec(table).allow_empty:
        assert validate(empty, table).collect().height == 0
    else:
        with pytest.raises(
            SchemaError, match=rf"^{table}: the table is empty; it needs at least one row\.$"
        ):
            validate(empty, table)


def test_extra_key_columns_take_part_in_duplicates() -> None:
    df = pl.concat([frame("forks"), frame("forks")]).with_columns(seed=pl.Series([0, 0, 1, 1]))
    validate(df, "forks", key=("seed",))
    with pytest.raises(SchemaError, match="2 keys appear more than once"):
        validate(df, "forks")


def test_extra_key_column_must_exist() -> None:
    with pytest.raises(SchemaError, match=r"missing required column `model`"):
        validate(frame("forks"), "forks", key=("model",))


def test_recovery_row_needs_a_delay() -> None:
    df = frame("forks", delay=[None, None])
    with pytest.raises(SchemaError) as info:
        validate(df, "forks")
    assert str(info.value) == (
        "forks: column `delay` is null on 1 recovery row "
        "(task_id/condition/method/delay t1/stale2/refresh/null); "
        "only `none` rows may leave it null."
    )


def test_negative_counts_are_rejected() -> None:
    with pytest.raises(SchemaError, match=r"column `depth` is negative on 1 row \(state_id s1\)"):
        validate(frame("states", depth=[-5]), "states")


def test_failure_surfacing_order() -> None:
    with pytest.raises(SchemaError, match="`surfaced_step` is before `root_cause_step`"):
        validate(frame("failures", surfaced_step=[1]), "failures")
    with pytest.raises(SchemaError, match="`surfaced_step` is after `final_step`"):
        validate(frame("failures", surfaced_step=[25]), "failures")
    assert validate(frame("failures", surfaced_step=[None]), "failures").collect().height == 1


def test_more_than_five_offenders_are_summarised() -> None:
    df = pl.DataFrame(
        {
            "task_id": [f"t{i:02d}" for i in range(8)],
            "condition": ["clean"] * 8,
            "method": ["none"] * 8,
            "delay": [None] * 8,
            "success": [None] * 8,
        },
        schema_overrides={"success": pl.Boolean},
    )
    with pytest.raises(SchemaError) as info:
        validate(df, "forks")
    assert "has 8 nulls (task_id/condition/method/delay t00/clean/none/null" in str(info.value)
    assert "t04/clean/none/null and 3 more)" in str(info.value)


def test_safe_upcasts() -> None:
    df = frame("forks").with_columns(
        pl.col("delay").cast(pl.Int32),
        pl.col("condition").cast(pl.Categorical),
        pl.col("method").cast(pl.Enum(["none", "refresh"])),
        pl.col("task_id").str.slice(1).cast(pl.UInt16),
    )
    out = validate(df, "forks").collect()
    assert out.schema["delay"] == pl.Int64
    assert out.schema["condition"] == pl.String
    assert out.schema["method"] == pl.String
    assert out.schema["task_id"] == pl.String
    assert out["task_id"].to_list() == ["1", "1"]


def test_all_null_optional_column_takes_canonical_type() -> None:
    df = frame("forks").with_columns(prefix_hash=pl.lit(None))
    assert validate(df, "forks").collect_schema()["prefix_hash"] == pl.String


def test_extra_columns_are_carried_unchanged() -> None:
    df = frame("forks").with_columns(model=pl.lit("m"), score=pl.lit(0.5, pl.Float32))
    out = validate(df, "forks").collect()
    assert out["model"].to_list() == ["m", "m"]
    assert out.schema["score"] == pl.Float32


def test_caller_frame_is_not_modified() -> None:
    df = frame("forks").with_columns(pl.col("delay").cast(pl.Int32))
    validate(df, "forks").collect()
    assert df.schema["delay"] == pl.Int32


def test_canonical_dtype_refuses_lossy_casts() -> None:
    column = Column("x", "int")
    assert canonical_dtype(pl.Float64, column) is None
    assert canonical_dtype(pl.Int8, column) == pl.Int64
    assert canonical_dtype(pl.String, Column("x", "float")) is None


def test_unknown_table_and_check_mode() -> None:
    with pytest.raises(SchemaError, match=r"unknown table 'fork'; known tables: forks, "):
        validate(frame("forks"), "fork")
    with pytest.raises(SchemaError, match=r"parameter `checks` is 'some'"):
        validate(frame("forks"), "forks", checks="some")  # type: ignore[arg-type]


def test_schema_only_checks_skip_the_data() -> None:
    df = frame("forks", success=[None, True])
    assert validate(df, "forks", checks="schema").collect().height == 2


def test_validate_accepts_any_source(tmp_path) -> None:
    path = tmp_path / "forks.parquet"
    frame("forks").write_parquet(path)
    assert validate(str(path), "forks").collect().height == 2


forks_rows = st.lists(
    st.tuples(
        st.sampled_from(["t1", "t2", "t3", "t4"]),
        st.sampled_from(["clean", "stale2"]),
        st.sampled_from(["none", "refresh"]),
        st.sampled_from([None, 0, 1]),
        st.one_of(st.booleans(), st.none()),
    ),
    min_size=1,
    max_size=25,
)


def _outcome(df: pl.DataFrame) -> str:
    try:
        return f"ok:{validate(df, 'forks').collect().sort(pl.all()).rows()}"
    except SchemaError as exc:
        return f"error:{exc}"


@settings(max_examples=60, deadline=None)
@given(rows=forks_rows, data=st.data())
def test_validation_does_not_depend_on_row_order(rows, data) -> None:
    schema = {
        "task_id": pl.String,
        "condition": pl.String,
        "method": pl.String,
        "delay": pl.Int64,
        "success": pl.Boolean,
    }
    df = pl.DataFrame(rows, schema=schema, orient="row")
    order = data.draw(st.permutations(range(df.height)))
    assert _outcome(df) == _outcome(df[list(order)])


def test_a_repeated_hash_without_a_repeated_key_is_not_a_duplicate() -> None:
    """The hash pre-check only nominates candidates; the exact check decides (collisions)."""
    from recoverylab.schema import _check_duplicates

    df = frame("forks")
    key = spec("forks").key
    hashes = df.lazy().select(pl.struct(list(key)).hash().alias("__hash"))
    collided = pl.concat([hashes, hashes]).sort("__hash")  # every hash now repeats
    _check_duplicates(df.lazy(), spec("forks"), key, collided)  # distinct keys: no error
    doubled = pl.concat([df, df.head(1)]).lazy()
    with pytest.raises(SchemaError, match="1 key appears more than once"):
        _check_duplicates(doubled, spec("forks"), key, collided)


def test_shard_scope_allows_an_empty_shard_only_inside_it() -> None:
    from recoverylab.schema import shard_scope

    empty = frame("forks").clear()
    with shard_scope():
        assert validate(empty, "forks").collect().height == 0
        with pytest.raises(SchemaError, match="column `success` has 1 null"):
            validate(frame("forks", success=[None, True]), "forks")  # other checks unchanged
    with pytest.raises(SchemaError, match="the table is empty"):
        validate(empty, "forks")
    assert not spec("forks").allow_empty  # the shared contract object is never modified
