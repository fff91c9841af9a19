"""Lazy access to the optional plotting packages (the ``report`` extra)."""

from __future__ import annotations

import importlib
from types import ModuleType

from recoverylab._errors import MissingDependencyError

#: The pip extra that installs every package the charts and the HTML report need.
EXTRA = "recoverylab[report]"

_PACKAGES = {"altair": "altair", "vl_convert": "vl-convert-python"}


def require(module: str, feature: str = "charts") -> ModuleType:
    """Import an optional package, or say which extra installs it.

    Parameters
    ----------
    module
        ``"altair"`` or ``"vl_convert"``.
    feature
        What needs it, for the message (``"charts"``, ``"the HTML report"``...).

    Returns
    -------
    ModuleType
        The imported module.

    Raises
    ------
    MissingDependencyError
        When the package is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = _PACKAGES.get(module, module)
        raise MissingDependencyError(
            f"the optional package `{package}` is needed for {feature} but is not installed. "
            f"Hint: pip install '{EXTRA}'"
        ) from exc


def altair() -> ModuleType:
    """Return the ``altair`` module (see :func:`require`)."""
    return require("altair")


def vl_convert(feature: str = "the HTML report") -> ModuleType:
    """Return the ``vl_convert`` module (see :func:`require`)."""
    return require("vl_convert", feature)
