//! Network-boot answers per DHCP client (pure): which firmware is asking,
//! and what to put in its reply so that it ends in the node's iPXE script.
//!
//! Chain (docs/bare-metal.md): firmware PXE → TFTP `undionly.kpxe` (BIOS) or
//! `snponly.efi`/`ipxe.efi` (UEFI) → iPXE asks again with user class `iPXE`
//! → `http://<appliance>/boot/boot.ipxe` → the node's script. UEFI HTTP Boot
//! firmware gets the iPXE EFI binary by URL instead of TFTP.
//!
//! Rules (research: shared/research/bare-metal-boot.md §1):
//! - Only a client that asks to boot gets boot options: option 60 starting
//!   `PXEClient` or `HTTPClient`, or iPXE (option 77 `iPXE`, or option 175
//!   present). An installed OS's DHCP client sends none of these and gets
//!   none — it must not be sent back into the installer.
//! - Architecture from option 93 (IANA): 0 x86 BIOS; 7 and 9 x64 UEFI PXE
//!   (iPXE sent 9 until 2016); 11 ARM64 UEFI PXE; 16 x64 UEFI HTTP; 19
//!   ARM64 UEFI HTTP. Others get nothing (logged by the caller).
//! - A `PXEClient` reply echoes option 60 `PXEClient` with option 43
//!   `06 01 08 ff` (no boot menu, use the file field) like dnsmasq, so EDK2
//!   does not go looking for a proxy server on port 4011; an `HTTPClient`
//!   reply echoes option 60 `HTTPClient` and a full `http://` URL.
//! - The TFTP server is `siaddr` (EDK2 ignores option 66).

use std::net::Ipv4Addr;

/// Who is asking, by its DHCP options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// iPXE (any architecture): gets the HTTP script.
    Ipxe,
    /// Firmware PXE (TFTP) of this architecture.
    Pxe(u16),
    /// UEFI HTTP Boot of this architecture.
    Http(u16),
}

/// Classify a request from its option 60 (vendor class), 77 (user class),
/// 175 (iPXE encapsulated options) and 93 (architectures). `None`: the
/// client is not asking to boot.
pub fn classify(
    vendor_class: Option<&[u8]>,
    user_class: Option<&[u8]>,
    has_ipxe_options: bool,
    arches: &[u16],
) -> Option<Client> {
    let ipxe = has_ipxe_options || user_class.is_some_and(|u| u.windows(4).any(|w| w == b"iPXE"));
    if ipxe {
        return Some(Client::Ipxe);
    }
    let arch = arches.first().copied().unwrap_or(0);
    match vendor_class {
        Some(v) if v.starts_with(b"HTTPClient") => Some(Client::Http(arch)),
        Some(v) if v.starts_with(b"PXEClient") => Some(Client::Pxe(arch)),
        _ => None,
    }
}

/// What the appliance offers for network boot.
#[derive(Debug, Clone)]
pub struct Offer {
    /// The TFTP server (`siaddr`).
    pub tftp_server: Ipv4Addr,
    /// `http://<appliance>:<port>`.
    pub http_base: String,
    /// iPXE binaries present in the TFTP root (`undionly.kpxe`,
    /// `ipxe.efi`, `snponly.efi`, `arm64-efi/snponly.efi`, …).
    pub binaries: Vec<String>,
}

/// The boot part of a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootReply {
    /// BOOTP `file` and option 67: a TFTP path or an `http://` URL.
    pub file: String,
    /// `siaddr`.
    pub next_server: Ipv4Addr,
    /// Option 60 to echo (`PXEClient` or `HTTPClient`).
    pub vendor_class: Option<&'static str>,
    /// Option 43 `06 01 08 ff` (PXE: no menu, use the file).
    pub pxe_discovery: bool,
}

/// Option 43 for a `PXEClient` reply: sub-option 6 (discovery control) =
/// 8 (use the boot file, no menu), end.
pub const PXE_OPTION_43: [u8; 4] = [0x06, 0x01, 0x08, 0xff];

/// Why a boot client gets no boot options.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoBoot {
    #[error("client architecture {0} is not supported for network boot")]
    Arch(u16),
    #[error("no iPXE binary for client architecture {arch} in the TFTP root (looked for {wanted})")]
    Missing { arch: u16, wanted: String },
}

/// The first of `names` that the offer has.
fn pick<'a>(o: &Offer, arch: u16, names: &[&'a str]) -> Result<&'a str, NoBoot> {
    names
        .iter()
        .copied()
        .find(|n| o.binaries.iter().any(|b| b == n))
        .ok_or_else(|| NoBoot::Missing {
            arch,
            wanted: names.join(" or "),
        })
}

/// What to answer `client`.
pub fn answer(client: Client, o: &Offer) -> Result<BootReply, NoBoot> {
    let tftp = |file: &str| BootReply {
        file: file.to_string(),
        next_server: o.tftp_server,
        vendor_class: Some("PXEClient"),
        pxe_discovery: true,
    };
    let http = |file: &str| BootReply {
        file: format!("{}/boot/ipxe/{file}", o.http_base),
        next_server: o.tftp_server,
        vendor_class: Some("HTTPClient"),
        pxe_discovery: false,
    };
    // Debian's `ipxe` names, then Fedora's `ipxe-bootimgs-x86`.
    const X64: &[&str] = &[
        "snponly.efi",
        "ipxe-snponly-x86_64.efi",
        "ipxe.efi",
        "ipxe-x86_64.efi",
    ];
    const ARM64: &[&str] = &[
        "arm64-efi/snponly.efi",
        "arm64-efi/ipxe.efi",
        "snponly-arm64.efi",
    ];
    match client {
        Client::Ipxe => Ok(BootReply {
            file: format!("{}/boot/boot.ipxe", o.http_base),
            next_server: o.tftp_server,
            vendor_class: None,
            pxe_discovery: false,
        }),
        Client::Pxe(0) => pick(o, 0, &["undionly.kpxe", "ipxe.pxe"]).map(tftp),
        Client::Pxe(a @ (7 | 9)) => pick(o, a, X64).map(tftp),
        Client::Pxe(a @ 11) => pick(o, a, ARM64).map(tftp),
        Client::Http(a @ 16) => pick(o, a, X64).map(http),
        Client::Http(a @ 19) => pick(o, a, ARM64).map(http),
        Client::Pxe(a) | Client::Http(a) => Err(NoBoot::Arch(a)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(bins: &[&str]) -> Offer {
        Offer {
            tftp_server: Ipv4Addr::new(10, 0, 0, 1),
            http_base: "http://10.0.0.1:8080".into(),
            binaries: bins.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn classification() {
        let edk2 = b"PXEClient:Arch:00007:UNDI:003000";
        assert_eq!(
            classify(Some(edk2), None, false, &[7]),
            Some(Client::Pxe(7))
        );
        let http = b"HTTPClient:Arch:00016:UNDI:003000";
        assert_eq!(
            classify(Some(http), None, false, &[16]),
            Some(Client::Http(16))
        );
        // iPXE wins whatever else it sends.
        assert_eq!(
            classify(Some(edk2), Some(b"iPXE"), false, &[7]),
            Some(Client::Ipxe)
        );
        assert_eq!(classify(Some(edk2), None, true, &[7]), Some(Client::Ipxe));
        // An installed OS (dhclient, NetworkManager) asks nothing.
        assert_eq!(classify(None, None, false, &[]), None);
        assert_eq!(classify(Some(b"MSFT 5.0"), None, false, &[]), None);
        // No option 93 from a PXE client: BIOS (arch 0), as PXE 2.1 implies.
        assert_eq!(
            classify(Some(b"PXEClient"), None, false, &[]),
            Some(Client::Pxe(0))
        );
    }

    #[test]
    fn answers_by_architecture() {
        let o = offer(&["undionly.kpxe", "ipxe.efi", "snponly.efi"]);
        let bios = answer(Client::Pxe(0), &o).unwrap();
        assert_eq!(bios.file, "undionly.kpxe");
        assert_eq!(bios.vendor_class, Some("PXEClient"));
        assert!(bios.pxe_discovery);
        assert_eq!(bios.next_server, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(answer(Client::Pxe(7), &o).unwrap().file, "snponly.efi");
        assert_eq!(answer(Client::Pxe(9), &o).unwrap().file, "snponly.efi");
        let h = answer(Client::Http(16), &o).unwrap();
        assert_eq!(h.file, "http://10.0.0.1:8080/boot/ipxe/snponly.efi");
        assert_eq!(h.vendor_class, Some("HTTPClient"));
        assert!(!h.pxe_discovery);
        let i = answer(Client::Ipxe, &o).unwrap();
        assert_eq!(i.file, "http://10.0.0.1:8080/boot/boot.ipxe");
        assert_eq!(i.vendor_class, None);
        // ipxe.efi when snponly.efi is absent; arm64 only when present.
        assert_eq!(
            answer(Client::Pxe(7), &offer(&["ipxe.efi"])).unwrap().file,
            "ipxe.efi"
        );
        assert!(matches!(
            answer(Client::Pxe(11), &o),
            Err(NoBoot::Missing { arch: 11, .. })
        ));
        let arm = offer(&["arm64-efi/snponly.efi"]);
        assert_eq!(
            answer(Client::Http(19), &arm).unwrap().file,
            "http://10.0.0.1:8080/boot/ipxe/arm64-efi/snponly.efi"
        );
        assert_eq!(answer(Client::Pxe(2), &o), Err(NoBoot::Arch(2)));
    }
}
