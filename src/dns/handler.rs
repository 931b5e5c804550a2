//! The socket-free DNS core: one DNS message in, at most one message out.
//!
//! [`Core::handle`] is the whole request path the UDP and TCP loops use (and
//! the fuzz test drives): parse with hickory, apply the recursion ACL, let
//! hickory's [`Catalog`] answer (authoritative zones, forwarder at the root),
//! and encode with the transport's size limit (512 bytes or the EDNS buffer
//! over UDP, with TC set when the answer does not fit).
//!
//! Invariants:
//! - Nothing here panics on network input; undecodable messages and
//!   responses are dropped (counted in `malformed`, logged at debug).
//! - Names in the cluster zones are answered to anyone; other names are
//!   forwarded only for clients in `network.cidr` or on loopback, and only
//!   when `upstreamDNS` is set; otherwise REFUSED.
//! - A wildcard-covered name never gets NXDOMAIN (hickory issue #2905):
//!   [`WildcardFix`] turns it into NOERROR/NODATA per RFC 4592.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use hickory_proto::op::{Edns, Header, HeaderCounts, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::TSigResponseContext;
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};
use hickory_resolver::config::{NameServerConfig, ResolverOpts};
use hickory_server::net::NetError;
use hickory_server::net::runtime::{TokioRuntimeProvider, TokioTime};
use hickory_server::net::xfer::Protocol;
use hickory_server::server::{Request, RequestHandler, RequestInfo, ResponseHandler, ResponseInfo};
use hickory_server::store::forwarder::{ForwardConfig, ForwardZoneHandler};
use hickory_server::store::in_memory::InMemoryZoneHandler;
use hickory_server::zone_handler::{
    AuthLookup, AxfrPolicy, Catalog, LookupControlFlow, LookupError, LookupOptions, LookupRecords,
    MessageResponse, MessageResponseBuilder, ZoneHandler, ZoneTransfer, ZoneType,
};
use tracing::{debug, warn};

use super::records::{self, HickoryZone, NameClass};
use crate::config::Ipv4Net;
use crate::plan::Plan;

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

/// Wraps an in-memory zone to give RFC 4592 wildcard answers: hickory
/// answers NXDOMAIN for a wildcard-covered name with a missing type (issues
/// #2905 and #3893), which becomes NODATA; and it synthesizes wildcard
/// answers for names whose closest encloser is not the wildcard's parent
/// (`y.x.apps` when `x.apps` exists) or that are empty non-terminals, which
/// become NXDOMAIN and NODATA.
///
/// It also serves the SOA for negative answers with the RFC 2308 section 3
/// TTL, min(SOA TTL, SOA MINIMUM), so NXDOMAIN/NODATA are cached for
/// `dns.negativeTtl` (hickory looks that SOA up with no request info).
pub struct WildcardFix {
    inner: InMemoryZoneHandler<TokioRuntimeProvider>,
    zone: HickoryZone,
    negative_soa: Option<Record>,
}

impl WildcardFix {
    /// The RFC 4592 answer where hickory's differs, before asking it.
    fn override_for(&self, name: &LowerName) -> Option<LookupControlFlow<AuthLookup>> {
        match self.zone.classify(name) {
            NameClass::EmptyNonTerminal => {
                Some(LookupControlFlow::Continue(Err(LookupError::NameExists)))
            }
            NameClass::NxDomain => Some(LookupControlFlow::Continue(Err(
                LookupError::ResponseCode(ResponseCode::NXDomain),
            ))),
            NameClass::Owner | NameClass::Wildcard => None,
        }
    }

    /// hickory answers NXDOMAIN for a wildcard-covered name with a missing
    /// type; such a name exists, so that is NODATA.
    fn fix(
        &self,
        name: &LowerName,
        flow: LookupControlFlow<AuthLookup>,
    ) -> LookupControlFlow<AuthLookup> {
        let nx = |r: &Result<AuthLookup, LookupError>| {
            matches!(r, Err(LookupError::ResponseCode(ResponseCode::NXDomain)))
        };
        match flow {
            LookupControlFlow::Continue(r) if nx(&r) && self.zone.covered_by_wildcard(name) => {
                LookupControlFlow::Continue(Err(LookupError::NameExists))
            }
            LookupControlFlow::Break(r) if nx(&r) && self.zone.covered_by_wildcard(name) => {
                LookupControlFlow::Break(Err(LookupError::NameExists))
            }
            other => other,
        }
    }
}

#[async_trait::async_trait]
impl ZoneHandler for WildcardFix {
    fn zone_type(&self) -> ZoneType {
        self.inner.zone_type()
    }
    fn axfr_policy(&self) -> AxfrPolicy {
        self.inner.axfr_policy()
    }
    fn origin(&self) -> &LowerName {
        self.inner.origin()
    }
    async fn lookup(
        &self,
        name: &LowerName,
        rtype: RecordType,
        request_info: Option<&RequestInfo<'_>>,
        lookup_options: LookupOptions,
    ) -> LookupControlFlow<AuthLookup> {
        if request_info.is_none()
            && rtype == RecordType::SOA
            && name == self.inner.origin()
            && let Some(soa) = &self.negative_soa
        {
            return LookupControlFlow::Continue(Ok(AuthLookup::from(LookupRecords::Section(
                vec![soa.clone()],
            ))));
        }
        if let Some(flow) = self.override_for(name) {
            return flow;
        }
        let flow = self
            .inner
            .lookup(name, rtype, request_info, lookup_options)
            .await;
        self.fix(name, flow)
    }
    async fn search(
        &self,
        request: &Request,
        lookup_options: LookupOptions,
    ) -> (LookupControlFlow<AuthLookup>, Option<TSigResponseContext>) {
        if let Ok(info) = request.request_info()
            && info.query.query_type() != RecordType::AXFR
            && let Some(flow) = self.override_for(info.query.name())
        {
            return (flow, None);
        }
        let (flow, sig) = self.inner.search(request, lookup_options).await;
        match request.request_info() {
            Ok(info) => (self.fix(info.query.name(), flow), sig),
            Err(_) => (flow, sig),
        }
    }
    async fn zone_transfer(
        &self,
        request: &Request,
        lookup_options: LookupOptions,
        now: u64,
    ) -> Option<(
        Result<ZoneTransfer, LookupError>,
        Option<TSigResponseContext>,
    )> {
        self.inner.zone_transfer(request, lookup_options, now).await
    }
    async fn nsec_records(
        &self,
        name: &LowerName,
        lookup_options: LookupOptions,
    ) -> LookupControlFlow<AuthLookup> {
        self.inner.nsec_records(name, lookup_options).await
    }
}

/// Collects the encoded response instead of writing it to a socket.
#[derive(Clone)]
struct Capture {
    protocol: Protocol,
    out: Arc<Mutex<Option<Vec<u8>>>>,
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
        // RFC 1035 4.2.1 / RFC 6891 6.2.5: UDP answers fit the requester's
        // buffer (512 without EDNS); what does not fit is cut and TC set.
        let max = match self.protocol {
            Protocol::Udp => response
                .edns()
                .map(|e| e.max_payload().max(512))
                .unwrap_or(512),
            _ => u16::MAX,
        };
        let mut bytes = Vec::with_capacity(512);
        let mut enc = BinEncoder::new(&mut bytes);
        enc.set_max_size(max);
        let info = match response.destructive_emit(&mut enc) {
            Ok(info) => info,
            Err(e) => {
                warn!("encoding DNS response {id} failed: {e}; answering SERVFAIL");
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
        *self.out.lock().unwrap_or_else(|e| e.into_inner()) = Some(bytes);
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
}

/// Most distinct queries kept in each packet cache (UDP, TCP).
pub const PACKET_CACHE_ENTRIES: usize = 65_536;
/// Largest answer stored in a packet cache (bigger ones are always rebuilt).
pub const PACKET_CACHE_MAX_ANSWER: usize = 1232;

type Packets = std::collections::HashMap<Box<[u8]>, Box<[u8]>>;

/// A PowerDNS-style packet cache for authoritative answers: the query
/// message minus its ID → the encoded answer minus its ID.
///
/// Sound because the zones are immutable for the lifetime of a [`Core`] (a
/// reload builds a new one), an authoritative answer depends only on the
/// query bytes and the transport (which picks the size limit; there is one
/// cache per transport), never on the client address, and forwarded or
/// refused answers are never stored. Bounded: at most
/// [`PACKET_CACHE_ENTRIES`] answers of at most [`PACKET_CACHE_MAX_ANSWER`]
/// bytes (about 15 MB when full); once full, new queries are answered but
/// not stored.
#[derive(Default)]
struct PacketCache {
    map: std::sync::RwLock<Packets>,
}

impl PacketCache {
    /// Only plain single-question queries (at most one additional, the OPT) are cached.
    fn cacheable(msg: &[u8]) -> bool {
        msg.len() >= 17
            && msg.len() <= 512
            && msg[2] & 0xf8 == 0 // QR=0, OPCODE=QUERY
            && msg[4..6] == [0, 1]
            && msg[6..10] == [0, 0, 0, 0]
            && msg[10] == 0
            && msg[11] <= 1
    }
    /// Write the cached answer to `msg` into `out`; false when not cached.
    fn get_into(&self, msg: &[u8], out: &mut Vec<u8>) -> bool {
        if !Self::cacheable(msg) {
            return false;
        }
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let Some(body) = map.get(&msg[2..]) else {
            return false;
        };
        out.clear();
        out.extend_from_slice(&msg[..2]);
        out.extend_from_slice(body);
        true
    }
    fn put(&self, msg: &[u8], resp: &[u8]) {
        if !Self::cacheable(msg) || resp.len() < 12 || resp.len() > PACKET_CACHE_MAX_ANSWER {
            return;
        }
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if map.len() < PACKET_CACHE_ENTRIES {
            map.insert(msg[2..].into(), resp[2..].into());
        }
    }
    fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The DNS request path without sockets.
pub struct Core {
    catalog: Catalog,
    origins: Vec<LowerName>,
    forwarding: bool,
    cidr: Ipv4Net,
    cache_udp: PacketCache,
    cache_tcp: PacketCache,
    pub stats: Arc<Stats>,
}

/// Build the catalog for `plan`: one wildcard-fixed in-memory zone per plan
/// zone, and a forwarder at the root when `upstreamDNS` is set.
pub fn build(plan: &Plan) -> anyhow::Result<Core> {
    let mut catalog = Catalog::new();
    let mut origins = Vec::new();
    for z in &plan.zones {
        let hz = records::zone(z)?;
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
        origins.push(origin.clone());
        let negative_soa = hz.records.first().and_then(|r| match &r.data {
            RData::SOA(soa) => {
                let mut r = r.clone();
                r.ttl = r.ttl.min(soa.minimum);
                Some(r)
            }
            _ => None,
        });
        let handler = WildcardFix {
            inner: mem,
            zone: hz,
            negative_soa,
        };
        catalog.upsert(origin, vec![Arc::new(handler) as Arc<dyn ZoneHandler>]);
    }
    let c = &plan.cluster;
    let forwarding = !c.network.upstream_dns.is_empty();
    if forwarding {
        let name_servers = c
            .network
            .upstream_dns
            .iter()
            .map(|sa| {
                // Explicit servers only: never the host's resolv.conf, which
                // may point back at this appliance.
                let mut ns = NameServerConfig::udp_and_tcp(sa.ip());
                for conn in &mut ns.connections {
                    conn.port = sa.port();
                }
                ns
            })
            .collect();
        let mut opts = ResolverOpts::default();
        opts.timeout = c.dns.forward_timeout;
        opts.attempts = 2;
        opts.cache_size = 4096;
        let fwd = ForwardZoneHandler::builder_tokio(ForwardConfig {
            name_servers,
            options: Some(opts),
        })
        .with_origin(Name::root())
        .build()
        .map_err(|e| anyhow::anyhow!("DNS forwarder: {e}"))?;
        catalog.upsert(
            LowerName::new(&Name::root()),
            vec![Arc::new(fwd) as Arc<dyn ZoneHandler>],
        );
    }
    Ok(Core {
        catalog,
        origins,
        forwarding,
        cidr: c.network.cidr,
        cache_udp: PacketCache::default(),
        cache_tcp: PacketCache::default(),
        stats: Arc::new(Stats::default()),
    })
}

impl Core {
    /// May `ip` have names outside the cluster zones resolved for it?
    pub fn may_recurse(&self, ip: IpAddr) -> bool {
        self.cidr.contains_or_loopback(ip)
    }

    pub fn is_local(&self, name: &LowerName) -> bool {
        self.origins.iter().any(|o| o.zone_of(name))
    }

    pub fn route(&self, req: &Request) -> Route {
        let [q] = req.queries.queries() else {
            return Route::Local;
        };
        if req.metadata.op_code != OpCode::Query || self.is_local(q.name()) {
            Route::Local
        } else if self.forwarding && self.may_recurse(req.src().ip()) {
            Route::Forward
        } else {
            Route::Refuse
        }
    }

    /// Decode `msg`; `None` (after counting and logging) when it must be dropped.
    pub fn decode(&self, msg: &[u8], src: SocketAddr, protocol: Protocol) -> Option<Request> {
        if msg.len() < 12 {
            self.stats.malformed.fetch_add(1, Relaxed);
            debug!(%src, len = msg.len(), "DNS message too short; dropped");
            return None;
        }
        if msg[2] & 0x80 != 0 {
            self.stats.malformed.fetch_add(1, Relaxed);
            debug!(%src, "DNS response received as a query; dropped");
            return None;
        }
        match Request::from_bytes(msg.to_vec(), src, protocol) {
            Ok(r) => Some(r),
            Err(e) => {
                self.stats.malformed.fetch_add(1, Relaxed);
                debug!(%src, "undecodable DNS message dropped: {e}");
                None
            }
        }
    }

    /// Answer a decoded request.
    pub async fn answer(&self, req: &Request, route: Route) -> Option<Vec<u8>> {
        let out = Arc::new(Mutex::new(None));
        let cap = Capture {
            protocol: req.protocol(),
            out: out.clone(),
        };
        match route {
            Route::Refuse => {
                self.stats.refused_recursion.fetch_add(1, Relaxed);
                debug!(src = %req.src(), "recursion refused");
                let mut cap = cap;
                // RFC 6891 7: a query with OPT gets OPT back, even on errors.
                let edns = req.edns.as_ref().map(|e| {
                    let mut r = Edns::new();
                    r.set_max_payload(e.max_payload().max(512));
                    r
                });
                let resp = MessageResponseBuilder::new(&req.queries, edns.as_ref())
                    .error_msg(&req.metadata, ResponseCode::Refused);
                if let Err(e) = cap.send_response(resp).await {
                    debug!("REFUSED not sent: {e}");
                }
            }
            Route::Forward => {
                self.stats.forwarded.fetch_add(1, Relaxed);
                self.catalog.handle_request::<_, TokioTime>(req, cap).await;
            }
            Route::Local => {
                self.catalog.handle_request::<_, TokioTime>(req, cap).await;
                if let Some(b) = out.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                    self.cache(req.protocol()).put(req.as_slice(), b);
                }
            }
        }
        let bytes = out.lock().unwrap_or_else(|e| e.into_inner()).take();
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

    /// The cached answer to `msg`, if any (checked before decoding).
    pub fn cached(&self, msg: &[u8], protocol: Protocol) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.cached_into(msg, protocol, &mut out).then_some(out)
    }

    /// Like [`Core::cached`], writing into a reusable buffer.
    pub fn cached_into(&self, msg: &[u8], protocol: Protocol, out: &mut Vec<u8>) -> bool {
        if !self.cache(protocol).get_into(msg, out) {
            return false;
        }
        self.stats.cache_hits.fetch_add(1, Relaxed);
        self.stats.count_response(out);
        true
    }

    /// Entries in the UDP and TCP packet caches.
    pub fn cache_entries(&self) -> usize {
        self.cache_udp.len() + self.cache_tcp.len()
    }

    /// The full request path: bytes in, bytes (or nothing) out.
    pub async fn handle(&self, msg: &[u8], src: SocketAddr, protocol: Protocol) -> Option<Vec<u8>> {
        if let Some(r) = self.cached(msg, protocol) {
            return Some(r);
        }
        let req = self.decode(msg, src, protocol)?;
        let route = self.route(&req);
        self.answer(&req, route).await
    }
}
