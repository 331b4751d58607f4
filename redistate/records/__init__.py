"""Versioned records (sessions, users, collections): spec.py is the pure half
(validation, script arguments and replies), mergelog.py and mergepatch.py the
patched-record format, erasure.py the per-user index; collection_async.py is the
I/O shell (collection.py its generated sync twin); lua/ holds record_*.lua.
"""
