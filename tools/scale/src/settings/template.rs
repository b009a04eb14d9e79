//! `template.yaml` read the way CloudFormation reads it, as far as the simulation needs:
//! parameters (their defaults, overridden from the command line and checked against their
//! `MinValue`, `MaxValue` and `AllowedValues`), mappings, conditions, `Globals`, and the
//! intrinsic functions in both forms (`!Ref X` and `Ref: X`). What comes out is a tree of
//! plain values ([`Node`]) in which a reference to a resource stays a reference (its physical
//! name exists only once deployed).
//!
//! The YAML is parsed by saphyr, which keeps CloudFormation's short-form tags as tagged nodes
//! instead of dropping them (workspace Cargo.toml says why this crate).

use saphyr::{LoadableYamlNode, Scalar, Yaml};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// A template the simulation cannot follow: said loudly, with where and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template.yaml, {at}: {problem}")]
pub struct TemplateError {
    /// Where: a path of keys (`Resources.RefreshQueue.Properties.VisibilityTimeout`), or the
    /// command line's `--parameter`.
    pub at: String,
    pub problem: String,
}

pub(crate) fn error(at: &str, problem: impl Into<String>) -> TemplateError {
    TemplateError {
        at: at.to_owned(),
        problem: problem.into(),
    }
}

/// A value of the template once its intrinsic functions are evaluated.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    List(Vec<Node>),
    /// Keys in the template's order.
    Map(Vec<(String, Node)>),
    /// `!Ref` to a resource: its logical id.
    Resource(String),
    /// `!GetAtt Resource.Attribute`.
    Attribute {
        resource: String,
        attribute: String,
    },
    /// An intrinsic function this reader does not evaluate (`Fn::Base64`, `Fn::ImportValue`...):
    /// an error only where a setting the simulation reads is one.
    Unevaluated(String),
}

impl Node {
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value as CloudFormation would compare or substitute it (`!Equals`, `!Sub`).
    fn as_text(&self) -> Option<String> {
        match self {
            Node::Text(text) => Some(text.clone()),
            Node::Int(n) => Some(n.to_string()),
            Node::Float(x) => Some(x.to_string()),
            Node::Bool(b) => Some(b.to_string()),
            Node::Resource(id) => Some(id.clone()),
            Node::Attribute {
                resource,
                attribute,
            } => Some(format!("{resource}.{attribute}")),
            _ => None,
        }
    }
}

/// One of the template's parameters, with the value this run uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    pub name: String,
    pub number: bool,
    pub default: Option<String>,
    /// The default, or the command line's override.
    pub value: Option<String>,
    pub overridden: bool,
}

/// The template, evaluated: every resource's properties as plain values.
#[derive(Debug, Clone)]
pub struct Template {
    pub parameters: BTreeMap<String, Parameter>,
    /// `(logical id, Type, Properties)` in the template's order; a serverless function's
    /// properties include what `Globals.Function` gives it.
    pub resources: Vec<Resource>,
}

#[derive(Debug, Clone)]
pub struct Resource {
    pub id: String,
    pub kind: String,
    pub properties: Node,
}

impl Template {
    /// Parses `text`, applying `overrides` (parameter name, value) to the defaults.
    pub fn parse(text: &str, overrides: &[(String, String)]) -> Result<Self, TemplateError> {
        let documents =
            Yaml::load_from_str(text).map_err(|e| error("(the whole file)", e.to_string()))?;
        let root = documents
            .first()
            .ok_or_else(|| error("(the whole file)", "no YAML document"))?;
        let parameters = parameters(root, overrides)?;
        let resources_yaml = get(root, "Resources")
            .ok_or_else(|| error("Resources", "missing: a template has resources"))?;
        let resource_ids: Vec<String> = entries(resources_yaml, "Resources")?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let resolver = Resolver {
            parameters: &parameters,
            resource_ids: &resource_ids,
            mappings: get(root, "Mappings"),
            conditions: get(root, "Conditions"),
            evaluated_conditions: RefCell::new(BTreeMap::new()),
        };
        let function_globals = match get(root, "Globals").and_then(|g| get(g, "Function")) {
            Some(globals) => resolver.node(globals, "Globals.Function")?,
            None => Node::Map(Vec::new()),
        };
        let mut resources = Vec::new();
        for (id, yaml) in entries(resources_yaml, "Resources")? {
            let at = format!("Resources.{id}");
            // A resource whose condition is false is not created, as CloudFormation does.
            if let Some(condition) = get(yaml, "Condition") {
                let name = resolver.text(condition, &format!("{at}.Condition"))?;
                if !resolver.condition(&name, &at, 0)? {
                    continue;
                }
            }
            let kind = match get(yaml, "Type") {
                Some(Yaml::Value(Scalar::String(kind))) => kind.to_string(),
                _ => return Err(error(&at, "a resource has a Type")),
            };
            let mut properties = match get(yaml, "Properties") {
                Some(props) => resolver.node(props, &format!("{at}.Properties"))?,
                None => Node::Map(Vec::new()),
            };
            if kind == "AWS::Serverless::Function" {
                merge_globals(&mut properties, &function_globals);
            }
            resources.push(Resource {
                id,
                kind,
                properties,
            });
        }
        Ok(Self {
            parameters,
            resources,
        })
    }
}

/// `Globals.Function` under a function's own properties, as SAM merges them: the function's
/// scalar wins, maps merge key by key, lists add the global items before the function's.
fn merge_globals(properties: &mut Node, globals: &Node) {
    match (properties, globals) {
        (Node::Map(own), Node::Map(global)) => {
            for (key, global_value) in global {
                match own.iter_mut().find(|(k, _)| k == key) {
                    Some((_, own_value)) => merge_globals(own_value, global_value),
                    None => own.push((key.clone(), global_value.clone())),
                }
            }
        }
        (Node::List(own), Node::List(global)) => {
            let mut merged = global.clone();
            merged.append(own);
            *own = merged;
        }
        _ => {}
    }
}

fn parameters(
    root: &Yaml,
    overrides: &[(String, String)],
) -> Result<BTreeMap<String, Parameter>, TemplateError> {
    let mut out = BTreeMap::new();
    let declared = match get(root, "Parameters") {
        Some(section) => entries(section, "Parameters")?,
        None => Vec::new(),
    };
    for (name, yaml) in declared {
        let at = format!("Parameters.{name}");
        let number =
            matches!(get(yaml, "Type"), Some(Yaml::Value(Scalar::String(t))) if t == "Number");
        let default = get(yaml, "Default")
            .map(scalar_text)
            .transpose()
            .map_err(|p| error(&at, p))?;
        let overridden = overrides.iter().rev().find(|(n, _)| *n == name);
        let value = overridden
            .map(|(_, v)| v.clone())
            .or_else(|| default.clone());
        if let Some(value) = &value {
            check_parameter(yaml, number, value).map_err(|problem| {
                error(
                    if overridden.is_some() {
                        "--parameter"
                    } else {
                        &at
                    },
                    format!("{name}={value}: {problem}"),
                )
            })?;
        }
        out.insert(
            name.clone(),
            Parameter {
                name,
                number,
                default,
                value,
                overridden: overridden.is_some(),
            },
        );
    }
    for (name, _) in overrides {
        if !out.contains_key(name) {
            return Err(error(
                "--parameter",
                format!("{name}: template.yaml has no such parameter"),
            ));
        }
    }
    Ok(out)
}

/// What CloudFormation checks of a parameter's value before it deploys.
fn check_parameter(yaml: &Yaml, number: bool, value: &str) -> Result<(), String> {
    if number {
        let n: f64 = value.parse().map_err(|_| "not a number".to_owned())?;
        if let Some(min) = get(yaml, "MinValue").and_then(yaml_number) {
            if n < min {
                return Err(format!("below its MinValue {min}"));
            }
        }
        if let Some(max) = get(yaml, "MaxValue").and_then(yaml_number) {
            if n > max {
                return Err(format!("above its MaxValue {max}"));
            }
        }
    }
    if let Some(Yaml::Sequence(allowed)) = get(yaml, "AllowedValues") {
        let allowed: Vec<String> = allowed.iter().filter_map(|a| scalar_text(a).ok()).collect();
        if !allowed.iter().any(|a| a == value) {
            return Err(format!(
                "not one of its AllowedValues ({})",
                allowed.join(", ")
            ));
        }
    }
    Ok(())
}

struct Resolver<'t, 'y> {
    parameters: &'t BTreeMap<String, Parameter>,
    resource_ids: &'t [String],
    mappings: Option<&'t Yaml<'y>>,
    conditions: Option<&'t Yaml<'y>>,
    evaluated_conditions: RefCell<BTreeMap<String, bool>>,
}

/// Conditions nest (`!And`, `!Condition`); a template whose conditions loop is refused.
const MAX_CONDITION_DEPTH: usize = 16;

impl Resolver<'_, '_> {
    fn node(&self, yaml: &Yaml, at: &str) -> Result<Node, TemplateError> {
        Ok(match yaml {
            Yaml::Value(scalar) => scalar_node(scalar),
            Yaml::Representation(text, _, _) => Node::Text(text.to_string()),
            Yaml::Sequence(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    if !is_no_value(item) {
                        let node = self.node(item, &format!("{at}[{i}]"))?;
                        if node != no_value() {
                            out.push(node);
                        }
                    }
                }
                Node::List(out)
            }
            Yaml::Mapping(_) => {
                let pairs = entries(yaml, at)?;
                if let [(key, arg)] = pairs.as_slice() {
                    if let Some(function) = long_form(key) {
                        return self.intrinsic(function, arg, at);
                    }
                }
                let mut out = Vec::with_capacity(pairs.len());
                for (key, value) in pairs {
                    if !is_no_value(value) {
                        let node = self.node(value, &format!("{at}.{key}"))?;
                        if node != no_value() {
                            out.push((key, node));
                        }
                    }
                }
                Node::Map(out)
            }
            Yaml::Tagged(tag, inner) if tag.handle == "!" => {
                self.intrinsic(&tag.suffix, inner, at)?
            }
            Yaml::Tagged(_, inner) => self.node(inner, at)?,
            Yaml::Alias(_) | Yaml::BadValue => {
                return Err(error(at, "a value the YAML parser could not read"))
            }
        })
    }

    fn intrinsic(&self, function: &str, arg: &Yaml, at: &str) -> Result<Node, TemplateError> {
        let at = &format!("{at} (!{function})");
        match function {
            "Ref" => self.reference(&self.text(arg, at)?, at),
            "GetAtt" => {
                let (resource, attribute) = match self.node(arg, at)? {
                    Node::Text(dotted) => match dotted.split_once('.') {
                        Some((r, a)) => (r.to_owned(), a.to_owned()),
                        None => {
                            return Err(error(at, format!("`{dotted}` is not Resource.Attribute")))
                        }
                    },
                    Node::List(parts) => match parts.as_slice() {
                        [r, a] => (text_of(r, at)?, text_of(a, at)?),
                        _ => return Err(error(at, "takes [Resource, Attribute]")),
                    },
                    _ => return Err(error(at, "takes Resource.Attribute")),
                };
                Ok(Node::Attribute {
                    resource,
                    attribute,
                })
            }
            "Sub" => self.substitute(arg, at),
            "If" => match self.list(arg, at)? {
                [condition, when_true, when_false] => {
                    let name = self.text(condition, at)?;
                    let branch = if self.condition(&name, at, 0)? {
                        when_true
                    } else {
                        when_false
                    };
                    self.node(branch, at)
                }
                _ => Err(error(
                    at,
                    "takes [Condition, value if true, value if false]",
                )),
            },
            "FindInMap" => match self.list(arg, at)? {
                [map, first, second] => {
                    let keys = [
                        self.text(map, at)?,
                        self.text(first, at)?,
                        self.text(second, at)?,
                    ];
                    let mut node = self
                        .mappings
                        .ok_or_else(|| error(at, "the template has no Mappings"))?;
                    for key in &keys {
                        node = get(node, key).ok_or_else(|| {
                            error(at, format!("Mappings has no {}", keys.join(".")))
                        })?;
                    }
                    self.node(node, at)
                }
                _ => Err(error(at, "takes [Map, TopKey, SecondKey]")),
            },
            "Join" => match self.list(arg, at)? {
                [delimiter, items] => {
                    let delimiter = self.text(delimiter, at)?;
                    let Node::List(items) = self.node(items, at)? else {
                        return Err(error(at, "joins a list"));
                    };
                    let parts = items
                        .iter()
                        .map(|i| text_of(i, at))
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(Node::Text(parts.join(&delimiter)))
                }
                _ => Err(error(at, "takes [delimiter, [values]]")),
            },
            "Select" => match self.list(arg, at)? {
                [index, items] => {
                    let index: usize = self
                        .text(index, at)?
                        .parse()
                        .map_err(|_| error(at, "an index is a whole number"))?;
                    match self.node(items, at)? {
                        Node::List(mut items) if index < items.len() => {
                            Ok(items.swap_remove(index))
                        }
                        // A list known only once deployed (`!GetAZs`, `!Cidr`).
                        Node::Unevaluated(_) => Ok(Node::Unevaluated("Fn::Select".to_owned())),
                        _ => Err(error(at, format!("no item {index}"))),
                    }
                }
                _ => Err(error(at, "takes [index, [values]]")),
            },
            "Equals" | "Not" | "And" | "Or" | "Condition" => {
                Ok(Node::Bool(self.boolean(function, arg, at, 0)?))
            }
            other => Ok(Node::Unevaluated(format!("Fn::{other}"))),
        }
    }

    fn reference(&self, name: &str, at: &str) -> Result<Node, TemplateError> {
        if let Some(parameter) = self.parameters.get(name) {
            let value = parameter.value.clone().ok_or_else(|| {
                error(
                    at,
                    format!("parameter {name} has no default: give it with --parameter {name}=..."),
                )
            })?;
            if parameter.number {
                if let Ok(n) = value.parse::<i64>() {
                    return Ok(Node::Int(n));
                }
                if let Ok(x) = value.parse::<f64>() {
                    return Ok(Node::Float(x));
                }
            }
            return Ok(Node::Text(value));
        }
        if self.resource_ids.iter().any(|id| id == name) {
            return Ok(Node::Resource(name.to_owned()));
        }
        // SAM's references to what it generates for a resource (`!Ref Api.Stage`).
        if let Some((resource, attribute)) = name.split_once('.') {
            if self.resource_ids.iter().any(|id| id == resource) {
                return Ok(Node::Attribute {
                    resource: resource.to_owned(),
                    attribute: attribute.to_owned(),
                });
            }
        }
        if name == "AWS::NoValue" {
            // What an `!If` branch gives to say "leave this out": dropped by its list or map.
            return Ok(no_value());
        }
        if name.starts_with("AWS::") {
            // A pseudo parameter (the stack's name, region...): known only once deployed.
            return Ok(Node::Text(format!("${{{name}}}")));
        }
        Err(error(
            at,
            format!("`{name}` is neither a parameter nor a resource"),
        ))
    }

    /// `!Sub`: parameters (and the variables of the two-item form) are substituted; resources,
    /// attributes and pseudo parameters stay as `${...}`, since they exist only once deployed.
    fn substitute(&self, arg: &Yaml, at: &str) -> Result<Node, TemplateError> {
        let (text, variables) = match arg {
            Yaml::Sequence(items) => match items.as_slice() {
                [text, variables] => (self.text(text, at)?, Some(self.node(variables, at)?)),
                _ => return Err(error(at, "takes a string or [string, {variables}]")),
            },
            other => (self.text(other, at)?, None),
        };
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| error(at, "a `${` without its `}`"))?;
            let name = &after[..end];
            if let Some(literal) = name.strip_prefix('!') {
                out.push_str(&format!("${{{literal}}}"));
            } else if let Some(value) = variables.as_ref().and_then(|v| v.get(name)) {
                out.push_str(&text_of(value, at)?);
            } else if let Some(parameter) = self.parameters.get(name) {
                out.push_str(
                    parameter
                        .value
                        .as_deref()
                        .ok_or_else(|| error(at, format!("parameter {name} has no default")))?,
                );
            } else {
                out.push_str(&format!("${{{name}}}"));
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(Node::Text(out))
    }

    fn condition(&self, name: &str, at: &str, depth: usize) -> Result<bool, TemplateError> {
        if let Some(known) = self.evaluated_conditions.borrow().get(name) {
            return Ok(*known);
        }
        if depth > MAX_CONDITION_DEPTH {
            return Err(error(at, format!("condition {name} refers to itself")));
        }
        let yaml = self
            .conditions
            .and_then(|c| get(c, name))
            .ok_or_else(|| error(at, format!("no condition {name} in Conditions")))?;
        let at = format!("Conditions.{name}");
        let value = match yaml {
            Yaml::Tagged(tag, inner) if tag.handle == "!" => {
                self.boolean(&tag.suffix, inner, &at, depth + 1)?
            }
            other => match entries(other, &at)?.as_slice() {
                [(key, inner)] if long_form(key).is_some() => {
                    self.boolean(long_form(key).unwrap_or_default(), inner, &at, depth + 1)?
                }
                _ => {
                    return Err(error(
                        &at,
                        "a condition is !Equals, !Not, !And, !Or or !Condition",
                    ))
                }
            },
        };
        self.evaluated_conditions
            .borrow_mut()
            .insert(name.to_owned(), value);
        Ok(value)
    }

    fn boolean(
        &self,
        function: &str,
        arg: &Yaml,
        at: &str,
        depth: usize,
    ) -> Result<bool, TemplateError> {
        let operand = |yaml: &Yaml| -> Result<bool, TemplateError> {
            match yaml {
                Yaml::Tagged(tag, inner) if tag.handle == "!" => {
                    self.boolean(&tag.suffix, inner, at, depth + 1)
                }
                other => match entries(other, at)?.as_slice() {
                    [(key, inner)] if key == "Condition" || long_form(key).is_some() => {
                        let function = if key == "Condition" {
                            "Condition"
                        } else {
                            long_form(key).unwrap_or_default()
                        };
                        self.boolean(function, inner, at, depth + 1)
                    }
                    _ => Err(error(at, "not a condition")),
                },
            }
        };
        match function {
            "Equals" => match self.list(arg, at)? {
                [a, b] => Ok(text_of(&self.node(a, at)?, at)? == text_of(&self.node(b, at)?, at)?),
                _ => Err(error(at, "!Equals takes two values")),
            },
            "Not" => match self.list(arg, at)? {
                [inner] => Ok(!operand(inner)?),
                _ => Err(error(at, "!Not takes one condition")),
            },
            "And" => self
                .list(arg, at)?
                .iter()
                .try_fold(true, |all, c| Ok(all && operand(c)?)),
            "Or" => self
                .list(arg, at)?
                .iter()
                .try_fold(false, |any, c| Ok(any || operand(c)?)),
            "Condition" => self.condition(&self.text(arg, at)?, at, depth + 1),
            other => Err(error(at, format!("!{other} is not a condition function"))),
        }
    }

    fn text(&self, yaml: &Yaml, at: &str) -> Result<String, TemplateError> {
        text_of(&self.node(yaml, at)?, at)
    }

    fn list<'a, 'y>(&self, yaml: &'a Yaml<'y>, at: &str) -> Result<&'a [Yaml<'y>], TemplateError> {
        match yaml {
            Yaml::Sequence(items) => Ok(items),
            _ => Err(error(at, "takes a list")),
        }
    }
}

fn text_of(node: &Node, at: &str) -> Result<String, TemplateError> {
    node.as_text()
        .ok_or_else(|| error(at, format!("expected a single value, found {node:?}")))
}

/// `Ref` and `Fn::X` as a map's only key: the long form of an intrinsic function.
fn long_form(key: &str) -> Option<&str> {
    if key == "Ref" {
        Some("Ref")
    } else {
        key.strip_prefix("Fn::")
    }
}

/// `!Ref AWS::NoValue` once evaluated (an `!If`'s branch): its list item or map key is left out.
fn no_value() -> Node {
    Node::Unevaluated("AWS::NoValue".to_owned())
}

fn is_no_value(yaml: &Yaml) -> bool {
    match yaml {
        Yaml::Tagged(tag, inner) if tag.handle == "!" && tag.suffix == "Ref" => {
            matches!(&**inner, Yaml::Value(Scalar::String(s)) if s == "AWS::NoValue")
        }
        _ => false,
    }
}

fn scalar_node(scalar: &Scalar) -> Node {
    match scalar {
        Scalar::Null => Node::Null,
        Scalar::Boolean(b) => Node::Bool(*b),
        Scalar::Integer(n) => Node::Int(*n),
        Scalar::FloatingPoint(x) => Node::Float(x.into_inner()),
        Scalar::String(s) => Node::Text(s.to_string()),
    }
}

fn scalar_text(yaml: &Yaml) -> Result<String, String> {
    match yaml {
        Yaml::Value(scalar) => scalar_node(scalar)
            .as_text()
            .ok_or_else(|| "a null default".to_owned()),
        Yaml::Representation(text, _, _) => Ok(text.to_string()),
        _ => Err("expected a single value".to_owned()),
    }
}

fn yaml_number(yaml: &Yaml) -> Option<f64> {
    match yaml {
        Yaml::Value(Scalar::Integer(n)) => Some(*n as f64),
        Yaml::Value(Scalar::FloatingPoint(x)) => Some(x.into_inner()),
        Yaml::Value(Scalar::String(s)) => s.parse().ok(),
        _ => None,
    }
}

fn get<'a, 'y>(yaml: &'a Yaml<'y>, key: &str) -> Option<&'a Yaml<'y>> {
    match yaml {
        Yaml::Mapping(map) => map.iter().find_map(|(k, v)| match k {
            Yaml::Value(Scalar::String(k)) if k == key => Some(v),
            _ => None,
        }),
        _ => None,
    }
}

fn entries<'a, 'y>(
    yaml: &'a Yaml<'y>,
    at: &str,
) -> Result<Vec<(String, &'a Yaml<'y>)>, TemplateError> {
    match yaml {
        Yaml::Mapping(map) => map
            .iter()
            .map(|(k, v)| match k {
                Yaml::Value(scalar) => scalar_node(scalar)
                    .as_text()
                    .map(|k| (k, v))
                    .ok_or_else(|| error(at, "a null key")),
                _ => Err(error(at, "a key that is not a single value")),
            })
            .collect(),
        _ => Err(error(at, "expected a map")),
    }
}
