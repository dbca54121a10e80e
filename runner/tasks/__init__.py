"""Task suites as data: the task model and its loading, lint, script syntax, and running a
task's scripts in the guest as the account each role calls for."""
