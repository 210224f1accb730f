"""The ``kaos`` command line: install KAOS with helm, talk to agents, inspect memory.

It depends only on the core package and on the ``kubectl``/``helm`` the administrator
already uses; no Kubernetes client library.
"""
