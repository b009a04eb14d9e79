//! Ids that arrive from outside (paths, callbacks, admin input) and end up inside DynamoDB
//! keys, SQS group ids and WeCom's `state`: each is validated once, where it enters.

/// Declares a string newtype that can only hold 1 to `$max` ASCII letters and digits plus
/// the listed punctuation bytes, with its error type, serde through `String`, and `Display`.
macro_rules! validated_id {
    ($(#[$doc:meta])* $name:ident, $error:ident, $what:literal, max = $max:literal, also = [$($extra:literal),*]) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        // Shared, not owned: an id is cloned into every list, index entry and message that
        // names it, and one allocation for all of them keeps millions of codes (the scale
        // simulation's) within memory and their clones cheap. `ArcStr`, not `Arc<str>`: one
        // word per clone instead of two (the count and the text share the allocation).
        pub struct $name(arcstr::ArcStr);

        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $error;

        impl std::fmt::Display for $error {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(concat!($what, " must be 1 to ", $max, " characters of letters, digits" $(, ", '", $extra, "'")*))
            }
        }

        impl std::error::Error for $error {}

        impl $name {
            pub fn parse(raw: &str) -> Result<Self, $error> {
                let valid = (1..=$max).contains(&raw.len())
                    && raw.bytes().all(|b| b.is_ascii_alphanumeric() $(|| u32::from(b) == u32::from($extra))*);
                if valid {
                    Ok(Self(raw.into()))
                } else {
                    Err($error)
                }
            }

            pub fn as_str(&self) -> &str {
                self.0.as_str()
            }
        }

        impl TryFrom<String> for $name {
            type Error = $error;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                Self::parse(&value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> Self {
                value.0.as_str().to_owned()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

validated_id!(
    /// A tenant id as it appears in `/wecom/{tenant}/callback`, safe inside DynamoDB keys
    /// and SQS group ids.
    TenantId, InvalidTenantId, "tenant id", max = 64, also = ['-', '_']
);

validated_id!(
    /// A WeCom userid, as WeCom accepts them.
    StaffId, InvalidStaffId, "staff id", max = 64, also = ['_', '-', '.', '@']
);

validated_id!(
    /// A code's id, which is also the `state` of its WeCom contact way (so callbacks name
    /// it); WeCom's `state` holds at most 30 characters.
    CodeId, InvalidCodeId, "code id", max = 30, also = ['-', '_']
);

validated_id!(
    /// A WeCom department id (WeCom's are numbers; kept as text as WeCom sends them).
    DepartmentId, InvalidDepartmentId, "department id", max = 32, also = []
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_ids_are_limited_to_key_safe_characters() {
        assert!(TenantId::parse("acme-01_x").is_ok());
        for bad in ["", "a#b", "a/b", "空", &"a".repeat(65)] {
            assert_eq!(TenantId::parse(bad), Err(InvalidTenantId), "{bad:?}");
        }
    }
}
