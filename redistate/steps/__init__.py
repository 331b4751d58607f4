"""Durable steps and the task runner (store.task): spec.py is the pure half of
a step record, runner_async.py the runner (runner.py its generated sync twin);
lua/ holds step_*.lua.
"""
