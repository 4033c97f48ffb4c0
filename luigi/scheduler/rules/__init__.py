"""The scheduler's rules: how reports change tasks (intake), status changes (transitions), what is due
(pruning), which task a worker runs next (get_work, with ask-ahead and resources), and pure policy."""
