"""Golden images and what is made from them: the catalog, the linux-test and Windows 11 builds,
and warm states (saved RAM states per VM slot, how a run chooses warm or cold, and warming)."""
