"""Types of ``merge.fold``, the old name of the module :mod:`merge.batch` (:mod:`merge._compat`).

Every name of it warns when used, and the name goes in 0.4.0; no file ``merge/fold.py`` exists
(``merge/__init__.py`` registers the module). New code imports :mod:`merge.batch`, or the
function ``merge.fold``.
"""

from typing import Any

def __getattr__(name: str) -> Any: ...
