"""The memory service's wire contract and its client, shared by server, agent and CLI."""
