"""recoverylab: measure how well AI agents and their harnesses recover from errors.

Layout (README "Layout", ARCHITECTURE §2): the public face. It re-exports the core (schema, io,
_errors) and loads the protocol, engine, report and synth packages on first use; dependencies
point one way, cli -> protocols -> plan/stats/schema/io, with no import circles.

Three published evaluation protocols on one engine of lazy polars queries and scipy tests:
paired counterfactual recovery (``recoverylab.paired``, ``recoverylab.router``), goal preservation
under access barriers (``recoverylab.goal``) and takeover from replayed error states
(``recoverylab.takeover``). Every input is an Arrow table; every result is a polars frame.
"""

import importlib
from types import ModuleType

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
from recoverylab.io import scan, write_parquet
from recoverylab.schema import SPECS, validate

__version__ = "0.1.0"

#: Protocol and engine modules, imported on first attribute access so `import recoverylab` stays
#: fast: ``recoverylab.paired.summarize(...)`` works without importing ``recoverylab.paired``.
_SUBMODULES = (
    "engines",
    "goal",
    "paired",
    "plan",
    "report",
    "router",
    "stats",
    "synth",
    "takeover",
)
#: Earlier names of a module, still reachable: ``recoverylab.distributed`` is the engines.
_ALIASES = {"distributed": "engines"}


def __getattr__(name: str) -> ModuleType:
    if name in _SUBMODULES or name in _ALIASES:
        return importlib.import_module(f"recoverylab.{_ALIASES.get(name, name)}")
    raise AttributeError(f"module 'recoverylab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBMODULES, *_ALIASES})


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
