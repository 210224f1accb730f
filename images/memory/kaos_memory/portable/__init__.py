"""Memory a data subject can take along: the portable format, export, import, and Mem0's
dumps as imports (``docs/memory/export-format.md``)."""
