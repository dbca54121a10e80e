"""`cu-run audit`: a battery of generic hostile agents against every task of a suite, so a lab
learns which of its own tasks can be passed without being done (docs/audit.md): the attacks
(attacks.py), the judgement of each task and attack (judge.py), the reports (report.py), and the
audit's runs on one pool (run.py)."""
