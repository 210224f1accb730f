"""The errors raised while providing a test cluster."""

from __future__ import annotations


class ClusterError(Exception):
    """Root of the errors raised while providing a test cluster."""


class BinariesMissing(ClusterError):
    """The control-plane binaries are not built yet."""


class StartupFailed(ClusterError):
    """A component did not become ready; the message carries the tail of its log."""


class StepFailed(ClusterError):
    """A script of the repository (``hack/images``, ``hack/kind/deploy``) failed or overran;
    the message carries the tail of its log."""
