"""Every file in events/ through SAM's emulator against the deployed local world, asserted.

Run by `invoke.py test` (`make invoke-test`, a step of `make test`). The samples go to warm
containers of `sam local start-lambda --warm-containers EAGER` (one container per function,
started once: a cold `sam local invoke` costs about 5 s of SAM start-up and container creation
each), then one sample again through a cold `sam local invoke`, the path `make invoke` takes.

The stack's queue triggers are switched off for the run, so what a sample leaves in a queue is
still there to be read (and taken away); they are switched back on at the end, also on failure.

The samples' messages carry fixed deduplication ids (business keys, message ids), and a FIFO
queue drops a repeat of one for 5 minutes. A run that ends less than that after the last run
against the same stack therefore expects each such message at most once (stored, or dropped
as a repeat); otherwise, as in `make test`'s fresh stack, exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

Check = Callable[[dict, "World", dict], None]


# SQS drops a FIFO message whose deduplication id it saw in the last 5 minutes.
DEDUPLICATION_WINDOW_S = 300


class Failed(Exception):
    pass


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise Failed(message)


def poll(what: str, probe: Callable[[], object], timeout: float = 10.0, pause: float = 0.2):
    """probe() until it answers something truthy, within timeout."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise Failed(f"{what}: not seen within {timeout:.0f} s")
        time.sleep(pause)


class World:
    """The deployed stack as the assertions see it: the table, the queues and the sandbox."""

    def __init__(self, invoke, values: dict[str, str], repeat: bool):
        self.invoke = invoke
        self.values = values
        self.repeat = repeat
        self.dynamodb = invoke.stack.boto3_client("dynamodb")
        self.sqs = invoke.stack.boto3_client("sqs")
        self.lambdas = invoke.stack.boto3_client("lambda")

    def item(self, pk: str, sk: str) -> dict | None:
        answer = self.dynamodb.get_item(
            TableName=self.values["TableName"],
            Key={"pk": {"S": pk}, "sk": {"S": sk}},
            ConsistentRead=True,
        )
        return answer.get("Item")

    def items(self, pk: str, prefix: str) -> list[dict]:
        answer = self.dynamodb.query(
            TableName=self.values["TableName"],
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": prefix}},
            ConsistentRead=True,
        )
        return answer["Items"]

    def refresh_tally(self) -> tuple[int, int]:
        """(reasons, recomputes) over every day of the demo tenant's refresh counters."""
        # One query per tally shard (`keys::REFRESH_TALLY_SHARDS` in the adapters crate).
        rows = [
            row
            for shard in range(8)
            for row in self.items(f"TENANT#demo#STATS#REFRESH#{shard}", f"STATS#REFRESH#{shard}#")
        ]
        total = lambda field: sum(int(row.get(field, {}).get("N", "0")) for row in rows)  # noqa: E731
        return total("reasons"), total("recomputes")

    def _receive(self, output: str) -> list[dict]:
        return self.sqs.receive_message(
            QueueUrl=self.values[output],
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            VisibilityTimeout=30,
            WaitTimeSeconds=0,
        ).get("Messages", [])

    def _settle(self, output: str, message: dict) -> None:
        # The demo tenant's messages (and the sample's poison) are this run's own: taken away.
        # Anyone else's go back at once.
        try:
            ours = json.loads(message["Body"]).get("tenant") == "demo"
        except (json.JSONDecodeError, AttributeError):
            ours = True
        if ours:
            self.sqs.delete_message(QueueUrl=self.values[output], ReceiptHandle=message["ReceiptHandle"])
        else:
            self.sqs.change_message_visibility(
                QueueUrl=self.values[output], ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )

    def take(self, output: str, wanted: Callable[[dict], bool], timeout: float = 10.0) -> dict:
        """The first message of the queue `output` names that `wanted` accepts (taken away)."""

        def probe():
            for message in self._receive(output):
                self._settle(output, message)
                if wanted(message):
                    return message
            return None

        return poll(f"a matching message in {output}", probe, timeout)

    def stored(self, output: str, wanted: Callable[[dict], bool]) -> dict | None:
        """The message a sample stored in a queue, taken away; None when dropped as a repeat."""
        if not self.repeat:
            return self.take(output, wanted)
        # The function's send returned before its answer did: anything stored is there now.
        found = []
        while batch := self._receive(output):
            for message in batch:
                self._settle(output, message)
            found += [m for m in batch if wanted(m)]
        expect(len(found) <= 1, f"{len(found)} copies in {output} within the deduplication window")
        return found[0] if found else None

    def drain(self, output: str) -> int:
        """Takes away the run's own messages still in a queue (earlier samples' and seeding's)."""
        taken = 0
        while batch := self._receive(output):
            for message in batch:
                self._settle(output, message)
            taken += len(batch)
        return taken

    def sandbox_contact_ways(self) -> list[dict]:
        with urllib.request.urlopen(f"{self.invoke.stack.SANDBOX_URL}/_sandbox/contact-ways", timeout=10) as r:
            return json.loads(r.read())["contact_ways"]

    def robot_messages(self) -> list[dict]:
        with urllib.request.urlopen(f"{self.invoke.stack.SANDBOX_URL}/_sandbox/robot/messages", timeout=10) as r:
            return json.loads(r.read())["messages"]

    def triggers(self) -> list[str]:
        """The UUIDs of the stack's enabled SQS triggers (its functions are named in the outputs)."""
        uuids = []
        for key, name in self.values.items():
            if not key.endswith("FunctionName"):
                continue
            for mapping in self.lambdas.list_event_source_mappings(FunctionName=name)["EventSourceMappings"]:
                if mapping.get("State") != "Disabled":
                    uuids.append(mapping["UUID"])
        return uuids

    def switch(self, uuids: list[str], enabled: bool) -> None:
        for uuid in uuids:
            self.lambdas.update_event_source_mapping(UUID=uuid, Enabled=enabled)
        want = "Enabled" if enabled else "Disabled"
        for uuid in uuids:
            poll(
                f"trigger {uuid} {want}",
                lambda: self.lambdas.get_event_source_mapping(UUID=uuid)["State"] == want,
            )


# ---------------------------------------------------------------- the samples' answers


def http_answer(answer: dict) -> tuple[int, object]:
    body = answer.get("body")
    try:
        parsed = json.loads(body) if body else None
    except json.JSONDecodeError:
        parsed = body
    return answer.get("statusCode"), parsed


def status(expected: tuple[int, ...]) -> Callable[[dict], object]:
    def check(answer: dict):
        code, body = http_answer(answer)
        expect(code in expected, f"status {code}, expected {' or '.join(map(str, expected))}: {body}")
        return body

    return check


def put_tenant(answer, world, before):
    body = status((200,))(answer)
    expect(body["tenant"] == "demo" and body["corp_id"] == "wx5823bf96d3bd56c7", f"answer {body}")
    expect(world.item("TENANT#demo", "PROFILE") is not None, "no tenant profile in the table")
    expect(world.item("TENANT#demo", "DUE#MIDNIGHT") is not None, "the tenant's midnight is not due in the index")


def put_staff(answer, world, before):
    body = status((200,))(answer)
    expect(body["online"] is False and body["employment"] == "active", f"answer {body}")


def put_code(answer, world, before):
    body = status((200, 201))(answer)
    config_id = body["config_id"]
    way = [w for w in world.sandbox_contact_ways() if w["config_id"] == config_id]
    expect(len(way) == 1, f"contact way {config_id} not in the sandbox")
    expect(world.item("TENANT#demo#CODE#spring-01", "CODE#spring-01") is not None, "no code item in the table")


def get_code(answer, world, before):
    body = status((200,))(answer)
    excluded = {row["staff"] for row in body["excluded"]}
    expect(body["family"] == "native", f"family {body['family']}")
    expect("zhangsan" in excluded, f"zhangsan (offline) not excluded: {body['excluded']}")


def duplicate_member(answer, world, before):
    body = status((400,))(answer)
    expect(body["code"] == "invalid", f"answer {body}")


def put_department(answer, world, before):
    body = status((200,))(answer)
    expect(sorted(body["members"]) == ["lisi", "zhangsan"], f"answer {body}")


def put_code_departments(answer, world, before):
    body = status((200, 201))(answer)
    expect(body["code"] == "autumn-02" and body["config_id"], f"answer {body}")


def put_staff_departments(answer, world, before):
    body = status((200,))(answer)
    expect(sorted(body["departments"]) == ["2", "3"], f"answer {body}")


def put_staff_schedule(answer, world, before):
    body = status((200,))(answer)
    expect(len(body["schedule"]["shifts"]) == 3, f"answer {body}")
    expect(world.item("TENANT#demo", "DUE#SHIFTS") is not None, "the tenant's shift item is not due in the index")


def delete_code(answer, world, before):
    body = status((200,))(answer)
    expect(world.item("TENANT#demo#CODE#spring-01", "CODE#spring-01") is None, "the code item is still in the table")
    gone = all(w["config_id"] != body["config_id"] for w in world.sandbox_contact_ways())
    expect(gone, f"contact way {body['config_id']} still in the sandbox")


def verify_url(answer, world, before):
    code, body = http_answer(answer)
    expect(code == 200 and str(body) == "1616140317555161061", f"status {code}, body {body}")


def bad_signature(answer, world, before):
    status((401,))(answer)


def landing_visit(answer, world, before):
    # The sample's code is native (or deleted by then): one counted write, refused, and a page.
    code, body = http_answer(answer)
    expect(code == 404 and "<h1>" in str(body), f"status {code}, body {body}")


def add_contact(answer, world, before):
    code, body = http_answer(answer)
    expect(code == 200, f"status {code}, body {body}")
    message = world.stored(
        "InboxQueueUrl", lambda m: "61f17e210d57acf6b0a833373a6af92855a17fb6" in m["Body"]
    )
    if message is not None:
        stored = json.loads(message["Body"])
        expect(stored["tenant"] == "demo" and stored["envelope"].startswith("<xml>"), f"stored {stored}")


def batch(answer: dict) -> list:
    expect("batchItemFailures" in answer, f"not a batch response: {answer}")
    return answer["batchItemFailures"]


def reason(message: dict) -> dict:
    try:
        return json.loads(message["Body"])
    except json.JSONDecodeError:
        return {}


def inbox_add_and_poison(answer, world, before):
    expect(batch(answer) == [], f"left for redelivery: {batch(answer)}")
    parked = world.stored("InboxDeadLetterQueueUrl", lambda m: m["Body"] == "not json at all")
    if parked is not None:
        attributes = {k: v.get("StringValue") for k, v in parked.get("MessageAttributes", {}).items()}
        expect(attributes.get("failure_class") == "poison", f"parked with {attributes}")
    counted = world.item("TENANT#demo#CODE#code-1", "ADDS#TOTAL#code-1") or {}
    expect(counted.get("n_zhangsan", {}).get("N") == "1", f"the add is not counted in the table: {counted}")
    world.stored(
        "RefreshQueueUrl",
        lambda m: reason(m).get("code") == "code-1" and reason(m).get("cause") == "add_counted",
    )


def refresh_two_codes(answer, world, before):
    expect(batch(answer) == [], f"left for redelivery: {batch(answer)}")
    reasons, recomputes = world.refresh_tally()
    grown = (reasons - before["tally"][0], recomputes - before["tally"][1])
    expect(grown == (3, 2), f"refresh counters grew by (reasons, recomputes) = {grown}, expected (3, 2)")


def retry_served(answer, world, before):
    expect(batch(answer) == [], f"left for redelivery: {batch(answer)}")
    forwarded = world.stored(
        "RefreshQueueUrl",
        lambda m: reason(m).get("code") == "code-1" and reason(m).get("attempt") == 1,
    )
    if forwarded is not None:
        expect(reason(forwarded).get("cause") == "add_counted", f"forwarded {forwarded['Body']}")


def fan_out_staff(answer, world, before):
    expect(batch(answer) == [], f"left for redelivery: {batch(answer)}")
    # lisi sits on both seeded codes, and on autumn-02 through department 2 (the department
    # and code samples above): the fan-out sends each of them its reason.
    codes = ["autumn-02", "code-1", "code-2"]
    ours = lambda m: reason(m).get("fact_key") == "staff:lisi:1409659813700"  # noqa: E731
    seen: dict[str, dict] = {}

    def every():
        while batch_ := world._receive("RefreshQueueUrl"):
            for message in batch_:
                world._settle("RefreshQueueUrl", message)
                if ours(message):
                    seen[reason(message)["code"]] = reason(message)
        return world.repeat or sorted(seen) == codes

    poll(f"the fan-out's reasons for {', '.join(codes)} in refresh.fifo", every)
    expect(set(seen) <= set(codes), f"reasons for {sorted(seen)}")
    expect(all(r["cause"] == "staff_changed" for r in seen.values()), f"reasons {seen}")


def tick(answer, world, before):
    for field in ("held_elsewhere", "minutes_walked", "reasons_sent", "minutes_behind"):
        expect(field in answer, f"no {field} in the tick's report {answer}")
    expect(world.item("SCHEDULES", "TICK_CURSOR") is not None, "no tick cursor in the table")


def sweep(answer, world, before):
    for field in ("held_elsewhere", "dirty_due", "resyncs_sent", "read_back", "differing", "guards_tripped", "claims_finished", "dynamodb_requests"):
        expect(field in answer, f"no {field} in the sweep's report {answer}")
    expect(world.item("SWEEP", "LEASE") is not None, "no sweep lease in the table")


def replay_dry_run_page(answer, world, before):
    expect(batch(answer) == [], f"left for redelivery: {batch(answer)}")
    run = world.item("REPLAY#sample-dry-run", "RUN")
    expect(run is not None, "no replay run record in the table")
    status = run.get("status", {}).get("S")
    expect(status in ("codes", "done"), f"the run's status is {status}")
    # A dry run wrote no fact: no add of the window counted by the sample's page.
    page = poll(
        "the run's next page (its codes) in the replay queue",
        lambda: next(
            (
                m
                for m in world._receive("ReplayQueueUrl")
                if reason(m).get("run") == "sample-dry-run" and reason(m).get("phase") == "codes"
            ),
            None,
        ),
    )
    world.sqs.delete_message(QueueUrl=world.values["ReplayQueueUrl"], ReceiptHandle=page["ReceiptHandle"])


def alarm_relayed(answer, world, before):
    expect(answer is None, f"the alarm robot answered {answer}")
    posted = [m for m in world.robot_messages() if "qrsync-local-RefreshDeadLetters" in m["content"]]
    expect(posted, "the sample's alarm change did not reach the sandbox's group robot")


# (function, sample, check), in the order the samples build on each other.
CASES: list[tuple[str, str, Check]] = [
    ("AdminApiFunction", "apigw-admin-put-tenant.json", put_tenant),
    ("AdminApiFunction", "apigw-admin-put-staff.json", put_staff),
    ("AdminApiFunction", "apigw-admin-put-code.json", put_code),
    ("AdminApiFunction", "apigw-admin-get-code.json", get_code),
    ("AdminApiFunction", "apigw-admin-put-code-duplicate-member.json", duplicate_member),
    ("AdminApiFunction", "apigw-admin-put-department.json", put_department),
    ("AdminApiFunction", "apigw-admin-put-code-departments.json", put_code_departments),
    ("AdminApiFunction", "apigw-admin-put-staff-departments.json", put_staff_departments),
    ("AdminApiFunction", "apigw-admin-put-staff-schedule.json", put_staff_schedule),
    ("AdminApiFunction", "apigw-admin-delete-code.json", delete_code),
    ("CallbackFunction", "apigw-callback-verify-url.json", verify_url),
    ("CallbackFunction", "apigw-callback-bad-signature.json", bad_signature),
    ("CallbackFunction", "apigw-callback-add-contact.json", add_contact),
    ("LandingPageFunction", "apigw-landing-visit.json", landing_visit),
    ("RecordFactsFunction", "sqs-inbox-add-and-poison.json", inbox_add_and_poison),
    ("RefreshCodesFunction", "sqs-refresh-three-reasons-two-codes.json", refresh_two_codes),
    ("RefreshCodesFunction", "sqs-refresh-retry-served.json", retry_served),
    ("FanOutFunction", "sqs-fan-out-staff.json", fan_out_staff),
    ("ScheduleTickFunction", "scheduler-tick.json", tick),
    ("SweepFunction", "scheduler-sweep.json", sweep),
    ("ReplayFunction", "sqs-replay-dry-run-page.json", replay_dry_run_page),
    ("AlarmRobotFunction", "sns-alarm-state-change.json", alarm_relayed),
]


# ---------------------------------------------------------------- the run


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def invoke_warm(port: int, function: str, sample: Path) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/2015-03-31/functions/{function}/invocations",
        data=sample.read_bytes(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        error = response.headers.get("X-Amz-Function-Error")
        payload = response.read()
    if error:
        raise Failed(f"function error {error}: {payload[:500]!r}")
    return json.loads(payload)


class StartLambda:
    """`sam local start-lambda` with warm containers, stopped (and its containers removed) by id."""

    def __init__(self, invoke, doc: dict, values: dict[str, str]):
        self.port = free_port()
        state = invoke.stack.STATE
        self.ids = state / f"start-lambda-{invoke.stack.AWS_PORT}.containers"
        self.ids.write_text("")
        self.log = state / f"start-lambda-{invoke.stack.AWS_PORT}.log"
        command = [
            *invoke.SAM, "local", "start-lambda",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--warm-containers", "EAGER",
            *invoke.sam_args(doc, values),
        ]
        env = {**invoke.sam_env(doc), "QRSYNC_SAM_CONTAINERS": str(self.ids)}
        self.process = subprocess.Popen(
            command, cwd=invoke.ROOT, env=env, stdin=subprocess.DEVNULL,
            stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, start_new_session=True,
        )

    def wait(self, timeout: float) -> None:
        def up():
            if self.process.poll() is not None:
                raise Failed(f"start-lambda exited with {self.process.returncode}: {self.tail()}")
            return answers(self.port)

        poll("sam local start-lambda", up, timeout, pause=0.5)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        import docker

        client = docker.from_env()
        for container_id in filter(None, self.ids.read_text().split()):
            try:
                client.containers.get(container_id).remove(force=True)
            except docker.errors.NotFound:
                pass


def run_case(world: World, function: str, sample: str, check: Check, call, timings: list[float]) -> None:
    """Runs one sample and its check; appends the seconds each invocation took to timings."""
    world.drain("InboxQueueUrl")
    world.drain("RefreshQueueUrl")
    before = {"tally": world.refresh_tally()}
    event = world.invoke.placed(world.invoke.EVENTS / sample, world.values)

    def invoked() -> dict:
        started = time.monotonic()
        answer = call(function, event)
        timings.append(time.monotonic() - started)
        return answer

    answer = invoked()
    if function in ("ScheduleTickFunction", "SweepFunction") and answer.get("held_elsewhere"):
        # The deployed tick and sweep run on their schedules too, and give the lease back.
        def walked():
            again = invoked()
            return None if again.get("held_elsewhere") else again

        # A scheduled tick run waits for the next minute's grace (up to 75 s) holding the cursor.
        answer = poll("a tick run that holds the cursor", walked, 100, pause=1)
    check(answer, world, before)


def invoke_cold(invoke, doc: dict, values: dict[str, str]):
    def call(function: str, sample: Path) -> dict:
        command = [*invoke.SAM, "local", "invoke", function, "--event", str(sample), *invoke.sam_args(doc, values)]
        done = subprocess.run(command, cwd=invoke.ROOT, env=invoke.sam_env(doc), capture_output=True, text=True, timeout=120)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            raise Failed(f"sam local invoke exited {done.returncode}: {done.stderr[-1500:]}")
        return json.loads(lines[-1])

    return call


def main(invoke) -> None:
    started = time.monotonic()
    image_started = time.monotonic()
    invoke.lambda_image.locked(invoke.lambda_image.ensure)
    image_seconds = time.monotonic() - image_started
    doc = invoke.template()
    values = invoke.outputs()
    invoke.seed(values)
    stack_id = invoke.stack_id()
    last_run = invoke.stack.STATE / f"invoke-test-{invoke.stack.STACK}-{invoke.stack.AWS_PORT}.json"
    try:
        last = json.loads(last_run.read_text())
        repeat = last["stack_id"] == stack_id and time.time() - last["ended_at"] < DEDUPLICATION_WINDOW_S
    except (FileNotFoundError, ValueError, KeyError):
        repeat = False
    if repeat:
        invoke.log("the last run against this stack ended less than 5 minutes ago: the samples' queued messages are expected at most once")
    world = World(invoke, values, repeat)
    triggers = world.triggers()
    results: list[tuple[str, str, str, float, str]] = []
    # Off while start-lambda starts, so MiniStack's pollers have stopped before the first case
    # (a disabled mapping takes a poll to stop); back on whatever happens, a start-lambda that
    # cannot even be set up included.
    world.switch(triggers, False)
    invoke.log(f"switched off {len(triggers)} queue triggers of the stack for the run")
    server = None
    try:
        server = StartLambda(invoke, doc, values)
        warm_started = time.monotonic()
        server.wait(timeout=180)
        invoke.log(f"sam local start-lambda --warm-containers EAGER up in {time.monotonic() - warm_started:.1f} s (port {server.port})")

        def warm(function: str, sample: Path) -> dict:
            return invoke_warm(server.port, function, sample)

        cases = [(f, s, c, warm, "warm") for f, s, c in CASES]
        cases.append(("CallbackFunction", "apigw-callback-verify-url.json", verify_url, invoke_cold(invoke, doc, values), "cold"))
        for function, sample, check, call, how in cases:
            case_started, timings = time.monotonic(), []
            try:
                run_case(world, function, sample, check, call, timings)
                outcome = "ok"
            except (Failed, KeyError, TypeError, urllib.error.URLError, subprocess.TimeoutExpired) as error:
                outcome = f"FAILED: {type(error).__name__}: {error}"
            seconds = timings[-1] if timings else float("nan")
            results.append((function, sample, how, seconds, outcome))
            print(
                f"  {'ok  ' if outcome == 'ok' else 'FAIL'} {how} {function:21} {sample:43} "
                f"invoke {seconds:5.2f} s, case {time.monotonic() - case_started:5.2f} s"
                f"{'' if outcome == 'ok' else '  ' + outcome}",
                flush=True,
            )
    finally:
        last_run.write_text(json.dumps({"stack_id": stack_id, "ended_at": time.time()}) + "\n")
        if server is not None:
            server.stop()
        world.switch(triggers, True)
        invoke.log(f"stopped start-lambda, removed its containers, switched the {len(triggers)} triggers back on")
    failed = [r for r in results if r[4] != "ok"]
    if failed:
        print(server.tail())
    covered = {sample for _, sample, _, _, _ in results}
    missing = sorted(p.name for p in invoke.EVENTS.glob("*.json") if p.name not in covered)
    if missing:
        print(f"  FAIL samples in events/ with no case: {', '.join(missing)}")
    invoke.log(
        f"image {image_seconds:.1f} s, total {time.monotonic() - started:.1f} s "
        f"(warm invokes {sum(r[3] for r in results if r[2] == 'warm'):.1f} s, "
        f"cold sam local invoke {sum(r[3] for r in results if r[2] == 'cold'):.1f} s)"
    )
    print(f"{len(results) - len(failed)} passed, {len(failed) + len(missing)} failed")
    if failed or missing:
        raise SystemExit(1)
