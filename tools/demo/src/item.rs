//! The table's items as the demo reads them, one attribute at a time: an attribute that is
//! missing or of another type reads as `None` (or empty).

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

pub type Item = HashMap<String, AttributeValue>;

pub fn n(item: &Item, name: &str) -> Option<u64> {
    item.get(name)?.as_n().ok()?.parse().ok()
}

pub fn s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)?.as_s().ok().map(String::as_str)
}

pub fn numbers(item: &Item, name: &str) -> Vec<u64> {
    item.get(name)
        .and_then(|v| v.as_l().ok())
        .map(|l| {
            l.iter()
                .filter_map(|v| v.as_n().ok()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

pub fn strings(item: &Item, name: &str) -> Vec<String> {
    item.get(name)
        .and_then(|v| v.as_l().ok())
        .map(|l| l.iter().filter_map(|v| v.as_s().ok().cloned()).collect())
        .unwrap_or_default()
}
