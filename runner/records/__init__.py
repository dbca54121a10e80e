"""What a run leaves: the results log, run folders, recordings, provenance, the reports and the
Inspect export, and what is read back from them (compare, rescore)."""
