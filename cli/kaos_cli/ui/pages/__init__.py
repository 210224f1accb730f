"""The console's pages: the overview of every resource, an agent (tools, events, logs,
chat) and a MemoryStore's inspector (tiers, digest versions, forget)."""
