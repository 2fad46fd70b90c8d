"""Benchmarks of pith-merge against the physical limit of a merge: Ed25519 verification.

``python -m bench`` runs them all (``--quick`` with tiny sizes); ``docs/performance.md``
explains each figure, its target and how it was measured. Nothing here is imported by
``merge``, and nothing here runs in ``make test`` except a smoke run with tiny sizes.
"""
