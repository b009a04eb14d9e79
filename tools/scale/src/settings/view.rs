//! Reading typed settings out of the evaluated template, each miss or mistyped value an error
//! that names the key's path.

use super::template::{error, Node, TemplateError};

/// A node and where it is in the template.
#[derive(Debug, Clone)]
pub struct View<'n> {
    pub node: &'n Node,
    pub at: String,
}

impl<'n> View<'n> {
    pub fn new(node: &'n Node, at: impl Into<String>) -> Self {
        Self {
            node,
            at: at.into(),
        }
    }

    /// A key the simulation needs: its absence is an error.
    pub fn key(&self, key: &str) -> Result<View<'n>, TemplateError> {
        self.opt(key).ok_or_else(|| {
            error(
                &format!("{}.{key}", self.at),
                "missing, and the simulation reads it",
            )
        })
    }

    /// A key with a documented default when absent.
    pub fn opt(&self, key: &str) -> Option<View<'n>> {
        self.node
            .get(key)
            .map(|node| View::new(node, format!("{}.{key}", self.at)))
    }

    pub fn text(&self) -> Result<String, TemplateError> {
        match self.node {
            Node::Text(text) => Ok(text.clone()),
            Node::Int(n) => Ok(n.to_string()),
            Node::Float(x) => Ok(x.to_string()),
            Node::Bool(b) => Ok(b.to_string()),
            other => Err(self.unexpected("a single value", other)),
        }
    }

    /// A whole number, written as one or as a string (`"5"`, as Mappings hold them).
    pub fn u64(&self) -> Result<u64, TemplateError> {
        match self.node {
            Node::Int(n) => {
                u64::try_from(*n).map_err(|_| error(&self.at, format!("{n} is below 0")))
            }
            Node::Text(text) => text
                .trim()
                .parse()
                .map_err(|_| error(&self.at, format!("`{text}` is not a whole number"))),
            other => Err(self.unexpected("a whole number", other)),
        }
    }

    pub fn u32(&self) -> Result<u32, TemplateError> {
        let n = self.u64()?;
        u32::try_from(n).map_err(|_| error(&self.at, format!("{n} is too large")))
    }

    pub fn bool(&self) -> Result<bool, TemplateError> {
        match self.node {
            Node::Bool(b) => Ok(*b),
            Node::Text(text) if text.eq_ignore_ascii_case("true") => Ok(true),
            Node::Text(text) if text.eq_ignore_ascii_case("false") => Ok(false),
            other => Err(self.unexpected("true or false", other)),
        }
    }

    /// The logical id a `!Ref X` or `!GetAtt X.Arn` points at.
    pub fn resource(&self) -> Result<String, TemplateError> {
        match self.node {
            Node::Resource(id) | Node::Attribute { resource: id, .. } => Ok(id.clone()),
            other => Err(self.unexpected("a reference to a resource (!Ref or !GetAtt)", other)),
        }
    }

    pub fn entries(&self) -> Result<Vec<(String, View<'n>)>, TemplateError> {
        match self.node {
            Node::Map(pairs) => Ok(pairs
                .iter()
                .map(|(k, v)| (k.clone(), View::new(v, format!("{}.{k}", self.at))))
                .collect()),
            other => Err(self.unexpected("a map", other)),
        }
    }

    pub fn items(&self) -> Result<Vec<View<'n>>, TemplateError> {
        match self.node {
            Node::List(items) => Ok(items
                .iter()
                .enumerate()
                .map(|(i, v)| View::new(v, format!("{}[{i}]", self.at)))
                .collect()),
            other => Err(self.unexpected("a list", other)),
        }
    }

    fn unexpected(&self, wanted: &str, found: &Node) -> TemplateError {
        match found {
            Node::Unevaluated(function) => error(
                &self.at,
                format!("is {function}, which the simulation's reader does not evaluate"),
            ),
            other => error(&self.at, format!("expected {wanted}, found {other:?}")),
        }
    }
}
