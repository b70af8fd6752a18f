"""lancedb_client: LanceDB imported without running the REST client package's __init__, and that
package still whole for anything that uses it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_fresh(code: str, cwd: Path) -> str:
    """``code`` in a new interpreter (imports are per process), with the repository importable."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_lancedb_works_without_the_rest_client_apis_and_they_load_on_first_use(tmp_path: Path) -> None:
    out = run_fresh(
        """
        import sys
        from lancedb_client import REST_CLIENT_PACKAGE, lancedb

        def apis():
            return sorted(m for m in sys.modules if m.startswith(REST_CLIENT_PACKAGE + ".api."))

        assert apis() == [], apis()
        table = lancedb.connect("db").create_table("t", [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}])
        assert table.search().where("a = 2").to_list()[0]["b"] == "y"
        assert apis() == [], "a local table never needs the REST client"
        client = sys.modules[REST_CLIENT_PACKAGE]
        assert client.ApiClient.__name__ == "ApiClient"  # first use runs the real __init__
        assert REST_CLIENT_PACKAGE + ".api.table_api" in apis()
        print("ok")
        """,
        tmp_path,
    )
    assert out.strip() == "ok"


def test_an_already_imported_package_is_left_alone(tmp_path: Path) -> None:
    out = run_fresh(
        """
        import lance_namespace_urllib3_client as client
        from lancedb_client import REST_CLIENT_PACKAGE, defer_package_init

        assert not defer_package_init(REST_CLIENT_PACKAGE)
        assert not defer_package_init("no_such_package_here")
        print(client.ApiClient.__name__)
        """,
        tmp_path,
    )
    assert out.strip() == "ApiClient"
