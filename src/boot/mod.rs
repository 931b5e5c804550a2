//! Boot-media primitives shared by the services and the host checks: the
//! ISO 9660 reader, the live ISO's kernel-argument embed areas, and the
//! rules for opening a boot file under a root (TFTP, HTTP network boot,
//! the DHCP boot answers).

pub mod bootfiles;
pub mod iso9660;
pub mod liveiso;
