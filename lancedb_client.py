"""LanceDB for the read path, imported without the REST catalogue client it never calls.

``import lancedb`` imports ``lance_namespace``, and with it the package of a generated REST client
whose ``__init__`` imports every API module it has: about half of LanceDB's import time
(``python -X importtime``, docs/team-server.md), paid by every server start for a catalogue that a
local or object-store table does not use. Here that package is registered before LanceDB imports
it, but not run: its submodules import as usual (``lance_namespace`` needs the models), and the first
use of a name from the package itself runs its real ``__init__``, so nothing that does use it breaks.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

REST_CLIENT_PACKAGE = "lance_namespace_urllib3_client"


def defer_package_init(name: str) -> bool:
    """Register package ``name`` with its ``__init__`` not yet run; False when it is already
    imported or is not an installed package (then nothing changes)."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    package = importlib.util.module_from_spec(spec)

    def run_init(attribute: str) -> Any:
        # the real __init__ defines everything a caller may ask for; this hook goes first
        del package.__dict__["__getattr__"]
        spec.loader.exec_module(package)  # type: ignore[union-attr]
        return getattr(package, attribute)

    package.__dict__["__getattr__"] = run_init
    sys.modules[name] = package
    return True


defer_package_init(REST_CLIENT_PACKAGE)

import lancedb  # noqa: E402  (after the deferral, which is this module's reason to exist)

__all__ = ["lancedb"]
