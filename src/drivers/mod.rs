//! What the appliance drives besides its own sockets: libvirt (network,
//! disks, VMs; also a service when `startOnServe` is set) and Redfish BMCs.
//! Drivers follow the services' rule: neither imports a service or the
//! other driver.

pub mod bmc;
pub mod libvirt;
