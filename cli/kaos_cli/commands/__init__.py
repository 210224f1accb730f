"""The ``kaos`` command groups, one module per group (``kaos agent`` is ``agent``), and
what they share: the common options (``common``), the per-kind commands
(``resources``, ``describe``) and deploying (``deploy``)."""
