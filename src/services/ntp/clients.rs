//! Per-client rate limiting (pure: the caller passes the time).
//!
//! Each client address has a token bucket of `2 × rate` tokens refilled at
//! `rate` per second; a request takes one. Without a token the client may
//! get a KoD RATE, at most one per [`KOD_INTERVAL`], else nothing. The
//! table is bounded ([`MAX_CLIENTS`]): when full, idle entries (full
//! buckets) are dropped, then the stalest; a flood from one address
//! empties only its own bucket, so other clients are still answered.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::core::Rate;

/// Client addresses tracked at once.
pub const MAX_CLIENTS: usize = 4096;
/// At most one KoD per client in this interval.
pub const KOD_INTERVAL: Duration = Duration::from_secs(1);

struct Bucket {
    tokens: f64,
    at: Instant,
    last_kod: Option<Instant>,
}

/// The buckets of every recent client.
pub struct Limiter {
    rate: f64,
    clients: HashMap<IpAddr, Bucket>,
}

impl Limiter {
    pub fn new(rate: u32) -> Limiter {
        Limiter {
            rate: f64::from(rate.max(1)),
            clients: HashMap::new(),
        }
    }

    pub fn set_rate(&mut self, rate: u32) {
        self.rate = f64::from(rate.max(1));
    }

    fn burst(&self) -> f64 {
        self.rate * 2.0
    }

    /// May `ip` be answered at `now`?
    pub fn check(&mut self, ip: IpAddr, now: Instant) -> Rate {
        if !self.clients.contains_key(&ip) && self.clients.len() >= MAX_CLIENTS {
            self.evict(now);
        }
        let (rate, burst) = (self.rate, self.burst());
        let b = self.clients.entry(ip).or_insert(Bucket {
            tokens: burst,
            at: now,
            last_kod: None,
        });
        let dt = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + dt * rate).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return Rate::Allowed;
        }
        match b.last_kod {
            Some(t) if now.saturating_duration_since(t) < KOD_INTERVAL => Rate::Silent,
            _ => {
                b.last_kod = Some(now);
                Rate::Kod
            }
        }
    }

    /// Make room: drop the entries that would be full again by now, or
    /// else the stalest one.
    fn evict(&mut self, now: Instant) {
        let (rate, burst) = (self.rate, self.burst());
        self.clients.retain(|_, b| {
            b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate < burst
        });
        if self.clients.len() >= MAX_CLIENTS
            && let Some(ip) = self
                .clients
                .iter()
                .min_by_key(|(_, b)| b.at)
                .map(|(ip, _)| *ip)
        {
            self.clients.remove(&ip);
        }
    }

    /// Client addresses tracked.
    pub fn tracked(&self) -> usize {
        self.clients.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_kod_then_silence_then_refill() {
        let mut l = Limiter::new(2);
        let t0 = Instant::now();
        let a: IpAddr = "10.0.0.5".parse().unwrap();
        for _ in 0..4 {
            assert_eq!(l.check(a, t0), Rate::Allowed);
        }
        assert_eq!(l.check(a, t0), Rate::Kod);
        assert_eq!(l.check(a, t0), Rate::Silent);
        assert_eq!(l.check(a, t0 + Duration::from_millis(200)), Rate::Silent);
        assert_eq!(l.check(a, t0 + Duration::from_millis(600)), Rate::Allowed);
        assert_eq!(l.check(a, t0 + Duration::from_millis(600)), Rate::Silent);
        assert_eq!(l.check(a, t0 + Duration::from_millis(1000)), Rate::Allowed);
        assert_eq!(l.check(a, t0 + Duration::from_millis(1000)), Rate::Kod);
    }

    #[test]
    fn one_flooding_client_does_not_starve_another() {
        let mut l = Limiter::new(8);
        let t0 = Instant::now();
        let flood: IpAddr = "10.0.0.6".parse().unwrap();
        let other: IpAddr = "10.0.0.7".parse().unwrap();
        for i in 0..10_000u64 {
            l.check(flood, t0 + Duration::from_micros(i));
        }
        assert_eq!(
            l.check(other, t0 + Duration::from_millis(10)),
            Rate::Allowed
        );
    }

    #[test]
    fn the_table_is_bounded() {
        let mut l = Limiter::new(1);
        let t0 = Instant::now();
        for i in 0..(MAX_CLIENTS as u32 + 100) {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            l.check(ip, t0 + Duration::from_micros(u64::from(i)));
        }
        assert!(l.tracked() <= MAX_CLIENTS);
    }
}
