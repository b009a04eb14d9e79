"""Fuzzes the deployed admin API from docs/admin-api.openapi.json with schemathesis.

Seeds a tenant whose corp the WeCom sandbox knows (with a few staff online), then runs a
bounded number of cases per operation with the checks: no 5xx, status codes, content types
and bodies as the document says, schema-invalid input refused, and state unchanged after a
refused PUT or DELETE (hooks.py). Reads the stack's URLs from the outputs file `make deploy`
writes (.local/stack-<stack>-<port>.json). Exits with schemathesis's status.

    python tools/fuzz/run.py [--max-examples N] [--seed S]
"""

import argparse
import json
import os
import pathlib
import random
import string
import subprocess
import sys

import requests
from sigv4 import sign

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def outputs() -> dict:
    stack = os.environ.get("QRSYNC_STACK", "qrsync-local")
    port = os.environ.get("QRSYNC_AWS_PORT", "4566")
    return json.loads((ROOT / ".local" / f"stack-{stack}-{port}.json").read_text())


def seed(api: str, sandbox: str, rng: random.Random) -> tuple[str, list[str], list[str]]:
    def word(n: int) -> str:
        return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(n))

    tenant, corp_id = f"fz-seed-{word(6)}", f"ww{word(16)}"
    secret, token, key = word(40), word(24), "".join(rng.choice(string.ascii_letters) for _ in range(43))
    staff = [f"fz{i}-{word(4)}" for i in range(4)]
    response = requests.put(
        f"{sandbox}/_sandbox/corps/{corp_id}",
        json={"corp_secret": secret, "users": staff},
        timeout=30,
    )
    response.raise_for_status()

    def put(path: str, body: dict) -> None:
        url = f"{api}{path}"
        data = json.dumps(body).encode()
        headers = sign("PUT", url, data, {"content-type": "application/json"})
        answer = requests.put(url, data=data, headers=headers, timeout=30)
        if answer.status_code >= 300:
            raise SystemExit(f"seeding {path}: {answer.status_code} {answer.text}")

    put(f"/admin/tenants/{tenant}", {"corp_id": corp_id, "corp_secret": secret,
                                     "callback_token": token, "encoding_aes_key": key})
    for name in staff:
        put(f"/admin/tenants/{tenant}/staff/{name}", {"online": True})
    codes = ["fz-code-a", "fz-code-b"]
    for code in codes:
        put(f"/admin/tenants/{tenant}/codes/{code}", {"family": "native", "members": staff[:2]})
    return tenant, staff, codes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-examples", type=int, default=int(os.environ.get("QRSYNC_FUZZ_EXAMPLES", "30")))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("QRSYNC_FUZZ_SEED", "7")))
    args = parser.parse_args()
    out = outputs()
    api = out["LocalApiUrl"]
    tenant, staff, codes = seed(api, out["SandboxUrl"], random.Random(args.seed))
    print(f"[fuzz] seeded tenant {tenant} with staff {', '.join(staff)} and codes {', '.join(codes)}; {args.max_examples} cases per operation, seed {args.seed}")
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "hooks",
        "PYTHONPATH": str(HERE),
        "QRSYNC_FUZZ_API": api,
        "QRSYNC_FUZZ_TENANT": tenant,
        "QRSYNC_FUZZ_STAFF": ",".join(staff),
        "QRSYNC_FUZZ_CODES": ",".join(codes),
        "QRSYNC_FUZZ_SEED": str(args.seed),
    }
    command = [
        str(pathlib.Path(sys.executable).parent / "schemathesis"), "run",
        str(ROOT / "docs" / "admin-api.openapi.json"),
        "--url", api,
        # A placeholder the signing wrapper (hooks.py) replaces; cases without it stay unsigned.
        "--header", "Authorization: SigV4",
        "--max-examples", str(args.max_examples),
        "--seed", str(args.seed),
        "--phases", "examples,coverage,fuzzing",
        "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
                    "response_schema_conformance,negative_data_rejection,state_unchanged_after_refusal",
        "--no-color",
        "--suppress-health-check", "all",
        "--request-timeout", "30",
    ]
    return subprocess.call(command, env=env, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
