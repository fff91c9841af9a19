"""recoverylab: measure how well AI agents and their harnesses recover from errors.

Layout (README "Layout", ARCHITECTURE §2): the public face. It re-exports the errors (stdlib
only) and loads everything else on first use: the core names (``scan``, ``validate``, ... from io
and schema) and the protocol, engine, report and synth packages, so ``import recoverylab`` (and
the command line's ``--help``) imports no polars until a name that needs it is used. Dependencies
point one way, cli -> protocols -> plan/stats/schema/io, with no import circles.

Three published evaluation protocols on one engine of lazy polars queries and scipy tests:
paired counterfactual recovery (``recoverylab.paired``, ``recoverylab.router``), goal preservation
under access barriers (``recoverylab.goal``) and takeover from replayed error states
(``recoverylab.takeover``). Every input is an Arrow table; every result is a polars frame.
"""

import importlib
from typing import TYPE_CHECKING, Any

from recoverylab._errors import (
    EngineError,
    InputError,
    MissingDependencyError,
    NotFittedError,
    OutputError,
    ParameterError,
    RecoveryLabError,
    RecoveryLabWarning,
    SchemaError,
    SourceError,
)

if TYPE_CHECKING:  # loaded on first use (see __getattr__); named here for type checkers
    from recoverylab.io import scan, write_parquet
    from recoverylab.schema import SPECS, validate

__version__ = "0.1.0"

#: Modules imported on first attribute access so `import recoverylab` stays fast:
#: ``recoverylab.paired.summarize(...)`` works without importing ``recoverylab.paired``.
_SUBMODULES = (
    "engines",
    "goal",
    "io",
    "paired",
    "plan",
    "report",
    "router",
    "schema",
    "stats",
    "synth",
    "takeover",
)
#: Earlier names of a module, still reachable: ``recoverylab.distributed`` is the engines.
_ALIASES = {"distributed": "engines"}
#: Names re-exported from the core, by the module that defines them; they import polars, so
#: they too are loaded on first use (``from recoverylab import scan`` works as before).
_CORE_NAMES = {
    "scan": "io",
    "write_parquet": "io",
    "SPECS": "schema",
    "validate": "schema",
}


def __getattr__(name: str) -> Any:
    if name in _CORE_NAMES:
        value = getattr(importlib.import_module(f"recoverylab.{_CORE_NAMES[name]}"), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    if name in _SUBMODULES or name in _ALIASES:
        return importlib.import_module(f"recoverylab.{_ALIASES.get(name, name)}")
    raise AttributeError(f"module 'recoverylab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBMODULES, *_ALIASES, *_CORE_NAMES})


__all__ = [
    "SPECS",
    "EngineError",
    "InputError",
    "MissingDependencyError",
    "NotFittedError",
    "OutputError",
    "ParameterError",
    "RecoveryLabError",
    "RecoveryLabWarning",
    "SchemaError",
    "SourceError",
    "__version__",
    "engines",
    "goal",
    "paired",
    "plan",
    "report",
    "router",
    "scan",
    "stats",
    "synth",
    "takeover",
    "validate",
    "write_parquet",
]
