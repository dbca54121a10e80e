"""`python -m runner`: the cu-run command line."""

from runner.cli import main

main()
