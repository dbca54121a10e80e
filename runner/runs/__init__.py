"""Running a suite: the run scope (run and validate), the pool of slots (the scheduler and the VM
supply), a study's arms, and one VM outside a run (session)."""
