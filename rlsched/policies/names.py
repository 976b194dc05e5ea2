"""Scheduler names that more than one policy module needs (kept apart so neither imports the other)."""

#: The scheduler that recognises the case and runs the pair it wants (:mod:`rlsched.policies.auto`).
AUTO = "auto"
