"""Task checkpoints with their delta log: spec.py is the pure half (blobs,
digests, recovery, handoff), tasks_async.py the I/O shell (tasks.py its generated
sync twin); lua/ holds checkpoint_*.lua.
"""
