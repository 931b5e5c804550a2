#![warn(clippy::too_many_lines)]

fn main() {
    // Before any thread: one malloc arena for all threads (glibc would give
    // the DNS UDP workers one each, ~200 kB resident apiece after load).
    mallocarena::limit(1);
    let cli = crc_appliance::cmd::cli::Cli::parse_args();
    let log = crc_appliance::runtime::telemetry::init(cli.log_format);
    // With one usable core (e.g. pinned with taskset) a multi-thread runtime
    // has a single worker anyway; the current-thread scheduler runs the same
    // tasks without the work-stealing bookkeeping (measured: bench/RESULTS-lb.md).
    // Blocking work still goes to the spawn_blocking pool either way.
    let one_core = std::thread::available_parallelism().is_ok_and(|n| n.get() == 1);
    let mut builder = if one_core {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let rt = match builder.enable_all().thread_name("crc-appliance").build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(crc_appliance::run(cli)) {
        if !crc_appliance::cmd::reported(&e) {
            crc_appliance::runtime::telemetry::fatal(log, &e);
        }
        std::process::exit(crc_appliance::exit_code(&e));
    }
}
