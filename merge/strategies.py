"""The former name of :mod:`merge.testing` (the strategies moved there; extra ``pith-merge[testing]``).

Every name is :mod:`merge.testing`'s own object. New code imports :mod:`merge.testing`. This
module stays silent (no :class:`DeprecationWarning`): test suites that turn warnings into errors,
as this project's does, must keep importing it as they did.
"""

from __future__ import annotations

from .testing import *  # noqa: F403 (the whole API, re-exported)
from .testing import __all__  # noqa: F401
