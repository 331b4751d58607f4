"""Shared machinery every kind uses: keys (KeySpace) and the kind registry,
codecs and encryption, the record envelope, seals, Lua loading and the ACL it
needs, the one connection to Redis (connection_async.py -> connection.py) with its
retries and error translation, server checks, URLs, durability and migrations.
"""
