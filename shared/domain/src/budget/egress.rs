//! The addresses WeCom sees qrsync's calls come from, and which of them a tenant's calls are
//! charged to (docs/rules.md rule 6, docs/design/egress.md).
//!
//! WeCom limits every caller address to 20,000 calls a minute and 600,000 an hour per API,
//! across every corp calling from it (docs/wecom-api.md §7). Each tenant is charged to one
//! address, chosen by rendezvous hashing (highest random weight): every address scores the
//! tenant with a hash of both, and the highest score wins. The choice depends on nothing but
//! the tenant and the list, so every function and container makes the same one without
//! asking anyone, and adding an address moves only the tenants the new address now wins
//! (about one in N+1), removing one moves only its own tenants.

use crate::ids::TenantId;
use sha2::{Digest, Sha256};

/// The name of the one address everything leaves from when no fixed egress is configured:
/// a Lambda function outside a VPC calls from AWS's pool, and the local world from one host.
pub const SHARED_ADDRESS: &str = "shared";
/// Most addresses a deployment lists (the template offers 1 to 4; room to grow).
pub const MOST_ADDRESSES: usize = 16;
/// Longest address name taken: an IPv4 or IPv6 address in text fits well within it.
const LONGEST_ADDRESS: usize = 64;

/// The caller addresses of a deployment, in no particular order (the mapping ignores it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressAddresses {
    addresses: Vec<String>,
}

impl Default for EgressAddresses {
    /// One address, `SHARED_ADDRESS`: what a deployment without fixed egress is modelled as.
    fn default() -> Self {
        Self {
            addresses: vec![SHARED_ADDRESS.to_owned()],
        }
    }
}

impl EgressAddresses {
    /// The addresses of `list`, comma-separated (the template's `EgressIps` output); an empty
    /// list, or `shared`, is the one shared address. Refuses empty names, duplicates, names
    /// longer than 64 characters or with characters outside an IP address's, and more than 16
    /// addresses.
    pub fn parse(list: &str) -> Result<Self, String> {
        let names: Vec<&str> = list.split(',').map(str::trim).collect();
        if names.iter().all(|name| name.is_empty()) || names == [SHARED_ADDRESS] {
            return Ok(Self::default());
        }
        if names.len() > MOST_ADDRESSES {
            return Err(format!(
                "{} egress addresses listed; at most {MOST_ADDRESSES}",
                names.len()
            ));
        }
        let mut addresses: Vec<String> = Vec::with_capacity(names.len());
        for name in names {
            let usable = !name.is_empty()
                && name.len() <= LONGEST_ADDRESS
                && name
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() || c == '.' || c == ':');
            if !usable {
                return Err(format!(
                    "egress address {:?} is not an IP address",
                    name.chars().take(LONGEST_ADDRESS).collect::<String>()
                ));
            }
            if addresses.iter().any(|known| known == name) {
                return Err(format!("egress address {name} is listed twice"));
            }
            addresses.push(name.to_owned());
        }
        Ok(Self { addresses })
    }

    pub fn addresses(&self) -> &[String] {
        &self.addresses
    }

    /// The address `tenant`'s calls are charged to: the one scoring the tenant highest.
    pub fn address_for(&self, tenant: &TenantId) -> &str {
        self.addresses
            .iter()
            .max_by_key(|address| score(address, tenant))
            .map_or(SHARED_ADDRESS, String::as_str)
    }
}

/// The weight `address` gives `tenant`: the first eight bytes of a SHA-256 of both, with a
/// separator no address contains, so ("1.2", "3") and ("1.23", "") cannot collide.
fn score<'a>(address: &'a str, tenant: &TenantId) -> (u64, &'a str) {
    let digest = Sha256::new()
        .chain_update(address.as_bytes())
        .chain_update(b"/")
        .chain_update(tenant.as_str().as_bytes())
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    // Ties (one in 2^64) go to the greater name, the same everywhere.
    (u64::from_be_bytes(first), address)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenants(n: usize) -> Vec<TenantId> {
        (0..n)
            .map(|i| TenantId::parse(&format!("t{i:05}")).expect("a tenant id"))
            .collect()
    }

    #[test]
    fn without_addresses_every_tenant_is_charged_to_the_one_shared_address() {
        let egress = EgressAddresses::parse("").expect("empty is the default");
        assert_eq!(egress, EgressAddresses::default());
        let named = EgressAddresses::parse("shared").expect("the shared address by its name");
        assert_eq!(named, EgressAddresses::default());
        for tenant in tenants(20) {
            assert_eq!(egress.address_for(&tenant), SHARED_ADDRESS);
        }
    }

    #[test]
    fn tenants_spread_over_the_addresses_about_evenly() {
        let egress = EgressAddresses::parse("203.0.113.1,203.0.113.2,203.0.113.3,203.0.113.4")
            .expect("four addresses");
        let mut counts = std::collections::HashMap::new();
        for tenant in tenants(4_000) {
            *counts.entry(egress.address_for(&tenant)).or_insert(0u32) += 1;
        }
        assert_eq!(counts.len(), 4);
        for (address, count) in counts {
            assert!(
                (850..=1_150).contains(&count),
                "{address}: {count} of 4,000"
            );
        }
    }

    #[test]
    fn adding_an_address_moves_only_the_tenants_it_wins_and_about_one_in_n_plus_one() {
        let before =
            EgressAddresses::parse("203.0.113.1,203.0.113.2,203.0.113.3").expect("three addresses");
        let after = EgressAddresses::parse("203.0.113.1,203.0.113.2,203.0.113.3,198.51.100.7")
            .expect("four addresses");
        let mut moved = 0;
        for tenant in tenants(4_000) {
            let (was, is) = (before.address_for(&tenant), after.address_for(&tenant));
            if was != is {
                assert_eq!(is, "198.51.100.7", "a tenant moved between old addresses");
                moved += 1;
            }
        }
        assert!((850..=1_150).contains(&moved), "{moved} of 4,000 moved");
    }

    #[test]
    fn removing_an_address_moves_only_its_own_tenants_and_order_does_not_matter() {
        let all =
            EgressAddresses::parse("203.0.113.1,203.0.113.2,203.0.113.3").expect("three addresses");
        let reordered = EgressAddresses::parse("203.0.113.3, 203.0.113.1 ,203.0.113.2")
            .expect("the same three");
        let fewer = EgressAddresses::parse("203.0.113.1,203.0.113.3").expect("two addresses");
        for tenant in tenants(1_000) {
            let was = all.address_for(&tenant);
            assert_eq!(reordered.address_for(&tenant), was);
            if was != "203.0.113.2" {
                assert_eq!(fewer.address_for(&tenant), was);
            }
        }
    }

    #[test]
    fn a_list_with_a_blank_a_duplicate_a_name_or_too_many_addresses_is_refused() {
        for bad in [
            "203.0.113.1,,203.0.113.2",
            "203.0.113.1,203.0.113.1",
            "nat-gateway-a",
            "203.0.113.1;drop",
        ] {
            assert!(EgressAddresses::parse(bad).is_err(), "{bad} was taken");
        }
        let many: Vec<String> = (0..17).map(|i| format!("10.0.0.{i}")).collect();
        let error = EgressAddresses::parse(&many.join(",")).expect_err("17 addresses");
        assert!(error.contains("at most 16"), "{error}");
    }
}
