"""numba-cuda 0.30.4 calls ``numpy.row_stack``, which numpy 2.5 removed: put it back as ``numpy.vstack`` (its
documented alias) in every process that has this folder on its PYTHONPATH (``python -m lab scale`` adds it where
numpy lacks the name). Python imports ``sitecustomize`` once, at start-up."""
import numpy

if not hasattr(numpy, "row_stack"):
    numpy.row_stack = numpy.vstack
