"""The network as a task input: where a guest's requests may go (policy), and the recording proxy
that is a guest's only way out (docs/network.md)."""
