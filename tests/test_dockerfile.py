"""The Dockerfile builds an image that serves: with a Docker engine, for real; without one,
by replaying its steps (COPY, WORKDIR, ENV, RUN, CMD, HEALTHCHECK) in a temp directory."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import venv
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.live_server import REPO, ServerProcess, free_port
from tests.test_installed_package import PLAN, clean_environment

DOCKERFILE = REPO / "Dockerfile"
# What replaying cannot do as root of an image: the account the image runs as.
ACCOUNT_COMMANDS = frozenset({"groupadd", "useradd", "chown"})


def docker_engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def instructions(text: str) -> list[tuple[str, str]]:
    """(keyword, arguments) per instruction, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


@dataclass
class Stage:
    name: str
    root: Path
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)


class Replay:
    """Each stage's filesystem is a folder of its own under `root/`, where its absolute
    paths land."""

    def __init__(
        self, root: Path, context: Path, pip_bin: Path, steps: list[tuple[str, str]]
    ) -> None:
        self.root, self.context, self.pip_bin = root, context, pip_bin
        self.stages: list[Stage] = []
        self.cmd: list[str] = []
        self.healthcheck: list[str] = []
        image_paths = [args for keyword, args in steps if keyword == "WORKDIR"]
        image_paths += [shlex.split(a)[-1] for k, a in steps if k == "COPY"]
        tops = sorted({p.split("/")[1] for p in image_paths if p.startswith("/")})
        self._image_path = re.compile(r"(?<![\w.])/(" + "|".join(map(re.escape, tops)) + r")\b")

    def path(self, image_path: str) -> Path:
        stage = self.stages[-1]
        absolute = image_path if image_path.startswith("/") else f"{stage.workdir}/{image_path}"
        return stage.root / absolute.lstrip("/")

    def rooted(self, text: str) -> str:
        """`text` with every absolute path of the image moved under the stage's folder."""
        root = self.stages[-1].root
        return self._image_path.sub(lambda m: f"{root}/{m.group(1)}", text)

    def run(self, keyword: str, args: str) -> None:
        if keyword == "FROM":
            parts = args.split()
            name = parts[-1] if "AS" in map(str.upper, parts) else ""
            self.stages.append(Stage(name, self.root / f"stage{len(self.stages)}"))
        elif keyword == "WORKDIR":
            self.stages[-1].workdir = args
            self.path(args).mkdir(parents=True, exist_ok=True)
        elif keyword == "ENV":
            for assignment in shlex.split(args):
                name, _, value = assignment.partition("=")
                self.stages[-1].env[name] = value
        elif keyword == "COPY":
            self.copy(shlex.split(args))
        elif keyword == "RUN":
            for command in args.split("&&"):
                words = shlex.split(command)
                if words[0] not in ACCOUNT_COMMANDS:
                    self.shell(self.rooted(command.strip()))
        elif keyword == "CMD":
            self.cmd = json.loads(args)
        elif keyword == "HEALTHCHECK":
            self.healthcheck = shlex.split(args.split(" CMD ", 1)[1])

    def copy(self, words: list[str]) -> None:
        source_root = self.context
        if words[0].startswith("--from="):
            name = words[0].removeprefix("--from=")
            source_root = next(stage.root for stage in self.stages if stage.name == name)
            words = words[1:]
        *sources, destination = words
        for source in sources:
            origin = source_root / source.lstrip("/")
            target = self.path(destination)
            if origin.is_dir():
                shutil.copytree(origin, target, dirs_exist_ok=True)
            else:
                target = target / origin.name if destination.endswith("/") else target
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(origin, target)

    def shell(self, command: str) -> None:
        stage = self.stages[-1]
        env = {**clean_environment(), **stage.env, "PATH": f"{self.pip_bin}:/usr/bin:/bin"}
        subprocess.run(["bash", "-c", command], cwd=self.path(stage.workdir), env=env, check=True)

    def final_environment(self) -> dict[str, str]:
        return {name: self.rooted(value) for name, value in self.stages[-1].env.items()}


@pytest.mark.skipif(
    not docker_engine_answers(),
    reason="no Docker engine answers on this machine (`docker info` fails); "
    "test_dockerfile_steps_replayed checks the same steps without one",
)
def test_image_builds_and_serves(tmp_path: Path) -> None:
    tag = "toolloop-test:latest"
    subprocess.run(["docker", "build", "-t", tag, str(REPO)], check=True)
    port = free_port()
    container = subprocess.run(
        ["docker", "run", "-d", "--rm", "-p", f"127.0.0.1:{port}:8000",
         "-e", "TOOLLOOP_HOST=127.0.0.1", tag],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    try:
        for _ in range(300):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
        response = httpx.post(f"http://127.0.0.1:{port}/plans/sequential", json=PLAN, timeout=30)
        assert response.json()["status"] == "succeeded"
    finally:
        subprocess.run(["docker", "stop", container], check=False)


def test_dockerfile_steps_replayed(tmp_path: Path) -> None:
    """Every step of the Dockerfile, in order, in a temp directory standing for the image's
    root, with a virtualenv standing for the base image's Python. Two departures, both about
    where it runs, not what it runs: the account steps are not replayed, and the service
    binds 127.0.0.1 on a free port instead of 0.0.0.0:8000."""
    base_python = tmp_path / "python"
    venv.EnvBuilder(with_pip=True).create(base_python)
    steps = instructions(DOCKERFILE.read_text())
    replay = Replay(tmp_path / "image", REPO, base_python / "bin", steps)
    for keyword, args in steps:
        replay.run(keyword, args)

    assert replay.cmd == ["toolloop", "serve"]
    final = replay.stages[-1]
    assert not replay.path(f"{final.workdir}/app").exists(), "the image runs the installed wheel"
    port = free_port()
    env = {
        **replay.final_environment(),
        "PATH": f"{base_python / 'bin'}:/usr/bin:/bin",
        "TOOLLOOP_HOST": "127.0.0.1",
    }
    server = ServerProcess(
        replay.path(final.workdir),
        [],
        env={**clean_environment(), **env},
        port=port,
        program=(str(base_python / "bin" / "toolloop"),),
    )
    try:
        server.wait_until_answering()
        health = [w.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for w in replay.healthcheck]
        health[0] = str(base_python / "bin" / health[0])
        assert subprocess.run(health, env=env, check=False).returncode == 0
        response = httpx.post(f"{server.base}/plans/sequential", json=PLAN, timeout=30)
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "succeeded"
        assert replay.path("/srv/toolloop/data/toolloop.db").is_file()
    finally:
        server.stop()
