"""cu-run as an inspect_ai sandbox: one episode VM per sample (runner.sandbox.provider), the
computer tool's actions served from the VM's VNC display (runner.sandbox.computer), and cu-run
suites as Inspect tasks scored through the admin channel (runner.sandbox.suite).

Only provider.py and suite.py import inspect_ai; the rest is plain cu-run, tested without it.
"""
