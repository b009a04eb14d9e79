#!/usr/bin/env python3
"""The local world: MiniStack (local AWS) and the WeCom sandbox, on 127.0.0.1 only.

Every resource comes from template.yaml through `sam deploy`; this script keeps no list of its
own. It starts and stops services by the process ids it recorded, never by name.

    stack.py up          start MiniStack and the sandbox unless they already answer
    stack.py deploy      sam deploy the built template (.aws-sam/build) to MiniStack
    stack.py outputs     print the stack's outputs and the local URLs derived from them
    stack.py down        stop what `up` started
    stack.py serve       print the outputs, then stay in the foreground until Ctrl-C, and stop
                         the local world then (`make local` deploys first)

Settings (environment): QRSYNC_STACK (stack name, default qrsync-local), QRSYNC_AWS_PORT
(MiniStack port, default 4566), QRSYNC_SANDBOX_PORT (default 4580).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / ".local"
VENV_TOOLS = ROOT / ".venv" / "tools"
VENV_MINISTACK = ROOT / ".venv" / "ministack"

STACK = os.environ.get("QRSYNC_STACK", "qrsync-local")
AWS_PORT = int(os.environ.get("QRSYNC_AWS_PORT", "4566"))
SANDBOX_PORT = int(os.environ.get("QRSYNC_SANDBOX_PORT", "4580"))
AWS_URL = f"http://127.0.0.1:{AWS_PORT}"
SANDBOX_URL = f"http://127.0.0.1:{SANDBOX_PORT}"
REGION = "us-east-1"
DEPLOY_BUCKET = f"{STACK}-artifacts"
# The local world's stable public domain (`.test` is reserved for tests: it resolves nowhere);
# a request reaches it by naming it in its Host header at MiniStack's address.
PUBLIC_DOMAIN = "public.qrsync.test"

# MiniStack accepts any credentials; these are the conventional dummies.
AWS_ENV = {
    "AWS_ENDPOINT_URL": AWS_URL,
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_REGION": REGION,
    "AWS_DEFAULT_REGION": REGION,
}


def log(message: str) -> None:
    print(f"[local] {message}", flush=True)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_until(what: str, check, timeout: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if process is not None and process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}; see {STATE}/*.log")
        time.sleep(0.2)
    raise SystemExit(f"{what} did not come up within {timeout:.0f} s; see {STATE}/*.log")


def pid_file(name: str) -> Path:
    # Named by port, so two local worlds of one checkout (on other ports) keep apart.
    return STATE / f"{name}-{AWS_PORT}.pid"


def running_pid(name: str) -> int | None:
    try:
        pid = int(pid_file(name).read_text())
        os.kill(pid, 0)
        return pid
    except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
        return None


def start(name: str, command: list[str], env: dict[str, str], health: str, timeout: float) -> None:
    if running_pid(name) and answers(health):
        log(f"{name} already running (pid {running_pid(name)})")
        return
    if answers(health):
        raise SystemExit(
            f"something not started by this project answers at {health}; stop it or set the port"
        )
    STATE.mkdir(exist_ok=True)
    output = open(STATE / f"{name}-{AWS_PORT}.log", "ab")
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=output,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    pid_file(name).write_text(str(process.pid))
    wait_until(name, lambda: answers(health), timeout, process)
    log(f"{name} up (pid {process.pid}), log in {STATE / f'{name}-{AWS_PORT}.log'}")


def stop(name: str) -> None:
    pid = running_pid(name)
    if pid is None:
        pid_file(name).unlink(missing_ok=True)
        return
    # Each service runs in its own session; its process group holds it and its children
    # (MiniStack's function processes among them).
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    pid_file(name).unlink(missing_ok=True)
    log(f"{name} stopped (pid {pid})")


def up() -> None:
    STATE.mkdir(exist_ok=True)
    start(
        "ministack",
        [str(VENV_MINISTACK / "bin" / "ministack")],
        {
            **AWS_ENV,
            "GATEWAY_PORT": str(AWS_PORT),
            "BIND_HOST": "127.0.0.1",
            "MINISTACK_HOST": "127.0.0.1",
            "STATE_DIR": str(STATE / f"ministack-state-{AWS_PORT}"),
            "PERSIST_STATE": "0",
            "LOG_LEVEL": os.environ.get("MINISTACK_LOG_LEVEL", "WARNING"),
            # IAM enforced: every call a function makes is checked against the policies
            # template.yaml gives its role (the functions run under their role's session).
            # QRSYNC_MINISTACK_AUTH=false turns it off for `make bench-landing` alone, whose
            # 300 visits/s the emulator cannot serve while it evaluates IAM on each request.
            "AUTH": os.environ.get("QRSYNC_MINISTACK_AUTH", "true"),
        },
        f"{AWS_URL}/_ministack/health",
        timeout=60,
    )
    if os.environ.get("QRSYNC_MINISTACK_AUTH", "true") == "true":
        log("MiniStack enforces IAM (AUTH=true): each function runs as its own role")
    else:
        log("MiniStack does NOT enforce IAM (QRSYNC_MINISTACK_AUTH=false): for benches only")
    # Where cargo put it: CARGO_TARGET_DIR when set (as the Makefile's BIN), else target/.
    sandbox = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / "debug" / "wecom-sandbox"
    if not sandbox.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "wecom-sandbox"], cwd=ROOT, check=True)
    start(
        "wecom-sandbox",
        [str(sandbox), "--listen", f"127.0.0.1:{SANDBOX_PORT}"],
        {},
        f"{SANDBOX_URL}/_sandbox/health",
        timeout=30,
    )


def boto3_client(service: str):
    import boto3  # from the tools virtual environment (SAM CLI depends on it)

    return boto3.client(
        service,
        endpoint_url=AWS_URL,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def public_domain_certificate() -> str:
    """The ARN of MiniStack's certificate for PUBLIC_DOMAIN: the one a deployment before asked
    for, so a second deployment changes nothing of the domain, else a new one."""
    acm = boto3_client("acm")
    for page in acm.get_paginator("list_certificates").paginate():
        for certificate in page["CertificateSummaryList"]:
            if certificate["DomainName"] == PUBLIC_DOMAIN:
                return certificate["CertificateArn"]
    return acm.request_certificate(DomainName=PUBLIC_DOMAIN, ValidationMethod="DNS")["CertificateArn"]


def deploy() -> None:
    built = ROOT / ".aws-sam" / "build" / "template.yaml"
    if not built.exists():
        raise SystemExit("nothing built: run `make build` first")
    s3 = boto3_client("s3")
    try:
        s3.head_bucket(Bucket=DEPLOY_BUCKET)
    except Exception:  # noqa: BLE001 - any miss means "create it"
        s3.create_bucket(Bucket=DEPLOY_BUCKET)
    command = [
        str(VENV_TOOLS / "bin" / "sam"),
        "deploy",
        "--template-file", str(built),
        "--stack-name", STACK,
        "--s3-bucket", DEPLOY_BUCKET,
        "--region", REGION,
        "--capabilities", "CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND",
        "--no-confirm-changeset",
        "--no-fail-on-empty-changeset",
        "--no-progressbar",
    ]
    # The public routes are served on a domain of the stack's own too, as a deployment that
    # prints its URLs would (docs/design/public-urls.md): MiniStack routes a request whose Host
    # is the domain to the API, and its ACM issues the certificate the domain names.
    certificate = public_domain_certificate()
    # Locally WeCom is the sandbox, the sweep runs every minute (EventBridge's shortest rate),
    # a stale record it samples settles for a minute, a limit claim's owner holds it a
    # minute and a resigned member's link is deleted a minute after, so a repair shows within a test's patience; anything else comes from
    # QRSYNC_PARAMETER_OVERRIDES.
    overrides = [
        f"WeComApiBaseUrl={SANDBOX_URL}",
        "SweepPeriodMinutes=1",
        "DriftStaleSettleMinutes=1",
        "LinkRetireGraceMinutes=1",
        "ClaimOwnerLeaseSeconds=60",
        # The sandbox's group robot takes every alarm change (GET /_sandbox/robot/messages).
        f"AlarmRobotWebhookUrl={SANDBOX_URL}/cgi-bin/webhook/send?key=local-robot",
        f"PublicDomainName={PUBLIC_DOMAIN}",
        f"PublicDomainCertificateArn={certificate}",
        # MiniStack creates a WAF web ACL but has no AWS::WAFv2::WebACLAssociation (its
        # CloudFormation refuses the type) and enforces no rule: the per-client limits are
        # checked against the template instead (tools/template_check.py, docs/design/public-urls.md).
        "PerClientLimits=off",
    ]
    overrides += os.environ.get("QRSYNC_PARAMETER_OVERRIDES", "").split()
    command += ["--parameter-overrides", *overrides]
    log(f"sam deploy --stack-name {STACK} (to {AWS_URL})")
    subprocess.run(command, cwd=ROOT, env={**os.environ, **AWS_ENV, "SAM_CLI_TELEMETRY": "0"}, check=True)
    write_outputs()


def stack_outputs() -> dict[str, str]:
    stacks = boto3_client("cloudformation").describe_stacks(StackName=STACK)["Stacks"]
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}


def local_urls(outputs: dict[str, str]) -> dict[str, str]:
    """MiniStack serves a REST API at /_aws/execute-api/<id>/<stage>/..., not at the AWS host."""
    api = f"{AWS_URL}/_aws/execute-api/{outputs['ApiId']}/{outputs['ApiStage']}"
    return {
        "LocalApiUrl": api,
        "LocalCallbackUrlTemplate": f"{api}/wecom/{{tenant}}/callback",
        # The public domain's routes at MiniStack's address, with `Host: LocalPublicDomain`.
        "LocalPublicDomain": PUBLIC_DOMAIN,
        "AwsEndpointUrl": AWS_URL,
        "SandboxUrl": SANDBOX_URL,
    }


def write_outputs() -> dict[str, str]:
    outputs = stack_outputs()
    everything = {**outputs, **local_urls(outputs)}
    STATE.mkdir(exist_ok=True)
    (STATE / f"stack-{STACK}-{AWS_PORT}.json").write_text(json.dumps(everything, indent=2) + "\n")
    return everything


def print_outputs() -> None:
    everything = write_outputs()
    width = max(len(k) for k in everything)
    print(f"\nStack {STACK} on MiniStack at {AWS_URL}:")
    for key in sorted(everything):
        print(f"  {key.ljust(width)}  {everything[key]}")
    print()


def down() -> None:
    stop("wecom-sandbox")
    stop("ministack")


def serve() -> None:
    print_outputs()
    log("serving; Ctrl-C stops MiniStack and the sandbox")
    pid = running_pid("ministack")
    try:
        while pid is not None and running_pid("ministack") == pid:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        down()


COMMANDS = {"up": up, "deploy": deploy, "outputs": print_outputs, "down": down, "serve": serve}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in COMMANDS:
        raise SystemExit(__doc__)
    COMMANDS[sys.argv[1]]()
