//! `crc-appliance-libvirt`: the libvirt driver in a process of its own, the
//! only binary that links libvirt.so.0. Started by `crc-appliance`
//! (`serve` with `libvirt.startOnServe`, the `vm` commands); it speaks JSON
//! lines on stdin/stdout (crc_appliance::drivers::libvirt::proto).

#![warn(clippy::too_many_lines)]

fn main() -> std::process::ExitCode {
    crc_appliance::drivers::libvirt::helper::main()
}
