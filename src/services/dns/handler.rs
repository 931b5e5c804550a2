//! The socket-free DNS core: one DNS message in, at most one message out.
//!
//! [`Core::handle`] is the whole request path the UDP and TCP loops use (and
//! the fuzz test drives): parse with hickory, route (zones, recursion ACL,
//! classes and types answered with an RCODE alone), let hickory's
//! [`Catalog`] answer the cluster zones (completed by [`super::complete`])
//! or [`super::forward`] ask the upstreams, and fit the answer to the
//! transport ([`super::encode::fit`]: 512 bytes, or the EDNS buffer capped
//! at 1232, over UDP; TC answers carry only the question and the OPT).
//!
//! Invariants:
//! - Nothing here panics on network input; undecodable messages and
//!   responses are dropped (counted in `malformed`), except a query with
//!   two OPT records, which gets FORMERR (RFC 6891).
//! - Whatever a client sends costs at most one log line per reason every
//!   10 s ([`Core::log`], with the client address and the count of the rest):
//!   malformed messages, and the odd requests hickory's catalog would
//!   warn about once per datagram without the address (an unimplemented
//!   opcode, an EDNS version above 0, an update without one SOA zone) —
//!   its catalog logs errors only (`runtime::telemetry`).
//! - Names in the cluster zones are answered to anyone; other names are
//!   forwarded only for clients in `network.cidr`, a `dhcp.segments`
//!   subnet, `network.ipv6.cidr` or on loopback, and only
//!   when `upstreamDNS` is set; otherwise REFUSED. Address names of a
//!   reverse zone outside `network.cidr` (a /25../30 network's /24) that own
//!   no record count as other names.
//! - Classes other than IN and ANY are REFUSED (CHAOS included, as Knot
//!   without version/identity disclosure); qtype 0 is NOTIMP; AXFR and IXFR
//!   of a zone's origin are answered by [`super::transfer`] to clients in
//!   `dns.transfer` (AXFR over TCP only; an IXFR over UDP gets the SOA
//!   alone) and REFUSED to everyone else.
//! - A wildcard-covered name never gets NXDOMAIN (hickory issue #2905):
//!   [`WildcardFix`] (`handler/wildcard.rs`) turns it into NOERROR/NODATA
//!   per RFC 4592.

mod wildcard;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use hickory_proto::op::{Header, HeaderCounts, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, LowerName, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};
use hickory_server::net::NetError;
use hickory_server::net::runtime::{TokioRuntimeProvider, TokioTime};
use hickory_server::net::xfer::Protocol;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::store::in_memory::InMemoryZoneHandler;
use hickory_server::zone_handler::{AxfrPolicy, Catalog, MessageResponse, ZoneHandler, ZoneType};
use tracing::{debug, warn};

use super::complete::{self, ZoneData, reverse_addr};
use super::encode;
use super::forward::Forwarder;
use super::packetcache::PacketCache;
use super::records::{self, HickoryZone};
use crate::model::cluster::{IpCidr, Ipv4Net};
use crate::model::ipv6::Ipv6Net;
use crate::plan::Plan;
use crate::runtime::lograte::{self, LogRate};
use crate::runtime::sync::LockExt as _;
use wildcard::WildcardFix;

/// Log `key` for `src` at warn if `log` allows, else at debug.
pub fn warn_client(
    log: &LogRate,
    key: &'static str,
    src: SocketAddr,
    detail: impl FnOnce() -> String,
) {
    match log.check(key, Some(src)) {
        Some(tail) => warn!("dns: {key} from {src}: {}{tail}", detail()),
        None => debug!("dns: {key} from {src}: {}", detail()),
    }
}

/// The requests hickory's catalog answers with an error and a warning of
/// its own (silenced): the reason key and what is answered.
fn odd_request(req: &Request) -> Option<(&'static str, String)> {
    if let Some(v) = req.edns.as_ref().map(|e| e.version()).filter(|v| *v > 0) {
        return Some((
            "EDNS version above 0",
            format!("EDNS version {v}, answered BADVERS"),
        ));
    }
    match req.metadata.op_code {
        OpCode::Query => None,
        OpCode::Update => match req.queries.queries() {
            [q] if q.query_type() == RecordType::SOA => None,
            _ => Some((
                "invalid update",
                "an update without exactly one SOA zone, answered FORMERR".into(),
            )),
        },
        op => Some((
            "unimplemented opcode",
            format!("opcode {op:?}, answered NOTIMP"),
        )),
    }
}

/// Counters shown in `/status` and `/metrics`.
#[derive(Default)]
pub struct Stats {
    /// Responses sent, by RCODE (0..=15; index 16 = anything else).
    pub by_rcode: [AtomicU64; 17],
    /// Queries passed to the upstream resolvers.
    pub forwarded: AtomicU64,
    /// Out-of-zone queries refused (no upstream, or client not allowed).
    pub refused_recursion: AtomicU64,
    /// Messages dropped without an answer (undecodable, responses, too short).
    pub malformed: AtomicU64,
    /// Answers served from the packet cache.
    pub cache_hits: AtomicU64,
}

impl Stats {
    pub fn count_response(&self, msg: &[u8]) {
        let rc = msg.get(3).map(|b| usize::from(b & 0x0f)).unwrap_or(16);
        self.by_rcode[rc.min(16)].fetch_add(1, Relaxed);
    }
    pub fn rcode_counts(&self) -> Vec<(String, u64)> {
        self.by_rcode
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let n = c.load(Relaxed);
                (n > 0).then(|| {
                    let name = match i {
                        0 => "NOERROR".to_string(),
                        1 => "FORMERR".to_string(),
                        2 => "SERVFAIL".to_string(),
                        3 => "NXDOMAIN".to_string(),
                        4 => "NOTIMP".to_string(),
                        5 => "REFUSED".to_string(),
                        16 => "other".to_string(),
                        n => format!("RCODE{n}"),
                    };
                    (name, n)
                })
            })
            .collect()
    }
}

/// Collects the encoded response instead of writing it to a socket.
#[derive(Clone)]
struct Capture {
    out: Arc<Mutex<Option<Vec<u8>>>>,
    src: SocketAddr,
    log: Arc<LogRate>,
}

#[async_trait::async_trait]
impl ResponseHandler for Capture {
    async fn send_response<'a>(
        &mut self,
        response: MessageResponse<
            '_,
            'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
        >,
    ) -> Result<ResponseInfo, NetError> {
        let id = response.metadata().id;
        let op = response.metadata().op_code;
        // Encoded whole; the UDP size limit is applied afterwards by
        // `encode::fit`, which truncates the RFC 6891 way.
        let mut bytes = Vec::with_capacity(512);
        let mut enc = BinEncoder::new(&mut bytes);
        let info = match response.destructive_emit(&mut enc) {
            Ok(info) => info,
            Err(e) => {
                let src = self.src;
                warn_client(&self.log, "response encoding failed", src, || {
                    format!("encoding response {id} failed: {e}; answering SERVFAIL")
                });
                bytes.clear();
                let mut enc = BinEncoder::new(&mut bytes);
                let mut metadata = Metadata::new(id, MessageType::Response, op);
                metadata.response_code = ResponseCode::ServFail;
                let header = Header {
                    metadata,
                    counts: HeaderCounts::default(),
                };
                header
                    .emit(&mut enc)
                    .map_err(|e| NetError::from(e.to_string()))?;
                ResponseInfo::from(header)
            }
        };
        *self.out.locked() = Some(bytes);
        Ok(info)
    }
}

/// What to do with a decoded request, before the catalog sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Inside a cluster zone (or not a plain single-question query): the catalog answers.
    Local,
    /// Outside the zones, client allowed, upstreams configured.
    Forward,
    /// Outside the zones and not allowed to recurse.
    Refuse,
    /// Answered with this RCODE alone (non-IN class, qtype 0, zone
    /// transfers not allowed).
    Error(ResponseCode),
    /// An AXFR or IXFR of this zone (index in the zones) from an allowed client.
    Transfer(usize),
}

/// The DNS request path without sockets.
pub struct Core {
    catalog: Catalog,
    zones: Vec<ZoneData>,
    forwarder: Option<Forwarder>,
    cidr: Ipv4Net,
    /// Relayed segments (`dhcp.segments`): their clients may recurse too.
    segments: Vec<Ipv4Net>,
    /// `network.ipv6.cidr` on a dual-stack network: its clients may recurse.
    cidr6: Option<Ipv6Net>,
    /// Who may copy the zones (`dns.transfer`); empty: nobody.
    pub(super) transfer_acl: Vec<IpCidr>,
    /// The zones as served, for transfers (empty without `dns.transfer`).
    pub(super) transfer_zones: Vec<HickoryZone>,
    cache_udp: PacketCache,
    cache_tcp: PacketCache,
    pub stats: Arc<Stats>,
    /// Warnings a client can cause (malformed or odd messages): at most
    /// one line per reason every [`lograte::CLIENT_EVENTS`]. The service
    /// puts its serve's `dns` limiter here (as it does its `stats`); a
    /// core built alone has one of its own.
    pub log: Arc<LogRate>,
}

/// What [`Core::prepare`] made of a message.
pub enum Prepared {
    /// Not answered (counted in `malformed`).
    Drop,
    /// Answered without the catalog or an upstream (e.g. FORMERR).
    Reply(Vec<u8>),
    /// A query to answer with [`Core::answer`].
    Query(Box<Request>, Route),
}

/// Build the catalog for `plan`: one wildcard-fixed in-memory zone per plan
/// zone, and the forwarder when `upstreamDNS` is set.
pub fn build(plan: &Plan) -> anyhow::Result<Core> {
    build_zones(plan, &plan.zones)
}

/// [`build`] serving `served` (the plan's zones with the serials to serve,
/// [`transfer::Serials`]).
pub fn build_zones(plan: &Plan, served: &[crate::plan::Zone]) -> anyhow::Result<Core> {
    let mut catalog = Catalog::new();
    let mut zones = Vec::new();
    let copy = !plan.cluster.dns.transfer.is_empty();
    let mut transfer_zones = Vec::new();
    for z in served {
        let hz = records::zone(z)?;
        if copy {
            transfer_zones.push(hz.clone());
        }
        let mut mem = InMemoryZoneHandler::<TokioRuntimeProvider>::empty(
            hz.origin.clone(),
            ZoneType::Primary,
            AxfrPolicy::Deny,
        );
        for r in &hz.records {
            if !mem.upsert_mut(r.clone(), hz.serial) {
                debug!("zone {}: duplicate record {} ignored", hz.origin, r);
            }
        }
        let origin = LowerName::new(&hz.origin);
        let negative_soa = hz.records.first().and_then(|r| match &r.data {
            RData::SOA(soa) => {
                let mut r = r.clone();
                r.ttl = r.ttl.min(soa.minimum);
                Some(r)
            }
            _ => None,
        });
        zones.push(ZoneData::new(origin.clone(), &hz, negative_soa.clone()));
        let handler = WildcardFix::new(mem, hz, negative_soa);
        catalog.upsert(origin, vec![Arc::new(handler) as Arc<dyn ZoneHandler>]);
    }
    let c = &plan.cluster;
    // Explicit servers only: never the host's resolv.conf, which may point
    // back at this appliance.
    let forwarder = (!c.network.upstream_dns.is_empty())
        .then(|| Forwarder::new(c.network.upstream_dns.clone(), c.dns.forward_timeout));
    Ok(Core {
        catalog,
        zones,
        forwarder,
        cidr: c.network.cidr,
        segments: c.dhcp.segments.iter().map(|s| s.cidr).collect(),
        cidr6: c.network.ipv6.as_ref().map(|v6| v6.cidr),
        transfer_acl: c.dns.transfer.clone(),
        transfer_zones,
        cache_udp: PacketCache::default(),
        cache_tcp: PacketCache::default(),
        stats: Arc::new(Stats::default()),
        log: Arc::new(LogRate::new("dns", lograte::CLIENT_EVENTS)),
    })
}

impl Core {
    /// May `ip` have names outside the cluster zones resolved for it?
    pub fn may_recurse(&self, ip: IpAddr) -> bool {
        self.cidr.contains_or_loopback(ip)
            || self.segments.iter().any(|s| s.contains_or_loopback(ip))
            || self.cidr6.is_some_and(|c| c.contains_ip(ip))
    }

    fn zone_of(&self, name: &LowerName) -> Option<&ZoneData> {
        complete::zone_of(&self.zones, name)
    }

    /// Is `name` ours to answer? Inside a cluster zone, except the address
    /// names of a reverse zone that lie outside `network.cidr` (a /25../30
    /// network's reverse zone is its whole /24) and own no record of ours.
    pub fn is_local(&self, name: &LowerName) -> bool {
        match self.zone_of(name) {
            None => false,
            Some(z) => match reverse_addr(name) {
                Some(ip) if !self.cidr.contains(ip) => z.names.contains(name),
                _ => true,
            },
        }
    }

    pub fn route(&self, req: &Request) -> Route {
        let [q] = req.queries.queries() else {
            return Route::Local;
        };
        if req.metadata.op_code != OpCode::Query {
            return Route::Local;
        }
        // Knot (without version/identity disclosure) refuses every class
        // but IN and ANY, CHAOS included.
        if !matches!(q.query_class(), DNSClass::IN | DNSClass::ANY) {
            return Route::Error(ResponseCode::Refused);
        }
        match u16::from(q.query_type()) {
            0 => return Route::Error(ResponseCode::NotImp),
            251 | 252 => return self.transfer_route(req), // IXFR, AXFR
            _ => {}
        }
        if self.is_local(q.name()) {
            Route::Local
        } else if self.forwarder.is_some() && self.may_recurse(req.src().ip()) {
            Route::Forward
        } else {
            Route::Refuse
        }
    }

    /// Decode `msg`; `None` (after counting and logging) when it must be dropped.
    pub fn decode(&self, msg: &[u8], src: SocketAddr, protocol: Protocol) -> Option<Request> {
        match self.prepare(msg, src, protocol) {
            Prepared::Query(r, _) => Some(*r),
            _ => None,
        }
    }

    /// Decode and route `msg`: dropped, answered at once, or a query.
    pub fn prepare(&self, msg: &[u8], src: SocketAddr, protocol: Protocol) -> Prepared {
        if msg.len() < 12 {
            self.stats.malformed.fetch_add(1, Relaxed);
            warn_client(&self.log, "message too short", src, || {
                format!("{} bytes, dropped", msg.len())
            });
            return Prepared::Drop;
        }
        if msg[2] & 0x80 != 0 {
            self.stats.malformed.fetch_add(1, Relaxed);
            warn_client(&self.log, "response received as a query", src, || {
                "dropped".into()
            });
            return Prepared::Drop;
        }
        match Request::from_bytes(msg.to_vec(), src, protocol) {
            Ok(r) => {
                let route = self.route(&r);
                Prepared::Query(Box::new(r), route)
            }
            // RFC 6891 6.1.1: more than one OPT is a FORMERR (no OPT back,
            // as Knot answers).
            Err(_) if encode::opt_count(msg).is_some_and(|n| n > 1) => {
                match encode::error_reply(msg, ResponseCode::FormErr, false) {
                    Some(r) => {
                        self.stats.count_response(&r);
                        Prepared::Reply(r)
                    }
                    None => Prepared::Drop,
                }
            }
            Err(e) => {
                self.stats.malformed.fetch_add(1, Relaxed);
                warn_client(&self.log, "undecodable message", src, || {
                    format!("{e}, dropped")
                });
                Prepared::Drop
            }
        }
    }

    /// The size limit of answers to `req`: see [`encode::udp_limit`].
    fn limit(req: &Request) -> usize {
        match req.protocol() {
            Protocol::Udp => encode::udp_limit(req.edns.as_ref().map(|e| e.max_payload())),
            _ => usize::from(u16::MAX),
        }
    }

    /// Answer a decoded request.
    pub async fn answer(&self, req: &Request, route: Route) -> Option<Vec<u8>> {
        let limit = Self::limit(req);
        let bytes = match route {
            Route::Refuse => {
                self.stats.refused_recursion.fetch_add(1, Relaxed);
                debug!(src = %req.src(), "recursion refused");
                // RFC 6891 7: a query with OPT gets OPT back, even on errors.
                encode::error_reply(req.as_slice(), ResponseCode::Refused, req.edns.is_some())
            }
            Route::Error(rcode) => encode::error_reply(req.as_slice(), rcode, req.edns.is_some()),
            // The first message (all of it over UDP); TCP sends them all
            // through `transfer`.
            Route::Transfer(zone) => {
                return self.transfer(req, zone).into_iter().next();
            }
            Route::Forward => {
                self.stats.forwarded.fetch_add(1, Relaxed);
                let tcp = req.protocol() != Protocol::Udp;
                let up = match &self.forwarder {
                    Some(f) => f.forward(req.as_slice(), tcp).await,
                    None => None,
                };
                match up {
                    Some(a) => Some(encode::fit(a, limit)),
                    None => {
                        debug!(src = %req.src(), "no upstream answered in time; SERVFAIL");
                        encode::error_reply(
                            req.as_slice(),
                            ResponseCode::ServFail,
                            req.edns.is_some(),
                        )
                    }
                }
            }
            Route::Local => {
                let out = Arc::new(Mutex::new(None));
                let cap = Capture {
                    out: out.clone(),
                    src: req.src(),
                    log: self.log.clone(),
                };
                if let Some((key, detail)) = odd_request(req) {
                    warn_client(&self.log, key, req.src(), || detail);
                }
                self.catalog.handle_request::<_, TokioTime>(req, cap).await;
                let b = out.locked().take();
                let b = b.map(|b| {
                    let b = encode::point_at_question(complete::complete(&self.zones, b));
                    encode::fit(b, limit)
                });
                if let Some(b) = &b {
                    self.cache(req.protocol()).put(req.as_slice(), b);
                }
                b
            }
        };
        // Our own answers (not a forwarded one: the upstream set its flags).
        let mut bytes = bytes;
        if !matches!(route, Route::Forward)
            && let Some(b) = bytes.as_mut()
        {
            self.set_ra(b, req.src().ip());
        }
        if let Some(b) = &bytes {
            self.stats.count_response(b);
            if tracing::enabled!(tracing::Level::DEBUG) {
                let q = req.queries.queries().first();
                debug!(
                    src = %req.src(),
                    proto = %req.protocol(),
                    query = %q.map(|q| q.name().to_string()).unwrap_or_default(),
                    qtype = %q.map(|q| q.query_type().to_string()).unwrap_or_default(),
                    ?route,
                    rcode = b[3] & 0x0f,
                    len = b.len(),
                    "dns answer"
                );
            }
        }
        bytes
    }

    fn cache(&self, protocol: Protocol) -> &PacketCache {
        match protocol {
            Protocol::Udp => &self.cache_udp,
            _ => &self.cache_tcp,
        }
    }

    /// The cached answer to `msg` from `src`, if any (checked before
    /// decoding).
    pub fn cached(&self, msg: &[u8], src: IpAddr, protocol: Protocol) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.cached_into(msg, src, protocol, &mut out)
            .then_some(out)
    }

    /// Like [`Core::cached`], writing into a reusable buffer.
    pub fn cached_into(
        &self,
        msg: &[u8],
        src: IpAddr,
        protocol: Protocol,
        out: &mut Vec<u8>,
    ) -> bool {
        if !self.cache(protocol).get_into(msg, out) {
            return false;
        }
        self.set_ra(out, src);
        self.stats.cache_hits.fetch_add(1, Relaxed);
        self.stats.count_response(out);
        true
    }

    /// Set the RA flag of our own answer to `src`: recursion is available
    /// to it when an upstream is configured and `src` may recurse (so `dig`
    /// on a cluster client does not warn "recursion requested but not
    /// available"). Cached answers are shared between clients, so the bit
    /// is set per answer, not stored.
    fn set_ra(&self, msg: &mut [u8], src: IpAddr) {
        if let Some(flags) = msg.get_mut(3) {
            if self.forwarder.is_some() && self.may_recurse(src) {
                *flags |= 0x80;
            } else {
                *flags &= !0x80;
            }
        }
    }

    /// Entries in the UDP and TCP packet caches.
    pub fn cache_entries(&self) -> usize {
        self.cache_udp.len() + self.cache_tcp.len()
    }

    /// The full request path: bytes in, bytes (or nothing) out.
    pub async fn handle(&self, msg: &[u8], src: SocketAddr, protocol: Protocol) -> Option<Vec<u8>> {
        if let Some(r) = self.cached(msg, src.ip(), protocol) {
            return Some(r);
        }
        match self.prepare(msg, src, protocol) {
            Prepared::Drop => None,
            Prepared::Reply(r) => Some(r),
            Prepared::Query(req, route) => self.answer(&req, route).await,
        }
    }
}
