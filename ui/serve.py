"""Serve the page: `streamlit run ui/app.py`, its uploads kept under a bound (ui.uploads).

python -m ui.serve [options of `streamlit run`, e.g. --server.port 8501]
"""

from __future__ import annotations

import sys
from pathlib import Path

APP = Path(__file__).resolve().with_name("app.py")


def use_bounded_uploads() -> None:
    """Streamlit's Server builds its upload store from this name when it is created
    (streamlit/web/server/server.py, Server.__init__): the bounded one takes its place."""
    from streamlit.web.server import server

    from ui.uploads import BoundedUploadManager

    # replacing the class that name holds is the point; mypy refuses any assignment to a class name
    server.MemoryUploadedFileManager = BoundedUploadManager  # type: ignore[misc]


def main(argv: list[str] | None = None) -> None:
    from streamlit.web import cli

    use_bounded_uploads()
    options = sys.argv[1:] if argv is None else argv
    cli.main(["run", str(APP), *options], prog_name="streamlit")


if __name__ == "__main__":
    main()
