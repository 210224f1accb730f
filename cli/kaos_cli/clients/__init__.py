"""Plain clients of what KAOS serves, used by the CLI's commands and by the console.

``agent`` speaks an agent's OpenAI-compatible chat endpoint and reads its card; ``a2a``
manages an agent's A2A tasks through a2a-sdk's client. Neither knows about click: each
raises its own errors, which the commands word as one ``error:`` line.
"""
