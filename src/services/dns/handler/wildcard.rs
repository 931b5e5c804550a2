//! RFC 4592 wildcard answers over hickory's in-memory zone ([`WildcardFix`]),
//! and the RFC 2308 negative-caching SOA.
//!
//! Invariant: a wildcard-covered name never gets NXDOMAIN (hickory issues
//! #2905 and #3893); an empty non-terminal gets NODATA; a name whose
//! closest encloser is not the wildcard's parent gets NXDOMAIN. Every other
//! answer is hickory's, unchanged.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{LowerName, Record, RecordType, TSigResponseContext};
use hickory_server::net::runtime::TokioRuntimeProvider;
use hickory_server::server::{Request, RequestInfo};
use hickory_server::store::in_memory::InMemoryZoneHandler;
use hickory_server::zone_handler::{
    AuthLookup, AxfrPolicy, LookupControlFlow, LookupError, LookupOptions, LookupRecords,
    ZoneHandler, ZoneTransfer, ZoneType,
};

use crate::services::dns::records::{HickoryZone, NameClass};

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
pub(super) struct WildcardFix {
    inner: InMemoryZoneHandler<TokioRuntimeProvider>,
    zone: HickoryZone,
    negative_soa: Option<Record>,
}

impl WildcardFix {
    /// `inner` holds `zone`'s records; `negative_soa` is its SOA with the
    /// negative-caching TTL (none for a zone without an SOA first).
    pub(super) fn new(
        inner: InMemoryZoneHandler<TokioRuntimeProvider>,
        zone: HickoryZone,
        negative_soa: Option<Record>,
    ) -> Self {
        WildcardFix {
            inner,
            zone,
            negative_soa,
        }
    }

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
