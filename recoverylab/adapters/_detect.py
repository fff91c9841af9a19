"""Recognise inspect_ai evaluation logs from their first bytes, without importing inspect_ai.

The recognition is core knowledge (table readers use it to point at ``recoverylab import``), so
it lives in :mod:`recoverylab._formats`; the adapters package re-exports it under its own name.
"""

from __future__ import annotations

from recoverylab._formats import inspect_log_hint, looks_like_inspect_log

__all__ = ["inspect_log_hint", "looks_like_inspect_log"]
