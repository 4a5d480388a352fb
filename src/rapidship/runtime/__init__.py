"""Programs that ship inside every image (as the package `rapids_runtime`).

Standard library only at import time: the doctor must run even in a broken env.
"""
