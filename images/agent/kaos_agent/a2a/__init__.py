"""A2A protocol surface of the agent: the card and JSON-RPC methods."""
