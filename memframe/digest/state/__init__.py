"""The digest's own state: what lets a warm digest answer from stored rows.

The per-capsule state and what is kept beside it:

* `memframe.digest.state.digest_capsules`: the state's stored runs, the source rows above
  its watermark, and the text a row's label and headline are filled from;
* `memframe.digest.state.digest_subset`: the rows the subset sections can name;
* `memframe.digest.state.digest_aggregates`: the per-project counts and archive instants;
* `memframe.digest.state.digest_leaders`: the first rows of the newest and most-recalled
  lists;
* `memframe.digest.state.warm_reader`: what a digest reads of all that (`WarmState`), and
  the projection's door;
* `memframe.digest.state.cold_fold`: the same from every source row, range by range;
* `memframe.digest.state.capsule_job`: the jobs that keep it (and the kept sections).

Beside it:

* `memframe.digest.state.kept_families`: the store-wide families kept whole (telemetry, the
  graph's values, open sessions; a session's new blocks edges taken into them), stored as
  `memframe.digest.state.family_codec` says;
* `memframe.digest.state.sections`: the subset's sections kept for the capsule fence;
* `memframe.digest.state.journal`: the audit chain's verified checkpoint.

They are advanced by the jobs (`memframe.jobs.cycle`) and read by `memframe.digest.reads` (the incremental source: `kept_source`).
"""
