"""Read-only views of the scheduler's state: RPC queries, task serialisation, the visualiser's census,
task pages, neighbourhood and graph views, and upstream status."""
