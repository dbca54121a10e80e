"""Agents: what acts on the VM between setup and verify, one module per kind, and their registry;
the scripted agent's GUI scripts and the conditions they wait for."""
