"""Building golden images: the builders' registry, the linux-test and Windows 11 builds, and the
scratch space a build works in. The catalog of built images is runner.profiles.catalog."""
