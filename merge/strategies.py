"""The old name of :mod:`merge.testing` (the strategies moved there; extra ``pith-merge[testing]``).

Every name of it warns when used (:mod:`merge._compat`), and the module goes in 0.4.0. New code
imports :mod:`merge.testing`.
"""

from __future__ import annotations

from . import testing as _testing  # noqa: F401 (without Hypothesis, this import fails as merge.testing's)
from ._compat import module_getattr

__getattr__ = module_getattr(__name__)
