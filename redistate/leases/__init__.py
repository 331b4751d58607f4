"""Fenced leases: spec.py is the pure half (tokens, lease values, fences, local
deadlines, wait budgets), lease_async.py the I/O shell with renewal (lease.py its
generated sync twin); lua/ holds lock_*.lua.
"""
