"""Which system prompt a store's fact extraction sends: shared by the MemoryStore resource
and the memory service's settings."""

from __future__ import annotations

from typing import Literal

# Mem0's own extraction system prompt, or KAOS's compact one
# (``kaos_memory.storage.mem0.compact``).
ExtractionSystemPrompt = Literal["mem0", "compact"]
