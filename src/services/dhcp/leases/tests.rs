//! Unit tests of [`super`] (leases).

use super::*;

fn mac(n: u8) -> MacAddr {
    MacAddr([0x52, 0x54, 0, 0, 0, n])
}
fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, n)
}
fn cl(n: u8) -> Client {
    Client {
        mac: mac(n),
        client_id: None,
    }
}
fn table(pool: bool) -> LeaseTable {
    LeaseTable::new(Scope::new(
        "10.0.0.0/24".parse().unwrap(),
        pool.then_some((ip(100), ip(102))),
        [(mac(1), ip(10)), (mac(2), ip(11))],
        3600,
    ))
}
const T0: u64 = 1_000_000;

#[test]
fn reserved_macs_get_their_ip_and_unknown_need_a_pool() {
    let t = table(false);
    assert_eq!(t.choose(&cl(1), Some(ip(50)), T0), Ok(ip(10)));
    assert_eq!(t.choose(&cl(9), None, T0), Err(NoAddress::NotServed));
    assert!(!t.serves(&cl(9)));
    assert!(t.may_use(&cl(1), ip(10), T0));
    assert!(!t.may_use(&cl(1), ip(11), T0));
    assert!(!t.may_use(&cl(2), ip(10), T0));
    let t = table(true);
    assert_eq!(t.choose(&cl(9), None, T0), Ok(ip(100)));
    assert_eq!(t.choose(&cl(9), Some(ip(102)), T0), Ok(ip(102)));
    // A requested reserved or out-of-pool address is not granted.
    assert_eq!(t.choose(&cl(9), Some(ip(10)), T0), Ok(ip(100)));
    assert!(!t.may_use(&cl(9), ip(10), T0));
    assert!(!t.may_use(&cl(9), ip(99), T0));
}

#[test]
fn pool_allocation_offers_expiry_and_exhaustion() {
    let mut t = table(true);
    let a = t.choose(&cl(7), None, T0).unwrap();
    t.offer(&cl(7), a, None, T0);
    // The offer holds the address against others.
    assert!(!t.may_use(&cl(8), a, T0 + 1));
    let b = t.choose(&cl(8), Some(a), T0 + 1).unwrap();
    assert_ne!(a, b);
    t.bind(&cl(8), b, Some("eight"), T0 + 1);
    let c = t.choose(&cl(9), None, T0 + 2).unwrap();
    t.bind(&cl(9), c, None, T0 + 2);
    assert_eq!(
        t.choose(&cl(6), None, T0 + 3),
        Err(NoAddress::PoolExhausted)
    );
    // After the offer hold the offered address is free again.
    assert_eq!(t.choose(&cl(6), None, T0 + OFFER_HOLD + 1), Ok(a));
    // Same client, same address.
    assert_eq!(t.choose(&cl(8), None, T0 + 10), Ok(b));
    // After the lease expires, the oldest expired address is reused.
    let later = T0 + 2 + 3600;
    assert!(!t.lease_at(b).unwrap().active(later));
    t.gc(later);
    assert_eq!(t.lease_at(a), None, "expired offer collected");
    assert_eq!(t.choose(&cl(6), None, later), Ok(a));
    t.bind(&cl(6), a, None, later);
    assert_eq!(t.choose(&cl(5), None, later), Ok(b));
    t.bind(&cl(5), b, None, later);
    assert_eq!(t.lease_of(&cl(8)), None, "old holder's record replaced");
}

#[test]
fn client_identifier_identifies_pool_clients_not_reserved_ones() {
    let mut t = table(true);
    let c1 = Client {
        mac: mac(20),
        client_id: Some(vec![1, 2, 3]),
    };
    let a = t.choose(&c1, None, T0).unwrap();
    t.bind(&c1, a, None, T0);
    // Same client id from another NIC: same lease.
    let c2 = Client {
        mac: mac(21),
        client_id: Some(vec![1, 2, 3]),
    };
    assert_eq!(t.choose(&c2, None, T0), Ok(a));
    // Same MAC, other client id: another client.
    let c3 = Client {
        mac: mac(20),
        client_id: Some(vec![9]),
    };
    assert!(!t.may_use(&c3, a, T0));
    // A reserved MAC is matched by MAC whatever its client id.
    let r = Client {
        mac: mac(1),
        client_id: Some(b"\xff\x00\x01duid".to_vec()),
    };
    assert_eq!(t.choose(&r, None, T0), Ok(ip(10)));
    t.bind(&r, ip(10), Some("m0"), T0);
    assert!(t.may_use(&cl(1), ip(10), T0));
    assert!(t.release(&cl(1), ip(10), T0 + 5));
}

#[test]
fn release_and_decline() {
    let mut t = table(true);
    let a = t.choose(&cl(7), None, T0).unwrap();
    t.bind(&cl(7), a, None, T0);
    assert!(!t.release(&cl(8), a, T0 + 1), "only the holder releases");
    assert!(t.release(&cl(7), a, T0 + 1));
    assert!(
        !t.release(&cl(7), a, T0 + 1),
        "second release changes nothing"
    );
    assert_eq!(t.lease_at(a).unwrap().state_name(T0 + 1), "released");
    assert!(t.may_use(&cl(8), a, T0 + 2), "released address is free");
    // Sticky: the releasing client gets it back while free.
    assert_eq!(t.choose(&cl(7), None, T0 + 2), Ok(a));
    t.bind(&cl(7), a, None, T0 + 2);
    assert!(!t.decline(&cl(8), a, T0 + 3));
    assert!(t.decline(&cl(7), a, T0 + 3));
    assert!(t.is_declined(a, T0 + 4));
    assert!(!t.may_use(&cl(7), a, T0 + 4));
    assert_ne!(t.choose(&cl(7), None, T0 + 4), Ok(a));
    assert!(t.gc(T0 + 3 + DECLINE_HOLD));
    assert!(t.may_use(&cl(7), a, T0 + 3 + DECLINE_HOLD));
    // A declined reserved address: no offer until the hold ends.
    t.bind(&cl(1), ip(10), None, T0);
    assert!(t.decline(&cl(1), ip(10), T0));
    assert_eq!(
        t.choose(&cl(1), None, T0 + 1),
        Err(NoAddress::ReservedDeclined)
    );
    assert_eq!(t.choose(&cl(1), None, T0 + DECLINE_HOLD), Ok(ip(10)));
}

#[test]
fn file_round_trip_and_reconciliation() {
    let mut t = table(true);
    t.bind(&cl(1), ip(10), Some("m0"), T0);
    let c = Client {
        mac: mac(30),
        client_id: Some(vec![1, 0xab]),
    };
    t.bind(&c, ip(100), Some("pc"), T0);
    t.offer(&cl(31), ip(101), None, T0);
    t.bind(&cl(32), ip(102), None, T0);
    t.decline(&cl(32), ip(102), T0);
    let f = t.to_file();
    assert_eq!(f.leases.len(), 2, "offers are not persisted: {f:?}");
    let json = serde_json::to_string(&f).unwrap();
    assert!(json.contains("\"clientId\":\"01ab\""), "{json}");
    let back: LeaseFile = serde_json::from_str(&json).unwrap();
    assert_eq!(back, f);
    let (t2, notes) = LeaseTable::from_file(table(true).scope.clone(), &back);
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(t2.lease_of(&c).unwrap().ip, ip(100));
    assert!(!t2.may_use(&cl(40), ip(100), T0 + 1));
    assert!(t2.is_declined(ip(102), T0 + 1));
    // Under a new plan: mac 1 now reserved elsewhere, 10.0.0.100 reserved
    // for a new node → both records dropped with a note.
    let scope = Scope::new(
        "10.0.0.0/24".parse().unwrap(),
        Some((ip(100), ip(102))),
        [(mac(1), ip(12)), (mac(3), ip(100))],
        3600,
    );
    let (t3, notes) = LeaseTable::from_file(scope, &back);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(t3.leases().is_empty());
}

#[test]
fn lease_file_rejects_garbage() {
    assert!(serde_json::from_str::<LeaseFile>("{\"version\":1}").is_err());
    assert!(
        serde_json::from_str::<LeaseFile>(
            r#"{"version":1,"leases":[{"ip":"10.0.0.1","mac":"zz","state":"bound","expires":1}]}"#
        )
        .is_err()
    );
}

#[test]
fn ha_merge_takes_the_peers_newer_pool_leases_only() {
    let mut a = table(true);
    let mut b = table(true);
    // Client 7 binds through A.
    a.bind(&cl(7), ip(100), Some("seven"), T0);
    a.bind(&cl(1), ip(10), None, T0);
    let peer: Vec<Lease> = a.leases().into_iter().cloned().collect();
    assert_eq!(
        b.merge_peer(&peer, T0 + 1),
        vec![ip(100)],
        "the reservation is not shared"
    );
    assert!(!b.is_synced(ip(100)), "taken leases go to the lease file");
    // B no longer hands that address to someone else.
    assert!(!b.may_use(&cl(8), ip(100), T0 + 2));
    assert_eq!(b.choose(&cl(8), None, T0 + 2), Ok(ip(101)));
    assert_eq!(b.lease_of(&cl(7)).map(|l| l.ip), Some(ip(100)));
    // Again: nothing newer. A renewal through B wins over A's older record.
    assert!(b.merge_peer(&peer, T0 + 3).is_empty());
    b.bind(&cl(7), ip(100), Some("seven"), T0 + 100);
    let newer: Vec<Lease> = b.leases().into_iter().cloned().collect();
    assert_eq!(a.merge_peer(&newer, T0 + 101), vec![ip(100)]);
    assert!(
        b.merge_peer(&peer, T0 + 102).is_empty(),
        "an older record never wins"
    );
    // Expired or released records are not taken.
    let mut c = table(true);
    assert!(c.merge_peer(&newer, T0 + 100_000).is_empty());
}

#[test]
fn a_long_client_id_is_kept_as_its_digest_and_the_client_keeps_its_address() {
    let mut t = table(true);
    let long = Client {
        mac: mac(7),
        client_id: Some(vec![0xab; 255]),
    };
    let a = t.choose(&long, None, T0).unwrap();
    let l = t.bind(&long, a, None, T0);
    assert_eq!(
        l.client_id.as_deref().map(str::len),
        Some(66),
        "33 bytes, hex"
    );
    // The same client (same long id) is recognised again.
    assert_eq!(t.lease_of(&long).map(|l| l.ip), Some(a));
    assert!(t.may_use(&long, a, T0 + 1));
    // The peer that learned the digest recognises the client too.
    let mut peer = table(true);
    let mut skipped = crate::runtime::control::Skipped::default();
    let taken = peer.check_peer(vec![l], T0, &mut skipped);
    assert_eq!(skipped.count, 0);
    assert_eq!(peer.merge_peer(&taken, T0), vec![a]);
    assert!(peer.may_use(&long, a, T0 + 2));
    assert_eq!(peer.choose(&long, None, T0 + 2), Ok(a));
}

#[test]
fn a_peer_lease_from_the_future_or_outside_the_pool_is_refused() {
    let t = table(true);
    let lease = |n: u8, expires: u64| Lease {
        ip: ip(n),
        mac: mac(n),
        client_id: None,
        hostname: Some("h".repeat(200)),
        state: State::Bound,
        expires,
        reserved: false,
    };
    let mut skipped = crate::runtime::control::Skipped::default();
    let ok = t.check_peer(
        vec![
            lease(100, T0 + 3600),
            lease(101, u64::MAX / 2),
            lease(50, T0 + 10),
            lease(102, T0 + 3600 + PEER_SKEW + 1),
        ],
        T0,
        &mut skipped,
    );
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0].ip, ip(100));
    assert_eq!(ok[0].hostname, None, "a long hostname is dropped");
    assert_eq!(skipped.count, 3);
    assert!(skipped.first.unwrap().contains("beyond the lease time"));
    // merge_peer holds the same bound on its own.
    let mut t = table(true);
    assert!(t.merge_peer(&[lease(101, u64::MAX / 2)], T0).is_empty());
}

#[test]
fn sixteen_hundred_leases_with_255_byte_client_ids_stay_small() {
    let mut t = LeaseTable::new(Scope::new(
        "10.1.0.0/20".parse().unwrap(),
        Some((Ipv4Addr::new(10, 1, 4, 1), Ipv4Addr::new(10, 1, 11, 254))),
        [],
        3600,
    ));
    for i in 0..1600u32 {
        let c = Client {
            mac: MacAddr([2, 0, 0, 0, (i >> 8) as u8, i as u8]),
            client_id: Some(
                std::iter::repeat_n(i.to_be_bytes(), 64)
                    .flatten()
                    .take(255)
                    .collect(),
            ),
        };
        let ip = t.choose(&c, None, T0).unwrap();
        t.bind(&c, ip, Some(&"h".repeat(63)), T0);
    }
    let leases: Vec<&Lease> = t.leases();
    assert_eq!(leases.len(), 1600);
    let size = serde_json::to_vec(&leases).unwrap().len();
    // 255-byte ids as hex alone would be 816,000 bytes.
    assert!(size < 1600 * 320, "{size} bytes");
}
