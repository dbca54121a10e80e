"""Deciding what an episode came to: the verdict contract, the write set, safety rules, who an
error belongs to, stopping the agent before verification (quarantine), reading the disk on the
host, and the statistics of many episodes."""
