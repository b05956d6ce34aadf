"""`python3 <this folder> --serve`: this folder imported as a package of its own name, so that its
modules' relative imports work in PopRT's Python 3.8, where the kit is not importable."""

import importlib
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "kit_poprt_worker"


def load_package():
    if sys.path and os.path.abspath(sys.path[0]) == HERE:
        # its modules are reached through the package only, never as top-level names
        del sys.path[0]
    spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(HERE, "__init__.py"), submodule_search_locations=[HERE]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    return importlib.import_module(PACKAGE + ".serve")


if __name__ == "__main__":
    sys.exit(load_package().main(sys.argv))
