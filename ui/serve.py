"""Serve the page: `streamlit run ui/app.py`, its uploads kept under a bound (ui.uploads) and each
browser message's widget states bounded before Streamlit keeps them (ui.widget_states).

python -m ui.serve [options of `streamlit run`, e.g. --server.port 8501]
"""

from __future__ import annotations

import sys
from pathlib import Path

APP = Path(__file__).resolve().with_name("app.py")


def use_bounded_server() -> None:
    """Streamlit's Server builds its upload store and its runtime from these names when it is
    created (streamlit/web/server/server.py, Server.__init__): the bounded ones take their place."""
    from streamlit.web.server import server

    from ui.uploads import BoundedUploadManager
    from ui.widget_states import BoundedRuntime

    # replacing the classes those names hold is the point; mypy refuses any assignment to a class name
    server.MemoryUploadedFileManager = BoundedUploadManager  # type: ignore[misc]
    server.Runtime = BoundedRuntime  # type: ignore[misc]


def main(argv: list[str] | None = None) -> None:
    from streamlit.web import cli

    use_bounded_server()
    options = sys.argv[1:] if argv is None else argv
    cli.main(["run", str(APP), *options], prog_name="streamlit")


if __name__ == "__main__":
    main()
