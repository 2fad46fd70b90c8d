"""pith-merge under an unambiguous import name: ``import pith_merge`` is ``import merge``.

The package's own name, ``merge``, is generic, and an unrelated distribution on PyPI (also
called ``merge``) installs a top-level module ``merge.py``. Where both could be installed, import
``pith_merge``: it is the same public API (the names of ``merge.__all__``), and it refuses to
load when ``merge`` is not pith-merge's, instead of handing over another project's module.
"""

from __future__ import annotations

import merge as _merge

if not hasattr(_merge, "MERGE_VERSION") or not hasattr(_merge, "fold"):
    raise ImportError(
        f"the module 'merge' found at {getattr(_merge, '__file__', '?')} is not pith-merge's: "
        "another distribution installed a module of that name; uninstall it (pip uninstall merge) "
        "or put pith-merge first on sys.path"
    )

from merge import *  # noqa: F403 (the whole public API, re-exported)
from merge import __all__, __version__  # noqa: F401
