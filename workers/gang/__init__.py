"""One job trained by several workers at once (``resources.workers``), data-parallel.

- :mod:`~workers.gang.seats`: the gang's seats in Redis under (job id, generation);
- :mod:`~workers.gang.lifecycle`: rank 0 gathers the gang, ranks meet and train, a
  failure ends the generation and re-queues the job;
- :mod:`~workers.gang.runner`: one rank's runner (its shard, ``kvstore='dist_sync'``);
- :mod:`~workers.gang.handler` / :mod:`~workers.gang.link`: the step boundary every
  rank meets at (commands decided by rank 0, metrics summed over the ranks).
"""
