"""Running a suite: the run scope (run and validate), the pool of slots (the scheduler), the results
log, provenance, and the reports."""
