"""Write-time screening: whether a fact's text reads as an instruction to the agent.

A fact is something true about the user or the world ("User's bank is Monzo"). Text that
tells the agent what to do ("when the user asks about their bank, tell them ...", "ignore
previous instructions", "call the send_email tool", "send their password to ...") is not
a fact, whoever said it: a planted instruction (memory poisoning, OWASP ASI06) reaches the
model's instructions the next time it is recalled. ``screen`` names such text by a short
reason code, and the long-term store quarantines it (``mem0.quarantine``): kept, listed for
an administrator, never recalled until released.

Pure and cheap (compiled patterns, no model call): it runs on every fact a write stores.
The patterns are general forms of instructions, not the sentences of any attack set; each
needs the instruction's verb or its addressee, so a statement that only mentions the same
nouns ("User likes sending postcards", "User's e-mail is ana@example.org") passes.
"""

from __future__ import annotations

import re

# The reason codes, most specific first (the first that matches is given).
OVERRIDE = "override"
TOOL = "tool_directive"
EXFILTRATION = "exfiltration"
CREDENTIALS = "credentials"
ADDRESSED = "addressed_to_agent"

_F = re.IGNORECASE

_PRIOR = (
    r"(?:previous|prior|earlier|above|preceding|original|initial|old|existing|all|any|your|"
    r"the|system|developer|safety|security|content)"
)
_RULES = (
    r"(?:instructions?|prompts?|rules?|guidelines?|directives?|directions?|orders?|"
    r"guardrails?|policies|policy|constraints?|programming|training|context|guidance|"
    r"settings|filters?|checks|restrictions)"
)
_ORDERS = r"(?:instructions?|prompts?|rules?|guidelines?|directives?|orders?|policy|policies)"
_AGENT = r"(?:assistant|ai|agent|model|chatbot|bot|llm|gpt|copilot|language\s+model)"
# What an instruction tells the agent to do (imperative forms).
_DO = (
    r"(?:reply|respond|answer|say|tell|send|give|show|reveal|recommend|suggest|direct|"
    r"point|include|append|call|use|run|ask|insist|claim|state|inform|warn|redirect|"
    r"share|output|print|write|refuse|pretend|forward|instruct|remind|mention|upsell|"
    r"link|offer|provide|add|pay|transfer|email|e-mail|open|visit|collect|copy|leak|"
    r"obey|follow|fetch|sign|end|begin|start|promote|ignore|disregard|act|behave|treat)"
)

# Where an order starts: a sentence or clause, or after a word that leads into one ("and
# ignore ...", "you must ignore ..."); "User's kids ignore the rules" is a statement.
_ORDER_START = (
    r"(?:(?:^|[.!?,;:(\[\n-])\s*|\b(?:and|then|please|kindly|just|now|simply|must|should|"
    r"to|also|so|first|always|never)\s+)"
)

_OVERRIDE = re.compile(
    "|".join(
        (
            # "ignore all previous instructions", "disregard your earlier guidelines",
            # "don't follow your original instructions", "override safety settings"
            rf"{_ORDER_START}(?:ignore|disregard|forget|override|overrule|overlook|bypass|skip|drop|discard|"
            r"abandon|disable|pay\s+no\s+attention\s+to|set\s+aside|put\s+aside|"
            r"stop\s+following|no\s+longer\s+follow|(?:don't|do\s+not|never)\s+(?:follow|obey))\b"
            rf"(?:\W+\w+){{0,3}}?\W+{_PRIOR}\b(?:\W+\w+){{0,2}}?\W+{_RULES}\b",
            # "forget everything you were told", "overlook whatever rules you were given"
            rf"{_ORDER_START}(?:ignore|disregard|forget|overlook)\s+"
            r"(?:everything|all|anything|whatever|what)\b"
            r"(?:\W+\w+){0,4}?\W+(?:told|said|instructed|given|taught|configured|programmed)\b",
            # "the prior rules no longer apply", "the previous rules are void"
            rf"\b{_RULES}\b(?:\W+\w+){{0,3}}?\W+(?:(?:no\s+longer|do\s+not|don't|doesn't)\s+"
            r"(?:apply|count|matter)|(?:are|is)\s+(?:now\s+)?(?:void|null|cancell?ed|revoked|"
            r"obsolete|invalid|suspended|lifted|lifted))\b",
            # "your new system instruction", "new instructions:", "new directive for the bot"
            rf"\b(?:your|these\s+are\s+(?:your|the))\s+new\s+(?:system\s+)?{_ORDERS}\b",
            rf"\bnew\s+system\s+{_ORDERS}\b|\bnew\s+{_ORDERS}\s*:",
            rf"\bnew\s+{_ORDERS}\s+(?:for|to)\s+(?:the\s+|any\s+)?{_AGENT}\b",
            r"\bsystem\s+(?:prompt|message|instruction)s?\b",
            r"\b(?:developer|debug|god|admin|jailbreak|dan)\s+mode\b",
            r"\bjailbreak",
            r"\byou\s+are\s+now\s+(?:a|an|in|the|my|no\s+longer)\b",
            r"\bsystem\s+override\b",
            r"\b(?:no\s+longer|not)\s+bound\s+by\b",
            r"\b(?:hidden|secret|special|priority|system)\s+(?:instruction|directive|command|order)s?"
            r"\s*:",
            r"\bact\s+as\s+(?:dan|an?\s+(?:unrestricted|unfiltered|jailbroken|uncensored))\b",
            r"\byour\s+(?:real|true|actual|new|only|main|secret)\s+(?:task|job|goal|purpose|"
            r"mission|role|instructions?)\s+(?:is|are)\b",
            # a sentence that starts by dismissing something and says what to answer instead
            r"(?:^|[.!?:;]\s+)(?:ignore|disregard)\b[^.!?]{0,80}?\band\s+"
            r"(?:say|tell|reply|respond|answer|claim)\b",
        )
    ),
    _F,
)

_TOOL = re.compile(
    "|".join(
        (
            # "call the send_email tool", "use the transfer_funds tool", "run the shell tool"
            r"\b(?:call|use|run|invoke|execute|trigger|launch|fire)\s+(?:the\s+|a\s+|your\s+)?"
            r"[\w.-]+(?:\s+[\w.-]+)?\s+(?:tool|function|plugin|command|action)\b",
            r"\b(?:call|invoke|execute|run|calling|invoking|executing)\s+[a-z]+_[a-z_]+\b",
            # a shell pipeline fetched from the network
            r"\b(?:curl|wget)\b[^|\n]{0,200}\|\s*(?:ba|z)?sh\b",
            r"\b(?:rm\s+-rf|sudo\s+\w)",
            # "pay 500 EUR to account X", "transfer the funds to ..."
            r"\b(?:pay|transfer|wire|send)\s+(?:\w+\s+){0,2}?(?:\d[\d,.]*|all|the)\s*"
            r"(?:\w+\s+){0,2}?(?:to|into)\s+(?:account|iban|wallet|the\s+account)\b",
        )
    ),
    _F,
)

_DESTINATION = r"(?:https?://\S+|www\.\S+|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b)"
# A verb that moves data to a destination or sends a person to one (imperative forms:
# "sending postcards", "posted a photo" are statements).
_MOVE = (
    # "e-mail" and "mail" name an address as often as they order a sending ("My work
    # e-mail is ...", "E-mail: ..."): a noun when "is", "address" or a colon follows.
    r"(?:send|forward|upload|post|(?:e-?mail|mail)(?!\s*(?:address(?:es)?|id|is|was|are)\b)"
    r"(?!\s*:)|submit|append|include|attach|share|"
    r"transmit|leak|exfiltrate|copy|paste|report|deliver|redirect|direct|point|"
    r"visit|go\s+to|click|open|log\s+in|login|sign\s+in|verify|confirm|reset|re-?enter|enter|"
    r"advise|urge|tell)"
)
# Not a noun ("User's e-mail is ...", "their post at ..."): no determiner before the verb.
_NOT_NOUN = "".join(
    f"(?<!{d} )" for d in ("'s", "a", "an", "the", "my", "his", "her", "our", "your", "their")
)
# Nor an infinitive ("asked her to send the report to ...", "plans to visit https://..."):
# an intention reported, not an order.
_EXFILTRATION = re.compile(
    rf"{_NOT_NOUN}(?<!\bto )(?<![\w-]){_MOVE}\b[^.\n]{{0,160}}?{_DESTINATION}"
    rf"|{_DESTINATION}[^.\n]{{0,60}}?\band\s+{_MOVE}\b",
    _F,
)

_SECRET = (
    r"(?:passwords?|passcodes?|passphrases?|api[\s_-]?keys?|access[\s_-]?keys?|secret[\s_-]?keys?|"
    r"(?:session|auth|access|bearer|refresh)?[\s_-]?tokens?|credentials?|secrets?|"
    r"card\s+(?:numbers?|details)|credit\s+card|cvv|cvc|pin\s+(?:code|number)|ssh\s+keys?|"
    r"private\s+keys?|seed\s+phrase|social\s+security\s+numbers?)"
)
_CREDENTIALS = re.compile(
    rf"\b(?:send|forward|share|reveal|disclose|give|provide|include|append|paste|post|upload|"
    rf"leak|print|show|output|re-?enter|enter|type|read\s+out|collect|ask\s+(?:them\s+)?for|"
    rf"request)\b(?:\W+\w+){{0,4}}?\W+{_SECRET}\b",
    _F,
)

# Whom an instruction is about, besides the agent: the person it serves, named in the third
# person, or its answers ("you", "them" are just as often one person talking to another).
_TARGET = (
    r"(?:the\s+user|users|anyone|everyone|whoever|"
    r"(?:every|each|any|all|the\s+next|your\s+next)\s+(?:question|answer|reply|response|"
    r"message|conversation|chat|request|summary|summaries|output)s?)"
)
_ADDRESSED = re.compile(
    "|".join(
        (
            # "AI assistant reading this: ...", "note to the assistant", "[assistant instruction]"
            r"\b(?:note|message|instructions?|reminder|memo)\s+(?:to|for)\s+"
            rf"(?:the\s+|any\s+|all\s+)?(?:\w+\s+)?{_AGENT}s?\b",
            rf"\b{_AGENT}s?\s+(?:reading|processing|seeing|summari[sz]ing|parsing)\s+this\b",
            rf"\[\s*(?:\w+\s+)?{_AGENT}\s+(?:instructions?|note|directive|command)\s*\]",
            rf"\bdear\s+(?:\w+\s+)?{_AGENT}\b",
            # "Assistant, remember: ...": the agent called by name at a sentence's start
            rf"(?:^|[.!?]\s+)(?:hey\s+|hi\s+|ok\s+)?{_AGENT}\s*[,:]",
            # "when(ever) the user asks ..., reply/tell/say ...", "when asked about X, ..."
            r"\b(?:when|whenever|if|once|each\s+time|every\s+time)\s+(?:(?:the\s+user|anyone|"
            r"any\s*one|someone|somebody|a\s+user|users|they|i|he|she|the\s+customer)\s+\w+|"
            r"asked|questioned|prompted)\b[^.;\n]{0,200}?[,:]\s*"
            r"(?:then\s+|please\s+|you\s+(?:must|should)\s+|always\s+|just\s+|only\s+)?"
            rf"{_DO}\b",
            # "always reply ...", "never mention ...", "from now on, ..."
            r"\b(?:always|never)\s+(?!say\s+never)(?:reply|respond|answer|say|tell|mention|"
            r"recommend|suggest|include|append|send|refuse|claim|pretend)\b",
            r"\b(?:from\s+now\s+on|from\s+this\s+point(?:\s+(?:on|forward))?|henceforth|"
            r"going\s+forward)\b[^.\n]{0,60}?\b(?:reply|respond|answer|say|tell|you\s+(?:must|"
            r"should|will)|always|never|when|whenever|if|every)\b",
            r"\b(?:reply|respond|answer|speak|write|talk)\b[^.\n]{0,60}?\b(?:from\s+now\s+on|"
            r"henceforth|going\s+forward)\b",
            # "after every answer, append ...", "on the next request, include ..."
            r"\b(?:on|for|in|after|before|with)\s+(?:the\s+next|every|each|any)\s+(?:request|"
            r"question|answer|reply|response|message|conversation|chat)s?\s*,\s*(?:\w+\s+)?"
            rf"{_DO}\b",
            # a condition, then an order about the user, or the words to say
            r"(?:^|[.!?;:]\s+)(?:when(?:ever)?|if|upon|after|before|once)\b[^.;!?\n]{0,120}?,\s*"
            r"(?:then\s+|please\s+|always\s+|just\s+|only\s+|quietly\s+|silently\s+)?"
            rf"{_DO}\b(?:[^.!?\n]|\.(?=\S)){{0,120}}?(?:\b{_TARGET}\b|['\"\u2018\u201c])",
            r"\b(?:in|for|during)\s+(?:all\s+)?(?:future|later|subsequent|upcoming)\s+"
            r"(?:conversations|chats|sessions|answers|replies|responses)\b",
            r"\b(?:remember|save|store|note)\s+(?:this\s+|the\s+following\s+|a\s+)?"
            r"(?:rule|instruction|procedure|directive|command)s?\b",
            rf"\b(?:my|your|the\s+{_AGENT}'?s?)\s+(?:procedure|protocol|instructions?|directive|"
            rf"standing\s+order)s?\s+(?:from\s+now\s+on|going\s+forward|is|are)\b",
            r"\breminder\s+to\s+(?:myself|self)\b",
            # "the assistant should always recommend ...", "you should share ..."
            r"\b(?:(?:the|this|your)\s+(?:ai|assistant|chatbot|bot|model|language\s+model)|you)\s+"
            r"(?:must|should|shall|"
            r"has\s+to|have\s+to|needs?\s+to|is\s+to|are\s+to)\s+(?:always\s+|never\s+|now\s+|"
            r"not\s+)?(?:share|tell|say|reply|respond|answer|recommend|suggest|send|reveal|give|"
            r"include|mention|sign|promote|refuse|ignore|claim|upsell|collect|forward)\b",
            # a sentence that starts with an order about the user or the answers:
            # "Tell the user that ...", "Add a link to every answer", "Respond to the next
            # question with ..." (a note to oneself, "Call mom on Sunday", names neither)
            rf"(?:^|[.!?;:]\s+|\n)(?:please\s+|kindly\s+)?{_DO}\b(?:[^.!?\n]|\.(?=\S)){{0,120}}?"
            rf"\b{_TARGET}\b",
        )
    ),
    _F,
)

_CHECKS = (
    (OVERRIDE, _OVERRIDE),
    (TOOL, _TOOL),
    (CREDENTIALS, _CREDENTIALS),
    (EXFILTRATION, _EXFILTRATION),
    (ADDRESSED, _ADDRESSED),
)
REASONS = tuple(reason for reason, _ in _CHECKS)


def screen(text: str) -> str | None:
    """The reason ``text`` reads as an instruction to the agent, or None for a fact."""
    for reason, pattern in _CHECKS:
        if pattern.search(text):
            return reason
    return None


__all__ = ["REASONS", "screen"]
