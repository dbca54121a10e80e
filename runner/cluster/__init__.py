"""Many hosts: a run's episodes spread over the cu-run hosts of a Ray cluster.

ray_link talks to Ray; host_service is what each lab machine runs (a Ray actor); dispatch and
driver are the driver's queue and run; image_transfer gives hosts the driver's image; nodes,
local and join start and stop Ray nodes with a host on each.
"""
