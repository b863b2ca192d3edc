"""The optional parts of zoomeval (pyproject.toml's extras): the module each brings, whether it is installed, and the
one-line refusal of a study that needs one that is not."""

from __future__ import annotations

from importlib.util import find_spec

#: The module each extra installs that a study may need.
EXTRA_MODULES = {"sam": "segment_anything", "clip": "open_clip"}


def installed(extra: str) -> bool:
    return find_spec(EXTRA_MODULES[extra]) is not None


def missing_extra(key: str, value: str, extra: str) -> str:
    """The refusal of config ``key`` whose ``value`` needs ``extra``, not installed."""
    return f"{key}: {value} needs zoomeval's {extra!r} extra, which is not installed: pip install 'zoomeval[{extra}]'"
