"""Schemathesis hooks for qrsync's admin API, loaded through SCHEMATHESIS_HOOKS by run.py.

- Every request to the API is SigV4-signed for `execute-api`, as the platform's backend signs
  it, over the exact bytes sent (requests' send is wrapped: schemathesis's own hooks run before
  the body is serialised).
- Path parameters are steered (in `before_call`) so cases reach real state: tenant PUTs go to fresh tenants (a
  generated corp id must never replace the seeded tenant's, whose corp the WeCom sandbox
  knows), every other route to the seeded tenant, and about half of the staff and code ids to
  seeded staff (whom the sandbox knows, so codes can be created) and seeded codes.
- A check, `state_unchanged_after_refusal`: a PUT or DELETE answered 4xx leaves the resource
  as a GET read it just before.
"""

import json
import os
import pathlib
import random
import re
import urllib.parse

import requests
import schemathesis
from sigv4 import sign

API = os.environ["QRSYNC_FUZZ_API"]
DOCUMENT = json.loads(
    (pathlib.Path(__file__).resolve().parents[2] / "docs" / "admin-api.openapi.json").read_text()
)
TENANT = os.environ["QRSYNC_FUZZ_TENANT"]
STAFF = os.environ["QRSYNC_FUZZ_STAFF"].split(",")
CODES = os.environ["QRSYNC_FUZZ_CODES"].split(",")
# Seeded from the run's seed, so a failing run can be repeated.
RANDOM = random.Random(int(os.environ.get("QRSYNC_FUZZ_SEED", "0")))
# The GET taken before each PUT or DELETE, by the case's id.
BEFORE: dict[int, tuple[int, str]] = {}



def get(url: str) -> tuple[int, str]:
    response = requests.get(url, timeout=30)
    return response.status_code, response.text


_send = requests.Session.send


def _signed_send(session, request, **kwargs):
    """Signs each request to the API as it leaves, over its final URL, headers and bytes."""
    # A case without the Authorization header is a negative case about authentication: sent
    # unsigned, so IAM refuses it.
    if request.url.startswith(API) and "authorization" in request.headers:
        body = request.body.encode() if isinstance(request.body, str) else request.body
        headers = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
        request.headers = requests.structures.CaseInsensitiveDict(
            sign(request.method, request.url, body, headers)
        )
    return _send(session, request, **kwargs)


requests.Session.send = _signed_send


# Whole-string matches: `$` would also match before a trailing newline, which a negative case
# may put there.
TENANT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
STAFF_ID = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
CODE_ID = re.compile(r"[A-Za-z0-9_-]{1,30}")
ANY_ID = STAFF_ID


@schemathesis.hook
def before_call(ctx, case, kwargs):
    # Steered here rather than in `map_path_parameters`, which the coverage phase skips. An id
    # that is invalid on purpose is left alone for the API to refuse.
    params = case.path_parameters or {}
    steered = dict(params)
    if TENANT_ID.fullmatch(str(params.get("tenant", ""))):
        if case.method.upper() == "PUT" and case.operation.path == "/admin/tenants/{tenant}":
            params["tenant"] = f"fz-{RANDOM.randrange(10**9)}"
        else:
            params["tenant"] = TENANT
    if STAFF_ID.fullmatch(str(params.get("staff", ""))) and RANDOM.random() < 0.5:
        params["staff"] = RANDOM.choice(STAFF)
    if CODE_ID.fullmatch(str(params.get("code", ""))) and RANDOM.random() < 0.5:
        params["code"] = RANDOM.choice(CODES)
    if params != steered:
        # schemathesis re-validates a changed path with its parameters as they stand, already
        # URL-encoded (`NpJ%40hJ7WG`), and would take a valid id for an invalid one: valid ids
        # go back to their plain form (their characters need no encoding in a path).
        for name, value in params.items():
            plain = urllib.parse.unquote(str(value))
            if ANY_ID.fullmatch(plain):
                params[name] = plain
    shorten_long_lists(case)
    if case.method.upper() in ("PUT", "DELETE"):
        BEFORE[id(case)] = get(API + case.formatted_path)


# What a body may list here: a valid body at its bounds (a staff member in 100 departments, a
# department of 2,000) costs one DynamoDB request per entry, which the emulator under a
# loaded CI machine answers in about 90 ms each, past the function's 10 s. That is a question
# of speed (the unit tests and `edits` cover the bounds, the bench the speed), not of the
# contract, so valid lists are cut short; lists over their bound still go out whole.
LONGEST_LIST = {"departments": 10, "members": 50, "fallback": 50}
DEPARTMENT_ID = re.compile(r"[A-Za-z0-9]{1,32}")


def shorten_long_lists(case):
    body = case.body
    if not isinstance(body, dict):
        return
    for field, longest in LONGEST_LIST.items():
        value = body.get(field)
        if isinstance(value, list) and longest < len(value) <= bound(case, field) and valid(field, value):
            body[field] = value[:longest]


def valid(field: str, items: list) -> bool:
    """A list a negative case did not touch: distinct ids of the right shape. Cutting one that
    is invalid for another reason could cut the very fault the case is about."""
    pattern = DEPARTMENT_ID if field == "departments" else STAFF_ID
    ids = [item for item in items if isinstance(item, str) and pattern.fullmatch(item)]
    return len(ids) == len(items) == len(set(ids))


def bound(case, field: str) -> int:
    """The field's documented maxItems for this operation (0 when it has none)."""
    operation = DOCUMENT["paths"][case.operation.path][case.method.lower()]
    content = operation.get("requestBody", {}).get("content", {})
    ref = content.get("application/json", {}).get("schema", {}).get("$ref", "")
    name = ref.rsplit("/", 1)[-1]
    declared = DOCUMENT["components"]["schemas"].get(name, {}).get("properties", {}).get(field, {})
    for option in declared.get("anyOf", [declared]):
        if "maxItems" in option:
            return option["maxItems"]
    return 0


def comparable(text: str):
    """A GET's answer without what moves on its own between two reads."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, dict):
        value.pop("day", None)
        value.pop("eligible_now", None)
        value.pop("excluded", None)
        value.pop("outcome", None)
        value.pop("in_sync", None)
    return value


@schemathesis.check
def state_unchanged_after_refusal(ctx, response, case):
    before = BEFORE.pop(id(case), None)
    if before is None or not 400 <= response.status_code < 500:
        return None
    if response.status_code == 409 and any(
        f'"{code}"' in response.text for code in ("no_eligible_member", "staff_unusable")
    ):
        # Documented: the configuration is stored, only the contact way waits.
        return None
    resource = API + case.formatted_path
    after = get(resource)
    if (before[0], comparable(before[1])) != (after[0], comparable(after[1])):
        raise AssertionError(
            f"{case.method} {resource} was refused with {response.status_code} but changed "
            f"the resource: before {before}, after {after}"
        )
    return None

