#!/usr/bin/env python3
"""The base image `sam local invoke` runs our functions in, also on an engine with no images.

For a `provided.al2023` x86_64 function SAM runs `public.ecr.aws/lambda/provided:al2023-rapid-x86_64`,
which it builds itself, once, `FROM public.ecr.aws/lambda/provided:al2023-x86_64` by adding the
runtime interface emulator its package ships (`ADD` + `RUN mv ... && chmod ...`). Only the base
image has to come from somewhere; this script puts it in place under that name:

    lambda_image.py ensure   the real image if a registry answers; otherwise the local one,
                             built once from the pinned Debian packages and reused after
    lambda_image.py build    build the local one now, even if an image of that name exists
    lambda_image.py info     which base image is in place

The local image is Debian 13's libc and nothing the functions do not need (the bootstraps ask
for GLIBC_2.30 at most): the packages pinned in tools/requirements/lambda-base.txt, unpacked
into one root filesystem in memory and `docker import`ed with the Lambda environment of the
real image. A label holds a hash of the pins, so a change of the pins rebuilds it.

Settings (environment): QRSYNC_LAMBDA_IMAGE = auto (default: the real image when it can be
pulled, else the local one) | real (pull or fail) | local (never pull); QRSYNC_DEBIAN_ARCHIVE
(the archive the pins are fetched from).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import lzma
import os
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "tools" / "requirements" / "lambda-base.txt"
CACHE = ROOT / ".local" / "debs"

REPOSITORY = "public.ecr.aws/lambda/provided"
TAG = "al2023-x86_64"
BASE = f"{REPOSITORY}:{TAG}"
# The image SAM derives from BASE (samcli/local/docker/lambda_image.py, LambdaImage.build).
RAPID = f"{REPOSITORY}:al2023-rapid-x86_64"
LABEL = "qrsync.lambda-base"
# Bumped when the way the root filesystem is assembled changes, so the hash changes with it.
RECIPE = "1"

# busybox applets linked into /usr/bin: sh, mv and chmod for SAM's RUN line, the rest for a
# person looking around with `docker run --entrypoint sh`.
APPLETS = ("sh", "mv", "chmod", "cp", "rm", "mkdir", "ls", "cat", "env", "echo", "ps")

# What the real provided.al2023 image sets (docker inspect of it), less what SAM sets itself.
CHANGES = [
    "ENV PATH=/usr/local/bin:/usr/bin/:/bin:/opt/bin",
    "ENV LD_LIBRARY_PATH=/lib64:/usr/lib64:/var/runtime:/var/runtime/lib:/var/task:/var/task/lib:/opt/lib",
    "ENV LANG=C.UTF-8",
    "ENV LAMBDA_TASK_ROOT=/var/task",
    "ENV LAMBDA_RUNTIME_DIR=/var/runtime",
    "WORKDIR /var/task",
]


def log(message: str) -> None:
    print(f"[lambda-image] {message}", flush=True)


def engine():
    """The Docker engine, or a message that says there is none (never a silent skip)."""
    import docker  # from the tools virtual environment (SAM CLI depends on it)

    try:
        client = docker.from_env(timeout=600)
        client.ping()
        return client
    except Exception as error:  # noqa: BLE001 - any failure here means "no engine"
        raise SystemExit(
            "no Docker engine answers (DOCKER_HOST or the default socket): `sam local invoke` "
            f"runs every function in a container and needs one ({error})"
        ) from None


def read_pins() -> tuple[str, list[tuple[str, str, str, str]]]:
    archive, packages = "", []
    for line in PINS.read_text().splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if fields[0] == "archive":
            archive = fields[1]
        else:
            name, version, path, sha256 = fields
            packages.append((name, version, path, sha256))
    archive = os.environ.get("QRSYNC_DEBIAN_ARCHIVE", archive).rstrip("/")
    return archive, packages


def recipe_hash() -> str:
    digest = hashlib.sha256(RECIPE.encode() + PINS.read_bytes() + Path(__file__).read_bytes())
    return digest.hexdigest()[:16]


def fetch(archive: str, name: str, path: str, sha256: str) -> bytes:
    """The pinned .deb, from the cache when its hash matches, else from the archive."""
    cached = CACHE / Path(path).name
    if cached.exists() and hashlib.sha256(cached.read_bytes()).hexdigest() == sha256:
        return cached.read_bytes()
    url = f"{archive}/{path}"
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            data = response.read()
    except OSError as error:
        raise SystemExit(
            f"could not fetch {name} from {url} ({error}); if the archive dropped that version, "
            f"update {PINS.relative_to(ROOT)} (its header says how)"
        ) from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise SystemExit(f"{url}: sha256 {actual}, pinned {sha256}; refusing it")
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(data)
    return data


def deb_data(deb: bytes) -> tarfile.TarFile:
    """The data.tar.xz member of a .deb (an ar archive), without dpkg."""
    if not deb.startswith(b"!<arch>\n"):
        raise SystemExit("not a .deb (no ar header)")
    offset = 8
    while offset + 60 <= len(deb):
        header = deb[offset : offset + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        body = deb[offset + 60 : offset + 60 + size]
        if name == "data.tar.xz":
            return tarfile.open(fileobj=io.BytesIO(lzma.decompress(body)), mode="r:")
        offset += 60 + size + (size % 2)
    raise SystemExit("no data.tar.xz in a .deb")


def root_filesystem(archive: str, packages) -> bytes:
    """One tar of every pinned package's files (owned by root), plus what dpkg scripts would add."""
    out = io.BytesIO()
    seen: set[str] = set()
    mtime = 0

    with tarfile.open(fileobj=out, mode="w:") as rootfs:

        def add(info: tarfile.TarInfo, data: bytes | None = None) -> None:
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if info.name in seen:
                if info.isdir():
                    return
                raise SystemExit(f"two packages ship {info.name}")
            seen.add(info.name)
            rootfs.addfile(info, io.BytesIO(data) if data is not None else None)

        def directory(name: str) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, mtime
            add(info)

        certificates: list[bytes] = []
        for name, _version, path, sha256 in packages:
            with deb_data(fetch(archive, name, path, sha256)) as data:
                for member in data.getmembers():
                    member.name = member.name.removeprefix("./").rstrip("/")
                    if not member.name:
                        continue
                    mtime = max(mtime, member.mtime)
                    content = data.extractfile(member).read() if member.isfile() else None
                    if member.name.startswith("usr/share/ca-certificates/mozilla/") and content:
                        certificates.append(content)
                    add(member, content)

        for name in ("var", "var/task", "var/runtime", "opt", "root", "etc/ssl", "etc/ssl/certs"):
            directory(name)
        for applet in APPLETS:
            link = tarfile.TarInfo(f"usr/bin/{applet}")
            link.type, link.linkname, link.mtime = tarfile.SYMTYPE, "busybox", mtime
            add(link)
        # What update-ca-certificates (ca-certificates' postinst) writes: every root, one file.
        files = {
            "etc/ssl/certs/ca-certificates.crt": b"".join(sorted(certificates)),
            "etc/passwd": b"root:x:0:0:root:/root:/bin/sh\n",
            "etc/group": b"root:x:0:\n",
        }
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(content), 0o644, mtime
            add(info, content)
    return out.getvalue()


def image(client, name: str):
    import docker

    try:
        return client.images.get(name)
    except docker.errors.ImageNotFound:
        return None


def build(client) -> None:
    started = time.monotonic()
    archive, packages = read_pins()
    old = image(client, BASE)
    rootfs = root_filesystem(archive, packages)
    key = recipe_hash()
    versions = " ".join(f"{name}={version}" for name, version, _, _ in packages)
    changes = CHANGES + [f"LABEL {LABEL}={key}", f'LABEL {LABEL}.packages="{versions}"']
    client.api.import_image_from_data(rootfs, repository=REPOSITORY, tag=TAG, changes=changes)
    new = image(client, BASE)
    drop_stale_rapid(client)
    if old is not None and old.id != new.id and old.labels.get(LABEL):
        remove(client, old.id, "the local base image it replaces")
    log(
        f"built {BASE} locally in {time.monotonic() - started:.1f} s: "
        f"{new.attrs['Size'] / 1e6:.1f} MB, {len(packages)} Debian packages ({versions})"
    )


def pull(client) -> bool:
    import docker

    try:
        client.images.pull(REPOSITORY, tag=TAG)
        return True
    except docker.errors.APIError as error:
        log(f"no registry answered for {BASE} ({error.explanation or error})")
        return False


def remove(client, name: str, why: str) -> None:
    import docker

    try:
        client.images.remove(name, noprune=False)
        log(f"removed {name[:19]}: {why}")
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as error:
        log(f"could not remove {name[:19]} ({why}): {error.explanation or error}")


def drop_stale_rapid(client) -> None:
    """SAM reuses its rapid image whenever one exists, so one built on another base must go."""
    rapid, base = image(client, RAPID), image(client, BASE)
    if rapid is None or base is None:
        return
    base_layers = base.attrs["RootFS"].get("Layers", [])
    if rapid.attrs["RootFS"].get("Layers", [])[: len(base_layers)] != base_layers:
        remove(client, RAPID, "SAM's rapid image was built on another base image")


def describe(found) -> str:
    if found is None:
        return f"{BASE}: none"
    key = found.labels.get(LABEL)
    kind = f"local build {key} ({found.labels.get(LABEL + '.packages')})" if key else "real image"
    return f"{BASE}: {kind}, {found.attrs['Size'] / 1e6:.1f} MB, id {found.id[7:19]}"


def ensure(client) -> None:
    mode = os.environ.get("QRSYNC_LAMBDA_IMAGE", "auto")
    if mode not in ("auto", "real", "local"):
        raise SystemExit(f"QRSYNC_LAMBDA_IMAGE={mode}: expected auto, real or local")
    if mode != "local" and pull(client):
        log(f"pulled the real image: {describe(image(client, BASE))}")
    elif mode == "real":
        raise SystemExit(f"QRSYNC_LAMBDA_IMAGE=real, and {BASE} could not be pulled")
    else:
        found = image(client, BASE)
        key = found.labels.get(LABEL) if found is not None else None
        if found is not None and (key == recipe_hash() or (key is None and mode == "auto")):
            log(f"reusing {describe(found)}")
        else:
            build(client)
    drop_stale_rapid(client)


def locked(action) -> None:
    # Every checkout on this engine shares the image's name: one builds it at a time.
    with open(Path(tempfile.gettempdir()) / "qrsync-lambda-image.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        action(engine())


COMMANDS = {
    "ensure": lambda: locked(ensure),
    "build": lambda: locked(build),
    "info": lambda: print(describe(image(engine(), BASE))),
}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in COMMANDS:
        raise SystemExit(__doc__)
    COMMANDS[sys.argv[1]]()
