"""The long-term tier: Mem0 embedded as a library, over one vector backend per storage mode.

``store`` is the tier (``LongTermStore``); it reaches its vector store only through
``backend.VectorBackend``, implemented by ``chroma`` (local mode) and ``pgvector`` (external
mode). ``terms`` is the vocabulary every layer shares: how the service's scope and
attribution read in Mem0's terms. Layers import downwards only: the store, then the
backends, then the vocabulary.
"""
