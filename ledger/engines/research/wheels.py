"""A wheel found by version in ``TUNELEDGER_WHEELS`` or the cache, checked against the index.

``pip download`` checks the file it fetches against the hash its index link carries; a wheel
*found* under a version's file name (planted, copied in by hand, altered on disk) has no such
check. So, online, its SHA-256 is compared with the one the index publishes for that file name
(PyPI's JSON API, ``GET {index}/NAME/VERSION/json``: ``urls[].filename`` and
``urls[].digests.sha256``): a mismatch is refused in one line (exit 3). Where the index cannot
be asked (``--offline``, no network, a file name it does not publish) the wheel is used and the
reason its hash was not checked is returned as a note, never silence (docs/reliability.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ledger.errors import InvalidInput

from .sources import sha256_of

#: The index's JSON API, a mirror's in its place (``TUNELEDGER_INDEX_JSON``).
DEFAULT_INDEX_JSON = "https://pypi.org/pypi"

#: Seconds to wait for the index: past them the hash is reported unchecked, the research goes on.
INDEX_TIMEOUT_S = 10.0

#: Published SHA-256 by file name for one release, or the reason they could not be had.
DigestSource = Callable[[str, str], dict[str, str] | str]


def published_digests(distribution: str, version: str) -> dict[str, str] | str:
    """The SHA-256 the index publishes for each file of ``distribution`` ``version``, by file
    name; or, where the index cannot say, one line saying why."""
    import httpx

    base = os.environ.get("TUNELEDGER_INDEX_JSON", DEFAULT_INDEX_JSON).rstrip("/")
    url = f"{base}/{distribution}/{version}/json"
    try:
        answer = httpx.get(url, timeout=INDEX_TIMEOUT_S, follow_redirects=True)
    except httpx.HTTPError as exc:
        return f"{url} could not be read ({type(exc).__name__})"
    if answer.status_code != 200:
        return f"{url} answered HTTP {answer.status_code}"
    try:
        files = answer.json().get("urls") or []
        return {
            str(f["filename"]): str(f["digests"]["sha256"]).lower()
            for f in files
            if isinstance(f, dict) and isinstance(f.get("digests"), dict)
        }
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"{url} did not answer in the index's JSON shape"


def check_found_wheel(
    wheel: Path,
    distribution: str,
    version: str,
    digests: DigestSource | None = published_digests,
) -> str | None:
    """Refuse ``wheel`` if its SHA-256 is not the one the index publishes for its file name;
    ``None`` when it matches, else a note saying why it could not be checked.

    ``digests`` is the seam: ``None`` means the index is not to be asked (``--offline``);
    tests pass a recorded answer instead of the network.

    Raises:
        InvalidInput: (exit 3) the index publishes another SHA-256 for this file name.
    """
    spec = f"{distribution}=={version}"
    if digests is None:
        return f"{wheel}: its SHA-256 was not checked against the index (--offline)"
    published = digests(distribution, version)
    if isinstance(published, str):
        return f"{wheel}: its SHA-256 could not be checked against the index: {published}"
    expected = published.get(wheel.name)
    if expected is None:
        return (
            f"{wheel}: its SHA-256 could not be checked: the index publishes no file of this "
            f"name for {spec}"
        )
    actual = sha256_of(wheel)
    if actual != expected:
        raise InvalidInput(
            f"{wheel}: SHA-256 {actual[:16]}… is not the {expected[:16]}… the index publishes "
            f"for this file of {spec}: refused"
        )
    return None
