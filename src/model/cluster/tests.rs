use super::*;

#[test]
fn cidr() {
    let n: Ipv4Net = "192.168.131.0/24".parse().unwrap();
    assert!(n.contains("192.168.131.77".parse().unwrap()));
    assert!(!n.contains("192.168.132.1".parse().unwrap()));
    assert_eq!(n.broadcast(), Ipv4Addr::new(192, 168, 131, 255));
    assert_eq!(n.netmask(), Ipv4Addr::new(255, 255, 255, 0));
    assert!("192.168.131.1/24".parse::<Ipv4Net>().is_err());
    assert!("192.168.131.0/33".parse::<Ipv4Net>().is_err());
    assert!("192.168.131.0".parse::<Ipv4Net>().is_err());
    let all: Ipv4Net = "0.0.0.0/0".parse().unwrap();
    assert!(all.contains(Ipv4Addr::new(8, 8, 8, 8)));
}

#[test]
fn cluster_clients() {
    let cidr: Ipv4Net = "192.168.131.0/24".parse().unwrap();
    let ok = |s: &str| cidr.contains_or_loopback(s.parse().unwrap());
    assert!(ok("192.168.131.10"));
    assert!(ok("192.168.131.0"));
    assert!(ok("127.0.0.1"));
    assert!(ok("127.8.9.10"));
    assert!(ok("::1"));
    assert!(ok("::ffff:192.168.131.77"));
    assert!(ok("::ffff:127.0.0.1"));
    assert!(!ok("192.168.132.10"));
    assert!(!ok("10.0.0.1"));
    assert!(!ok("0.0.0.0"));
    assert!(!ok("8.8.8.8"));
    assert!(!ok("::ffff:10.0.0.1"));
    assert!(!ok("fd00::1"));
    assert!(!ok("::"));
}

#[test]
fn mac() {
    let m: MacAddr = "52:54:00:AB:cd:01".parse().unwrap();
    assert_eq!(m.to_string(), "52:54:00:ab:cd:01");
    assert_eq!("52-54-00-ab-cd-01".parse::<MacAddr>().unwrap(), m);
    assert!("52:54:00:ab:cd".parse::<MacAddr>().is_err());
    assert!("52:54:00:ab:cd:0g".parse::<MacAddr>().is_err());
    assert!(
        "01:00:5e:00:00:01"
            .parse::<MacAddr>()
            .unwrap()
            .is_multicast()
    );
}
