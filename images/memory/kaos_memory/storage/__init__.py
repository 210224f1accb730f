"""Storage tiers of the memory service: relational conversational tiers and Mem0 long-term."""
