"""The pgvector vector backend (external mode): Mem0's PostgreSQL table, KAOS's queries and
indexes on it, and the per-principal vector cache."""
