#!/usr/bin/env python3
"""Lays out .aws-sam/build as `sam build` does, from bootstraps cargo has already built.

    stage.py BIN_DIR    every function of template.yaml gets BIN_DIR/<its package> as its
                        `bootstrap` (stripped), and the built template points at them

`make test` builds the functions in the same cargo invocation as the tests (one feature set,
one profile, one target dir), so each dependency compiles once for both; `sam build` would
compile them again, per function, with other features. The functions are found from the
template itself (each `AWS::Serverless::Function`'s `CodeUri` names its crate), so this script
keeps no list of its own. `sam deploy` then deploys the result like any `sam build` output.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from samcli.yamlhelper import yaml_dump, yaml_parse  # the tools venv's SAM CLI

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / ".aws-sam" / "build"


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    bins = Path(sys.argv[1])
    template = yaml_parse((ROOT / "template.yaml").read_text())
    staged = 0
    for name, resource in template["Resources"].items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        code_uri = ROOT / resource["Properties"]["CodeUri"]
        package = tomllib.loads((code_uri / "Cargo.toml").read_text())["package"]["name"]
        built = bins / package
        if not built.is_file():
            raise SystemExit(f"{name}: no {built}; build the workspace's binaries first")
        target = BUILD / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        # As a release bootstrap is: no symbols, no debug info (a third of the size, uploaded
        # by every deploy of every local world).
        subprocess.run(
            ["strip", "--strip-all", "-o", str(target / "bootstrap"), str(built)], check=True
        )
        resource["Properties"]["CodeUri"] = name
        resource.setdefault("Metadata", {})["SamResourceId"] = name
        staged += 1
    (BUILD / "template.yaml").write_text(yaml_dump(template))
    print(f"[stage] {staged} bootstraps from {bins} in {BUILD}")
    for bootstrap in sorted(BUILD.glob("*/bootstrap")):
        print(f"[stage]   {bootstrap.relative_to(ROOT)}  {bootstrap.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
