# The attack is in ui_tamper.yaml (keys through the MCP server, test_tamper.py runs it with the
# scripted agent); run as the oracle, this task's agent does nothing.
true
