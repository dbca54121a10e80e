[Environment]::SetEnvironmentVariable("EVALS_PROBE", "42", "User")
