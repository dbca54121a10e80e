"""The episode VM and what makes one: its domain, warm states and the plan to start warm or
cold, warming, admission (what the host's memory admits), garbage collection of what dead runs
left, the host's checks (doctor) and the conformance checks a VM's shells and display pass."""
