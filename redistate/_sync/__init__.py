"""Source of truth for the I/O shells; ``redistate/_sync`` is generated from here."""
