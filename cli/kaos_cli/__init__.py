"""The ``kaos`` command line and its console: install KAOS with helm, deploy and follow its
resources, talk to agents, inspect and erase memory.

``commands`` holds the click command groups; ``clients`` the plain clients of an agent
(chat, card) and of its A2A tasks; ``kubectl`` the one way to the cluster, the user's own
``kubectl`` (no Kubernetes client library); ``kinds`` the four KAOS kinds, derived from
the CRD models; ``ui`` the console (``kaos ui``).
"""
