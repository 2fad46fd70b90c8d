"""Property tests: the laws of merge-v1, checked with Hypothesis over generated histories."""
