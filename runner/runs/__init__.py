"""Running a suite: the run scope (run and validate), the pool of slots (harness), the results
log, provenance, and the reports."""
