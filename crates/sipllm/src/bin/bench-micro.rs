//! `bench-micro`: the standalone tuner run (`cargo xtask bench-micro`).

fn main() {
    eprintln!("bench-micro: not yet implemented (the auto-tuner lands with the tuner issue)");
    std::process::exit(2);
}
