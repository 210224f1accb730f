"""Per-owner encryption at rest: every text the memory service stores for an owner (a
principal, else the agent, else the store) is sealed with AES-256-GCM under that owner's
data key, and a principal's forget destroys the key (crypto-shredding).

``kek`` is the key-encryption key that wraps data keys and never touches the database (a
versioned Secret file here, a KMS in ``kms``); ``keyring`` keeps one wrapped data key per
owner in the conversation store's key table and the unwrapped ones in memory, checked again
within the KEK's bound; ``opened`` keeps opened texts for the next read of their row;
``envelope`` is the sealed text's format and what binds it to its row.
"""
