crate::ids::validated_id!(
    /// A WeCom userid, as WeCom accepts them.
    StaffId, InvalidStaffId, "staff id", max = 64, also = ['_', '-', '.', '@']
);

crate::ids::validated_id!(
    /// A code's id, which is also the `state` of its WeCom contact way (so callbacks name
    /// it); WeCom's `state` holds at most 30 characters.
    CodeId, InvalidCodeId, "code id", max = 30, also = ['-', '_']
);

crate::ids::validated_id!(
    /// A WeCom department id (WeCom's are numbers; kept as text as WeCom sends them).
    DepartmentId, InvalidDepartmentId, "department id", max = 32, also = []
);
