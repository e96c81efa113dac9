"""The brokers' images for docker-compose.yml: the public ones, or the same servers built here from Debian.

    python3 scripts/docker_images.py [--mode auto|public|local] [NAME ...]

prints ``export ANARCHON_<NAME>_IMAGE=<image>`` for each backend's service
(every one with a ``[service]`` in its manifest, or those NAMEd). The mode is
``--mode``, else ``ANARCHON_IMAGES``, else ``auto``:

``public``
    the image the manifest names (``redis:7.0``), pulled from its registry.
``local``
    the same server built on this machine from Debian's packages, for a
    machine that reaches no image registry: a Debian bookworm base made by
    ``debootstrap`` from the Debian mirror and ``docker import``, then the
    backend's ``docker/Dockerfile`` on it. Each image is tagged with a hash
    of its definition, so it is built once and again only when that changes.
``auto``
    public where the image is here or ``docker pull`` gets it within
    ``ANARCHON_PULL_TIMEOUT_S`` (20 s), local otherwise.

``ANARCHON_<NAME>_IMAGE`` set beforehand wins over all of these. Builds take a
lock, so parallel test steps build each image once. Written by hand: no
library builds a ``debootstrap`` base, and the rest is three docker commands.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scripts.backends import ROOT, Manifest, image_variable, load

__all__ = ["MODES", "base_image", "local_image", "resolve"]

MODES = ("auto", "public", "local")
SUITE = "bookworm"
MIRROR = os.environ.get("ANARCHON_DEBIAN_MIRROR", "http://deb.debian.org/debian")
#: What the base is made of; its hash is the base's tag, so a change here rebuilds it.
BASE_RECIPE = f"debootstrap --variant=minbase {SUITE} DIR {MIRROR}; rm -rf DIR/var/lib/apt/lists/* DIR/var/cache/apt/*"
LOCK = Path(tempfile.gettempdir()) / "anarchon-docker-images.lock"


def _log(message: str) -> None:
    print(f"docker_images: {message}", file=sys.stderr, flush=True)


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big") + part)
    return h.hexdigest()[:12]


def _present(image: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False).returncode == 0


@contextmanager
def _locked() -> Iterator[None]:
    with open(LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def base_image() -> str:
    """The Debian base every local image is built on, made once per recipe."""
    tag = f"anarchon-local/debian:{SUITE}-{_digest(BASE_RECIPE.encode())}"
    with _locked():
        if _present(tag):
            return tag
        if shutil.which("debootstrap") is None:
            raise SystemExit("docker_images: the local images need debootstrap (apt-get install debootstrap)")
        began = time.monotonic()
        # debootstrap must run as root (chroot, device nodes); elsewhere (a CI runner) through sudo.
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        with tempfile.TemporaryDirectory(prefix="anarchon-debian-") as root:
            subprocess.run(
                [*sudo, "debootstrap", "--variant=minbase", SUITE, root, MIRROR], check=True, stdout=subprocess.DEVNULL
            )
            for leftover in ("var/lib/apt/lists", "var/cache/apt"):
                subprocess.run([*sudo, "find", f"{root}/{leftover}", "-mindepth", "1", "-delete"], check=True)
            tar = subprocess.Popen([*sudo, "tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
            subprocess.run(["docker", "import", "-", tag], stdin=tar.stdout, check=True, stdout=subprocess.DEVNULL)
            if tar.wait() != 0:
                raise SystemExit(f"docker_images: tar of the debootstrap tree failed ({tar.returncode})")
            if sudo:  # the tree is root's: TemporaryDirectory could not remove it
                subprocess.run([*sudo, "rm", "-rf", root], check=True)
                Path(root).mkdir()
        _log(f"built {tag} in {time.monotonic() - began:.0f} s (debootstrap from {MIRROR})")
        return tag


def local_image(m: Manifest) -> str:
    """The backend's server built from its ``docker/`` folder on :func:`base_image`."""
    folder = ROOT / "packages" / m.folder / "docker"
    if not (folder / "Dockerfile").is_file():
        raise SystemExit(f"docker_images: {m.name} has no {folder.relative_to(ROOT)}/Dockerfile to build locally")
    base = base_image()
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    tag = f"anarchon-local/{m.name}:{_digest(base.encode(), *(p.name.encode() + p.read_bytes() for p in files))}"
    with _locked():
        if not _present(tag):
            began = time.monotonic()
            subprocess.run(
                ["docker", "build", "-q", "--build-arg", f"BASE={base}", "-t", tag, str(folder)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            _log(f"built {tag} in {time.monotonic() - began:.0f} s")
    return tag


def _pulled(image: str) -> bool:
    if _present(image):
        return True
    timeout = float(os.environ.get("ANARCHON_PULL_TIMEOUT_S", "20"))
    try:
        done = subprocess.run(["docker", "pull", "-q", image], capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def resolve(manifests: list[Manifest], mode: str | None = None) -> dict[str, str]:
    """``ANARCHON_<NAME>_IMAGE`` -> image, for each of these backends' services."""
    mode = mode or os.environ.get("ANARCHON_IMAGES") or "auto"
    if mode not in MODES:
        raise SystemExit(f"ANARCHON_IMAGES={mode!r} is not one of {', '.join(MODES)}; unset it for auto")
    images = {}
    for m in manifests:
        if m.service is None:
            continue
        variable = image_variable(m)
        public = str(m.service["image"])
        if os.environ.get(variable):
            images[variable] = os.environ[variable]
        elif mode == "public" or (mode == "auto" and _pulled(public)):
            images[variable] = public
        else:
            if mode == "auto":
                _log(f"{public} cannot be pulled; building {m.name} from Debian's packages")
            images[variable] = local_image(m)
    return images


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/docker_images.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=MODES, default=None)
    p.add_argument("names", nargs="*", help="backends (default: every one with a service)")
    args = p.parse_args(argv)
    manifests = load()
    unknown = set(args.names) - {m.name for m in manifests}
    if unknown:
        p.error(f"unknown backend(s) {', '.join(sorted(unknown))}; choose from {', '.join(m.name for m in manifests)}")
    chosen = [m for m in manifests if not args.names or m.name in args.names]
    for variable, image in resolve(chosen, args.mode).items():
        print(f"export {variable}={image}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
