"""The digest's own state: what lets a warm digest answer from stored rows.

* `memframe.digest.state.capsules`: the per-capsule state, the digest's subset, the
  aggregates, the archive instants and the leaders;
* `memframe.digest.state.families`: the store-wide families kept whole (telemetry, the
  graph's values, open sessions);
* `memframe.digest.state.sections`: the subset's sections kept for the capsule fence;
* `memframe.digest.state.journal`: the audit chain's verified checkpoint.

They are advanced by the jobs (`memframe.jobs.cycle`) and read by `memframe.digest.inputs`.
"""
