"""The agent's MCP server over one episode's VM: its tools, HTTP transport behind a bearer token,
the trajectory that records every call, and the per-episode session an agent is handed."""
