//! Detects this machine and prints its `hardware_id` and a few of its fields.
//!
//! `cargo run --example detect -p device-profile`

fn main() {
    let hw = device_profile::get_hardware_info();
    println!("hardware_id:    {}", hw.hardware_id());
    println!("cpu:            {} ({})", hw.cpu_model, hw.arch);
    println!(
        "cores:          {} physical, {} logical; this process may use {}",
        hw.physical_cores, hw.logical_cores, hw.effective_cpus
    );
    if hw.efficiency_cores > 0 {
        println!(
            "hybrid:         {} performance, {} efficiency cores",
            hw.performance_cores, hw.efficiency_cores
        );
    }
    println!("simd:           {}", hw.simd.join(" "));
    println!("l3:             {} MiB", hw.l3_total_bytes >> 20);
    println!("ram:            {} GiB", hw.ram_bytes >> 30);
}
