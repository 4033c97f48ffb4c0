"""The scheduler's model: plain records, the indexed state that every write goes through, ready queues,
deadlines, the change set a durable store writes, and the clock. No rules, no I/O."""
