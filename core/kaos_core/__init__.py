"""KAOS core: the code every image shares.

Wire contracts, clients, CRD models, settings, logging, metrics and health. Nothing in
here imports an image package (``kaos_memory``, ``kaos_agent``, ``kaos_operator``), so
the core installs and imports with none of the per-image extras.
"""

__version__ = "0.1.0"
