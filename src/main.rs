use clap::Parser;

fn main() {
    let cli = crc_appliance::cli::Cli::parse();
    crc_appliance::telemetry::init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("crc-appliance")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(crc_appliance::run(cli)) {
        eprintln!("error: {e:#}");
        std::process::exit(crc_appliance::exit_code(&e));
    }
}
