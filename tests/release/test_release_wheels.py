"""What a user gets from `pip install anarchon-<backend>` or `pip install "anarchon[redis]"`: every wheel and sdist.

The wheels are built once per session the way a release builds them:
``python -m build`` makes the sdist, then the wheel from that sdist, so a
wheel that only builds inside the repository fails here. Each backend wheel
then goes alone into a fresh virtual environment next to the anarchon-core
wheel; there `anarchon backends` must list it, `from anarchon import
XBackend` must work, and every backend left out must answer with the command
that installs it. The ``anarchon`` meta-distribution, metadata only, must
name each backend by its extra, and ``anarchon[redis]`` installed from the
wheels alone must run a job against the shared Redis. Our own wheels are
installed with ``--no-index``, so a
same-named release on an index can never stand in for them; their third-party
requirements come from the machine's usual index through pip's cache.

Run with `.venv/bin/python -m pytest tests/release -q` (about a minute).
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

import pytest

from scripts.backends import load

ROOT = Path(__file__).resolve().parents[2]
LICENSE = (ROOT / "LICENSE").read_text()


#: The first-party backends, as their manifests declare them (scripts/backends.py).
MANIFESTS = load(ROOT)

#: Distribution name -> folder under packages/.
DISTRIBUTIONS: dict[str, str] = {
    "anarchon-core": "anarchon-core",
    "anarchon": "anarchon",
    "anarchon-conformance": "conformance",
    **{m.distribution: m.folder for m in MANIFESTS},
    "anarchon-prometheus": "anarchon-prometheus",
    "anarchon-opentelemetry": "anarchon-opentelemetry",
    "anarchon-web": "anarchon-web",
}
# Every folder with a pyproject is a distribution this test builds.
assert sorted(DISTRIBUTIONS.values()) == sorted(p.parent.name for p in (ROOT / "packages").glob("*/pyproject.toml"))


#: The meta-distribution: no code, anarchon-core plus a distribution per extra.
META = "anarchon"
EXTRAS = {
    **{m.name: [m.distribution] for m in MANIFESTS},
    "prometheus": ["anarchon-prometheus"],
    "opentelemetry": ["anarchon-opentelemetry"],
    "web": ["anarchon-web"],
}
EXTRAS["all"] = sorted(d for names in EXTRAS.values() for d in names)


@dataclass(frozen=True)
class BackendDist:
    distribution: str
    backend: str  # the name `anarchon backends` lists
    cls: str  # what `from anarchon import ...` gives


BACKENDS = [BackendDist(m.distribution, m.name, m.cls) for m in MANIFESTS]


def run(cmd: Sequence[str | Path], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run a command; on failure show its whole output, not just the exit code."""
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    if proc.returncode != 0:
        pytest.fail(
            f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n"
            f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}",
            pytrace=False,
        )
    return proc.stdout


def pip(python: Path, *args: str) -> str:
    """This interpreter's pip, working on another environment (no pip inside it: faster to create)."""
    return run([sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check", *args])


def new_venv(where: Path) -> Path:
    run([sys.executable, "-m", "venv", "--without-pip", where])
    return where / "bin" / "python"


def clean_env() -> dict[str, str]:
    """The environment minus what would let a test see the repository's own packages."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "ANARCHON_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@dataclass(frozen=True)
class Dists:
    folder: Path
    version: str

    def wheel(self, distribution: str) -> Path:
        return self.folder / f"{distribution.replace('-', '_')}-{self.version}-py3-none-any.whl"

    def sdist(self, distribution: str) -> Path:
        return self.folder / f"{distribution.replace('-', '_')}-{self.version}.tar.gz"

    def metadata(self, distribution: str) -> Message:
        with zipfile.ZipFile(self.wheel(distribution)) as wheel:
            name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
            return email.parser.Parser().parsestr(wheel.read(name).decode())

    def third_party_requirements(self, distribution: str) -> list[str]:
        return [r for r in self.metadata(distribution).get_all("Requires-Dist", []) if not r.startswith("anarchon")]


@pytest.fixture(scope="session")
def version() -> str:
    return (ROOT / "VERSION").read_text().strip()


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory, version: str) -> Dists:
    work = tmp_path_factory.mktemp("build")
    builder = new_venv(work / "builder")
    # [build-system] requires of the packages (all seven say the same); no
    # tomllib, which Python 3.10 lacks.
    pyproject = (ROOT / "packages/anarchon-core/pyproject.toml").read_text()
    requires = re.findall(r'"([^"]+)"', re.search(r"^requires = \[(.*)\]$", pyproject, re.M).group(1))
    pip(builder, "install", "--quiet", "build", *requires)
    out = work / "dist"
    for folder in DISTRIBUTIONS.values():
        # Without isolation: the builder already holds the backend, and seven
        # isolated environments would cost half a minute for nothing.
        run([builder, "-m", "build", "--no-isolation", "--outdir", out, ROOT / "packages" / folder], env=clean_env())
    return Dists(out, version)


@pytest.fixture(scope="session")
def install(tmp_path_factory: pytest.TempPathFactory, dists: Dists) -> Callable[..., Path]:
    """A fresh environment holding exactly the named distributions of ours, and their requirements."""

    def make(*distributions: str) -> Path:
        python = new_venv(
            tmp_path_factory.mktemp("venv-" + "-".join(d.removeprefix("anarchon-") for d in distributions))
        )
        ours = [f"{d}=={dists.version}" for d in distributions]
        pip(python, "install", "--quiet", "--no-index", "--no-deps", "--find-links", str(dists.folder), *ours)
        theirs = sorted({r for d in distributions for r in dists.third_party_requirements(d)})
        if theirs:
            pip(python, "install", "--quiet", *theirs)
        pip(python, "check")  # every Requires-Dist, ours included, is satisfied
        return python

    return make


def readme(distribution: str) -> str:
    return (ROOT / "packages" / DISTRIBUTIONS[distribution] / "README.md").read_text()


# -- the files themselves -------------------------------------------------------


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_wheel_metadata_is_complete(dists: Dists, distribution: str) -> None:
    meta = dists.metadata(distribution)
    assert meta["Name"] == distribution
    assert meta["Version"] == dists.version
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["Requires-Python"] == ">=3.10"
    assert meta["Summary"]
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_payload().strip() == readme(distribution).strip()
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL", []))
    assert {"Source", "Issues", "Documentation", "Changelog"} <= set(urls)
    classifiers = meta.get_all("Classifier", [])
    assert ("Typing :: Typed" in classifiers) is (distribution != META), "only a wheel with code is typed"
    assert "Programming Language :: Python :: 3 :: Only" in classifiers


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_wheel_carries_the_license_and_py_typed_and_no_build_files(dists: Dists, distribution: str) -> None:
    with zipfile.ZipFile(dists.wheel(distribution)) as wheel:
        names = wheel.namelist()
        license_files = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert len(license_files) == 1
        assert wheel.read(license_files[0]).decode() == LICENSE
    if distribution == META:
        assert [n for n in names if ".dist-info/" not in n] == [], "the meta-distribution must ship no module"
    else:
        assert any(n.endswith("/py.typed") for n in names), "PEP 561 marker missing"
    assert not [n for n in names if n.rsplit("/", 1)[-1] == "BUILD"], "Pants BUILD files leaked into the wheel"
    assert not [n for n in names if "/tests/" in n or n.startswith("tests/")]


@pytest.mark.parametrize(
    ("folder", "store", "suffix"),
    [("anarchon-redis", "anarchon_redis/lua", ".lua"), ("anarchon-postgres", "anarchon_postgres/sql", ".sql"),
     ("anarchon-sqlite", "anarchon_sqlite/sql", ".sql")],
)  # fmt: skip
def test_the_store_code_files_are_in_the_wheel(dists: Dists, folder: str, store: str, suffix: str) -> None:
    """Each backend keeps its store code (Lua scripts, SQL) as resource files; a wheel without them cannot work."""
    sources = ROOT / "packages" / folder / "src"
    expected = {p.relative_to(sources).as_posix() for p in (sources / store).rglob(f"*{suffix}")}
    with zipfile.ZipFile(dists.wheel(folder)) as wheel:
        names = set(wheel.namelist())
    assert expected, f"no {suffix} files found in the sources"
    assert expected <= names, f"missing from the wheel: {sorted(expected - names)}"


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_sdist_builds_anywhere(dists: Dists, distribution: str) -> None:
    """An sdist has no ../../VERSION: it must carry the version and license itself."""
    project = f"{distribution.replace('-', '_')}-{dists.version}"
    with tarfile.open(dists.sdist(distribution)) as sdist:
        names = set(sdist.getnames())
        pkg_info = sdist.extractfile(f"{project}/PKG-INFO")
        assert pkg_info is not None
        assert f"Version: {dists.version}\n" in pkg_info.read().decode()
        license_file = sdist.extractfile(f"{project}/LICENSE")
        assert license_file is not None and license_file.read().decode() == LICENSE
    assert {f"{project}/pyproject.toml", f"{project}/README.md"} <= names
    assert not [n for n in names if n.rsplit("/", 1)[-1] == "BUILD"]
    assert not [n for n in names if n.endswith((".pyc", ".sqlite3"))]


@pytest.mark.parametrize("distribution", [d for d in DISTRIBUTIONS if d != META])
def test_entry_points_are_in_the_wheel(dists: Dists, distribution: str) -> None:
    with zipfile.ZipFile(dists.wheel(distribution)) as wheel:
        text = wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))).decode()
    if distribution == "anarchon-core":
        assert "[anarchon]\nmemory = anarchon._memory_plugin" in text
        assert "[console_scripts]\nanarchon = anarchon.cli:main" in text
    elif distribution == "anarchon-conformance":
        assert "[pytest11]\nanarchon_conformance = anarchon_conformance.plugin" in text
    elif distribution == "anarchon-prometheus":
        assert "[anarchon]\nprometheus = anarchon_prometheus._plugin" in text
    elif distribution == "anarchon-opentelemetry":
        assert "[anarchon]\nopentelemetry = anarchon_opentelemetry._plugin" in text
    elif distribution == "anarchon-web":
        assert "[console_scripts]\nanarchon-web = anarchon_web.cli:main" in text
    else:
        backend = next(b for b in BACKENDS if b.distribution == distribution)
        assert re.search(rf"\[anarchon\]\n{backend.backend} = anarchon_{backend.backend}\._plugin", text), text


def test_meta_distribution_names_each_distribution_by_its_extra(dists: Dists) -> None:
    meta = dists.metadata(META)
    assert sorted(meta.get_all("Provides-Extra", [])) == sorted(EXTRAS)
    required: dict[str | None, set[str]] = {}
    for requirement in meta.get_all("Requires-Dist", []):
        spec, _, marker = requirement.partition(";")
        extra = re.search(r"extra == ['\"]([a-z]+)['\"]", marker)
        name = re.split(r"[<>=!~ ]", spec.strip(), maxsplit=1)[0]
        assert re.search(r">=0\.1,\s*<0\.2|<0\.2,\s*>=0\.1", spec), f"{requirement!r}: pin our own to this series"
        required.setdefault(extra.group(1) if extra else None, set()).add(name)
    assert required.pop(None) == {"anarchon-core"}
    assert {extra: sorted(names) for extra, names in required.items()} == EXTRAS
    with zipfile.ZipFile(dists.wheel(META)) as wheel:
        assert not [n for n in wheel.namelist() if n.endswith("entry_points.txt")]


def test_every_license_copy_is_the_root_license() -> None:
    """Each package folder holds a copy (an sdist cannot reach ../../LICENSE); the root one is the original."""
    for folder in DISTRIBUTIONS.values():
        assert (ROOT / "packages" / folder / "LICENSE").read_text() == LICENSE, f"packages/{folder}/LICENSE differs"


def test_pants_knows_every_third_party_requirement(dists: Dists) -> None:
    """requirements.txt and each backend's BUILD feed Pants' lockfile; a new dependency must land in one of them."""
    lines = [
        line
        for line in (ROOT / "3rdparty/python/requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for build in ROOT.glob("packages/*/BUILD"):  # python_requirement(name=..., requirements=["x>=1"])
        lines += re.findall(r'python_requirement\([^)]*requirements=\["([^"]+)"\]', build.read_text())
    listed = {re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0].lower() for line in lines}
    for distribution in DISTRIBUTIONS:
        for requirement in dists.third_party_requirements(distribution):
            name = re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()
            assert name in listed, (
                f"{distribution} requires {requirement!r}: add it to 3rdparty/python/requirements.txt or its BUILD"
            )


# -- installed, one backend at a time ----------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.backend)
def test_backend_wheel_alone_next_to_the_core(install: Callable[..., Path], backend: BackendDist) -> None:
    python = install("anarchon-core", backend.distribution)
    bin_dir = python.parent

    listed = json.loads(run([bin_dir / "anarchon", "backends", "--json"], env=clean_env()))
    assert sorted(entry["name"] for entry in listed) == sorted(["memory", backend.backend])

    others = [b for b in BACKENDS if b is not backend]
    probe = textwrap.dedent(
        f"""
        import json
        import anarchon
        from anarchon import {backend.cls}
        missing = {{}}
        for name in {[b.cls for b in others]!r}:
            try:
                getattr(anarchon, name)
            except ImportError as exc:
                missing[name] = [type(exc).__name__, str(exc)]
            else:
                missing[name] = None
        print(json.dumps({{"module": {backend.cls}.__module__, "version": anarchon.__version__, "missing": missing}}))
        """
    )
    out = json.loads(run([python, "-c", probe], env=clean_env(), cwd=python.parent))
    assert out["module"].startswith(f"anarchon_{backend.backend}")
    for other in others:
        error = out["missing"][other.cls]
        assert error is not None, f"{other.cls} imported although {other.distribution} is not installed"
        assert error[0] == "BackendNotInstalledError"
        assert f"pip install {other.distribution}" in error[1]


def test_prometheus_wheel_alone_next_to_the_core(install: Callable[..., Path]) -> None:
    """Installed alone, the observer counts a run of any scheduler in the process into the default registry."""
    python = install("anarchon-core", "anarchon-prometheus")
    probe = textwrap.dedent(
        """
        import asyncio
        from prometheus_client import REGISTRY
        from anarchon import Scheduler

        async def main():
            s = Scheduler("memory://")
            s.add("tick", "0 0 1 1 *", lambda: None)
            await s.run_now("tick")

        asyncio.run(main())
        print(REGISTRY.get_sample_value("anarchon_runs_total", {"anarchon_job": "tick", "status": "succeeded"}))
        """
    )
    assert run([python, "-c", probe], env=clean_env(), cwd=python.parent).strip() == "1.0"


def test_opentelemetry_wheel_alone_next_to_the_core(install: Callable[..., Path]) -> None:
    """Installed alone (the API only, no SDK), the observer is loaded and a run goes through it untouched."""
    python = install("anarchon-core", "anarchon-opentelemetry")
    probe = textwrap.dedent(
        """
        import asyncio
        from anarchon import Scheduler

        async def main():
            s = Scheduler("memory://")
            s.add("tick", "0 0 1 1 *", lambda: None)
            loaded = "opentelemetry" in dict(s.plugins.pluggy.list_name_plugin())
            print(loaded, (await s.run_now("tick")).status)

        asyncio.run(main())
        """
    )
    assert run([python, "-c", probe], env=clean_env(), cwd=python.parent).strip() == "True succeeded"


@pytest.fixture
def redis_url() -> str:
    """The shared Redis (ANARCHON_REDIS_URL); unreachable: skipped, or a failure under CI=true."""
    redis = pytest.importorskip("redis")
    url = os.environ.get("ANARCHON_REDIS_URL", "redis://127.0.0.1:6379/0")
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        reason = f"no Redis at {url} ({exc}); start one or set ANARCHON_REDIS_URL"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so this must not be skipped: {reason}")
        pytest.skip(f"!!! SKIPPED: {reason}")
    finally:
        client.close()
    return url


def test_pip_install_anarchon_redis_gives_a_working_scheduler(
    tmp_path_factory: pytest.TempPathFactory, dists: Dists, redis_url: str
) -> None:
    """`pip install "anarchon[redis]"`, our wheels only (``--no-index``), then a job run through the shared Redis."""
    python = new_venv(tmp_path_factory.mktemp("venv-anarchon-redis-extra"))
    # Third-party requirements from the index first, so the --no-index install below resolves only ours.
    pip(
        python,
        "install",
        "--quiet",
        *sorted({*dists.third_party_requirements("anarchon-core"), *dists.third_party_requirements("anarchon-redis")}),
    )
    pip(
        python,
        "install",
        "--quiet",
        "--no-index",
        "--find-links",
        str(dists.folder),
        f"anarchon[redis]=={dists.version}",
    )
    pip(python, "check")
    installed = {p["name"] for p in json.loads(pip(python, "list", "--format", "json"))}
    assert {"anarchon", "anarchon-core", "anarchon-redis"} <= installed
    assert not installed & {m.distribution for m in MANIFESTS if m.name != "redis"}

    prefix = f"release-{os.urandom(4).hex()}:"
    probe = textwrap.dedent(
        f"""
        import asyncio, json
        from anarchon import RedisBackend, Scheduler

        async def main():
            ran = asyncio.Event()
            scheduler = Scheduler(RedisBackend(url={redis_url!r}, prefix={prefix!r}))
            async def tick():
                ran.set()

            scheduler.add("tick", "* * * * * *", tick, jitter_ms=0)
            scheduler.add("manual", "0 0 1 1 *", lambda: None)
            async with scheduler:
                manual = await scheduler.run_now("manual")
                await asyncio.wait_for(ran.wait(), 10)
            runs = await scheduler.history("tick")
            print(json.dumps({{"manual": manual.status.value, "ticks": [r.instance for r in runs],
                              "me": scheduler.instance_id, "module": RedisBackend.__module__}}))

        asyncio.run(main())
        """
    )
    try:
        out = json.loads(run([python, "-c", probe], env=clean_env(), cwd=python.parent))
    finally:
        import redis

        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()
    assert out["module"].startswith("anarchon_redis")
    assert out["manual"] == "succeeded"
    assert out["ticks"] and set(out["ticks"]) == {out["me"]}


def test_core_version_matches_the_distribution(install: Callable[..., Path], dists: Dists) -> None:
    python = install("anarchon-core")
    code = "import anarchon, importlib.metadata as m; print(anarchon.__version__, m.version('anarchon-core'))"
    module_version, dist_version = run([python, "-c", code], env=clean_env(), cwd=python.parent).split()
    assert dist_version == dists.version
    assert module_version == dists.version, "anarchon.__version__ is not the VERSION file's"


def test_conformance_suite_runs_from_its_wheel(install: Callable[..., Path], tmp_path: Path) -> None:
    """A third party's view: only the wheels, no repository config (no asyncio_mode=auto, no conftest)."""
    python = install("anarchon-core", "anarchon-conformance")
    (tmp_path / "test_third_party_memory.py").write_text(
        textwrap.dedent(
            """
            import pytest
            from anarchon.memory import MemoryBackend, MemoryStore
            from anarchon_conformance import BackendSuite

            class TestMemory(BackendSuite):
                @pytest.fixture
                def backend_factory(self):
                    store = MemoryStore()
                    return lambda: MemoryBackend(store)
            """
        )
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    out = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow"], cwd=tmp_path, env=clean_env())
    assert re.search(r"\d+ passed", out), out
    assert "anarchon conformance" in out, "the pytest11 plugin did not load from the wheel"


def test_web_wheel_carries_its_templates_and_stylesheet(dists: Dists) -> None:
    with zipfile.ZipFile(dists.wheel("anarchon-web")) as wheel:
        names = set(wheel.namelist())
    for page in ("base", "jobs", "job", "run", "error", "_macros"):
        assert f"anarchon_web/templates/{page}.html" in names
    assert "anarchon_web/static/style.css" in names


def test_web_wheel_alone_next_to_the_core_serves_its_pages(install: Callable[..., Path]) -> None:
    """Templates and static files load from the installed wheel, not from the repository."""
    python = install("anarchon-core", "anarchon-web")
    assert "module:attr" in run([python.parent / "anarchon-web", "--help"], env=clean_env())
    probe = textwrap.dedent(
        """
        import asyncio, json
        import anarchon_web
        from anarchon import MemoryBackend, Scheduler

        scheduler = Scheduler(MemoryBackend())
        scheduler.add("nightly", "0 3 * * *", lambda: None, timezone="Europe/Athens")
        app = anarchon_web.app(scheduler)

        async def get(path, query=b""):
            sent, requests = [], [{"type": "http.request", "body": b"", "more_body": False}]
            async def receive():  # the request once, then a client that stays connected
                if requests:
                    return requests.pop()
                await asyncio.sleep(3600)
            async def send(message):
                sent.append(message)
            scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": query,
                     "headers": [(b"host", b"x")], "scheme": "http", "server": ("x", 80), "root_path": "",
                     "http_version": "1.1", "client": ("127.0.0.1", 1)}
            await app(scope, receive, send)
            body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
            return sent[0]["status"], body.decode()

        async def main():
            pages = {p: await get(p) for p in ["/", "/jobs/nightly", "/static/style.css"]}
            status, data = await get("/", b"format=json")
            print(json.dumps({"pages": {p: [s, len(b), "nightly" in b] for p, (s, b) in pages.items()},
                              "json": [status, json.loads(data)["jobs"][0]["name"]],
                              "file": anarchon_web.__file__}))

        asyncio.run(main())
        """
    )
    out = json.loads(run([python, "-c", probe], env=clean_env(), cwd=python.parent))
    assert out["pages"]["/"][0] == 200 and out["pages"]["/"][2]
    assert out["pages"]["/jobs/nightly"][0] == 200 and out["pages"]["/jobs/nightly"][2]
    assert out["pages"]["/static/style.css"][0] == 200 and out["pages"]["/static/style.css"][1] > 1000
    assert out["json"] == [200, "nightly"]
    assert str(ROOT) not in out["file"], "anarchon_web was imported from the repository, not the wheel"
