"""Synthetic run logs with known ground truth, for tests, ``data_samples/`` and ``benchmarks/``.

Layout: one private generator per protocol (``_forks``, ``_router``, ``_goal``, ``_takeover``)
and :mod:`recoverylab.synth.inspect_logs` (genuine inspect_ai logs). May import the core and the
protocols' public API; among recoverylab's packages only the cli imports it.

Each generator makes the tables of one protocol for a range of cluster units (tasks, cases,
workflows), in fixed blocks of :data:`BLOCK` with a random stream from ``(seed, block index)``:
the same seed gives the same rows however the output is chunked, and any machine can make any
block. :func:`write` streams chunks to ``out_dir/<table>/part-NNNNN.parquet``, so a 50-million-row
forks table never has to fit in memory.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError
from recoverylab._outputs import atomic_dir

__all__ = ["BLOCK", "GENERATORS", "Generator", "generate", "register", "write"]

#: Cluster units per random block. Fixed: changing it changes every generated data set.
BLOCK = 10_000

#: Generator modules, imported on first use.
_MODULES: tuple[str, ...] = ("_router", "_forks", "_goal", "_takeover")

Tables = dict[str, pl.DataFrame]


@dataclass(frozen=True)
class Generator:
    """A synthetic data generator for one protocol.

    ``block(start, stop, rng, **options)`` returns the tables for units ``start..stop-1``; it must
    use only ``rng`` for randomness and be vectorised over units.
    """

    name: str
    tables: tuple[str, ...]
    block: Callable[..., Tables]
    description: str


GENERATORS: dict[str, Generator] = {}


def register(generator: Generator) -> Generator:
    """Add a generator to :data:`GENERATORS` (called by the generator modules)."""
    GENERATORS[generator.name] = generator
    return generator


def get(name: str) -> Generator:
    """Return the generator called ``name``."""
    for module in _MODULES:
        importlib.import_module(f"recoverylab.synth.{module}")
    try:
        return GENERATORS[name]
    except KeyError:
        known = ", ".join(sorted(GENERATORS)) or "none"
        raise ParameterError(f"unknown synthetic table {name!r}; known: {known}.") from None


def _blocks(units: int, seed: int, gen: Generator, options: dict) -> Iterator[Tables]:
    if units < 1:
        raise ParameterError(f"parameter `tasks` is {units}; it must be at least 1.")
    for index, start in enumerate(range(0, units, BLOCK)):
        rng = np.random.default_rng([seed, index])
        yield gen.block(start, min(start + BLOCK, units), rng, **options)


def generate(name: str, units: int, *, seed: int = 0, **options: object) -> Tables:
    """Generate every table of generator ``name`` for ``units`` cluster units, in memory.

    Examples
    --------
    >>> from recoverylab import synth
    >>> tables = synth.generate("forks", 10, seed=1)  # doctest: +SKIP
    """
    gen = get(name)
    blocks = list(_blocks(units, seed, gen, options))
    return {t: pl.concat([b[t] for b in blocks], how="vertical_relaxed") for t in gen.tables}


def write(
    name: str,
    out_dir: str | Path,
    units: int,
    *,
    seed: int = 0,
    chunk_units: int = 100_000,
    progress: Callable[[str], None] | None = None,
    **options: object,
) -> dict[str, list[Path]]:
    """Stream generator ``name`` to ``out_dir/<table>/part-NNNNN.parquet``, chunk by chunk.

    Parameters
    ----------
    name
        Generator name (see :data:`GENERATORS`).
    out_dir
        Output directory.
    units
        Number of cluster units (tasks, cases or workflows).
    seed
        Random seed; the same seed gives the same rows whatever ``chunk_units`` is.
    chunk_units
        Units per output file (rounded up to whole blocks of :data:`BLOCK`).
    progress
        Called with a message after each file.
    **options
        Passed to the generator.

    Returns
    -------
    dict
        Table name -> written files.
    """
    gen = get(name)
    per_file = max(1, -(-chunk_units // BLOCK))
    out = Path(out_dir)
    written: dict[str, list[Path]] = {t: [] for t in gen.tables}
    blocks = _blocks(units, seed, gen, options)
    done = 0
    # Each table's directory is staged whole and renamed into place at the end: a killed run
    # leaves no incomplete dataset, and parts of an earlier, larger run never mix with these.
    with ExitStack() as stack:
        staging = {t: stack.enter_context(atomic_dir(out / t)) for t in gen.tables}
        while chunk := list(itertools.islice(blocks, per_file)):
            done += len(chunk)
            for table, files in written.items():
                part = f"part-{len(files):05d}.parquet"
                frame = pl.concat([b[table] for b in chunk], how="vertical_relaxed")
                frame.write_parquet(staging[table] / part)
                files.append(out / table / part)
            if progress is not None:
                progress(f"{name}: {min(done * BLOCK, units)}/{units} units written")
    return written
