"""Fuzzing harnesses for pith-merge (see fuzz/README.md); not part of the installed package."""
