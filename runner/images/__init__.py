"""Golden images: the builders' registry, the linux-test and Windows 11 builds, the scratch space
a build works in, and the catalog of built images (runner.images.catalog)."""
