"""Checks of template.yaml that no local world can run (`make lint`).

MiniStack creates no WAF web ACL association and evaluates no rate-based rule, so the per-client
limits in front of the public routes (docs/design/public-urls.md) are held to the template here:
the web ACL and its association exist under PerClientLimits (on by default), the ACL limits each
address on both public routes and each landing URL and tenant callback URL, and the limits are
parameters. The public routes' own API Gateway buckets are checked too: the landing page and the
callback each have method settings of their own. Exits non-zero naming each problem.

    python tools/template_check.py [--self-test]
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

from cfnlint.decode import decode

ROOT = Path(__file__).resolve().parent.parent

# (rule name, aggregate key, the path prefix its scope-down matches, the limit's parameter)
RATE_RULES = [
    ("LandingPerClient", "IP", "/l/", "LandingPerClientPerMinute"),
    ("LandingPerCode", "URI_PATH", "/l/", "LandingPerCodePerMinute"),
    ("CallbackPerClient", "IP", "/wecom/", "CallbackPerClientPerMinute"),
    ("CallbackPerTenant", "URI_PATH", "/wecom/", "CallbackPerTenantPerMinute"),
]

# (resource path, method) -> the rate parameter of the public method's own bucket
OWN_BUCKETS = {
    ("/~1l~1{tenant}~1{code}", "GET"): "LandingThrottleRatePerSecond",
    ("/~1wecom~1{tenant}~1callback", "POST"): "CallbackThrottleRatePerSecond",
    ("/~1wecom~1{tenant}~1callback", "GET"): "CallbackThrottleRatePerSecond",
}


def ref(value) -> str | None:
    return value.get("Ref") if isinstance(value, dict) else None


def aggregate_key(statement: dict) -> str | None:
    kind = statement.get("AggregateKeyType")
    if kind != "CUSTOM_KEYS":
        return kind
    keys = statement.get("CustomKeys", [])
    if len(keys) == 1 and "UriPath" in keys[0]:
        return "URI_PATH"
    return None


def scoped_prefixes(statement: dict) -> set[str]:
    """The path prefixes a scope-down statement matches (STARTS_WITH on the URI path)."""
    scope = statement.get("ScopeDownStatement", {})
    matches = scope.get("OrStatement", {}).get("Statements", [scope])
    prefixes = set()
    for match in matches:
        byte = match.get("ByteMatchStatement", {})
        if "UriPath" in byte.get("FieldToMatch", {}) and byte.get("PositionalConstraint") == "STARTS_WITH":
            search = byte.get("SearchString")
            if isinstance(search, dict) and "Fn::Sub" in search:
                search = search["Fn::Sub"].replace("/${StageName}", "")
            if isinstance(search, str):
                prefixes.add(search)
    return prefixes


def problems(template: dict) -> list[str]:
    found = []
    parameters = template.get("Parameters", {})
    resources = template.get("Resources", {})
    switch = parameters.get("PerClientLimits", {})
    if switch.get("Default") != "on":
        found.append("PerClientLimits: no parameter, or not on by default")
    condition = template.get("Conditions", {}).get("LimitPerClient")
    if condition != {"Fn::Equals": [{"Ref": "PerClientLimits"}, "on"]}:
        found.append("Conditions.LimitPerClient: not PerClientLimits = on")
    acls = {name: r for name, r in resources.items() if r.get("Type") == "AWS::WAFv2::WebACL"}
    if len(acls) != 1:
        found.append(f"one AWS::WAFv2::WebACL expected, {len(acls)} found")
        return found
    [(acl_name, acl)] = acls.items()
    props = acl.get("Properties", {})
    if acl.get("Condition") != "LimitPerClient":
        found.append(f"{acl_name}: not under the condition LimitPerClient")
    if props.get("Scope") != "REGIONAL":
        found.append(f"{acl_name}: Scope is not REGIONAL (a regional API's stage)")
    if "Allow" not in props.get("DefaultAction", {}):
        found.append(f"{acl_name}: the default action must allow (only a rule's limit refuses)")
    rules = {rule.get("Name"): rule for rule in props.get("Rules", [])}
    for name, key, prefix, parameter in RATE_RULES:
        rule = rules.get(name)
        if rule is None:
            found.append(f"{acl_name}: no rule {name}")
            continue
        statement = rule.get("Statement", {}).get("RateBasedStatement")
        if statement is None:
            found.append(f"{name}: not a rate-based rule")
            continue
        if "Block" not in rule.get("Action", {}):
            found.append(f"{name}: does not block (Count only measures)")
        if ref(statement.get("Limit")) != parameter or parameter not in parameters:
            found.append(f"{name}: its limit is not the parameter {parameter}")
        if aggregate_key(statement) != key:
            found.append(f"{name}: not aggregated by {key}")
        if statement.get("EvaluationWindowSec") != 60:
            found.append(f"{name}: the window is not 60 s (the parameters are per minute)")
        if prefix not in scoped_prefixes(statement):
            found.append(f"{name}: its scope-down does not match paths starting {prefix}")
    associations = [
        (name, r) for name, r in resources.items() if r.get("Type") == "AWS::WAFv2::WebACLAssociation"
    ]
    if len(associations) != 1:
        found.append(f"one AWS::WAFv2::WebACLAssociation expected, {len(associations)} found")
    else:
        [(name, association)] = associations
        props = association.get("Properties", {})
        if association.get("Condition") != "LimitPerClient":
            found.append(f"{name}: not under the condition LimitPerClient")
        if props.get("WebACLArn") != {"Fn::GetAtt": [acl_name, "Arn"]}:
            found.append(f"{name}: does not associate {acl_name}")
        if "Api.Stage" not in repr(props.get("ResourceArn")) or "/restapis/${Api}/stages/" not in repr(
            props.get("ResourceArn")
        ):
            found.append(f"{name}: its resource is not the API's stage")
    api = resources.get("Api", {}).get("Properties", {})
    settings = {
        (s.get("ResourcePath"), s.get("HttpMethod")): s for s in api.get("MethodSettings", [])
    }
    for method, parameter in OWN_BUCKETS.items():
        setting = settings.get(method)
        if setting is None or ref(setting.get("ThrottlingRateLimit")) != parameter:
            found.append(f"Api: {method[1]} {method[0]} has no bucket of its own ({parameter})")
    return found


def load() -> dict:
    template, matches = decode(str(ROOT / "template.yaml"))
    if matches:
        raise SystemExit(f"template.yaml does not parse: {matches}")
    return template


def self_test() -> int:
    """Each check fails on a template that lacks what it checks."""
    template = load()
    assert problems(template) == [], problems(template)
    resources = template["Resources"]
    acl = next(name for name, r in resources.items() if r.get("Type") == "AWS::WAFv2::WebACL")
    association = next(
        name for name, r in resources.items() if r.get("Type") == "AWS::WAFv2::WebACLAssociation"
    )

    def broken(change) -> list[str]:
        copied = copy.deepcopy(template)
        change(copied)
        return problems(copied)

    cases = {
        "no web ACL": lambda t: t["Resources"].pop(acl),
        "no association": lambda t: t["Resources"].pop(association),
        "off by default": lambda t: t["Parameters"]["PerClientLimits"].update(Default="off"),
        "a rule gone": lambda t: t["Resources"][acl]["Properties"]["Rules"].pop(),
        "a rule counting": lambda t: t["Resources"][acl]["Properties"]["Rules"][0].update(Action={"Count": {}}),
        "the callback sharing the stage's setting": lambda t: t["Resources"]["Api"]["Properties"][
            "MethodSettings"
        ].pop(1),
    }
    failed = [name for name, change in cases.items() if not broken(change)]
    if failed:
        print("template_check self-test: not caught:", ", ".join(failed))
        return 1
    print(f"template_check self-test: {len(cases)} broken templates caught")
    return 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    found = problems(load())
    for problem in found:
        print(f"template.yaml: {problem}")
    if not found:
        print("template.yaml: per-client limits and the public routes' buckets in place")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
