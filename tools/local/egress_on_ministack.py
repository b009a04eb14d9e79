#!/usr/bin/env python3
"""Which of template.yaml's fixed-egress resources MiniStack deploys (docs/design/egress.md).

The whole template with FixedEgress=on does not deploy on MiniStack: it refuses the template for
the NAT gateways and Elastic IPs it has no provisioner for. This deploys the egress resources
alone (the template's Parameters and Conditions, every `Egress*` resource) through MiniStack's
CloudFormation with FixedEgress=on, and prints what it created or refused; `--without-nat` leaves
out the Elastic IPs, NAT gateways and the private routes through them, to show the rest deploys.

    stack.py up                                   # or any MiniStack on QRSYNC_AWS_PORT
    .venv/tools/bin/python tools/local/egress_on_ministack.py --addresses 4 [--without-nat]
"""

from __future__ import annotations

import argparse
import re
import time

from stack import ROOT, STACK, boto3_client

# What the --without-nat deployment leaves out: MiniStack has no provisioner for them.
NAT_PARTS = re.compile(r"^Egress(Ip|Nat|PrivateRoute)[0-9]$")


def section(lines: list[str], name: str) -> list[str]:
    start = lines.index(name + ":")
    end = next(
        i for i in range(start + 1, len(lines))
        if lines[i] and not lines[i].startswith((" ", "#"))
    )
    return lines[start:end]


def egress_template(without_nat: bool) -> str:
    lines = (ROOT / "template.yaml").read_text().split("\n")
    resources, keep = ["Resources:"], False
    for line in section(lines, "Resources")[1:]:
        named = re.match(r"^  ([A-Za-z0-9]+):\s*$", line)
        if named:
            name = named.group(1)
            keep = name.startswith("Egress") and not (without_nat and NAT_PARTS.match(name))
        if keep:
            resources.append(line)
    head = ['AWSTemplateFormatVersion: "2010-09-09"']
    return "\n".join(head + section(lines, "Parameters") + section(lines, "Conditions") + resources)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--addresses", default="2", choices=["1", "2", "3", "4"])
    parser.add_argument("--without-nat", action="store_true")
    args = parser.parse_args()
    cfn = boto3_client("cloudformation")
    name = f"{STACK}-egress-{int(time.time())}"
    try:
        cfn.create_stack(
            StackName=name,
            TemplateBody=egress_template(args.without_nat),
            Parameters=[
                {"ParameterKey": "FixedEgress", "ParameterValue": "on"},
                {"ParameterKey": "EgressAddresses", "ParameterValue": args.addresses},
            ],
        )
    except cfn.exceptions.ClientError as refused:
        raise SystemExit(f"refused: {refused.response['Error']['Message']}") from None
    deadline = time.monotonic() + 120
    while True:
        stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
        if not stack["StackStatus"].endswith("IN_PROGRESS") or time.monotonic() > deadline:
            break
        time.sleep(1)
    print(name, stack["StackStatus"], stack.get("StackStatusReason", ""))
    for resource in cfn.describe_stack_resources(StackName=name)["StackResources"]:
        print(" ", resource["ResourceStatus"], resource["ResourceType"], resource["LogicalResourceId"])
    cfn.delete_stack(StackName=name)


if __name__ == "__main__":
    main()
