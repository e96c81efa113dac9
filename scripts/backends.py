"""The first-party backends, read from their manifests (``packages/*/backend.toml``).

Every place outside a backend's folder that must list the backends reads
this, or is generated from it, so a new first-party backend is its folder
plus ``make generate``:

    python3 scripts/backends.py generate     # rewrite the generated blocks and files
    python3 scripts/backends.py check        # exit 1 naming each stale one (make lint runs it)
    python3 scripts/backends.py steps        # name|seconds|paths per backend (scripts/test-matrix.sh)
    python3 scripts/backends.py services     # name, port, start and ready commands (scripts/services.sh)
    python3 scripts/backends.py env          # export VAR=url per service (scripts/services.sh)
    python3 scripts/backends.py env-names    # VAR per service (make test-docker unsets them)
    python3 scripts/backends.py programs     # Debian packages of the servers fault tests start (CI workflow)

A generated block sits between ``# >>> generated: KIND`` and
``# <<< generated: KIND`` lines; only what lies between is rewritten. The
standard library only (Python 3.11 or newer, for tomllib): scripts/services.sh runs this
before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parent.parent

#: Distributions around the backends, (folder, import name), in the order the tool lists want them.
BEFORE = [("anarchon-core", "anarchon"), ("conformance", "anarchon_conformance")]
AFTER = [
    ("anarchon-prometheus", "anarchon_prometheus"),
    ("anarchon-opentelemetry", "anarchon_opentelemetry"),
    ("anarchon-web", "anarchon_web"),
]
#: The meta-package's extras that are not backends.
OTHER_EXTRAS = [
    ("prometheus", "anarchon-prometheus"),
    ("opentelemetry", "anarchon-opentelemetry"),
    ("web", "anarchon-web"),
]
PIN = ">=0.1,<0.2"
_NAME = re.compile(r"[a-z][a-z0-9]*\Z")
#: What a [service] table must say: the loopback server (services.sh) and its container (docker-compose.yml).
_SERVICE_KEYS = ("env", "url", "port", "start", "ready", "image", "container_port", "docker_url", "compose")


@dataclass(frozen=True)
class Manifest:
    """One backend's ``backend.toml``."""

    folder: str
    name: str
    title: str
    order: int
    distribution: str
    module: str
    cls: str
    url_schemes: list[str]
    docs: str
    marker: str
    untyped: list[str]
    test: dict[str, Any]
    service: dict[str, Any] | None
    #: Its benchmark targets (modules in its benchmarks/ folder) and their claim bound.
    bench: dict[str, Any]


def load(root: Path = ROOT) -> list[Manifest]:
    """Every manifest under ``root/packages``, in their ``order``; a broken one raises naming its file."""
    found = []
    for path in sorted((root / "packages").glob("*/backend.toml")):
        data = tomllib.loads(path.read_text())
        try:
            manifest = Manifest(
                folder=path.parent.name,
                name=data["name"],
                title=data["title"],
                order=int(data["order"]),
                distribution=data["distribution"],
                module=data["module"],
                cls=data["class"],
                url_schemes=list(data["url_schemes"]),
                docs=data["docs"],
                marker=data["marker"],
                untyped=list(data.get("untyped", [])),
                test=dict(data["test"]),
                service=data.get("service"),
                bench=dict(data.get("bench", {"targets": [], "private": []})),
            )
        except KeyError as exc:
            raise SystemExit(f"{path}: the key {exc} is missing; see packages/anarchon-redis/backend.toml") from None
        missing = [k for k in _SERVICE_KEYS if manifest.service is not None and k not in manifest.service]
        if missing:
            raise SystemExit(f"{path}: [service] lacks {', '.join(missing)}; see packages/anarchon-redis/backend.toml")
        if not _NAME.match(manifest.name):
            raise SystemExit(f"{path}: name={manifest.name!r} must be lower-case letters and digits")
        found.append(manifest)
    return sorted(found, key=lambda m: (m.order, m.name))


def _quoted(items: list[str]) -> str:
    return ", ".join(f'"{item}"' for item in items)


def _modules(ms: list[Manifest]) -> list[str]:
    return [module for _, module in BEFORE] + [m.module for m in ms] + [module for _, module in AFTER]


def _folders(ms: list[Manifest]) -> list[str]:
    return [folder for folder, _ in BEFORE] + [m.folder for m in ms] + [folder for folder, _ in AFTER]


# -- the generated blocks, by kind ---------------------------------------------------------


def _markers(ms: list[Manifest]) -> str:
    return "".join(f'  "{m.name}: {m.marker}",\n' for m in ms)


def _import_roots(ms: list[Manifest]) -> str:
    return f"root_packages = [{_quoted(_modules(ms))}]\n"


def _import_forbidden(ms: list[Manifest]) -> str:
    return f"forbidden_modules = [{_quoted(_modules(ms)[1:])}]\n"


def _import_independent(ms: list[Manifest]) -> str:
    return f"modules = [{_quoted([m.module for m in ms])}]\n"


def _mypy_paths(ms: list[Manifest]) -> str:
    paths = "".join(f'  "packages/{folder}/src",\n' for folder in _folders(ms))
    return f"files = [\n{paths}]\nmypy_path = [\n{paths}]\n"


def _mypy_typed(ms: list[Manifest]) -> str:
    modules = [f"{m}.*" for m in [*(m.module for m in ms), "anarchon_conformance", "anarchon_web"]]
    return f"module = [{_quoted(modules)}]\n"


def _mypy_untyped(ms: list[Manifest]) -> str:
    return f"module = [{_quoted([u for m in ms for u in m.untyped])}]\n"


def _extras(ms: list[Manifest]) -> str:
    pairs = [(m.name, m.distribution) for m in ms] + OTHER_EXTRAS
    lines = "".join(f'{extra} = ["{dist}{PIN}"]\n' for extra, dist in pairs)
    every = "".join(f'  "{dist}{PIN}",\n' for _, dist in pairs)
    return f"{lines}all = [\n{every}]\n"


def _first_party(ms: list[Manifest]) -> str:
    classes = "".join(f'    "{m.cls}": ("{m.module}", "{m.distribution}"),\n' for m in ms)
    schemes = "".join(f'    "{s}": "{m.distribution}",\n' for m in ms for s in m.url_schemes)
    return (
        "FIRST_PARTY: dict[str, tuple[str, str]] = {\n"
        f"{classes}}}\n"
        "_BACKEND_SCHEMES: dict[str, str] = {\n"
        f"{schemes}}}\n"
    )


def image_variable(m: Manifest) -> str:
    """The variable that picks a service's image (scripts/docker_images.py sets it)."""
    return f"ANARCHON_{m.name.upper()}_IMAGE"


def _compose(ms: list[Manifest]) -> str:
    out = []
    for m in ms:
        if m.service and m.service.get("compose"):
            body = "".join(f"    {line}\n" if line else "\n" for line in m.service["compose"].strip("\n").splitlines())
            image = f"${{{image_variable(m)}:-{m.service['image']}}}"
            # A free port on 127.0.0.1 only: never the shared servers' ports, never another interface.
            ports = f'["127.0.0.1::{m.service["container_port"]}"]'
            out.append(f"  {m.name}:\n    image: {image}\n    ports: {ports}\n{body}")
    return "\n".join(out)


def _nav(ms: list[Manifest]) -> str:
    return "".join(f"      - {m.title}: {m.docs}\n" for m in ms)


def _doc_paths(ms: list[Manifest]) -> str:
    return "".join(f"            - packages/{m.folder}/src\n" for m in ms)


BLOCKS: dict[str, Callable[[list[Manifest]], str]] = {
    "markers": _markers,
    "import-roots": _import_roots,
    "import-forbidden": _import_forbidden,
    "import-independent": _import_independent,
    "mypy-paths": _mypy_paths,
    "mypy-typed": _mypy_typed,
    "mypy-untyped": _mypy_untyped,
    "extras": _extras,
    "first-party": _first_party,
    "compose": _compose,
    "nav": _nav,
    "doc-paths": _doc_paths,
}

#: Every file with generated blocks; each must hold at least one.
FILES = [
    "pyproject.toml",
    "packages/anarchon/pyproject.toml",
    "packages/anarchon-core/src/anarchon/distributions.py",
    "docker-compose.yml",
    "mkdocs.yml",
]

_BLOCK = re.compile(
    r"(?P<head>^[ \t]*# >>> generated: (?P<kind>[a-z-]+)[^\n]*\n)"
    r"(?P<body>.*?)"
    r"(?P<tail>^[ \t]*# <<< generated: (?P=kind)[^\n]*$)",
    re.M | re.S,
)


def render(text: str, ms: list[Manifest], where: str) -> str:
    """``text`` with every generated block rewritten from ``ms``."""

    def fill(found: re.Match[str]) -> str:
        kind = found["kind"]
        if kind not in BLOCKS:
            raise SystemExit(f"{where}: unknown generated block {kind!r}; the kinds are {', '.join(BLOCKS)}")
        return found["head"] + BLOCKS[kind](ms) + found["tail"]

    rendered, count = _BLOCK.subn(fill, text)
    if count == 0:
        raise SystemExit(f"{where}: no '# >>> generated: KIND' block; scripts/backends.py FILES lists it")
    return rendered


def stale(root: Path = ROOT, *, write: bool = False) -> list[str]:
    """The generated files that differ from what the manifests make (rewritten when ``write``)."""
    ms = load(root)
    changed = []
    for name in FILES:
        path = root / name
        text = path.read_text()
        wanted = render(text, ms, name)
        if wanted != text:
            changed.append(name)
            if write:
                path.write_text(wanted)
    return changed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/backends.py", description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["generate", "check", "steps", "services", "env", "env-names", "programs"])
    p.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = p.parse_args(argv)
    ms = load(args.root)
    if args.command in ("generate", "check"):
        changed = stale(args.root, write=args.command == "generate")
        for name in changed:
            verb = "rewrote" if args.command == "generate" else "is stale; run `make generate`:"
            print(f"backends: {verb} {name}" if args.command == "generate" else f"backends: {name} {verb}")
        return 1 if changed and args.command == "check" else 0
    for m in ms:
        if args.command == "steps":
            print(f"{m.name}|{m.test['seconds']}|{m.test['paths']}")
        elif m.service is None:
            continue
        elif args.command == "services":
            print("\t".join([m.name, str(m.service["port"]), m.service["start"], m.service["ready"]]))
        elif args.command == "env":
            print(f"export {m.service['env']}={m.service['url']}")
        elif args.command == "env-names":
            print(m.service["env"])
        elif args.command == "programs":
            print("\n".join(m.service.get("programs", [])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
