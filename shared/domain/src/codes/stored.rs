use crate::ids::StaffId;
use crate::membership::CodeConfig;

/// A code as the admin configured it, with the WeCom contact way it owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCode {
    pub config: CodeConfig,
    /// WeCom's id of the contact way; `None` until the admin's create call succeeded.
    pub config_id: Option<String>,
    /// The list WeCom created the contact way with: what WeCom holds until the first push.
    pub created_with: Vec<StaffId>,
}
