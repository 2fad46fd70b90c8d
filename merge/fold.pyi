"""Types of ``merge.fold`` the former module name, a deprecated alias of :mod:`merge.batch`.

At run time ``merge/__init__.py`` registers :mod:`merge.batch` under this name; no module
``merge/fold.py`` exists. New code imports :mod:`merge.batch` (or the function ``merge.fold``).
"""

from .batch import *  # noqa: F403 (the whole API, re-exported)
from .batch import __all__ as __all__
