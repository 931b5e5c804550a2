use super::*;

const NODE: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 1]);

fn a(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn scope(pool: bool) -> Scope {
    Scope {
        prefix: a("fd00:10::"),
        prefix_len: 64,
        pool: pool.then(|| (a("fd00:10::1000"), a("fd00:10::1002"))),
        reserved: [(NODE, a("fd00:10::10"))].into(),
        lease_time: 3600,
    }
}

fn client(duid: &[u8], mac: Option<MacAddr>) -> Client {
    Client {
        duid: duid.to_vec(),
        iaid: 1,
        mac,
    }
}

#[test]
fn a_new_duid_of_the_same_mac_takes_the_reserved_address_over() {
    let mut t = Table::new(scope(false));
    let llt = client(
        &[0, 1, 0, 1, 9, 9, 9, 9, 0x52, 0x54, 0, 0, 0, 1],
        Some(NODE),
    );
    let ll = client(&[0, 3, 0, 1, 0x52, 0x54, 0, 0, 0, 1], Some(NODE));
    assert_eq!(t.choose(&llt, None, 100), Ok(a("fd00:10::10")));
    assert!(t.bind(&llt, a("fd00:10::10"), 100));
    assert!(!t.bind(&llt, a("fd00:10::10"), 200), "a renewal is not new");
    assert_eq!(t.choose(&ll, None, 300), Ok(a("fd00:10::10")));
    assert!(t.bind(&ll, a("fd00:10::10"), 300));
    assert_eq!(t.bindings().count(), 1);
    assert!(t.binding_of(&llt).is_none());
    assert_eq!(t.mac_of_duid(&ll.duid), Some(NODE));
}

#[test]
fn unknown_clients_get_nothing_without_a_pool_and_pool_addresses_with_one() {
    let t = Table::new(scope(false));
    let en = client(&[0, 2, 0, 0, 0, 9, 1], None);
    let other = client(
        &[0, 3, 0, 1, 2, 0, 0, 0, 0, 9],
        Some(MacAddr([2, 0, 0, 0, 0, 9])),
    );
    assert_eq!(t.choose(&en, None, 1), Err(NoAddress::NoMac));
    assert_eq!(t.choose(&other, None, 1), Err(NoAddress::NotReserved));
    let mut t = Table::new(scope(true));
    let first = t.choose(&en, None, 1).unwrap();
    assert_eq!(first, a("fd00:10::1000"));
    t.bind(&en, first, 1);
    assert_eq!(t.choose(&en, None, 2), Ok(first), "keeps its address");
    assert!(!t.may_use(&other, first, 2));
    assert_eq!(t.choose(&other, Some(first), 2), Ok(a("fd00:10::1001")));
    // A reserved address is never a pool address, even when hinted.
    assert!(!t.may_use(&en, a("fd00:10::10"), 2));
    // Exhaustion, then the expired one comes back.
    t.bind(&other, a("fd00:10::1001"), 2);
    let third = client(&[0, 2, 0, 0, 0, 9, 3], None);
    t.bind(&third, a("fd00:10::1002"), 2);
    let fourth = client(&[0, 2, 0, 0, 0, 9, 4], None);
    assert_eq!(t.choose(&fourth, None, 3), Err(NoAddress::PoolExhausted));
    assert_eq!(t.choose(&fourth, None, 3603), Ok(a("fd00:10::1000")));
}

#[test]
fn release_decline_and_gc() {
    let mut t = Table::new(scope(true));
    let en = client(&[0, 2, 1], None);
    t.bind(&en, a("fd00:10::1000"), 10);
    let _ = t.take_unsynced();
    assert!(!t.release(&client(&[0, 2, 2], None), a("fd00:10::1000")));
    assert!(t.release(&en, a("fd00:10::1000")));
    assert!(!t.is_synced(a("fd00:10::1000")));
    assert!(t.may_use(&client(&[0, 2, 2], None), a("fd00:10::1000"), 11));
    t.bind(&en, a("fd00:10::1000"), 12);
    assert_eq!(t.decline(&en, a("fd00:10::1000"), 12), Ok(()));
    assert!(t.is_declined(a("fd00:10::1000"), 13));
    assert_eq!(t.choose(&en, None, 13), Ok(a("fd00:10::1001")));
    assert!(t.gc(12 + DECLINE_HOLD));
    assert!(!t.is_declined(a("fd00:10::1000"), 12 + DECLINE_HOLD));
    // A node's declined reservation: no address until the hold ends.
    let node = client(&[0, 3, 0, 1, 0x52, 0x54, 0, 0, 0, 1], Some(NODE));
    t.bind(&node, a("fd00:10::10"), 20);
    // The same DUID and IAID without evidence of the node's MAC (another
    // host replaying the node's DUID): refused.
    let replay = client(&node.duid, None);
    assert_eq!(
        t.decline(&replay, a("fd00:10::10"), 20),
        Err(DeclineRefused::NotTheNode)
    );
    assert_eq!(t.choose(&node, None, 21), Ok(a("fd00:10::10")));
    assert_eq!(t.decline(&node, a("fd00:10::10"), 20), Ok(()));
    assert_eq!(t.choose(&node, None, 21), Err(NoAddress::ReservedDeclined));
}

#[test]
fn declines_are_rate_limited() {
    let mut t = Table::new(Scope {
        pool: Some((a("fd00:10::1000"), a("fd00:10::10ff"))),
        ..scope(true)
    });
    let mut refused = 0;
    for i in 0..(DECLINE_BURST as u8 + 3) {
        let c = client(&[0, 2, i], None);
        let addr = t.choose(&c, None, 100).unwrap();
        t.bind(&c, addr, 100);
        if t.decline(&c, addr, 100) == Err(DeclineRefused::RateLimited) {
            refused += 1;
        }
    }
    assert_eq!(refused, 3);
    let c = client(&[0, 2, 99], None);
    let addr = t.choose(&c, None, 100 + DECLINE_WINDOW).unwrap();
    t.bind(&c, addr, 100 + DECLINE_WINDOW);
    assert_eq!(t.decline(&c, addr, 100 + DECLINE_WINDOW), Ok(()));
}

#[test]
fn gc_forgets_the_mac_of_a_duid_without_a_binding() {
    let mut t = Table::new(scope(true));
    let node = client(&[0, 3, 0, 1, 0x52, 0x54, 0, 0, 0, 1], Some(NODE));
    t.bind(&node, a("fd00:10::10"), 10);
    let other = client(&[0, 2, 7], Some(MacAddr([2, 0, 0, 0, 0, 7])));
    t.bind(&other, a("fd00:10::1000"), 10);
    assert_eq!(t.decline(&other, a("fd00:10::1000"), 10), Ok(()));
    t.gc(11);
    assert_eq!(t.mac_of_duid(&node.duid), Some(NODE));
    assert_eq!(t.mac_of_duid(&other.duid), None);
}

#[test]
fn the_file_round_trips_and_drops_what_no_longer_fits() {
    let mut t = Table::new(scope(true));
    let node = client(&[0, 3, 0, 1, 0x52, 0x54, 0, 0, 0, 1], Some(NODE));
    let en = client(&[0, 2, 1], None);
    t.bind(&node, a("fd00:10::10"), 10);
    t.bind(&en, a("fd00:10::1000"), 10);
    let f = t.to_file();
    let json = serde_json::to_string(&f).unwrap();
    let back: BindingFile = serde_json::from_str(&json).unwrap();
    let (t2, notes) = Table::from_file(scope(true), &back);
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(t2.to_file(), f);
    assert_eq!(t2.mac_of_duid(&node.duid), Some(NODE));
    // The pool is gone and the node moved: both dropped with a note.
    let mut s = scope(false);
    s.reserved = [(NODE, a("fd00:10::11"))].into();
    let (t3, notes) = Table::from_file(s, &back);
    assert_eq!(t3.bindings().count(), 0);
    assert_eq!(notes.len(), 2, "{notes:?}");
}

#[test]
fn on_link() {
    let s = scope(false);
    assert!(s.on_link(a("fd00:10::ffff")));
    assert!(!s.on_link(a("fd00:11::1")));
}
