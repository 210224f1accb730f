"""The Chroma vector backend (local mode): embedded Chroma, KAOS's listing index beside it,
the per-principal vector cache, and the purges of erased text from Chroma's files."""
