"""Step-boundary commands in the worker, in two halves kept apart on purpose.

(a) :mod:`workers.steering.collect` decides *which* commands are due at a boundary: what
the control stream delivered, what the job's rules decided (:mod:`workers.steering.rules`),
deduplicated by command id and ordered (a user's change wins over a rule's at the same
step). Only this half reads the outside world.

(b) :mod:`workers.steering.apply` applies a given, serialisable list of commands to the
trainer state, deterministically, and returns the confirmations. It touches no Redis and
no database, so every rank of a distributed job can run it on the list rank 0 decided.

:class:`workers.steering.state.SteeringState` is what the commands changed that the
trainer's own state file does not hold (frozen parameters, a replaced schedule, the rules
and their counters, the ids applied so far); it is saved in each checkpoint's meta.json.
"""
