"""A compact system prompt for Mem0's fact extraction, for models with a small context.

Mem0 2.2.1 sends every extraction with its ``ADDITIVE_EXTRACTION_PROMPT`` as the system
message: about 8,400 tokens, most of them worked examples. A model served with a
4,096-token context (Ollama's default, and the context of many small models) cannot read
it: the server cuts the prompt from its head, so the model sees the tail of the examples
and the conversation, never the instructions; and a served model is billed the whole
prompt on every fold. ``compact`` (``KAOS_MEMORY_EXTRACTION_SYSTEM_PROMPT``) sends the
same instructions in about 500 tokens instead: the same role, inputs, rules
and output format (Mem0 parses the answer as before), without the examples. Only that
system message is replaced; Mem0's user message (the new messages, the existing memories
to deduplicate and link against, the observation date, the custom instructions) is sent
as Mem0 builds it.
"""

from __future__ import annotations

from typing import Any

COMPACT_EXTRACTION_PROMPT = """\
# ROLE

You are a Memory Extractor. From the New Messages, write every piece of memorable \
information as a short, self-contained factual statement. You only ADD memories.

# WHAT TO EXTRACT

- From user messages: personal details, preferences, plans, relationships, work, health, \
opinions, hobbies, experiences, things done for the first time, and the key facts of \
material the user shares.
- From assistant messages, only what is specific and new: recommendations given, plans \
made for the user, information provided, agreements reached. Write them in the user's \
terms ("User was recommended X").
- Not: vague characterisations ("you seem passionate"), greetings and acknowledgements, \
the assistant talking about itself, anything only found in Existing Memories.
- Extract every topic of the conversation, not only the first one.

# HOW TO WRITE A MEMORY

- Self-contained: name who and what ("User's sister Maria lives in Porto"), no "he" or \
"it" without its noun.
- Keep names, titles, numbers, quantities and qualifiers exactly as said.
- Ground time: resolve "yesterday", "last week", "next month" against the Observation \
Date, never against the current date.
- 15 to 80 words; plain statements, no opinions of your own.

# DEDUPLICATION AND LINKING

- Skip what the Recently Extracted Memories or the Existing Memories already say with no \
new detail.
- When a new memory is about the same thing as an Existing Memory (an update, a \
follow-up, a changed preference), put that memory's id in its "linked_memory_ids".
- Custom instructions, when given, take precedence.

# OUTPUT FORMAT

Return ONLY valid JSON, nothing else:

{"memory": [{"id": "0", "text": "...", "attributed_to": "user", "linked_memory_ids": []}]}

- id: "0", "1", ... in order.
- text: the memory.
- attributed_to: "user" for facts by or about the user, "assistant" for what the \
assistant provided.
- linked_memory_ids: ids from Existing Memories, or [].
- Nothing worth keeping: {"memory": []}
"""


def compact_messages(
    messages: list[dict[str, Any]], mem0_prompt: str | None
) -> list[dict[str, Any]]:
    """``messages`` with Mem0's extraction system message ``mem0_prompt`` replaced by the
    compact one (what Mem0 appended to it, such as its agent-scope suffix, is kept); any
    other request, or ``mem0_prompt`` None (Mem0's own prompt asked for), unchanged."""
    if mem0_prompt is None or not messages:
        return messages
    first = messages[0]
    content = first.get("content")
    if first.get("role") != "system" or not isinstance(content, str):
        return messages
    if not content.startswith(mem0_prompt):
        return messages
    suffix = content[len(mem0_prompt) :]
    return [{**first, "content": COMPACT_EXTRACTION_PROMPT + suffix}, *messages[1:]]
