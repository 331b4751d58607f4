"""Audit events, a hash-chained stream per entity: spec.py is the pure half
(canonical form, chain, verification, folding), stream_async.py the I/O shell
(stream.py its generated sync twin); lua/ holds event_*.lua.
"""
