"""The field's benchmarks (OSWorld, WindowsAgentArena) as cu-run suites: imported from their
task JSONs, never reimplemented (docs/benchmarks.md).

    upstream     reading a benchmark's tree: its task files, their domains, its version
    classify     what a task needs (assets, the web, live app state, ...) as tags, and why
                 one that cannot run here is left out
    setup_linux  OSWorld's config steps as a setup.sh; its getters as a collector
    setup_windows  the same for WAA, in PowerShell
    importer     `cu-run tasks import`: one task folder per upstream task
"""
