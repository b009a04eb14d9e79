#!/usr/bin/env python3
"""`sam local invoke` against the deployed local world (MiniStack and the WeCom sandbox).

    invoke.py run FN EVENT   seed what the samples need, then `sam local invoke FN -e EVENT` and
                             print the function's answer (`make invoke FN=... EVENT=...`)
    invoke.py env            write the env-vars file and print its path
    invoke.py deployed       exit 0 if this checkout's local world is up, deployed and built
    invoke.py test           every file in events/ through the functions in SAM's emulator, each
                             answer and effect asserted (`make invoke-test`, part of `make test`)

The functions get the stack's resources from an env-vars file generated from the stack's
outputs: each variable a function's template entry sets from a resource (`!Ref Table`,
`!Ref InboxQueue`...) gets the value of the output that carries the same expression. Variables
set from template parameters are left to SAM, which resolves them from `--parameter-overrides`
the way the deploy did (`WeComApiBaseUrl` = the sandbox, plus QRSYNC_PARAMETER_OVERRIDES), with
`CallbackMaxAgeSeconds` widened for the samples' 2014 timestamps. A value in the env-vars file
beats the parameter, so no parameter-set variable is put there.

The container reaches MiniStack and the sandbox on 127.0.0.1 through the host's network
(`--docker-network host`, made to work by tools/local/sam_local.py) and gets `AWS_ENDPOINT_URL`
and the dummy credentials of the local world.

Settings (environment): those of stack.py (QRSYNC_STACK, QRSYNC_AWS_PORT, QRSYNC_SANDBOX_PORT),
QRSYNC_PARAMETER_OVERRIDES, QRSYNC_LAMBDA_IMAGE (lambda_image.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lambda_image  # noqa: E402
import stack  # noqa: E402

ROOT = stack.ROOT
EVENTS = ROOT / "events"
BUILT = ROOT / ".aws-sam" / "build" / "template.yaml"
SAM = [str(stack.VENV_TOOLS / "bin" / "python"), str(Path(__file__).resolve().parent / "sam_local.py")]
# The samples carry WeCom's reference timestamps (2014).
SAMPLE_OVERRIDES = ["CallbackMaxAgeSeconds=3000000000"]

# The sample tenant's WeCom directory: every staff member a sample names.
DEMO_STAFF = ["zhangsan", "lisi", "wangwu", "manager"]
# The codes the SQS samples name (refresh reasons for code-1 and code-2).
DEMO_CODES = {"code-1": ["zhangsan", "lisi"], "code-2": ["lisi", "wangwu"]}


def log(message: str) -> None:
    print(f"[invoke] {message}", flush=True)


# ---------------------------------------------------------------- the stack's side


def template() -> dict:
    from samcli.yamlhelper import yaml_parse  # reads !Ref and friends as CloudFormation does

    if not BUILT.exists():
        raise SystemExit("nothing built: run `make build` (or `make deploy`) first")
    return yaml_parse(BUILT.read_text())


def functions(doc: dict) -> dict[str, dict]:
    return {
        name: resource
        for name, resource in doc["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def outputs() -> dict[str, str]:
    try:
        return {**stack.stack_outputs(), **stack.local_urls(stack.stack_outputs())}
    except Exception as error:  # noqa: BLE001 - botocore raises many kinds here
        raise SystemExit(
            f"no stack {stack.STACK} at {stack.AWS_URL} ({error}): run `make deploy` first"
        ) from None


def env_vars(doc: dict, values: dict[str, str]) -> dict[str, dict[str, str]]:
    """Each function's resource-set variables, valued from the output carrying the same expression."""
    by_expression = {
        json.dumps(output["Value"], sort_keys=True): key for key, output in doc["Outputs"].items()
    }
    parameters = set(doc.get("Parameters", {}))
    mappings = doc.get("Mappings", {})
    common = doc.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
    result: dict[str, dict[str, str]] = {}
    for name, resource in functions(doc).items():
        own = resource["Properties"].get("Environment", {}).get("Variables", {})
        result[name] = {}
        for variable, value in {**common, **own}.items():
            if not isinstance(value, dict) or value.get("Ref") in parameters:
                continue
            # A constant of the template's Mappings (the refresh queues' maxReceiveCount): the
            # template itself holds its value.
            if "Fn::FindInMap" in value:
                table, key, attribute = value["Fn::FindInMap"]
                result[name][variable] = str(mappings[table][key][attribute])
                continue
            key = by_expression.get(json.dumps(value, sort_keys=True))
            if key is None:
                raise SystemExit(
                    f"{name}'s {variable} is {value}, and no output of template.yaml carries it: "
                    "add one (the outputs are how everything local finds the stack's resources)"
                )
            result[name][variable] = values[key]
    return result


def template_variables(doc: dict) -> set[str]:
    common = doc.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
    names = set(common)
    for resource in functions(doc).values():
        names |= set(resource["Properties"].get("Environment", {}).get("Variables", {}))
    return names


def write_env_file(doc: dict, values: dict[str, str]) -> Path:
    path = stack.STATE / f"invoke-env-{stack.STACK}-{stack.AWS_PORT}.json"
    stack.STATE.mkdir(exist_ok=True)
    path.write_text(json.dumps(env_vars(doc, values), indent=2, sort_keys=True) + "\n")
    return path


def parameter_overrides() -> list[str]:
    overrides = [
        f"WeComApiBaseUrl={stack.SANDBOX_URL}",
        f"AlarmRobotWebhookUrl={stack.SANDBOX_URL}/cgi-bin/webhook/send?key=local-robot",
    ]
    overrides += os.environ.get("QRSYNC_PARAMETER_OVERRIDES", "").split()
    return overrides + SAMPLE_OVERRIDES


def sam_env(doc: dict) -> dict[str, str]:
    # SAM gives a template variable the value of a shell variable of the same name before the
    # template's own: a stray TABLE_NAME in the caller's shell must not reach the function.
    env = {k: v for k, v in os.environ.items() if k not in template_variables(doc)}
    return {**env, **stack.AWS_ENV, "SAM_CLI_TELEMETRY": "0"}


def sam_args(doc: dict, values: dict[str, str]) -> list[str]:
    return [
        "--template-file", str(BUILT),
        "--env-vars", str(write_env_file(doc, values)),
        "--parameter-overrides", *parameter_overrides(),
        "--docker-network", "host",
        # The base image is put in place by lambda_image.py; SAM would otherwise try to pull it.
        "--skip-pull-image",
    ]


def placed(sample: Path, values: dict[str, str]) -> Path:
    """The sample as the deployed stack would deliver it.

    The SQS samples name the queue they came from in `eventSourceARN`, for a stack named
    `qrsync` (`...:qrsync-refresh-retry-15s.fifo`), and the refresh function tells a retry
    queue's message from a fresh reason by that queue's name. Each record is pointed at the
    deployed queue of the same role (the output URL ending in the stack's name plus the same
    suffix); other samples are used as they are.
    """
    event = json.loads(sample.read_text())
    records = event.get("Records") if isinstance(event, dict) else None
    if not records or any(r.get("eventSource") != "aws:sqs" for r in records):
        return sample
    queues = {url.rsplit("/", 1)[-1]: url for key, url in values.items() if key.endswith("QueueUrl")}
    for record in records:
        name = record["eventSourceARN"].rsplit(":", 1)[-1]
        deployed = f"{stack.STACK}-{name.removeprefix('qrsync-')}"
        if deployed not in queues:
            raise SystemExit(f"{sample.name}: no queue {deployed} in the stack's outputs for {name}")
        account = queues[deployed].rsplit("/", 2)[-2]
        record["eventSourceARN"] = f"arn:aws:sqs:{stack.REGION}:{account}:{deployed}"
        record["awsRegion"] = stack.REGION
    placed_dir = stack.STATE / "events"
    placed_dir.mkdir(parents=True, exist_ok=True)
    target = placed_dir / sample.name
    target.write_text(json.dumps(event, indent=2) + "\n")
    return target


# ---------------------------------------------------------------- seeding


def admin(values: dict[str, str], method: str, path: str, body: dict | None = None):
    """One SigV4-signed admin API call through the deployed route; answers (status, JSON)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    url = f"{values['LocalApiUrl']}/admin{path}"
    data = json.dumps(body).encode() if body is not None else None
    request = AWSRequest(method=method, url=url, data=data, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials("test", "test"), "execute-api", stack.REGION).add_auth(request)
    return http(method, url, data, dict(request.headers))


def http(method: str, url: str, data: bytes | None, headers: dict[str, str]):
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def stack_id() -> str:
    stacks = stack.boto3_client("cloudformation").describe_stacks(StackName=stack.STACK)["Stacks"]
    return stacks[0]["StackId"]


def seed_once(values: dict[str, str]) -> None:
    """Seeds a stack the first time a sample is run against it, and not again: seeding puts the
    staff back online, which would undo what a sample run since (put-staff) changed."""
    marker = stack.STATE / f"invoke-seeded-{stack.STACK}-{stack.AWS_PORT}"
    current = stack_id()
    if marker.exists() and marker.read_text().strip() == current:
        log(f"tenant demo seeded already in this stack ({marker.relative_to(ROOT)})")
        return
    seed(values)
    marker.write_text(current + "\n")


def seed(values: dict[str, str]) -> None:
    """The `demo` tenant the samples are signed for, its WeCom corp and the codes they name."""
    tenant = json.loads(json.loads((EVENTS / "apigw-admin-put-tenant.json").read_text())["body"])
    corp = {
        "corp_secret": tenant["corp_secret"],
        "users": DEMO_STAFF,
        "callback": {
            "url": values["LocalCallbackUrlTemplate"].replace("{tenant}", "demo"),
            "token": tenant["callback_token"],
            "encoding_aes_key": tenant["encoding_aes_key"],
        },
    }
    status, answer = http(
        "PUT", f"{stack.SANDBOX_URL}/_sandbox/corps/{tenant['corp_id']}",
        json.dumps(corp).encode(), {"Content-Type": "application/json"},
    )
    expect_status("the sandbox's demo corp", status, answer, (200, 201))
    status, answer = admin(values, "PUT", "/tenants/demo", tenant)
    expect_status("the demo tenant", status, answer, (200,))
    for staff in DEMO_STAFF:
        status, answer = admin(values, "PUT", f"/tenants/demo/staff/{staff}", {"online": True})
        expect_status(f"staff {staff}", status, answer, (200,))
    for code, members in DEMO_CODES.items():
        body = {"family": "native", "members": members, "switches": {"offline_check": True}}
        status, answer = admin(values, "PUT", f"/tenants/demo/codes/{code}", body)
        expect_status(f"code {code}", status, answer, (200, 201))
    log(f"seeded tenant demo (corp {tenant['corp_id']}), staff {', '.join(DEMO_STAFF)}, codes {', '.join(DEMO_CODES)}")


def expect_status(what: str, status: int, answer, expected) -> None:
    if status not in expected:
        raise SystemExit(f"seeding {what}: HTTP {status} {answer}")


# ---------------------------------------------------------------- commands


def run(function: str, event: str) -> None:
    doc = template()
    if function not in functions(doc):
        raise SystemExit(f"no function {function} in template.yaml: one of {', '.join(functions(doc))}")
    lambda_image.locked(lambda_image.ensure)
    values = outputs()
    seed_once(values)
    sample = placed(Path(event), values)
    if sample != Path(event):
        log(f"{event}: eventSourceARN pointed at the deployed queues ({sample.relative_to(ROOT)})")
    command = [*SAM, "local", "invoke", function, "--event", str(sample), *sam_args(doc, values)]
    started = time.monotonic()
    status = subprocess.run(command, cwd=ROOT, env=sam_env(doc)).returncode
    log(f"sam local invoke {function} -e {event}: exit {status} in {time.monotonic() - started:.1f} s")
    raise SystemExit(status)


def deployed() -> None:
    """Exits 0 when this checkout's local world is up with the stack deployed and built."""
    try:
        up = stack.running_pid("ministack") is not None and bool(stack.stack_outputs())
    except Exception:  # noqa: BLE001 - no stack, no MiniStack: either way "not deployed"
        up = False
    if not (up and BUILT.exists()):
        log(f"no deployed stack {stack.STACK} on {stack.AWS_URL} yet: deploying it")
        raise SystemExit(1)


def print_env() -> None:
    print(write_env_file(template(), outputs()))


def test() -> None:
    import invoke_test  # the assertions live beside this file

    invoke_test.main(sys.modules[__name__])


COMMANDS = {"run": (run, 2), "env": (print_env, 0), "deployed": (deployed, 0), "test": (test, 0)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS or len(sys.argv) - 2 != COMMANDS[sys.argv[1]][1]:
        raise SystemExit(__doc__)
    COMMANDS[sys.argv[1]][0](*sys.argv[2:])
