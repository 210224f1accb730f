"""The conversational tiers in SQL, shared by the SQLite and PostgreSQL backends.

One module per concern, each a set of plain functions over one open transaction (``Tx``):
``schema`` (DDL, version, migrations), ``window`` (writes and reads of the window and
digests), ``folds`` (the outbox), ``leases`` and ``erasure``. ``store`` composes them
behind one executor boundary; a backend only supplies a ``Dialect`` (``sqlite``,
``postgres``).
"""
