//! `sipllm`: prints the detected hardware profile and the tuned runtime profile.

use clap::Parser;

/// SipLLM auto-tuner: picks the thread count and schedule policy for this machine.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Print the detected hardware_id and the hardware JSON, then exit.
    #[arg(long)]
    profile_info: bool,
    /// Print one JSON object on stdout and nothing else.
    #[arg(long)]
    json: bool,
}

fn main() {
    let cli = Cli::parse();
    let hw = device_profile::get_hardware_info();
    if cli.json {
        let out = serde_json::json!({ "hardware_id": hw.hardware_id(), "hardware": hw });
        println!("{out}");
    } else {
        println!("hardware_id: {}", hw.hardware_id());
        println!("{}", serde_json::to_string_pretty(&hw).unwrap_or_default());
    }
}
