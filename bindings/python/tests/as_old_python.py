"""Imports slotpartner as another Python version would see it: ``sys.version_info`` is replaced
by the version given (``python3 as_old_python.py 3.8.10``) before the import. Prints
``imported <version>``, or the import's error and exits 1."""

import sys

version = tuple(int(part) for part in sys.argv[1].split("."))
sys.version_info = version + ("final", 0)  # type: ignore[assignment,misc]
try:
    import slotpartner
except ImportError as error:
    print(f"{type(error).__name__}: {error}")
    sys.exit(1)
print("imported", slotpartner.__version__)
