"""Deprecated alias of :mod:`merge.testing` (the strategies moved there; extra ``pith-merge[testing]``).

Every name is :mod:`merge.testing`'s own object. Importing this module warns
(:class:`DeprecationWarning`); import :mod:`merge.testing` instead.
"""

from __future__ import annotations

import warnings

from .testing import *  # noqa: F403 (the whole API, re-exported)
from .testing import __all__  # noqa: F401

warnings.warn(
    "merge.strategies is deprecated: import merge.testing instead (pip install 'pith-merge[testing]')",
    DeprecationWarning,
    stacklevel=2,
)
