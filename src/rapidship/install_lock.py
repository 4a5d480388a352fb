"""Builder-side: install a conda lock into a prefix, exactly, without solving.

Runs inside the builder stage with the installer venv's python. Filled in by the conda
locking work; until then conda variants cannot be built.
"""

import sys

if __name__ == "__main__":
    sys.exit("install_lock: conda installs are not available in this version of rapidship")
