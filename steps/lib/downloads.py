"""A file from a pinned URL, downloaded once into a cache and checked against its sha256, with pooch: it
streams to a temporary name in the cache folder and renames the file into place only when it is whole
and its sum matches, so a refused or cut-short download leaves nothing behind (pooch.core.stream_download).
"""

from __future__ import annotations

import logging
from pathlib import Path

from steps.lib.errors import StepError


def fetch_pinned(url: str, sha256: str | None, folder: Path, name: str) -> Path:
    """`folder/name`, downloaded from `url` unless already there with this sha256 (or with any content,
    when `sha256` is None); StepError in one line if the download fails or its sum is not `sha256`."""
    import pooch
    import requests

    pooch.get_logger().setLevel(logging.WARNING)  # no "Downloading data from ..." line of its own
    try:
        path = pooch.retrieve(
            url,
            known_hash=f"sha256:{sha256}" if sha256 else None,
            fname=name,
            path=folder,
            progressbar=False,
        )
    except ValueError:  # pooch.utils.hash_matches: the download is not the pinned file
        raise StepError(f"{url}: sha256 does not match the pinned {sha256}") from None
    except (requests.RequestException, OSError) as error:
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise StepError(f"cannot download {url}: {reason}") from None
    return Path(path)
