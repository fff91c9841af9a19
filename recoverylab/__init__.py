"""recoverylab: measure how well AI agents and their harnesses recover from errors.

Three published evaluation protocols on one engine of lazy polars queries and scipy tests:
paired counterfactual recovery (``recoverylab.paired``, ``recoverylab.router``), goal preservation
under access barriers (``recoverylab.goal``) and takeover from replayed error states
(``recoverylab.takeover``). Every input is an Arrow table; every result is a polars frame.
"""

from recoverylab._errors import (
    InputError,
    MissingDependencyError,
    NotFittedError,
    ParameterError,
    RecoveryLabError,
    SchemaError,
    SourceError,
)
from recoverylab.io import scan, write_parquet
from recoverylab.schema import SPECS, validate

__version__ = "0.1.0"

__all__ = [
    "SPECS",
    "InputError",
    "MissingDependencyError",
    "NotFittedError",
    "ParameterError",
    "RecoveryLabError",
    "SchemaError",
    "SourceError",
    "__version__",
    "scan",
    "validate",
    "write_parquet",
]
