//! Which user records (`dns.records`) contradict the records the appliance
//! generates, or each other — checked by validation, so that `check`,
//! `render zone` and `serve` never disagree about one file.
//!
//! Rules (by owner name, exact match; `*.apps` is its own owner):
//! - a CNAME cannot share its name with any other record (RFC 1034 §3.6.2),
//!   generated or user;
//! - a user record of a type the appliance already serves at that name
//!   (`api` A, a node's A, the etcd SRV, …) would silently add to or shadow
//!   it, so it is refused;
//! - a user record identical to an earlier one is a duplicate.

use super::names::{RData, Record};

/// `(index into user, message)` for every conflicting user record.
pub fn find(generated: &[&Record], user: &[Record]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, u) in user.iter().enumerate() {
        let is_cname = |r: &Record| matches!(r.data, RData::Cname(_));
        let here: Vec<&Record> = generated
            .iter()
            .copied()
            .filter(|g| g.name == u.name)
            .collect();
        if let Some(g) = here.first().filter(|_| is_cname(u)) {
            out.push((
                i,
                format!(
                    "CNAME at {} conflicts with the {} record the appliance serves there (a CNAME can have no other data)",
                    u.name,
                    g.data.type_name()
                ),
            ));
            continue;
        }
        if let Some(g) = here
            .iter()
            .find(|g| g.data.type_name() == u.data.type_name() || is_cname(g))
        {
            out.push((
                i,
                format!(
                    "{} already has the {} record the appliance serves ({}); a user {} record there would change it",
                    u.name,
                    g.data.type_name(),
                    g.data,
                    u.data.type_name()
                ),
            ));
            continue;
        }
        let earlier = user[..i]
            .iter()
            .enumerate()
            .find(|(_, e)| e.name == u.name && (is_cname(e) || is_cname(u) || e.data == u.data));
        if let Some((j, e)) = earlier {
            let msg = if e.data == u.data {
                format!(
                    "duplicate of dns.records[{j}] ({} {})",
                    u.name,
                    u.data.type_name()
                )
            } else {
                format!(
                    "{} at {} conflicts with dns.records[{j}] ({}): a CNAME can have no other data",
                    u.data.type_name(),
                    u.name,
                    e.data.type_name()
                )
            };
            out.push((i, msg));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str, data: RData) -> Record {
        Record {
            name: name.into(),
            ttl: 30,
            data,
        }
    }

    #[test]
    fn rules() {
        let api = r("api.c.x.", RData::A("10.0.0.1".parse().unwrap()));
        let node = r("m0.c.x.", RData::A("10.0.0.10".parse().unwrap()));
        let generated = [&api, &node];
        let cname = |n: &str| r(n, RData::Cname("elsewhere.example.".into()));
        let txt = |n: &str, t: &str| r(n, RData::Txt(t.into()));
        let user = vec![
            cname("api.c.x."),                                    // 0: CNAME over generated A
            r("m0.c.x.", RData::A("10.0.0.99".parse().unwrap())), // 1: second A at a node
            txt("m0.c.x.", "ok"),                                 // 2: fine
            txt("m0.c.x.", "ok"),                                 // 3: duplicate of 2
            cname("www.c.x."),                                    // 4: fine
            r("www.c.x.", RData::A("10.0.0.5".parse().unwrap())), // 5: A beside user CNAME
            txt("other.c.x.", "fine"),                            // 6: fine
        ];
        let found = find(&generated, &user);
        let idx: Vec<usize> = found.iter().map(|(i, _)| *i).collect();
        assert_eq!(idx, vec![0, 1, 3, 5], "{found:#?}");
        assert!(
            found[0]
                .1
                .contains("CNAME at api.c.x. conflicts with the A record")
        );
        assert!(found[1].1.contains("already has the A record"));
        assert!(found[2].1.contains("duplicate of dns.records[2]"));
        assert!(found[3].1.contains("conflicts with dns.records[4] (CNAME)"));
    }
}
