"""Build-time metadata of pith-merge: where its release requires the compiled path.

A release's wheel and sdist (``make wheels``, which sets ``PITH_MERGE_RELEASE=1``) require
``pith-merge-native`` at exactly this version on the platforms its wheel is built for, so that
``pip install pith-merge`` is fast by default there (docs/performance.md, "Installing the compiled
path"). Any other build, ``pip install .`` of a checkout or a build from the sdist where no wheel
of the native package fits, leaves it out: the install never fails for want of Rust, and
``pith-merge --version`` says that the pure path serves and how to get the compiled one.
"""

from __future__ import annotations

import os
from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface

#: Set by ``make wheels``: the build is a release's, which pins the compiled path.
RELEASE = "PITH_MERGE_RELEASE"


class CompiledPathPin(MetadataHookInterface):
    """``dependencies`` from ``[tool.hatch.metadata.hooks.custom]``, plus ``native`` in a release."""

    PLUGIN_NAME = "custom"

    def update(self, metadata: dict[str, Any]) -> None:
        dependencies = list(self.config["dependencies"])
        if os.environ.get(RELEASE) == "1":
            dependencies.append(self.config["native"])
        metadata["dependencies"] = dependencies
