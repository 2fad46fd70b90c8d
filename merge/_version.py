"""pith-merge's version, in a module of its own: any module may import it, and none of them
has to import :mod:`merge` (the package's ``__init__``, which imports everything) to learn it."""

#: This package's version (the only place it is written; pyproject.toml reads it from here).
__version__ = "0.3.0"
