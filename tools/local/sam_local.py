#!/usr/bin/env python3
"""The SAM CLI, with the two things a function container needs to reach the local world.

    sam_local.py local invoke ... --docker-network host
    sam_local.py local start-lambda ... --docker-network host

takes exactly `sam`'s arguments and runs the pinned SAM CLI in this process after two changes:

- `--docker-network host` puts the container in the host's network namespace. SAM accepts the
  value but only skips connecting the container to a network, so it stays on Docker's bridge,
  where 127.0.0.1 is the container itself and MiniStack and the sandbox (bound to the host's
  127.0.0.1 only) are out of reach (aws/aws-sam-cli#4236). Sharing the host's namespace, the
  emulator would also listen on 0.0.0.0:8080 and serve the runtime API on 127.0.0.1:9001,
  where every other container and program of this machine would collide with it: it is told
  to listen on 127.0.0.1 at the free port SAM picked for it, and on another free port for the
  runtime API.
- `AWS_ENDPOINT_URL` from this process's environment is passed to the function, beside the
  credentials and region SAM passes already. SAM passes only the variables the template
  declares, and the template declares none for the endpoint: on AWS there is none.

QRSYNC_SAM_CONTAINERS names a file to which the id of every container created is appended, so
the caller can remove exactly the containers of its run (warm containers outlive a crash).
"""

from __future__ import annotations

import os
import sys

import samcli
from docker.models.containers import ContainerCollection
from samcli.cli.main import cli
from samcli.local.docker.container import Container
from samcli.local.docker.utils import find_free_port
from samcli.local.lambdafn.env_vars import EnvironmentVariables

# The methods replaced below are SAM's internals: a SAM upgrade must be checked against them.
PINNED_SAM = "1.170.0"
RIE_ADDRESS = "--runtime-interface-emulator-address"
RUNTIME_API_ADDRESS = "--runtime-api-address"

_create = Container.create
_containers_create = ContainerCollection.create
_aws_variables = EnvironmentVariables._get_aws_variables


def create(self: Container, context):
    if self.network_id == "host" and RIE_ADDRESS not in (self._entrypoint or []):
        interface = self._container_host_interface
        # Above SAM's own range for the emulator's port (5000-9000), so the two never meet.
        api_port = find_free_port(network_interface=interface, start=9001, end=9999)
        self._container_opts = {**(self._container_opts or {}), "network_mode": "host"}
        self._entrypoint = [
            *self._entrypoint,
            RIE_ADDRESS,
            f"{interface}:{self.rapid_port_host}",
            RUNTIME_API_ADDRESS,
            f"{interface}:{api_port}",
        ]
    container_id = _create(self, context)
    record = os.environ.get("QRSYNC_SAM_CONTAINERS")
    if record:
        with open(record, "a") as ids:
            ids.write(f"{container_id}\n")
    return container_id


def containers_create(self: ContainerCollection, image, command=None, **kwargs):
    # SAM always publishes the emulator's port; in the host's namespace there is nothing to
    # publish, and docker-py refuses port bindings there.
    if kwargs.get("network_mode") == "host":
        kwargs.pop("ports", None)
    return _containers_create(self, image, command, **kwargs)


def aws_variables(self: EnvironmentVariables):
    variables = _aws_variables(self)
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        variables["AWS_ENDPOINT_URL"] = endpoint
    return variables


def main() -> None:
    if samcli.__version__ != PINNED_SAM:
        raise SystemExit(
            f"{__file__} patches SAM CLI {PINNED_SAM}, this is {samcli.__version__}: check "
            "Container.create and EnvironmentVariables._get_aws_variables, then update it"
        )
    if Container.RAPID_PORT_CONTAINER != "8080":
        raise SystemExit("SAM's emulator port changed; check the host-network patch")
    Container.create = create
    ContainerCollection.create = containers_create
    EnvironmentVariables._get_aws_variables = aws_variables
    sys.argv[0] = "sam"
    sys.exit(cli())


if __name__ == "__main__":
    main()
