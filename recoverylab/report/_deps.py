"""Lazy access to the optional plotting packages (the ``report`` extra), and the chart renderer.

Altair's default Jupyter renderer loads the Vega libraries from a CDN when the notebook is
shown, so offline (or behind a proxy) every chart reads "Error loading script". The first chart
made through :mod:`recoverylab.report` therefore switches altair to its ``svg`` renderer
(vl-convert draws the chart in the kernel; the notebook stores a static SVG, which also survives
export to HTML or PDF) — unless the user already chose a renderer of their own.
:func:`chart_renderer` chooses another, e.g. ``chart_renderer("default")`` for altair's
interactive charts when the CDN is reachable.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

from recoverylab._errors import MissingDependencyError

#: The pip extra that installs every package the charts and the HTML report need.
EXTRA = "recoverylab[report]"

_PACKAGES = {"altair": "altair", "vl_convert": "vl-convert-python"}


def require(module: str, feature: str = "charts") -> ModuleType:
    """Import ``module`` (``"altair"`` or ``"vl_convert"``), or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = _PACKAGES.get(module, module)
        raise MissingDependencyError(
            f"the optional package `{package}` is needed for {feature} but is not installed. "
            f"Hint: pip install '{EXTRA}'"
        ) from exc


#: The renderer recoverylab enables for charts in notebooks (offline: no CDN).
OFFLINE_RENDERER = "svg"

_renderer_chosen = False


def altair() -> ModuleType:
    """Return the ``altair`` module (see :func:`require`), with an offline renderer enabled.

    On the first call, when altair's renderer is still its CDN-loading default and vl-convert
    is installed, the ``svg`` renderer is enabled; later calls and a renderer the user chose
    (before or after, through altair or :func:`chart_renderer`) are left alone.
    """
    global _renderer_chosen  # noqa: PLW0603 -- one switch per process, on first use
    alt = require("altair")
    if not _renderer_chosen:
        _renderer_chosen = True
        if alt.renderers.active == "default" and importlib.util.find_spec("vl_convert"):
            alt.renderers.enable(OFFLINE_RENDERER)
    return alt


def chart_renderer(name: str = OFFLINE_RENDERER, **options: Any) -> None:
    """Choose how altair charts display in notebooks (recoverylab's default: ``"svg"``).

    Parameters
    ----------
    name
        An altair renderer: ``"svg"`` (static, offline, the default here), ``"png"``
        (static, offline), ``"default"`` (altair's interactive charts; loads Vega from a CDN
        when shown), ``"jupyter"`` (interactive through anywidget; ``offline=True`` to
        bundle Vega), or any other name in ``altair.renderers.names()``.
    **options
        Passed to ``altair.renderers.enable`` (e.g. ``offline=True``, ``scale_factor=2``).

    Raises
    ------
    MissingDependencyError
        When altair is not installed.

    Examples
    --------
    >>> from recoverylab import report
    >>> report.chart_renderer("default")  # doctest: +SKIP
    """
    global _renderer_chosen  # noqa: PLW0603 -- the user's choice is final
    alt = require("altair")
    _renderer_chosen = True
    alt.renderers.enable(name, **options)


def vl_convert(feature: str = "the HTML report") -> ModuleType:
    """Return the ``vl_convert`` module (see :func:`require`)."""
    return require("vl_convert", feature)


def check_extra() -> None:
    """Raise :class:`MissingDependencyError` unless the ``report`` extra is installed.

    A command that will write a report calls this before any work, so a missing package is
    reported in one line before minutes of statistics.
    """
    altair()
    vl_convert()
