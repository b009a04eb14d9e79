use std::fmt;

/// A WeCom userid: 1 to 64 characters of letters, digits and `_ - . @` (what WeCom accepts).
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct StaffId(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("staff id must be 1 to 64 characters of letters, digits, '_', '-', '.' or '@'")]
pub struct InvalidStaffId;

impl StaffId {
    pub fn parse(raw: &str) -> Result<Self, InvalidStaffId> {
        let valid = (1..=64).contains(&raw.len())
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'@'));
        if valid {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InvalidStaffId)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for StaffId {
    type Error = InvalidStaffId;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<StaffId> for String {
    fn from(value: StaffId) -> Self {
        value.0
    }
}

impl fmt::Display for StaffId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A code's id, which is also the `state` of its WeCom contact way (so callbacks name it):
/// 1 to 30 characters (WeCom's `state` limit) of letters, digits, `-` and `_`.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct CodeId(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("code id must be 1 to 30 characters of letters, digits, '-' or '_'")]
pub struct InvalidCodeId;

impl CodeId {
    pub fn parse(raw: &str) -> Result<Self, InvalidCodeId> {
        let valid = (1..=30).contains(&raw.len())
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if valid {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InvalidCodeId)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for CodeId {
    type Error = InvalidCodeId;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<CodeId> for String {
    fn from(value: CodeId) -> Self {
        value.0
    }
}

impl fmt::Display for CodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
