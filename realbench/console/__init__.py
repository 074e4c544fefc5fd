"""The lab console: a web app over the farm, the run stores and the labelling queue (a wiring package)."""
