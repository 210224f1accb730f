"""The MCP server runtime (``kaos-mcp``): tools from configuration, served over MCP."""
